#!/usr/bin/python3
"""Runs the command blocks of README.md and docs/*.md and compares what they print with what the
blocks show (the convention is in docs/architecture.md, "Doc blocks are tested").

A ```console block holds commands, each on a line starting with "$ " (and on the next lines while one
ends in a backslash), each followed by the lines it prints, stdout and stderr together, and "[N]" last
when it exits with N other than 0. In the expected lines, a line "..." stands for any number of lines
and a line ending in " (re)" is a regular expression for one whole line. An HTML comment on the line
before a block marks it:

    <!-- doc-test: skip (why) -->   not run: illustrative, or it needs what the test has not
    <!-- doc-test: continued -->    more of the output of the command above, matched anywhere in it

The blocks of one file run in order in one temporary folder holding a copy of data/, docs/examples/
and tests/data/models/, with the tool under test on PATH as attn-trace and a fixed environment
(COLUMNS=80; a command may set its own, "$ COLUMNS=120 attn-trace ..."). A block that shows a command's
output without being a console block or marked (a plain, text or json block right after a command
line, a command line with its output in one indented block, a block with the tool's headings, errors
or warnings) is an error too, so that no output goes untested.

usage: doc_blocks.py ATTN_TRACE SOURCE_DIR [--update] [FILE.md ...]
  --update rewrites each drifted block's expected lines from what the commands print, keeping its
  "..." and "(re)" lines where they still match; read the result before committing it.
"""

import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(skip|continued)\b(.*?)-->\s*$")
COMMAND_LINE = re.compile(r"^attn-trace [a-z]")  # a command, not "attn-trace: error: ..."
SYNTAX = re.compile(r"\[[^\]]*\]|\b[A-Z][A-Z_]+\b")  # "FILE [options]": usage, not a command to run
OUTPUT_SIGNS = ("━━ ", "── head ", "attn-trace 0.", "attn-trace: error:", "warning: ")  # what the tool prints
ELLIPSIS = "..."
REGEX_SUFFIX = " (re)"
TIMEOUT = 60
STOPPED = "(still running after %d s: stopped)"  # never written into a page by --update


class Block:
    def __init__(self, path, kind, info, line, lines, marker, before):
        self.path = path
        self.kind = kind  # "fence" or "indent"
        self.info = info  # the fence's info string ("console", "json", "")
        self.line = line  # 1-based number of the block's first content line
        self.lines = lines  # the content, without the fence's indentation
        self.marker = marker  # "skip", "continued" or None
        self.before = before  # the nearest non-blank line above the block (or its opening fence)


def parse(path):
    """The fenced and indented code blocks of one markdown file, in order."""
    with open(path, encoding="utf-8") as f:
        text = f.read().split("\n")
    blocks = []
    i = 0
    previous = ""  # the last non-blank line outside a block
    marker = None
    while i < len(text):
        line = text[i]
        fence = FENCE.match(line)
        if fence:
            indent, mark, info = len(fence.group(1)), fence.group(2), fence.group(3)
            j = i + 1
            while j < len(text) and not re.match(r"^ {0,3}" + re.escape(mark[0]) + "{%d,}\\s*$" % len(mark), text[j]):
                j += 1
            content = [t[indent:] if t[:indent].strip() == "" else t.lstrip() for t in text[i + 1 : j]]
            blocks.append(Block(path, "fence", info, i + 2, content, marker, previous))
            marker, previous = None, line
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or text[i - 1].strip() == ""):
            j = i
            while j < len(text) and (text[j].startswith("    ") or text[j].strip() == ""):
                j += 1
            while j > i and text[j - 1].strip() == "":
                j -= 1
            blocks.append(Block(path, "indent", "", i + 1, [t[4:] for t in text[i:j]], marker, previous))
            marker, previous = None, text[j - 1]
            i = j
            continue
        m = MARKER.match(line)
        if m:
            marker = m.group(1)
        elif line.strip():
            marker = None
            previous = line
        i += 1
    return blocks


def is_command(line):
    return bool(COMMAND_LINE.match(line)) and not SYNTAX.search(line.split("  ")[0])


def lint(block):
    """Why a block that is not run seems to show a command's output, or None."""
    if block.kind == "fence" and block.info == "console":
        if block.marker is None and not (block.lines and block.lines[0].startswith("$ ")):
            return "a console block must start with a '$ ' command line, or be marked continued or skip"
        return None
    if block.marker is not None:
        return None
    if any(t.lstrip().startswith("$ ") for t in block.lines):
        return "a '$ ' command line outside a console block"
    plain = block.kind == "fence" and block.info in ("", "text")
    if block.kind == "fence" and (plain or block.info in ("json", "markdown", "latex", "csv")):
        above = block.before[4:] if block.before.startswith("    ") else ""
        if is_command(above):
            return "the output of the command line above it: make both one console block, or mark it"
    if block.kind == "indent":
        for k in range(len(block.lines) - 2):
            if is_command(block.lines[k]) and block.lines[k + 1] == "" and block.lines[k + 2].strip() \
                    and not is_command(block.lines[k + 2]):
                return "a command line and its output in one indented block: make it a console block"
    commands = block.kind == "indent" and any(is_command(t) for t in block.lines)  # a list of commands
    if (plain or block.kind == "indent" and not commands) and \
            any(t.lstrip().startswith(OUTPUT_SIGNS) for t in block.lines):
        return "what looks like the tool's output: make it a console block (continued?), or mark it"
    return None


class Command:
    def __init__(self, text, expected, line):
        self.text = text
        self.expected = expected
        self.line = line
        self.trailing = 0  # blank lines after its output, before the next command


def commands_of(block):
    commands = []
    for k, t in enumerate(block.lines):
        if t.startswith("$ "):
            commands.append(Command(t[2:], [], block.line + k))
        elif commands and not commands[-1].expected and commands[-1].text.endswith("\\"):
            commands[-1].text += "\n" + t  # a line ending in a backslash goes on, as in the shell
        elif commands:
            commands[-1].expected.append(t)
    for c in commands:
        while c.expected and c.expected[-1] == "":
            c.expected.pop()
            c.trailing += 1
    if commands:
        commands[-1].trailing = 0
    return commands


def line_pattern(expected):
    if expected.endswith(REGEX_SUFFIX):
        return "(?:" + expected[: -len(REGEX_SUFFIX)] + ")"
    return re.escape(expected)


def matches(expected, actual):
    pattern = "".join("(?:[^\n]*\n)*?" if e == ELLIPSIS else line_pattern(e) + "\n" for e in expected)
    return re.fullmatch(pattern, "".join(a + "\n" for a in actual)) is not None


def line_matches(expected, actual):
    return re.fullmatch(line_pattern(expected), actual) is not None


def loose(line):
    """A line as locate compares it: spaces collapsed and rules shortened, so that a heading still
    matches after the width changed."""
    return re.sub(r"([━─])\1+", r"\1", " ".join(line.split()))


def locate(chunk, actual, lo, key=loose):
    """Where chunk (expected lines without "...") best fits in actual[lo:]: (start, end), or None.
    The best window holds the most of the chunk's lines in order (its heading breaks a tie between two
    tables alike); it may be longer than the chunk, for lines that now wrap. When no line is left as it
    was, lines are matched by their first two words."""
    width = len(chunk) + len(chunk) // 2 + 2
    keyed_chunk, keyed = [key(t) for t in chunk], [key(t) for t in actual]
    best, best_score = None, 0.0
    for s in range(lo, max(lo, len(actual) - len(chunk)) + 1):
        window = keyed[s : s + width]
        found = [b for b in difflib.SequenceMatcher(None, keyed_chunk, window, autojunk=False).get_matching_blocks()
                 if b.size]
        score = sum(b.size for b in found) + (0.5 if window[:1] == keyed_chunk[:1] else 0.0)
        if score > best_score:
            best, best_score = (s, found), score
    if best is None:
        return locate(chunk, actual, lo, lambda t: " ".join(t.split()[:2])) if key is loose else None
    s, found = best
    first, last = found[0], found[-1]
    start = max(lo, s + first.b - first.a)
    end = min(len(actual), s + last.b + last.size + (len(chunk) - last.a - last.size))
    while start < end < len(actual) and actual[end].startswith(" ") and actual[end].strip() \
            and not actual[end - 1].rstrip().endswith((".", ":", ";", ")", "]")):
        end += 1  # a sentence that now wraps onto one more line ends with it
    return start, max(start, end)


def resolve(expected, actual):
    """The expected lines rewritten to what actual holds, keeping "..." and "(re)" lines that still
    fit; None when the blocks cannot be placed in actual."""
    if matches(expected, actual):
        return expected
    chunks = [[]]
    for e in expected:
        if e == ELLIPSIS:
            chunks.append([])
        else:
            chunks[-1].append(e)
    if len(chunks) == 1:
        return keep_regex_lines(expected, actual)
    spans = []
    pos = 0
    for k, chunk in enumerate(chunks):
        if k == 0:
            where = (0, len(chunk)) if not chunk else locate(chunk, actual, 0)
            where = (0, where[1]) if where else None
        elif k == len(chunks) - 1:
            where = locate(chunk, actual, pos) if chunk else (len(actual), len(actual))
            where = (where[0], len(actual)) if where else None
        else:
            where = locate(chunk, actual, pos)
        if where is None or where[0] < pos:
            return None
        spans.append(where)
        pos = where[1]
    out = []
    for k, (chunk, (start, end)) in enumerate(zip(chunks, spans)):
        if k > 0:
            out.append(ELLIPSIS)
        out += keep_regex_lines(chunk, actual[start:end])
    return out if matches(out, actual) else None


def keep_regex_lines(expected, actual):
    """actual, with the expected "(re)" lines in the places where they still match."""
    out = list(actual)
    sm = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for tag, a0, a1, b0, b1 in sm.get_opcodes():
        if tag == "replace":
            for e, b in zip(range(a0, a1), range(b0, b1)):
                if expected[e].endswith(REGEX_SUFFIX) and line_matches(expected[e], actual[b]):
                    out[b] = expected[e]
    return out


def environment(work):
    return {
        "PATH": os.path.join(work, "bin") + ":/usr/bin:/bin",
        "HOME": work,
        "COLUMNS": "80",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def run(command, work, env):
    # Its own process group, so that a command that hangs is stopped with everything it started.
    process = subprocess.Popen(["bash", "-c", command.text], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return [STOPPED % TIMEOUT]
    actual = out.decode("utf-8", errors="replace").split("\n")
    if actual and actual[-1] == "":
        actual.pop()
    while actual and actual[-1] == "":
        actual.pop()
    if process.returncode != 0:
        actual.append("[%d]" % process.returncode)
    return actual


def prepare(source, binary):
    work = tempfile.mkdtemp(prefix="doc-blocks-")
    shutil.copytree(os.path.join(source, "data"), os.path.join(work, "data"))
    shutil.copytree(os.path.join(source, "docs", "examples"), os.path.join(work, "docs", "examples"))
    shutil.copytree(os.path.join(source, "tests", "data", "models"), os.path.join(work, "tests", "data", "models"))
    os.mkdir(os.path.join(work, "bin"))
    os.symlink(binary, os.path.join(work, "bin", "attn-trace"))
    return work


def report_drift(block, command, expected, resolved, actual, continued=False):
    where = "%s:%d" % (os.path.relpath(block.path), block.line if continued else command.line)
    if continued:
        print("DRIFTED: %s: more of the output of line %d: $ %s" % (where, command.line, command.text))
    else:
        print("DRIFTED: %s: $ %s" % (where, command.text))
    new = resolved if resolved is not None else actual
    sys.stdout.writelines(difflib.unified_diff([e + "\n" for e in expected], [a + "\n" for a in new],
                                               "the block at " + where, "what attn-trace prints"))
    if resolved is None:
        print("(the block's '...' lines do not fit what it prints: --update cannot place them)")


def without_trailing_blanks(lines):
    lines = list(lines)
    while lines and lines[-1] == "":
        lines.pop()
    return lines


class Page:
    """One markdown file being checked: its folder, the last command run there, the edits --update
    will make."""

    def __init__(self, path, binary, source, update, counts):
        self.path, self.update, self.counts = path, update, counts
        self.work = prepare(source, binary)
        self.env = environment(work=self.work)
        self.last, self.last_command = None, None  # for a continued block
        self.edits = []  # (index of the first content line, old length, new lines)
        self.ok = True

    def untested(self, block, problem):
        print("UNTESTED: %s:%d: %s" % (os.path.relpath(self.path), block.line, problem))
        self.ok = False

    def drifted(self, block, old, new):
        """new is None when --update cannot place the block's "..." lines."""
        self.ok = self.ok and self.update and new is not None
        if self.update and new is not None:
            self.edits.append((block.line - 1, len(old), new))

    def check_continued(self, block):
        self.counts["continued"] += 1
        if self.last is None:
            return self.untested(block, "a continued block with no command above it")
        expected = without_trailing_blanks(block.lines)
        resolved = resolve([ELLIPSIS] + expected + [ELLIPSIS], self.last)
        if resolved is not None:
            resolved = resolved[1:] if resolved[:1] == [ELLIPSIS] else resolved
            resolved = resolved[:-1] if resolved[-1:] == [ELLIPSIS] else resolved
        if resolved != expected:
            report_drift(block, self.last_command, expected, resolved, self.last, continued=True)
            self.drifted(block, expected, resolved)

    def check_console(self, block):
        self.counts["run"] += 1
        new_lines, changed, placed = [], False, True
        for command in commands_of(block):
            self.counts["commands"] += 1
            actual = run(command, self.work, self.env)
            self.last, self.last_command = actual, command
            resolved = resolve(command.expected, actual) if actual != [STOPPED % TIMEOUT] else None
            if resolved != command.expected:
                report_drift(block, command, command.expected, resolved, actual)
                changed, placed = True, placed and resolved is not None
            new_lines += ["$ " + command.text] + (resolved if resolved is not None else command.expected)
            new_lines += [""] * command.trailing
        if changed:
            self.drifted(block, without_trailing_blanks(block.lines),
                         "\n".join(new_lines).split("\n") if placed else None)

    def check(self, block):
        problem = lint(block)
        if problem:
            return self.untested(block, problem)
        if block.marker == "skip":
            self.counts["skipped"] += 1
        elif block.kind == "fence" and block.info == "console":
            self.check_continued(block) if block.marker == "continued" else self.check_console(block)

    def write_edits(self):
        with open(self.path, encoding="utf-8") as f:
            text = f.read().split("\n")
        for first, length, lines in sorted(self.edits, reverse=True):
            indent = re.match(r"^ *", text[first - 1]).group(0)  # the opening fence's
            text[first : first + length] = [indent + t if t else t for t in lines]
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n".join(text))
        print("updated %s (%d blocks)" % (os.path.relpath(self.path), len(self.edits)))


def check_file(path, binary, source, update, counts):
    page = Page(path, binary, source, update, counts)
    try:
        for block in parse(path):
            page.check(block)
    finally:
        shutil.rmtree(page.work, ignore_errors=True)
    if update and page.edits:
        page.write_edits()
    return page.ok


def main(argv):
    update = "--update" in argv
    args = [a for a in argv if a != "--update"]
    if len(args) < 2:
        print(__doc__)
        return 2
    binary = os.path.realpath(args[0])
    source = os.path.realpath(args[1])
    files = [os.path.realpath(f) for f in args[2:]] or \
        [os.path.join(source, "README.md")] + sorted(
            os.path.join(source, "docs", f) for f in os.listdir(os.path.join(source, "docs")) if f.endswith(".md"))
    counts = {"run": 0, "commands": 0, "continued": 0, "skipped": 0}
    ok = True
    for path in files:
        ok = check_file(path, binary, source, update, counts) and ok
    print("%d blocks that show output, in %d files: %d run (%d commands), %d continued, %d marked skip; %s" % (
        counts["run"] + counts["continued"] + counts["skipped"], len(files), counts["run"], counts["commands"],
        counts["continued"], counts["skipped"], "all as shown" if ok else "some drifted or untested"))
    # Over all the docs, no command at all would mean the blocks were not found, not that they passed.
    return 0 if ok and (args[2:] or counts["commands"] > 0) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
