# The Python module `attn_trace` (docs/python.md): apps/python/core.cpp, the library's functions for
# Python, compiled with pybind11 (Debian's pybind11-dev) as attn_trace/_core, beside the package's own
# Python (apps/python/attn_trace/), in python/ of the build folder and, installed, where Debian's
# /usr/bin/python3 looks: PREFIX/lib/python3.X/dist-packages. Without pybind11 every other target is
# built as usual. Not in the sanitizer and fuzzing builds: a module with the sanitizers' runtime cannot
# be loaded by an interpreter without it.
option(ATTN_PYTHON "Build the Python module attn_trace, when pybind11 is installed" ON)
set(ATTN_HAS_PYTHON_MODULE OFF)
if(ATTN_PYTHON AND NOT ATTN_SANITIZE AND NOT ATTN_FUZZ)
  # Debian's interpreter, not another python3 that comes first on PATH (a pyenv, a venv).
  set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  if(pybind11_FOUND)
    set(ATTN_HAS_PYTHON_MODULE ON)
  else()
    message(STATUS "pybind11 not found: the Python module attn_trace is not built (scripts/setup.sh installs it)")
  endif()
endif()

if(ATTN_HAS_PYTHON_MODULE)
  # A shared object links the library's code, which must then be position independent; without
  # semantic interposition GCC still inlines and calls the library's functions directly, as before.
  set_target_properties(attn_core PROPERTIES POSITION_INDEPENDENT_CODE ON)
  foreach(isa IN LISTS ATTN_KERNEL_ISAS)
    set_target_properties(attn_kernel_${isa} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endforeach()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(attn_core PRIVATE -fno-semantic-interposition)
  endif()

  set(ATTN_PYTHON_PACKAGE ${PROJECT_BINARY_DIR}/python/attn_trace)
  pybind11_add_module(attn_trace_core MODULE NO_EXTRAS apps/python/core.cpp)
  set_target_properties(attn_trace_core PROPERTIES OUTPUT_NAME _core LIBRARY_OUTPUT_DIRECTORY ${ATTN_PYTHON_PACKAGE})
  target_link_libraries(attn_trace_core PRIVATE attn::core attn_warnings)
  # The package's Python beside the module, so that PYTHONPATH=build/release/python imports it.
  add_custom_command(TARGET attn_trace_core POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -E copy_if_different ${PROJECT_SOURCE_DIR}/apps/python/attn_trace/__init__.py
                             ${ATTN_PYTHON_PACKAGE}/__init__.py)
  set(ATTN_PYTHON_DIR lib/python${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}/dist-packages CACHE STRING
      "Where the Python module is installed, under the prefix")
  install(TARGETS attn_trace_core LIBRARY DESTINATION ${ATTN_PYTHON_DIR}/attn_trace)
  install(FILES apps/python/attn_trace/__init__.py DESTINATION ${ATTN_PYTHON_DIR}/attn_trace)
endif()
# scripts/demo.sh reads it to build the module too.
set(ATTN_HAS_PYTHON_MODULE ${ATTN_HAS_PYTHON_MODULE} CACHE INTERNAL "Whether the Python module attn_trace is built")
