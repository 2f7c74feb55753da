#!/usr/bin/env python3
"""The explorer's controls (docs/explorer.md) in a real browser: headless Chromium driven by Selenium,
offline, the page opened from file:// and changed through its own controls only.

After each change (dtype, engine, tile sizes, the backward pass, an example from the menu) #trace-data
must equal `attn-trace run - --json -` with the same options on the input the page offers for download
(the file Chromium saves from "download input"), and "download trace" must save #trace-data itself.
Undo (the button and Ctrl+Z) returns the trace before the change and redo (Ctrl+Shift+Z) the one after;
reset returns the page as it opened; a copied link opened in a new page shows the same input, settings and
trace; a link's settings (dtype, engine, block-q, block-k, backward) are the command line's.

usage: controls_test.py ATTN_TRACE SOURCE_DIR
Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --tests).
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siblings  # noqa: E402  loads this folder's scripts under names of their own

page = siblings.load("explorer_page", "browser_test.py")  # the tool, the page's state, waits, the offline check
core = siblings.load("explorer_core_test", "core_test.py")  # where the C libraries differ, and compare's rule

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

report = page.report
check = report.check

# The settings as the controls show them, in the command line's terms.
SETTINGS = """
const v = id => document.getElementById(id);
return {dtype: v('dtype').value, engine: v('engine').value, block_q: v('block-q').value,
        block_k: v('block-k').value, backward: v('backward').checked,
        undo: !v('undo').disabled, redo: !v('redo').disabled};
"""


def args_of(settings):
    """The options of `attn-trace run` that the page's settings stand for."""
    out = ["--dtype", settings["dtype"], "--engine", settings["engine"]]
    if settings["engine"] != "naive":
        if settings["block_q"]:
            out += ["--block-q", settings["block_q"]]
        if settings["block_k"]:
            out += ["--block-k", settings["block_k"]]
    if settings["backward"]:
        out.append("--backward")
    return out


def downloaded(folder, name, before):
    """The text of `name` once Chromium has saved it anew into `folder` (mtime after `before`)."""
    path = os.path.join(folder, name)
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getmtime(path) >= before and not os.path.exists(path + ".crdownload"):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if text:
                return text
        time.sleep(0.05)
    check(False, f"{name} was downloaded within 30 s")
    return ""


def fetch(driver, folder, button, name):
    path = os.path.join(folder, name)
    if os.path.exists(path):
        os.remove(path)
    before = time.time() - 1
    driver.find_element(By.ID, button).click()
    return downloaded(folder, name, before)


def agrees(driver, binary, folder, what):
    """#trace-data is the tool's trace of the input the page offers for download, with its settings; the
    trace it offers is #trace-data. Returns the state."""
    state = driver.execute_script(page.STATE)
    settings = driver.execute_script(SETTINGS)
    offered = fetch(driver, folder, "download-input", "input.json")
    check(offered == state["input"], f"{what}: the input offered for download is #input-data")
    want = page.tool(binary, "run", "-", *args_of(settings), "--json", "-", stdin=offered).stdout
    command = f"`attn-trace run - {' '.join(args_of(settings))} --json -` of the offered input"
    if state["trace"] != want:
        # Byte for byte unless the browser's C library rounds a function of this input otherwise
        # (core_test.may_differ); then the same steps, and the output and gradients within compare's rule.
        why = core.may_differ("the page's input", settings["dtype"], offered)
        check(why is not None, f"{what}: #trace-data is {command} byte for byte")
        ours, theirs = json.loads(state["trace"]), json.loads(want)
        check([s["name"] for s in ours["steps"]] == [s["name"] for s in theirs["steps"]],
              f"{what}: #trace-data has the steps of {command}")
        with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:
            f.write(offered)
            f.flush()
            core.within_rule(binary, f.name, what, settings["dtype"], settings["backward"], ours, theirs)
    trace = fetch(driver, folder, "download-trace", "trace.json")
    check(trace == state["trace"], f"{what}: the trace offered for download is #trace-data")
    return state


def change(driver, runs, what, act):
    act()
    return page.shown(driver, runs + 1, what)


def select(driver, control, value):
    Select(driver.find_element(By.ID, control)).select_by_value(value)


def type_into(driver, control, text):
    field = driver.find_element(By.ID, control)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text, Keys.ENTER)


def keys(driver, *combo):
    """A shortcut pressed on the page's body (outside every text field)."""
    driver.find_element(By.TAG_NAME, "h1").click()
    chain = ActionChains(driver)
    for k in combo[:-1]:
        chain.key_down(k)
    chain.send_keys(combo[-1])
    for k in reversed(combo[:-1]):
        chain.key_up(k)
    chain.perform()


def structure(driver, binary, folder, state):
    """A token added, renamed and removed, a mask cell flipped, the head count changed, dropout turned on:
    after each, the page's trace is the tool's on the offered input."""
    runs = state["runs"]
    n = len(json.loads(state["input"])["X"])
    state = change(driver, runs, "a token added", lambda: driver.find_element(By.ID, "add-token").click())
    added = json.loads(state["input"])
    check(len(added["X"]) == n + 1 and len(added["tokens"]) == n + 1, f"a token added: X has {len(added['X'])} rows")
    agrees(driver, binary, folder, "a token added")
    box = driver.find_element(By.CSS_SELECTOR, f'#tokens input[data-token="{n}"]')
    state = change(driver, state["runs"], "a token renamed", lambda: type_into_element(box, "mat"))
    check(json.loads(state["input"])["tokens"][n] == "mat", "the new token is renamed mat")
    check(json.loads(state["trace"])["input"]["tokens"][n] == "mat", "the trace labels it mat")

    state = change(driver, state["runs"], "causal", lambda: select(driver, "mask-kind", "causal"))
    agrees(driver, binary, folder, "a causal mask")
    cell = driver.find_element(By.CSS_SELECTOR, 'td[data-mask="/0/1"]')
    check("off" in cell.get_attribute("class"), "causal: The may not see cat")
    state = change(driver, state["runs"], "a mask cell flipped", lambda: cell.click())
    mask = json.loads(state["input"])["mask"]
    check(isinstance(mask, dict) and mask["type"] == "custom" and mask["allow"][0][1] in (True, 1),
          f"a flipped cell makes the mask custom with The -> cat allowed: {mask}")
    masked = next(s for s in json.loads(state["trace"])["steps"] if s["name"] == "masked")["data"]
    check(masked[0][0][1] != "-inf" and masked[0][0][2] == "-inf",
          f"the trace's masked step follows the flipped cell: {masked[0][0]}")
    agrees(driver, binary, folder, "a mask cell flipped")

    state = change(driver, state["runs"], "two heads", lambda: type_into(driver, "heads", "2"))
    two = json.loads(state["trace"])["config"]
    check(two["n_heads"] == 2, f"the trace has two heads: {two}")
    agrees(driver, binary, folder, "two heads")
    state = change(driver, state["runs"], "dropout", lambda: type_into(driver, "dropout-p", "0.5"))
    check(json.loads(state["input"]).get("dropout", {}).get("p") == 0.5, "dropout p 0.5 is in the input")
    check(any(s["name"] == "dropped" for s in json.loads(state["trace"])["steps"]), "the trace has the dropped step")
    agrees(driver, binary, folder, "dropout on")
    state = change(driver, state["runs"], "a token removed",
                   lambda: driver.find_element(By.CSS_SELECTOR, '#tokens [data-remove-token="0"]').click())
    check(len(json.loads(state["input"])["X"]) == n, "a token removed")
    agrees(driver, binary, folder, "a token removed")
    before = state
    state = change(driver, state["runs"], "undo of a removal", lambda: driver.find_element(By.ID, "undo").click())
    check(len(json.loads(state["input"])["X"]) == n + 1, "undo brings the token back")
    page.no_console_error(driver, "after the structure's edits")
    return before


def type_into_element(field, text):
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text, Keys.ENTER)


def main():
    binary, source = sys.argv[1:3]
    cat_sat = open(os.path.join(source, "data", "the_cat_sat.json"), encoding="utf-8").read()
    gpt = open(os.path.join(source, "data", "gpt_causal.json"), encoding="utf-8").read()
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "downloads")
        os.mkdir(folder)
        driver = report.browser(downloads=folder)
        driver.set_window_size(1400, 1000)
        try:
            html = os.path.join(work, "p.html")
            page.tool(binary, "explore", os.path.join(source, "data", "the_cat_sat.json"), "-o", html)
            driver.get("file://" + html)
            state = page.shown(driver, 1, "the page opens")
            opened = state
            settings = driver.execute_script(SETTINGS)
            check(settings == {"dtype": "float32", "engine": "both", "block_q": "", "block_k": "", "backward": False,
                               "undo": False, "redo": False},
                  f"the controls show `explore`'s defaults, with nothing to undo: {settings}")
            agrees(driver, binary, folder, "as opened")
            runs = state["runs"]

            # Each setting through its own control.
            state = change(driver, runs, "dtype float64", lambda: select(driver, "dtype", "float64"))
            agrees(driver, binary, folder, "dtype float64")
            state = change(driver, state["runs"], "engine flash", lambda: select(driver, "engine", "flash"))
            agrees(driver, binary, folder, "engine flash")
            state = change(driver, state["runs"], "block-q 1", lambda: type_into(driver, "block-q", "1"))
            q_only = state
            state = change(driver, state["runs"], "block-k 2", lambda: type_into(driver, "block-k", "2"))
            tiles = agrees(driver, binary, folder, "tiles 1 x 2")
            flash = json.loads(tiles["trace"])["flash"]
            check((flash["block_q"], flash["block_k"]) == (1, 2), f"the trace's tiles are 1 x 2: {flash['block_q']}, "
                  f"{flash['block_k']}")
            state = change(driver, state["runs"], "the backward pass", lambda: driver.find_element(By.ID, "backward").click())
            with_backward = agrees(driver, binary, folder, "the backward pass on")
            names = [s["name"] for s in json.loads(with_backward["trace"])["steps"]]
            check("d_X" in names and "flash_backward" in json.loads(with_backward["trace"]),
                  "with the backward pass the trace holds the gradients and flash's backward walk")

            # A bad tile size is refused in a line, and nothing changes.
            runs = state["runs"]
            type_into(driver, "block-q", "0")
            said = driver.find_element(By.ID, "said").text
            check("block-q" in said, f"a tile of 0 is refused in a line: {said!r}")
            check(driver.execute_script(page.STATE)["trace"] == with_backward["trace"], "a refused tile changes nothing")
            check(driver.execute_script(SETTINGS)["block_q"] == "1", "the field shows the tile size in use again")

            # Undo, by the button and by Ctrl+Z; redo by Ctrl+Shift+Z.
            state = change(driver, runs, "undo", lambda: driver.find_element(By.ID, "undo").click())
            check(state["trace"] == tiles["trace"], "undo returns the trace before the backward pass")
            check(driver.execute_script(SETTINGS)["backward"] is False, "undo turns the backward control off again")
            state = change(driver, state["runs"], "Ctrl+Z", lambda: keys(driver, Keys.CONTROL, "z"))
            check(state["trace"] == q_only["trace"], "Ctrl+Z undoes block-k 2 as well")
            state = change(driver, state["runs"], "Ctrl+Shift+Z", lambda: keys(driver, Keys.CONTROL, Keys.SHIFT, "z"))
            check(state["trace"] == tiles["trace"], "Ctrl+Shift+Z redoes the tile size")
            state = change(driver, state["runs"], "redo", lambda: driver.find_element(By.ID, "redo").click())
            check(state["trace"] == with_backward["trace"], "redo returns the trace after the backward pass")
            check(not driver.execute_script(SETTINGS)["redo"], "nothing is left to redo")

            # The link: copied, then opened in a new page.
            driver.find_element(By.ID, "copy-link").click()
            link = driver.find_element(By.ID, "link").get_attribute("value")
            check("#input=" in link and "&dtype=float64&engine=flash&block-q=1&block-k=2&backward=1" in link,
                  f"the link holds the input and the settings under the command line's names: {link[-80:]!r}")
            driver.get("about:blank")
            driver.get(link)
            state = page.shown(driver, 1, "the copied link opens")
            check(state["input"] == with_backward["input"] and state["trace"] == with_backward["trace"],
                  "the copied link shows the same input and trace")
            settings = driver.execute_script(SETTINGS)
            check(settings["dtype"] == "float64" and settings["engine"] == "flash" and settings["block_q"] == "1"
                  and settings["block_k"] == "2" and settings["backward"] is True,
                  f"the copied link's controls show its settings: {settings}")
            page.check_offline(driver, "a copied link")
            page.no_console_error(driver, "a copied link")

            # An example from the menu, then reset to the page as it opened.
            state = change(driver, state["runs"], "an example", lambda: select(driver, "example", "gpt-causal"))
            check(state["input"] == gpt, "the menu's gpt-causal is data/gpt_causal.json byte for byte")
            agrees(driver, binary, folder, "the gpt-causal example")
            state = change(driver, state["runs"], "undo of an example", lambda: driver.find_element(By.ID, "undo").click())
            check(state["input"] == with_backward["input"], "undo returns the input before the example")
            state = change(driver, state["runs"], "reset", lambda: driver.find_element(By.ID, "reset").click())
            check(state["input"] == cat_sat and state["trace"] == opened["trace"],
                  "reset shows the page's own input with the settings it opened with")
            check(driver.execute_script(SETTINGS)["engine"] == "both", "reset sets the controls back")
            page.no_console_error(driver, "after every control")

            # The structure, through its own controls, on the worked example with the settings reset.
            structure(driver, binary, folder, state)
        finally:
            driver.quit()
    if report.failures:
        print(f"{len(report.failures)} failures")
        return 1
    print("browser: the explorer's controls checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
