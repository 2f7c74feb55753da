#!/usr/bin/env python3
"""The explorer's overview (docs/explorer.md, "What the page shows") in a real browser: headless Chromium
driven by Selenium, offline, the page opened from file:// and used through its own controls only.

It checks that
  - every step of the trace (#trace-data) has its heatmaps, one per matrix (at most 16), in the order of
    the trace, and that they follow an edit of the structure (a head added: every head step gets one more);
  - clicking a weight's cell shows what `attn-trace explain input --query I --key J --head H` prints for
    it, and after an edit of X the explanation is the tool's for the edited input; with the backward pass
    on, clicking a gradient shows `explain --grad STEP --index …`; clicking a number of ALiBi's `bias` step
    shows the weight's story too;
  - the corner says how long the last edit took to draw, as the page measured it;
  - at 390 px wide (a phone) the page does not scroll sideways, the bar of controls stays at the top as
    the page scrolls and every control can be reached; screenshots at 1400 and 390 px are saved beside
    the build (explorer-overview-1400.png, explorer-390.png);
  - nothing is fetched and nothing is logged as an error.
And it prints (does not judge) the time from an edit to the page drawn for a 64-token input, as the page
measured it: the figure docs/explorer.md quotes.

usage: overview_test.py ATTN_TRACE SOURCE_DIR OUT_DIR
Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --tests).
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siblings  # noqa: E402  loads this folder's scripts under names of their own

page = siblings.load("explorer_page", "browser_test.py")  # the tool, the page's state, waits, the offline check

from selenium.webdriver.common.by import By  # noqa: E402

report = page.report
check = report.check

# The cards drawn: each step's name and how many heatmaps it has.
CARDS = """
return Array.from(document.querySelectorAll('#steps section.step')).map(
  s => [s.getAttribute('data-step'), s.querySelectorAll('canvas').length]);
"""

# A click on cell (row, col) of heatmap `panel` of step `name`, as the pointer would make it.
CLICK = """
const [name, panel, row, col] = arguments;
const canvas = document.querySelector(`#steps section.step[data-step="${name}"] canvas[data-panel="${panel}"]`);
canvas.scrollIntoView({block: 'center'});
const r = canvas.getBoundingClientRect();
const x = r.left + (col + 0.5) * r.width / canvas.width, y = r.top + (row + 0.5) * r.height / canvas.height;
canvas.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: x, clientY: y}));
"""

EXPLANATION = """
const e = document.getElementById('explanation');
return e.hidden ? null : {title: document.getElementById('explanation-title').textContent,
                          text: document.getElementById('explanation-text').textContent,
                          after: e.previousElementSibling && e.previousElementSibling.getAttribute('data-step')};
"""


def panels(shape):
    count = 1
    for n in shape[:-2]:
        count *= n
    return min(count, 16)


def the_tools_explanation(binary, text, *args):
    """What `attn-trace explain input …` prints to a pipe 100 columns wide, the input in a file named input."""
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "input"), "w", encoding="utf-8") as f:
            f.write(text)
        env = dict(os.environ, COLUMNS="100", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        env.pop("NO_COLOR", None)
        r = subprocess.run([binary, "explain", "input", *args], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, f"attn-trace explain input {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r.stdout


def check_cards(driver, state, what):
    trace = json.loads(state["trace"])
    want = [[s["name"], panels(s["shape"])] for s in trace["steps"]
            if all(n > 0 for n in s["shape"])]
    got = driver.execute_script(CARDS)
    check(got == want, f"{what}: a card per step with a heatmap per matrix: {got} against {want}")


def explained(driver, what, before=None):
    deadline = time.time() + 10
    while time.time() < deadline:
        e = driver.execute_script(EXPLANATION)
        if e is not None and e["text"] != before:
            return e
        time.sleep(0.05)
    check(False, f"{what}: an explanation is shown")
    return {"title": "", "text": "", "after": None}


# The next time the page writes into data-drawn-ms, awaited without polling the page (a poll is a task on
# the page's thread, and would be measured with it).
NEXT_DRAWN = """
const root = document.documentElement;
window.nextDrawn = new Promise((resolve) => new MutationObserver((changes, observer) => {
  observer.disconnect();
  resolve(root.getAttribute('data-drawn-ms'));
}).observe(root, {attributes: true, attributeFilter: ['data-drawn-ms']}));
"""
DRAWN = "window.nextDrawn.then(arguments[arguments.length - 1]);"


def speed(driver, binary, source, work):
    """The time from a cell's edit to the page drawn, for a 64-token input, as the page measured it."""
    rng = random.Random(64)
    n, d, h, dk = 64, 32, 4, 8

    def matrix(rows, cols):
        return [[round(rng.uniform(-1, 1), 2) for _ in range(cols)] for _ in range(rows)]

    text = json.dumps({"tokens": [f"t{i}" for i in range(n)], "n_heads": h, "mask": "causal", "X": matrix(n, d),
                       "W_q": matrix(d, h * dk), "W_k": matrix(d, h * dk), "W_v": matrix(d, h * dk),
                       "W_o": matrix(h * dk, d)})
    path = os.path.join(work, "n64.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    html = os.path.join(work, "n64.html")
    page.tool(binary, "explore", path, "-o", html)
    driver.set_window_size(1400, 1000)
    driver.get("file://" + html)
    page.shown(driver, 1, "the 64-token page opens")
    times = {}
    driver.set_script_timeout(60)
    for report_open in (False, True):
        driver.execute_script(f"document.getElementById('full-report').open = {str(report_open).lower()}")
        time.sleep(0.5)
        measured = []
        for k in range(4 if report_open else 8):  # with the report open each edit also redraws it: seconds
            runs = driver.execute_script(page.STATE)["runs"]
            cell = f"X/{k}/{len(measured) + (8 if report_open else 0)}"
            was = float(driver.find_element(By.CSS_SELECTOR, f'td[data-path="{cell}"]').text)
            driver.execute_script(NEXT_DRAWN)
            page.edit_cell(driver, cell, str(round(was + 0.25, 2)))
            measured.append(float(driver.execute_async_script(DRAWN)))
            page.wait(driver, "the edit's trace is written", lambda s: s["runs"] > runs)
        measured.sort()
        times[report_open] = measured
    corner = driver.find_element(By.ID, "timing").text
    check(corner.startswith("drawn in "), f"the corner says the time to draw: {corner!r}")
    for report_open, measured in times.items():
        print(f"64 tokens, d_model 32, 4 heads of 8, causal, engine both, float32, the full report "
              f"{'open' if report_open else 'closed'}: an edit drawn in {measured[len(measured) // 2]:.0f} ms "
              f"(median of {len(measured)}; {measured[0]:.0f} to {measured[-1]:.0f})", flush=True)


def alibi(driver, binary, cat_sat, work):
    """A number of ALiBi's `bias` step clicked: the weight's story, as `attn-trace explain` tells it (the
    page once named the step `biased` in a list of its own and explained nothing there)."""
    text = json.dumps(dict(json.loads(cat_sat), alibi=[0.5]))
    path = os.path.join(work, "alibi.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    html = os.path.join(work, "alibi.html")
    page.tool(binary, "explore", path, "-o", html)
    driver.get("file://" + html)
    page.shown(driver, 1, "the ALiBi page opens")
    driver.execute_script(CLICK, "bias", 0, 2, 0)
    e = explained(driver, "an ALiBi bias clicked")
    want = the_tools_explanation(binary, text, "--query", "2", "--key", "0", "--head", "0")
    check(e["text"].rstrip("\n") == want.rstrip("\n"), "an ALiBi bias's explanation is `attn-trace explain`'s\n"
          f"page:\n{e['text'][:400]}\ntool:\n{want[:400]}")
    check(e["after"] == "bias", f"the explanation is under the bias step: after {e['after']}")


def phone(driver, out_dir):
    """At 390 px: no sideways scroll of the page, the bar stays at the top, every control reachable."""
    driver.set_window_size(390, 844)
    time.sleep(0.5)
    width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    check(width[0] <= width[1], f"390 px: the page does not scroll sideways: {width}")
    driver.save_screenshot(os.path.join(out_dir, "explorer-390.png"))
    driver.execute_script("window.scrollTo(0, 1500)")
    time.sleep(0.2)
    top = driver.execute_script("return document.querySelector('header.bar').getBoundingClientRect().top")
    check(abs(top) < 1, f"390 px: the bar stays at the top when the page scrolls: its top at {top}")
    for control in ("example", "dtype", "engine", "block-q", "block-k", "backward", "undo", "redo", "reset",
                    "download-input", "download-trace", "copy-link"):
        reachable = driver.execute_script("""
const el = document.getElementById(arguments[0]);
el.scrollIntoView({block: 'nearest', inline: 'nearest'});
const r = el.getBoundingClientRect();
const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth + 1 && (hit === el || el.contains(hit) ||
       (hit && hit.contains(el)));""", control)
        check(reachable, f"390 px: #{control} can be reached and is not covered")
    table = driver.execute_script("""
const s = document.querySelector('.matrix .scroll');
return s ? [s.scrollWidth, s.clientWidth, getComputedStyle(s).overflowX] : null;""")
    check(table is not None and table[2] == "auto", f"390 px: a matrix scrolls in its own box: {table}")
    driver.execute_script("window.scrollTo(0, 0)")
    driver.set_window_size(1400, 1000)


def main():
    binary, source, out_dir = sys.argv[1:4]
    cat_sat = open(os.path.join(source, "data", "the_cat_sat.json"), encoding="utf-8").read()
    driver = report.browser()
    driver.set_window_size(1400, 1000)
    try:
        with tempfile.TemporaryDirectory() as work:
            html = os.path.join(work, "p.html")
            page.tool(binary, "explore", os.path.join(source, "data", "the_cat_sat.json"), "-o", html)
            driver.get("file://" + html)
            state = page.shown(driver, 1, "the page opens")
            check_cards(driver, state, "as opened")
            verdict = driver.find_element(By.ID, "verdict").text
            check(verdict.startswith("naive vs flash: PASS"), f"the verdict line: {verdict!r}")

            # A weight: "cat" (query 1) on "The" (key 0), head 0.
            driver.execute_script(CLICK, "weights", 0, 1, 0)
            e = explained(driver, "a weight clicked")
            want = the_tools_explanation(binary, cat_sat, "--query", "1", "--key", "0", "--head", "0")
            check(e["text"].rstrip("\n") == want.rstrip("\n"), "a weight's explanation is `attn-trace explain`'s\n"
                  f"page:\n{e['text'][:400]}\ntool:\n{want[:400]}")
            check("0.7679" in e["text"], "cat -> The is explained as 0.7679")
            check(e["after"] == "weights", f"the explanation is under the weights: after {e['after']}")
            driver.save_screenshot(os.path.join(out_dir, "explorer-overview-1400.png"))

            # An edit of X: the explanation follows.
            runs = state["runs"]
            page.edit_cell(driver, "X/1/0", "2")
            state = page.shown(driver, runs + 1, "an edit with an explanation open")
            e = explained(driver, "the explanation after an edit", before=e["text"])
            want = the_tools_explanation(binary, state["input"], "--query", "1", "--key", "0", "--head", "0")
            check(e["text"].rstrip("\n") == want.rstrip("\n"), "after an edit, the explanation is the tool's for the edited input")

            # Two heads: every head step gets a heatmap per head.
            runs = state["runs"]
            field = driver.find_element(By.ID, "heads")
            field.send_keys("\ue009a")  # Ctrl+A
            field.send_keys("2\n")
            state = page.shown(driver, runs + 1, "two heads")
            check_cards(driver, state, "two heads")
            counts = dict(driver.execute_script(CARDS))
            check(counts.get("weights") == 2, f"two heads: two heatmaps of weights: {counts.get('weights')}")

            # The backward pass, and a gradient clicked: d_weights of head 1, query 2, key 1.
            runs = state["runs"]
            driver.find_element(By.ID, "backward").click()
            state = page.shown(driver, runs + 1, "the backward pass")
            check_cards(driver, state, "with the backward pass")
            before = driver.execute_script(EXPLANATION)
            driver.execute_script(CLICK, "d_weights", 1, 2, 1)
            e = explained(driver, "a gradient clicked", before=before["text"] if before else None)
            want = the_tools_explanation(binary, state["input"], "--grad", "d_weights", "--index", "1,2,1")
            check(e["text"].rstrip("\n") == want.rstrip("\n"), "a gradient's explanation is `attn-trace explain --grad`'s\n"
                  f"page:\n{e['text'][:400]}\ntool:\n{want[:400]}")

            alibi(driver, binary, cat_sat, work)

            corner = driver.find_element(By.ID, "timing").text
            check(corner.startswith("drawn in ") and " ms" in corner, f"the corner says the time: {corner!r}")
            page.check_offline(driver, "the overview")
            page.no_console_error(driver, "the overview")

            phone(driver, out_dir)
            page.no_console_error(driver, "at 390 px")
            speed(driver, binary, source, work)
            page.no_console_error(driver, "the 64-token page")
    finally:
        driver.quit()
    if report.failures:
        print(f"{len(report.failures)} failures")
        return 1
    print("browser: the explorer's overview, explanations, phone layout and time checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
