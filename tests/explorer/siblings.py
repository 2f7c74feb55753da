"""The explorer's browser tests use each other: this loads a script of this folder as a module under a
name of its own, since tests/explorer/browser_test.py and tests/report/browser_test.py share a file name
and one import of "browser_test" would shadow the other."""
import importlib.util
import os


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
