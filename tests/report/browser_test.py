#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium driven by Selenium, one session for every page.

For the report of every example in data/ (and of saved traces read back as FILE), it checks that
  - the page loads from file:// with no console error, fetches nothing (the browser's resource entries
    are only file:, data: and blob: URLs) and names no external src or href;
  - every step has its section (id="step-NAME");
  - every heatmap cell's data-value is the trace's value (the trace of `run --json` with the same
    engine, rounded to the 7 significant digits the page keeps);
  - next-tile changes #tile-state and moves the highlighted tile, and prev-tile brings both back;
  - a screenshot is taken and is not blank (its pixels, read back in the browser, have many colours);
and, once, that the head selector and the theme switch work (with grouped-query attention, a query head
shows its group's key/value head) and that a token such as </script><b>
stays text. The pages of report --backward get the same checks (every gradient's cells included), and
their backward tile walk is stepped through its controls from the first step to the last: D of every
row, then each tile's P, dP, dS, dQ_i contribution and running dK_j, dV_j as the trace of
`run --backward --engine flash --json -` holds them, skipped tiles said so, and the dQ_i gathered over
the key tiles equal to the trace's d_q_heads. The browser runs with its network off (a proxy that does
not exist), so a page that needed one would fail.

usage: browser_test.py ATTN_TRACE SOURCE_DIR
Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --tests).
"""
import base64
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

STEPS = ["q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled", "masked", "weights",
         "head_outputs", "concat", "output"]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return ok


def run(binary, *args, expect=(0,)):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    if r.returncode not in expect:
        raise SystemExit(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def browser(downloads=None):
    """Headless Chromium with its network off; files it downloads go to the folder `downloads` when given."""
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars", "--disable-extensions",
                "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if downloads:
        options.add_experimental_option("prefs", {"download.default_directory": downloads,
                                                  "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    if downloads:
        driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver


def load(driver, path):
    driver.get("file://" + os.path.abspath(path))
    deadline = time.time() + 30
    while time.time() < deadline:
        if driver.execute_script("return document.documentElement.getAttribute('data-ready')") == "1":
            return True
        time.sleep(0.05)
    return False


def value(text):
    """A number as the trace or the page writes it: -inf, inf and nan as strings."""
    special = {"-inf": -math.inf, "inf": math.inf, "nan": math.nan}
    return special[text] if isinstance(text, str) and text in special else float(text)


def flat(nested):
    if isinstance(nested, list):
        return [x for item in nested for x in flat(item)]
    return [value(nested)]


def same(page, trace):
    if math.isinf(trace) or math.isnan(trace):
        return page == trace or (math.isnan(page) and math.isnan(trace))
    return abs(page - trace) <= 1e-6 * abs(trace) + 1e-300


def panels_of(step, config):
    """The trace step's values split as the page splits them: one 2-D matrix per batch item and head."""
    batched = config["batch"] is not None
    shape, data = step["shape"], flat(step["data"])
    rows = shape[-2] if len(shape) >= 2 else 1
    cols = shape[-1]
    out = []
    size = rows * cols
    dims = step["dims"]
    outer = shape[:-2] if len(shape) >= 2 else []
    for k in range(len(data) // size if size else 0):
        index, rest = [], k
        for extent in reversed(outer):
            index.insert(0, rest % extent)
            rest //= extent
        batch = index[0] if batched else 0
        head = index[-1] if (len(outer) > (1 if batched else 0)) else None
        if head is not None and config["head"] is not None:  # a trace of one head: its axes hold that head
            group = config["n_heads"] // config["n_kv_heads"]
            head = config["head"] // group if "kv_head" in step["dims"] else config["head"]
        out.append((batch, head, data[k * size:(k + 1) * size]))
    return out


def with_sink_column(panels, weights, sinks, config):
    """The weights' panels as the page draws them with sinks: each row ends in its head's sink share,
    the trace's sink_weights (head, query), or (batch, head, query) for a batch."""
    cols = weights["shape"][-1]
    shares = flat(sinks["data"])
    heads, n = sinks["shape"][-2], sinks["shape"][-1]
    out = []
    for k, (batch, head, values) in enumerate(panels):
        h = k % heads  # the panels come batch by batch, head by head, as the sink shares do
        row_shares = shares[(batch * heads + h) * n:(batch * heads + h + 1) * n]
        rows = len(values) // cols
        out.append((batch, head, [x for r in range(rows) for x in values[r * cols:(r + 1) * cols] + [row_shares[r]]]))
    return out


COLLECT = """
const out = {};
for (const section of document.querySelectorAll('section.step')) {
  const figures = [];
  for (const figure of section.querySelectorAll('figure.heatmap')) {
    if (figure.hidden) continue;
    figures.push({batch: Number(figure.dataset.batch),
                  head: figure.dataset.head === undefined ? null : Number(figure.dataset.head),
                  values: Array.from(figure.querySelectorAll('rect[data-value]'), r => r.getAttribute('data-value'))});
  }
  out[section.dataset.step] = figures;
}
return out;
"""

NETWORK = """
const urls = performance.getEntriesByType('resource').map(e => e.name);
urls.push(location.href);
const attrs = [];
for (const el of document.querySelectorAll('[src], [href], [xlink\\\\:href]'))
  for (const name of ['src', 'href', 'xlink:href'])
    if (el.hasAttribute(name)) attrs.push(el.getAttribute(name));
return {urls, attrs, links: document.querySelectorAll('link, iframe, object, embed, img[src]').length};
"""

TILE = """
const h = document.getElementById('tile-highlight');
return {state: document.getElementById('tile-state').textContent,
        rows: h && h.getAttribute('data-rows'), cols: h && h.getAttribute('data-cols'),
        step: h && h.getAttribute('data-step'),
        box: h && [h.style.left, h.style.top, h.style.width, h.style.height].join(' ')};
"""

# How many colours a PNG has, read back through a canvas in the browser.
COLOURS = """
const done = arguments[arguments.length - 1];
const img = new Image();
img.onload = () => {
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let k = 0; k < d.length; k += 4 * 7) seen.add((d[k] << 16) | (d[k + 1] << 8) | d[k + 2]);
  done({width: img.width, height: img.height, colours: seen.size});
};
img.onerror = () => done(null);
img.src = 'data:image/png;base64,' + arguments[0];
"""


BACKWARD_TILE = """
const h = document.getElementById('backward-tile-highlight');
const parts = {};
for (const f of document.querySelectorAll('#backward-tile-parts figure[data-part]'))
  parts[f.dataset.part] = Array.from(f.querySelectorAll('rect[data-value]'), r => r.getAttribute('data-value'));
const D = Array.from(document.querySelectorAll('#backward-tile-parts table[data-part=D] td[data-value]'),
                     td => td.getAttribute('data-value'));
const next = document.querySelector('[data-action=next-backward-tile]');
return {state: document.getElementById('backward-tile-state').textContent,
        rows: h && h.getAttribute('data-rows'), cols: h && h.getAttribute('data-cols'),
        step: h && h.getAttribute('data-step'), parts, D, last: next.disabled};
"""


def step_values(trace, name):
    for step in trace["steps"]:
        if step["name"] == name:
            return step
    return None


def check_backward_walk(driver, name, flash):
    """Step the backward walk from its first step to its last with next-backward-tile, comparing what
    each step shows with the flash trace (run --backward --engine flash --json -)."""
    fb = flash["flash_backward"]
    config = flash["config"]
    n, d_k = config["n"], config["d_k"]
    batched = config["batch"] is not None
    D = fb["D"] if batched else [fb["D"]]  # batch × head × n
    # The steps the walk must show: per batch item and head, D, then its tiles in the engine's order.
    expected, group = [], None
    for tile in fb["tiles"]:
        if (tile["batch"], tile["head"]) != group:
            group = (tile["batch"], tile["head"])
            expected.append(("D", tile))
        expected.append(("tile", tile))
    dq = {}  # (batch, head, query row) -> the dQ_i the walk has gathered at its last key tile
    seen_skipped = False
    for k, (kind, tile) in enumerate(expected):
        shown = driver.execute_script(BACKWARD_TILE)
        where = f"{name}: backward walk step {k + 1} of {len(expected)}"
        check(shown["state"].startswith(f"step {k + 1} of {len(expected)}"), f"{where}: the state says so: {shown['state']!r}")
        head = tile["head"] if config["head"] is None else 0
        d_rows = D[tile["batch"]][head]
        if kind == "D":
            check("D = rowsum(dO ⊙ O)" in shown["state"], f"{where}: D comes first: {shown['state']!r}")
            check(len(shown["D"]) == n and all(same(value(a), value(b)) for a, b in zip(shown["D"], d_rows)),
                  f"{where}: D of every row is the trace's: {shown['D']} vs {d_rows}")
        else:
            check(shown["rows"] == ",".join(map(str, tile["rows"])) and shown["cols"] == ",".join(map(str, tile["cols"])),
                  f"{where}: the frame is on rows {tile['rows']} × keys {tile['cols']}: {shown['rows']} × {shown['cols']}")
            check(f"key tile {tile['j']}" in shown["state"] and f"query tile {tile['i']}" in shown["state"],
                  f"{where}: the state names key tile {tile['j']} and query tile {tile['i']}: {shown['state']!r}")
            if tile["skipped"]:
                seen_skipped = True
                check("skipped" in shown["state"] and not shown["parts"],
                      f"{where}: a skipped tile is said to be skipped and shows no numbers")
            else:
                want_d = d_rows[tile["rows"][0]:tile["rows"][1]]
                check(all(same(value(a), value(b)) for a, b in zip(shown["D"], want_d)) and len(shown["D"]) == len(want_d),
                      f"{where}: D_i of the tile's rows: {shown['D']} vs {want_d}")
                for part in ("P", "dP", "dS", "dQ_add", "dK_j", "dV_j"):
                    want = flat(tile[part])
                    got = [value(x) for x in shown["parts"].get(part, [])]
                    check(len(got) == len(want) and all(same(a, b) for a, b in zip(got, want)),
                          f"{where}: {part} is the trace's: {got} vs {want}")
                got = [value(x) for x in shown["parts"].get("dQ_sum", [])]
                for r in range(tile["rows"][1] - tile["rows"][0]):
                    dq[(tile["batch"], tile["head"], tile["rows"][0] + r)] = got[r * d_k:(r + 1) * d_k]
        check(shown["last"] == (k == len(expected) - 1), f"{where}: next is disabled only at the last step")
        if k + 1 < len(expected):
            driver.find_element("css selector", "[data-action=next-backward-tile]").click()
    check(seen_skipped or not any(t["skipped"] for t in fb["tiles"]), f"{name}: the walk passed its skipped tiles")
    # What the walk gathered into dQ_i over the key tiles is the trace's d_q_heads (float32 sums in
    # another order: a few ulps apart).
    dqh = step_values(flash, "d_q_heads")
    if dqh is not None and dq:
        values = flat(dqh["data"])
        for (b, hd, row), got in sorted(dq.items()):
            head = hd if config["head"] is None else 0
            at = ((b * len(dqh["data"][0]) if batched else 0) + head) * n * d_k + row * d_k
            want = values[at:at + d_k]
            check(len(got) == d_k and all(abs(a - w) <= 1e-5 * max(1.0, abs(w)) for a, w in zip(got, want)),
                  f"{name}: dQ_i so far at row {row} of head {hd}, after its last key tile, is d_q_heads: {got} vs {want}")
    print(f"{name}: {len(expected)} steps of the backward walk checked, {len(dq)} rows of dQ_i", flush=True)
    # and back to the first step
    for _ in range(len(expected) - 1):
        driver.find_element("css selector", "[data-action=prev-backward-tile]").click()
    first = driver.execute_script(BACKWARD_TILE)
    check(first["state"].startswith("step 1 of"), f"{name}: prev-backward-tile goes back to the first step")


def check_page(driver, name, path, trace, shots):
    if not check(load(driver, path), f"{name}: the page sets data-ready within 30 s"):
        return
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    check(not errors, f"{name}: no console error: {errors}")

    net = driver.execute_script(NETWORK)
    check(all(re.match(r"^(file|data|blob):", u) for u in net["urls"]),
          f"{name}: the page fetched only file:, data: and blob: URLs: {net['urls']}")
    check(all(a.startswith("#") for a in net["attrs"]), f"{name}: every src and href is within the page: {net['attrs']}")
    check(net["links"] == 0, f"{name}: no link, iframe, object, embed or img element")

    for step in STEPS:
        check(driver.execute_script(f"return !!document.getElementById('step-{step}')"),
              f"{name}: section id=step-{step} is present")

    # Show every head, then compare every SVG cell with the trace.
    driver.execute_script("const s = document.getElementById('head-select'); s.value = 'all';"
                          "s.dispatchEvent(new Event('change'));")
    deadline = time.time() + 10
    while driver.execute_script("return document.querySelectorAll('figure.heatmap:not([hidden])').length !=="
                                " document.querySelectorAll('figure.heatmap:not([hidden]) > :nth-child(2)').length"):
        if time.time() > deadline:
            break
        time.sleep(0.05)
    page = driver.execute_script(COLLECT)
    compared = 0
    sinks = {step["name"]: step for step in trace["steps"]}.get("sink_weights")
    for step in trace["steps"]:
        figures = page.get(step["name"], [])
        expected = panels_of(step, trace["config"])
        if step["name"] == "weights" and sinks is not None:
            expected = with_sink_column(expected, step, sinks, trace["config"])
        check(len(figures) == len(expected),
              f"{name}: step {step['name']} has {len(expected)} heatmaps, the page {len(figures)}")
        for (batch, head, values), figure in zip(expected, figures):
            where = f"{name}: {step['name']} batch {batch} head {head}"
            check(figure["batch"] == batch and figure["head"] == head,
                  f"{where}: the figure is batch {figure['batch']} head {figure['head']}")
            if not check(len(figure["values"]) == len(values),
                         f"{where}: {len(values)} cells in the trace, {len(figure['values'])} rects with data-value"):
                continue
            for k, (shown, want) in enumerate(zip(figure["values"], values)):
                if not check(same(value(shown), want), f"{where} cell {k}: data-value {shown}, trace {want}"):
                    break
                compared += 1
    check(compared > 0, f"{name}: some cells were compared")
    print(f"{name}: {compared} cells compared", flush=True)

    if trace.get("flash") and driver.execute_script("return !!document.querySelector('[data-action=next-tile]')"):
        before = driver.execute_script(TILE)
        driver.find_element("css selector", "[data-action=next-tile]").click()
        after = driver.execute_script(TILE)
        check(after["state"] != before["state"], f"{name}: next-tile changes #tile-state")
        check((after["rows"], after["cols"], after["box"]) != (before["rows"], before["cols"], before["box"]),
              f"{name}: next-tile moves the highlighted tile: {before} -> {after}")
        driver.find_element("css selector", "[data-action=prev-tile]").click()
        back = driver.execute_script(TILE)
        check(back == before, f"{name}: prev-tile goes back: {before} -> {back}")
        # The running state table's columns are the tile's fields of one number per row, in the trace's
        # order (m_prev, m_new, alpha, l_prev, l_new), and each of its rows has a cell for each.
        tile = next((t for t in trace["flash"]["tiles"] if not t["skipped"]), None)
        if tile is not None:
            per_row = [k for k, v in tile.items() if isinstance(v, list) and v and not isinstance(v[0], list)
                       and k not in ("rows", "cols")]
            table = driver.execute_script(
                "var t = document.querySelector('table.state'); if (!t) return null;"
                "return {head: Array.prototype.map.call(t.querySelectorAll('thead th'), function (c) { return c.textContent; }),"
                " rows: Array.prototype.map.call(t.querySelectorAll('tbody tr'), function (r) {"
                "   return r.querySelectorAll('td').length; })};")
            if check(table is not None, f"{name}: the tile walk shows its running state table"):
                check(table["head"][1:] == per_row,
                      f"{name}: the state table's columns {table['head'][1:]} are the trace's {per_row}")
                check(all(n in (len(per_row), 1) for n in table["rows"]),
                      f"{name}: every row of the state table has a cell per column: {table['rows']}")

    if shots:
        png = driver.get_screenshot_as_png()
        check(len(png) > 10000, f"{name}: the screenshot is a PNG of some size ({len(png)} bytes)")
        seen = driver.execute_async_script(COLOURS, base64.b64encode(png).decode())
        check(seen is not None and seen["colours"] >= 16, f"{name}: the screenshot is not blank: {seen}")
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    check(not errors, f"{name}: no console error while using the page: {errors}")


def main():
    binary, source = sys.argv[1], sys.argv[2]
    examples = sorted(glob.glob(os.path.join(source, "data", "*.json")))
    if not examples:
        raise SystemExit(f"no examples in {source}/data")
    driver = browser()
    driver.set_script_timeout(20)
    try:
        with tempfile.TemporaryDirectory() as work:
            pages = []
            for example in examples:
                name = os.path.basename(example)[:-5]
                html = os.path.join(work, name + ".html")
                run(binary, "report", example, "-o", html)
                trace = json.loads(run(binary, "run", example, "--engine", "both", "--json", "-").stdout)
                pages.append((name, html, trace))

            # Saved traces as FILE: a run of both engines, and a comparison with its verdict.
            saved = os.path.join(work, "gqa.trace.json")
            run(binary, "run", os.path.join(source, "data", "gqa.json"), "--engine", "both", "--json", saved)
            run(binary, "report", saved, "-o", os.path.join(work, "gqa-saved.html"))
            pages.append(("gqa.json saved by run --json", os.path.join(work, "gqa-saved.html"),
                          json.load(open(saved))))
            compared = os.path.join(work, "gpt.compare.json")
            run(binary, "compare", os.path.join(source, "data", "gpt_causal.json"), "--json", compared, expect=(0, 1))
            run(binary, "report", compared, "-o", os.path.join(work, "gpt-compare.html"))
            pages.append(("gpt_causal.json saved by compare --json", os.path.join(work, "gpt-compare.html"),
                          json.load(open(compared))))

            # One engine, and one head of a few steps.
            gpt = os.path.join(source, "data", "gpt_causal.json")
            for label, args in (("flash", ["--engine", "flash"]),
                                ("head1", ["--head", "1", "--steps", "weights,output"])):
                html = os.path.join(work, f"gpt-{label}.html")
                run(binary, "report", gpt, *args, "-o", html)
                engine = [] if "--engine" in args else ["--engine", "both"]
                trace = json.loads(run(binary, "run", gpt, *engine, *args, "--json", "-").stdout)
                pages.append((f"gpt_causal.json {' '.join(args)}", html, trace))

            # report --backward: the worked example, and a causal input with a seeded dY (skipped tiles).
            backward = []
            for label, example, args in (("the_cat_sat", "the_cat_sat.json", []),
                                         ("gpt_causal", "gpt_causal.json", ["--grad-seed", "7"])):
                path = os.path.join(source, "data", example)
                html = os.path.join(work, f"{label}-backward.html")
                run(binary, "report", path, "--backward", *args, "-o", html)
                both = json.loads(run(binary, "run", path, "--backward", *args, "--engine", "both", "--json", "-").stdout)
                flash = json.loads(run(binary, "run", path, "--backward", *args, "--engine", "flash", "--json", "-").stdout)
                pages.append((f"{example} --backward {' '.join(args)}", html, both))
                backward.append((f"{example} --backward {' '.join(args)}", html, flash))

            for name, html, trace in pages:
                check_page(driver, name, html, trace, shots=True)

            for name, html, flash in backward:
                check(load(driver, html), f"{name}: the page loads")
                check_backward_walk(driver, name, flash)
                errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                check(not errors, f"{name}: no console error while walking: {errors}")

            # The worked example: every d_weights entry 2, d_scores 0, and the page says why.
            load(driver, os.path.join(work, "the_cat_sat-backward.html"))
            shown = driver.execute_script(
                "return [Array.from(document.querySelectorAll('#step-d_weights rect[data-value]'), r => r.getAttribute('data-value')),"
                " Array.from(document.querySelectorAll('#step-d_scores rect[data-value]'), r => r.getAttribute('data-value')),"
                " (document.querySelector('#step-d_masked .why-zero') || {}).textContent || ''];")
            check(len(shown[0]) == 9 and all(value(x) == 2 for x in shown[0]), f"the cat sat: d_weights all 2: {shown[0]}")
            check(len(shown[1]) == 9 and all(abs(value(x)) < 1e-6 for x in shown[1]), f"the cat sat: d_scores all 0: {shown[1]}")
            check("Every row of d_weights holds one number c" in shown[2] and "every row of V is [1, 1]" in shown[2],
                  f"the cat sat: d_masked says why it is 0: {shown[2]!r}")

            # The verdict of a comparison is on the page.
            load(driver, os.path.join(work, "gpt-compare.html"))
            verdict = driver.execute_script("return document.getElementById('verdict').textContent")
            check("compare's verdict: pass" in verdict or "compare's verdict: fail" in verdict,
                  f"the report of a compare trace gives its verdict: {verdict}")

            # The head selector shows one head; the theme switch changes the colours.
            load(driver, os.path.join(work, "gpt_causal.html"))
            shown = driver.execute_script(
                "const s = document.getElementById('head-select'); s.value = '1'; s.dispatchEvent(new Event('change'));"
                "return Array.from(document.querySelectorAll('#step-weights figure.heatmap:not([hidden])'),"
                " f => f.dataset.head);")
            check(shown == ["1"], f"head 1 chosen: the weights show head 1 only, not {shown}")
            # With grouped-query attention each query head reads its group's key/value head: of gqa.json's 4
            # query heads sharing 2, heads 0 and 1 read key/value head 0, heads 2 and 3 read head 1.
            load(driver, os.path.join(work, "gqa.html"))
            for head in range(4):
                shown = driver.execute_script(
                    "const s = document.getElementById('head-select'); s.value = arguments[0];"
                    " s.dispatchEvent(new Event('change'));"
                    "const heads = step => Array.from(document.querySelectorAll("
                    "  '#step-' + step + ' figure.heatmap:not([hidden])'), f => f.dataset.head);"
                    "return [heads('weights'), heads('k_heads'), heads('v_heads')];", str(head))
                check(shown == [[str(head)], [str(head // 2)], [str(head // 2)]],
                      f"gqa: query head {head} chosen: weights, k_heads, v_heads show {shown}")
            load(driver, os.path.join(work, "gpt_causal.html"))
            themes = driver.execute_script(
                "const before = getComputedStyle(document.body).backgroundColor;"
                "document.querySelector('[data-action=theme]').click();"
                "return [before, getComputedStyle(document.body).backgroundColor,"
                " document.documentElement.getAttribute('data-theme')];")
            check(themes[0] != themes[1] and themes[2] in ("dark", "light"), f"the theme switch: {themes}")

            # --mistake: the page opens with the mistake; its first difference is drawn as intended and as
            # mistaken, and the mistaken values are the ones run --mistake --json reports.
            leak = os.path.join(work, "gpt-no-mask.html")
            run(binary, "report", gpt, "--mistake", "no-mask", "-o", leak)
            mistake = json.loads(run(binary, "run", gpt, "--mistake", "no-mask", "--json", "-").stdout)
            check(load(driver, leak), "report --mistake no-mask: the page loads")
            drawn = driver.execute_script(
                "const s = document.getElementById('mistake');"
                "return [s !== null, document.querySelector('nav.contents a').getAttribute('href'),"
                " document.querySelector('#mistake tr.first th').textContent,"
                " Array.from(document.querySelectorAll('#mistake-maps figure'), f => f.querySelector('figcaption').textContent),"
                " Array.from(document.querySelectorAll('#mistake-maps figure'),"
                "  f => Array.from(f.querySelectorAll('rect[data-value]'), r => r.getAttribute('data-value')))];")
            check(drawn[0] and drawn[1] == "#mistake", f"report --mistake: the section comes first: {drawn[:2]}")
            check(drawn[2] == mistake["first_difference"]["step"] == "masked",
                  f"report --mistake: the first difference is {drawn[2]}")
            check(len(drawn[3]) == 2 and drawn[3][0].endswith("intended") and drawn[3][1].endswith("mistaken"),
                  f"report --mistake: two heatmaps, intended and mistaken: {drawn[3]}")
            if len(drawn[4]) == 2:
                at = mistake["first_difference"]["index"]  # [head, query, key] of the largest difference
                cols = len(drawn[4][1]) and int(len(drawn[4][1]) ** 0.5)
                shown = value(drawn[4][1][at[1] * cols + at[2]])
                check(same(shown, value(mistake["first_difference"]["mistaken"])),
                      f"report --mistake: the mistaken cell {at} is {shown}, "
                      f"run --mistake --json says {mistake['first_difference']['mistaken']}")
                check(value(drawn[4][0][at[1] * cols + at[2]]) == -math.inf,
                      "report --mistake: the intended cell is -inf, as the mask says")

            # A token that tries to end the script, and one that tries to drive a terminal.
            with open(os.path.join(source, "data", "the_cat_sat.json")) as f:
                doc = json.load(f)
            doc["tokens"] = ["</script><b>bold</b>", "\u001b[31mred", "<!--"]
            hostile = os.path.join(work, "hostile.json")
            with open(hostile, "w") as f:
                json.dump(doc, f)
            run(binary, "report", hostile, "-o", os.path.join(work, "hostile.html"))
            check(load(driver, os.path.join(work, "hostile.html")), "hostile tokens: the page still loads")
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            check(not errors, f"hostile tokens: no console error: {errors}")
            tokens = driver.execute_script(
                "return [Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length,"
                " Array.from(document.querySelectorAll('.token'), t => t.textContent)];")
            check(tokens[0] == 0, f"hostile tokens: no <b> element came from a token ({tokens[0]})")
            check(tokens[1] == ["</script><b>bold</b>", "\\x1b[31mred", "<!--"],
                  f"hostile tokens: shown as text, ESC written out: {tokens[1]}")
    finally:
        driver.quit()

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("browser: every report checked")


if __name__ == "__main__":
    main()
