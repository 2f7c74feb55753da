"""The screenshots of the HTML report for docs/pictures.md and of the explorer for docs/explorer.md, taken
in headless Chromium through Selenium from pages that attn-trace writes (scripts/pictures.sh runs it).

usage: report_pictures.py path/to/attn-trace OUT_DIR
"""

import os
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains

binary, out = sys.argv[1], sys.argv[2]


def browser(dark=False):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1040",
                "--force-device-scale-factor=1"):
        options.add_argument(arg)
    if dark:
        options.add_argument("--force-dark-mode")
        options.add_argument("--blink-settings=preferredColorScheme=0")
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def load(driver, path):
    driver.get("file://" + os.path.abspath(path))
    deadline = time.time() + 30
    while driver.execute_script("return document.documentElement.getAttribute('data-ready')") != "1":
        if time.time() > deadline:
            raise SystemExit(f"{path}: the page never finished drawing")
        time.sleep(0.05)


def shot(driver, name):
    path = os.path.join(out, name)
    driver.save_screenshot(path)
    print(f"pictures: {path}")


def scroll_to(driver, element_id, offset=0):
    driver.execute_script(f"window.scrollTo(0, document.getElementById('{element_id}').offsetTop - {offset})")
    time.sleep(0.2)


with tempfile.TemporaryDirectory() as tmp:
    pages = {}
    for name, args in (("cat", ["data/the_cat_sat.json"]),
                       ("gpt", ["data/gpt_causal.json", "--block-q", "2", "--block-k", "1"]),
                       ("gqa", ["data/gqa.json"])):
        pages[name] = os.path.join(tmp, name + ".html")
        subprocess.run([binary, "report", *args, "-o", pages[name]], check=True)
    pages["explorer"] = os.path.join(tmp, "explorer.html")
    subprocess.run([binary, "explore", "data/the_cat_sat.json", "-o", pages["explorer"]], check=True)

    driver = browser()
    try:
        # The top of the worked example's report: the header, the pipeline, the first steps.
        load(driver, pages["cat"])
        shot(driver, "report-the-cat-sat.png")
        # Its weights, with the pointer on "cat" -> "The" (row 1, column 0).
        scroll_to(driver, "step-weights", 20)
        # Cells are in row-major order: row 1 ("cat"), column 0 ("The") of the 3 × 3 weights is the fourth.
        cell = driver.find_elements("css selector", "#step-weights rect.cell")[3]
        ActionChains(driver).move_to_element(cell).perform()
        time.sleep(0.3)
        shot(driver, "report-weights-hover.png")
        # The tile walk of the causal example, six tiles in: a tile where m rises and alpha rescales.
        load(driver, pages["gpt"])
        scroll_to(driver, "flash", 10)
        for _ in range(6):
            driver.find_element("css selector", "[data-action=next-tile]").click()
        time.sleep(0.3)
        shot(driver, "report-tile-walk.png")
        # The dark theme, on the grouped-query example's masked scores and weights.
        load(driver, pages["gqa"])
        driver.find_element("css selector", "[data-action=theme]").click()
        scroll_to(driver, "step-masked", 20)
        shot(driver, "report-dark.png")
        # The explorer, once its core has computed the page's input and the report frame is drawn.
        driver.set_window_size(1400, 860)
        driver.get("file://" + os.path.abspath(pages["explorer"]))
        deadline = time.time() + 30
        while not driver.execute_script("const d = document.getElementById('report').contentDocument;"
                                        "return document.documentElement.getAttribute('data-runs') === '1' &&"
                                        " d.documentElement.getAttribute('data-ready') === '1'"):
            if time.time() > deadline:
                raise SystemExit("the explorer never finished computing")
            time.sleep(0.05)
        # With the explanation of one weight open: "cat" (query 1) on "The" (key 0), clicked in its heatmap.
        driver.execute_script("""
const canvas = document.querySelector('#steps section.step[data-step="weights"] canvas');
const r = canvas.getBoundingClientRect();
canvas.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: r.left + 0.5 * r.width / 3,
                                              clientY: r.top + 1.5 * r.height / 3}));""")
        time.sleep(0.3)
        shot(driver, "explorer-the-cat-sat.png")
    finally:
        driver.quit()
