"""Turns the terminal trace's colour output (the SGR escapes attn-trace writes) into an HTML page in a
dark terminal's colours, so that headless Chromium can take a screenshot of it for docs/pictures.md.

usage: attn-trace run ... --color always | python3 scripts/ansi_to_html.py > page.html
"""

import html
import re
import sys

BACKGROUND, FOREGROUND = "#1e1e1e", "#d4d4d4"


def xterm(n):
    if n < 16:
        base = [(0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16), (36, 114, 200), (188, 63, 188),
                (17, 168, 205), (229, 229, 229), (102, 102, 102), (241, 76, 76), (35, 209, 139), (245, 245, 67),
                (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255)]
        return base[n]
    if n < 232:
        n -= 16
        level = lambda v: 0 if v == 0 else 55 + 40 * v
        return level(n // 36), level(n // 6 % 6), level(n % 6)
    grey = 8 + 10 * (n - 232)
    return grey, grey, grey


def css(rgb):
    return "#%02x%02x%02x" % rgb


def convert(text):
    out, state = [], {}
    for piece in re.split(r"(\x1b\[[0-9;]*m)", text):
        match = re.fullmatch(r"\x1b\[([0-9;]*)m", piece)
        if not match:
            if piece:
                style = ";".join(f"{k}:{v}" for k, v in state.items())
                out.append(f'<span style="{style}">{html.escape(piece)}</span>' if style else html.escape(piece))
            continue
        codes = [int(c) for c in match.group(1).split(";") if c] or [0]
        k = 0
        while k < len(codes):
            c = codes[k]
            if c == 0:
                state = {}
            elif c == 1:
                state["font-weight"] = "bold"
            elif c == 2:
                state["opacity"] = "0.6"
            elif 30 <= c <= 37:
                state["color"] = css(xterm(c - 30 + (8 if state.get("font-weight") else 0)))
            elif 90 <= c <= 97:
                state["color"] = css(xterm(c - 90 + 8))
            elif c in (38, 48) and codes[k + 1] == 2:
                state["color" if c == 38 else "background"] = css(tuple(codes[k + 2:k + 5]))
                k += 4
            elif c in (38, 48) and codes[k + 1] == 5:
                state["color" if c == 38 else "background"] = css(xterm(codes[k + 2]))
                k += 2
            k += 1
    return "".join(out)


body = convert(sys.stdin.read())
print(f"""<!doctype html><meta charset="utf-8"><style>
body {{ margin: 0; background: {BACKGROUND}; }}
pre {{ margin: 0; padding: 12px 16px; color: {FOREGROUND}; font: 15px/1.0 "DejaVu Sans Mono", monospace; }}
</style><pre>{body}</pre>""")
