#!/usr/bin/env python3
"""The explorer (attn-trace explore) in a real browser: headless Chromium driven by Selenium, with its
network off (a proxy that does not exist), the page opened from file://.

It checks that
  - the page of `attn-trace explore data/the_cat_sat.json` is under 2 MB, loads with no console error,
    fetches nothing (only file:, data:, blob: and about: URLs, in the page and in its report frame) and
    names no address outside itself;
  - the core computes the trace in the page: #trace-data is `attn-trace run --engine both --json -`
    of the input byte for byte, and the report frame shows it (cat -> The is 0.768 in the weights);
  - an edit of one number through the page's own cell (click, type, Enter) recomputes: #trace-data is
    then the tool's trace of the edited input (#input-data), which this test computes itself, and the
    report's cells follow;
  - a bad edit, in a cell or in the JSON text, shows the tool's own one-line message and keeps the last
    good trace; a valid edit of the text recomputes again;
  - with #input= and base64url of another input in the address, the page shows that input instead;
  - a screenshot at 1400 px wide is not blank (saved beside the build as explorer-1400.png).

usage: browser_test.py ATTN_TRACE SOURCE_DIR OUT_DIR
Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --tests).
"""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import browser_test as report  # noqa: E402  the report's browser, network check and colour count

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

check = report.check

# The state the tests read: the runs shown and the inputs refused (<html>'s data-runs and data-errors),
# the two JSON blocks, the error line, and the report frame's readiness.
STATE = """
const frame = document.getElementById('report');
const doc = frame.contentDocument;
const error = document.getElementById('error');
return {runs: Number(document.documentElement.getAttribute('data-runs') || 0),
        errors: Number(document.documentElement.getAttribute('data-errors') || 0),
        input: document.getElementById('input-data').textContent,
        trace: document.getElementById('trace-data').textContent,
        error: error.hidden ? null : error.textContent,
        frameReady: !!(doc && doc.documentElement && doc.documentElement.getAttribute('data-ready') === '1')};
"""

# What the frame's report holds: the weights' cells and what it fetched.
FRAME = """
const doc = document.getElementById('report').contentDocument;
const win = document.getElementById('report').contentWindow;
const urls = win.performance.getEntriesByType('resource').map(e => e.name);
const attrs = [];
for (const el of doc.querySelectorAll('[src], [href]'))
  for (const name of ['src', 'href']) if (el.hasAttribute(name)) attrs.push(el.getAttribute(name));
return {weights: Array.from(doc.querySelectorAll('#step-weights rect[data-value]'), r => r.getAttribute('data-value')),
        title: (doc.querySelector('.description') || {}).textContent || '',
        urls, attrs};
"""


def tool(binary, *args, stdin=None, expect=(0,)):
    r = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True, timeout=120)
    if r.returncode not in expect:
        raise SystemExit(f"attn-trace {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def wait(driver, what, condition, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        state = driver.execute_script(STATE)
        if condition(state):
            return state
        time.sleep(0.05)
    check(False, f"{what} within {seconds} s: {driver.execute_script(STATE)}")
    return driver.execute_script(STATE)


def shown(driver, runs, what):
    """Waits until the page has shown `runs` runs and the report in its frame is drawn."""
    return wait(driver, what, lambda s: s["runs"] >= runs and s["frameReady"])


def the_tools_trace(binary, text):
    return tool(binary, "run", "-", "--engine", "both", "--json", "-", stdin=text).stdout


def the_tools_error(binary, text):
    """The tool's one-line message for an input it refuses, with the file named as the page names it."""
    line = tool(binary, "run", "-", stdin=text, expect=(2,)).stderr.strip()
    return re.sub(r"^attn-trace: error: <stdin>: ", "input: ", line)


def edit_cell(driver, path, text):
    cell = driver.find_element(By.CSS_SELECTOR, f'td[data-path="{path}"]')
    cell.click()
    field = cell.find_element(By.TAG_NAME, "input")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text, Keys.ENTER)


def no_console_error(driver, what):
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    check(not errors, f"{what}: no console error: {errors}")


def check_offline(driver, what):
    net = driver.execute_script(report.NETWORK)
    check(all(re.match(r"^(file|data|blob|about):", u) for u in net["urls"]),
          f"{what}: the page fetched only file:, data:, blob: and about: URLs: {net['urls']}")
    check(all(a.startswith("#") for a in net["attrs"]), f"{what}: every src and href is within the page: {net['attrs']}")
    frame = driver.execute_script(FRAME)
    check(all(re.match(r"^(file|data|blob|about):", u) for u in frame["urls"]),
          f"{what}: the report frame fetched nothing: {frame['urls']}")
    check(all(a.startswith("#") for a in frame["attrs"]), f"{what}: the frame's src and href stay within it: {frame['attrs']}")


def main():
    binary, source, out_dir = sys.argv[1:4]
    cat_sat = open(os.path.join(source, "data", "the_cat_sat.json"), encoding="utf-8").read()
    gpt = open(os.path.join(source, "data", "gpt_causal.json"), encoding="utf-8").read()
    driver = report.browser()
    driver.set_window_size(1400, 1000)
    try:
        with tempfile.TemporaryDirectory() as work:
            page = os.path.join(work, "p.html")
            tool(binary, "explore", os.path.join(source, "data", "the_cat_sat.json"), "-o", page)
            size = os.path.getsize(page)
            check(size < 2_000_000, f"the page is under 2 MB: {size} bytes")
            print(f"the worked example's page: {size} bytes", flush=True)

            # It opens with the input it holds, computed in the page.
            driver.get("file://" + page)
            state = shown(driver, 1, "the page computes its input")
            check(state["input"] == cat_sat, "#input-data is the file as written")
            check(state["trace"] == the_tools_trace(binary, cat_sat),
                  "the page's first trace is the tool's byte for byte")
            frame = driver.execute_script(FRAME)
            check(len(frame["weights"]) == 9 and abs(float(frame["weights"][3]) - 0.768) < 5e-4,
                  f"the report shows cat -> The at 0.768: {frame['weights']}")
            check_offline(driver, "the worked example")
            no_console_error(driver, "the worked example")

            # One number through its own cell: X[0][0] ("The", feature 0) from 1 to 1.5.
            before = state["trace"]
            edit_cell(driver, "X/0/0", "1.5")
            state = shown(driver, 2, "an edited cell recomputes")
            check(json.loads(state["input"])["X"][0][0] == 1.5, "the edited input holds X[0][0] = 1.5")
            check(state["trace"] != before, "the trace changed")
            check(state["trace"] == the_tools_trace(binary, state["input"]),
                  "after the cell's edit, #trace-data is the tool's trace of the edited input")
            steps = json.loads(state["trace"])["steps"]
            weights = report.flat(next(s for s in steps if s["name"] == "weights")["data"])  # (1 head, 3, 3)
            frame = driver.execute_script(FRAME)
            check(abs(float(frame["weights"][3]) - weights[3]) < 1e-6,
                  f"the report follows: cat -> The is {frame['weights'][3]}, the trace {weights[3]}")
            no_console_error(driver, "after a cell's edit")

            # A bad edit in a cell: the tool's message, and the last good trace kept.
            good = state
            edit_cell(driver, "X/0/1", "abc")
            state = wait(driver, "a bad cell shows an error", lambda s: s["errors"] >= 1)
            bad_text = driver.find_element(By.ID, "input-text").get_attribute("value")
            check(state["error"] == the_tools_error(binary, bad_text),
                  f"the page says the tool's message: {state['error']!r}")
            check(state["trace"] == good["trace"] and state["input"] == good["input"] and state["runs"] == good["runs"],
                  "a bad edit keeps the last good input and trace")

            # The JSON text: invalid JSON is refused with the tool's message, then a valid text recomputes.
            area = driver.find_element(By.ID, "input-text")
            area.send_keys(Keys.CONTROL, "a")
            area.send_keys('{"X": [[1, 2]],')
            state = wait(driver, "invalid JSON shows an error", lambda s: s["errors"] >= 2)
            check(state["error"] == the_tools_error(binary, '{"X": [[1, 2]],'),
                  f"invalid JSON: the tool's message: {state['error']!r}")
            check(state["trace"] == good["trace"], "invalid JSON keeps the last good trace")
            edited = json.loads(cat_sat)
            edited["tokens"] = ["A", "dog", "ran"]
            text = json.dumps(edited)
            area.send_keys(Keys.CONTROL, "a")
            area.send_keys(text)
            state = shown(driver, good["runs"] + 1, "a valid text recomputes")
            check(state["error"] is None, f"the error is gone: {state['error']!r}")
            check(state["input"] == text and state["trace"] == the_tools_trace(binary, text),
                  "after the text's edit, #trace-data is the tool's trace of it")
            check(json.loads(state["trace"])["input"]["tokens"] == ["A", "dog", "ran"], "the new tokens are in the trace")
            labels = driver.execute_script("return Array.from(document.querySelectorAll('table[data-matrix=\"X\"] th'),"
                                           " th => th.textContent)")
            check(labels == ["A", "dog", "ran"], f"the cells follow the text: {labels}")

            # The screenshot, at 1400 px.
            driver.get("file://" + page)
            shown(driver, 1, "the page opens again")
            png = driver.get_screenshot_as_png()
            with open(os.path.join(out_dir, "explorer-1400.png"), "wb") as f:
                f.write(png)
            seen = driver.execute_async_script(report.COLOURS, base64.b64encode(png).decode())
            check(seen is not None and seen["colours"] >= 16 and seen["width"] == 1400,
                  f"the screenshot at 1400 px is not blank: {seen}")

            # #input= in the address: another input.
            link = base64.urlsafe_b64encode(gpt.encode("utf-8")).decode().rstrip("=")
            driver.get("about:blank")
            driver.get("file://" + page + "#input=" + link)
            state = shown(driver, 1, "a linked input opens")
            check(state["input"] == gpt, "#input= is the page's input")
            check(state["trace"] == the_tools_trace(binary, gpt), "the linked input's trace is the tool's")
            labels = driver.execute_script("return Array.from(document.querySelectorAll('table[data-matrix=\"X\"] th'),"
                                           " th => th.textContent)")
            check(labels == json.loads(gpt)["tokens"], f"the cells show the linked input: {labels}")
            check_offline(driver, "a linked input")
            no_console_error(driver, "a linked input")

            # Another link pasted into the same tab changes only the fragment: the page follows it.
            runs = state["runs"]
            link = base64.urlsafe_b64encode(cat_sat.encode("utf-8")).decode()  # with its padding
            driver.execute_script("location.hash = arguments[0]", "input=" + link)
            state = shown(driver, runs + 1, "a new #input= in the same tab")
            check(state["input"] == cat_sat and state["trace"] == the_tools_trace(binary, cat_sat),
                  "the page follows a new #input=")
    finally:
        driver.quit()
    if report.failures:
        print(f"{len(report.failures)} failures")
        return 1
    print("browser: the explorer checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
