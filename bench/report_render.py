#!/usr/bin/env python3
"""How large the HTML report of a big trace is, and how long headless Chromium takes to render it.

Builds a seeded causal input of n = 256 tokens, 8 heads, d_model = 256 (bench/make_input.py) in a
temporary folder, writes its report (both engines, the defaults of `attn-trace report`), and loads the
page from file:// in headless Chromium three times. The render time is the page's own clock from the
start of navigation to the moment report.js has drawn every heatmap of the head shown and the tile
walk and set data-ready (data-render-ms); the best of the three loads is printed, with the targets
of the issue: under 20 MB and under 3 s.

usage: bench/report_render.py [path/to/attn-trace]   (default: build/release/attn-trace)
Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --tests).
"""
import os
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

N, D_MODEL, HEADS, SEED = 256, 256, 8, 1
SIZE_TARGET_MB, TIME_TARGET_S = 20, 3.0


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build", "release", "attn-trace")
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "input.json")
        with open(source, "w") as f:
            subprocess.run([sys.executable, os.path.join(here, "make_input.py"), str(N), str(D_MODEL), str(HEADS),
                            str(SEED)], stdout=f, check=True)
        page = os.path.join(work, "report.html")
        start = time.perf_counter()
        subprocess.run([binary, "report", source, "-o", page], check=True)
        write_s = time.perf_counter() - start
        size_mb = os.path.getsize(page) / 1e6

        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1280,900"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        times = []
        try:
            for _ in range(3):
                driver.get("about:blank")
                driver.get("file://" + page)
                deadline = time.time() + 60
                while driver.execute_script("return document.documentElement.getAttribute('data-ready')") != "1":
                    if time.time() > deadline:
                        raise SystemExit("the page did not become ready within 60 s")
                    time.sleep(0.02)
                times.append(int(driver.execute_script(
                    "return document.documentElement.getAttribute('data-render-ms')")) / 1000)
        finally:
            driver.quit()

    render_s = min(times)
    print(f"report of n = {N}, {HEADS} heads, d_model = {D_MODEL} (causal), float32, both engines, "
          f"{os.cpu_count()} cores")
    print(f"  attn-trace report (run + write):       {write_s:.2f} s")
    print(f"  file size:                             {size_mb:.1f} MB   (target < {SIZE_TARGET_MB} MB: "
          f"{'met' if size_mb < SIZE_TARGET_MB else 'MISSED'})")
    print(f"  navigation start to data-ready:        {render_s:.2f} s   (target < {TIME_TARGET_S:g} s: "
          f"{'met' if render_s < TIME_TARGET_S else 'MISSED'}; best of {', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
