"""The terminal output fits and speaks the terminal's language (issue "Pictures", docs/cli.md "Fitting
the terminal"), checked on a 64-token, 4-head causal input with a wide token (猫) and a combining one:

- no line is wider than COLUMNS (40, 80, 120; every --help, example --list and steps at 60 too), counting display width with Python's own unicodedata
  (East Asian Wide and Fullwidth take two columns, combining marks none): an implementation
  independent of the tool's;
- every line of a table (or heatmap) of the same block has the same display width, so a wide token
  does not shift its row;
- with LC_ALL=C (or POSIX, or no locale at all) every byte is ASCII, help and errors included;
- colour escapes appear only when colour is on; 24-bit ones only with COLORTERM=truecolor.

usage: check_terminal.py path/to/attn-trace
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unicodedata

BIN = sys.argv[1]
ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
failures = []


def width(line):
    plain = ESCAPE.sub("", line)
    total = 0
    for ch in plain:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def run(args, env_extra, unset=("LANG", "LC_ALL", "LC_CTYPE", "COLUMNS", "COLORTERM", "NO_COLOR"), check=True):
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_extra)
    r = subprocess.run([BIN] + args, env=env, capture_output=True, timeout=60)
    if check and r.returncode not in (0, 1):
        failures.append(f"{args} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r


def make_input(path):
    random.seed(7)
    n, d, h = 64, 16, 4
    tokens = [f"t{i}" for i in range(n)]
    tokens[5] = "猫"
    tokens[9] = "cafe\u0301"  # café with a combining accent
    tokens[12] = "ｔｏｋｅｎ"  # fullwidth letters
    mat = lambda r, c, s: [[round(random.gauss(0, s), 3) for _ in range(c)] for _ in range(r)]
    doc = {"description": "64 tokens, 4 heads, causal, with wide and combining tokens", "tokens": tokens,
           "X": mat(n, d, 1), "W_q": mat(d, d, 0.5), "W_k": mat(d, d, 0.5), "W_v": mat(d, d, 0.5),
           "W_o": mat(d, d, 0.5), "n_heads": h, "mask": "causal"}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)


def check_widths(text, columns, what):
    lines = text.split("\n")
    too_wide = [(i, width(l)) for i, l in enumerate(lines) if width(l) > columns]
    if too_wide:
        i, w = too_wide[0]
        failures.append(f"{what}, COLUMNS={columns}: {len(too_wide)} lines wider than {columns}, "
                        f"first line {i + 1} ({w} columns): {ESCAPE.sub('', lines[i])!r}")


def check_tables_aligned(text, what):
    # Rows of one table: consecutive lines that start with two spaces and a label, under a heading.
    lines = [ESCAPE.sub("", l) for l in text.split("\n")]
    block = []
    checked = 0
    for line in lines + [""]:
        if line.startswith("  ") and not line.startswith("  (") and line.strip():
            block.append(line)
            continue
        if len(block) >= 3:
            rows = [l for l in block if re.search(r"(\d\.\d{4}|·|-inf)$", l)]
            widths = {width(l) for l in rows}
            checked += 1
            if len(widths) > 1:
                failures.append(f"{what}: a table's rows differ in width {sorted(widths)}: {rows[:6]}")
        block = []
    return checked


# attn-trace diff's cases (tests/data/diff), beside this folder.
CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data", "diff")

with tempfile.TemporaryDirectory() as tmp:
    source = os.path.join(tmp, "c64.json")
    make_input(source)
    saved = os.path.join(tmp, "c64.trace.json")
    run(["run", source, "--engine", "both", "--json", saved], {"LC_ALL": "C.UTF-8"})
    commands = [
        ["run", source, "--engine", "both"],
        ["run", source, "--view", "heatmap"],
        ["run", source, "--view", "numbers", "--max-cols", "0"],
        ["run", source, "--steps", "weights", "--head", "0"],
        ["compare", source],
        ["compare", source, "--view", "heatmap"],
        ["show", saved, "--steps", "scores,weights,tiles"],
        ["run", source, "--mistake", "no-mask"],
        ["explain", source, "--query", "3", "--key", "1", "--engine", "flash"],
        # a divergence with its window and diagnosis (exit 1), and a long dump name in the table
        ["diff", os.path.join(CASES, "head_split", "input.json"), os.path.join(CASES, "head_split", "dumps")],
        ["diff", os.path.join(CASES, "names", "input.json"), os.path.join(CASES, "names", "dumps"),
         "--name", "weights=attn_probs", "--name", "output=attn_out"],
    ]
    for columns in (40, 80, 120):
        for args in commands:
            for color in ("never", "always"):
                r = run(args + ["--color", color], {"LC_ALL": "C.UTF-8", "COLUMNS": str(columns)})
                check_widths(r.stdout.decode(), columns, " ".join(args[:1] + args[2:]) + f" --color {color}")
    # Help and the lists fit too: every command's --help (the commands as --help lists them),
    # example --list and steps, in UTF-8 and in ASCII.
    top = run(["--help"], {"LC_ALL": "C.UTF-8", "COLUMNS": "1000"}).stdout.decode()
    listed = top.split("Subcommands:\n", 1)[1].split("\n\n", 1)[0]
    pages = [["--help"], ["example", "--list"], ["steps"]] + [[l.split()[0], "--help"] for l in listed.splitlines()]
    for columns in (40, 60, 80, 120):
        for locale in ("C.UTF-8", "C"):
            for args in pages:
                r = run(args, {"LC_ALL": locale, "COLUMNS": str(columns)})
                check_widths(r.stdout.decode(), columns, " ".join(args) + f" LC_ALL={locale}")
    r = run(["run", source, "--view", "numbers", "--steps", "q,weights", "--max-rows", "0"],
            {"LC_ALL": "C.UTF-8", "COLUMNS": "200"})
    if check_tables_aligned(r.stdout.decode(), "run --view numbers at 200 columns") < 5:
        failures.append("the alignment check found fewer than 5 tables to check")

    # ASCII only when the locale is not UTF-8, whatever says so (or nothing does).
    for env in ({"LC_ALL": "C"}, {"LANG": "POSIX"}, {}, {"LC_ALL": "C", "LANG": "en_US.UTF-8"}):
        for args in commands + [["run", "--help"], ["--help"], ["plot", "--help"], ["report", "--help"]]:
            for color in ("never", "always"):
                extra = ["--color", color] if args[-1] != "--help" else []
                r = run(args + extra, env, check=False)
                for stream, data in (("stdout", r.stdout), ("stderr", r.stderr)):
                    bad = [b for b in data if b >= 0x80]
                    if bad:
                        failures.append(f"{args} {extra} with {env}: {len(bad)} bytes on {stream} are not ASCII")
        r = run(["run", os.path.join(tmp, "missing-猫.json")], env, check=False)
        if r.returncode != 2 or any(b >= 0x80 for b in r.stderr):
            failures.append(f"an error with {env} is not one ASCII line with exit 2: {r.stderr!r}")

    # Colour only when asked for (or on a terminal); 24-bit only when the terminal says it has it.
    heat = ["run", source, "--steps", "weights", "--view", "heatmap"]
    never = run(heat + ["--color", "never"], {"LC_ALL": "C.UTF-8"}).stdout
    if b"\x1b" in never:
        failures.append("--color never printed an escape")
    piped = run(heat, {"LC_ALL": "C.UTF-8"}).stdout
    if b"\x1b" in piped:
        failures.append("--color auto printed an escape into a pipe")
    on = run(heat + ["--color", "always"], {"LC_ALL": "C.UTF-8"}).stdout
    if b"\x1b[48;5;" not in on or b"\x1b[48;2;" in on:
        failures.append("--color always without COLORTERM should use the 256-colour palette only")
    true = run(heat + ["--color", "always"], {"LC_ALL": "C.UTF-8", "COLORTERM": "truecolor"}).stdout
    if b"\x1b[48;2;" not in true:
        failures.append("--color always with COLORTERM=truecolor should use 24-bit colours")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("every line fits 40, 80 and 120 columns; ASCII under C and POSIX; colour only when on")
