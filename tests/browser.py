"""Headless Chromium (Debian's chromium + chromedriver, driven by selenium) opening an HTML report from file://.

Shared by tests/test_html_report.py and benchmarks/html_report.py. `open_report` loads the page, waits until
every plot is wired, and returns what a person would see, counted from the rendered SVG: the bars and collapse
markers drawn per plot, the browser's console messages and every URL the page requested (CDP network log and
the Resource Timing entries), and a PNG screenshot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver",)
# No network, no background services: the only requests left are the page's own.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars")
INSTALL_HINT = "make browser (apt-get install chromium chromium-driver)"

# Per plot: the marks drawn for each role, from the rendered SVG: every mark is one element in a group named by its
# role (`data-role`); the cumulative cost is one polyline, counted by the points the browser parsed from it.
COUNT_SCRIPT = """
const plots = [];
for (const holder of document.querySelectorAll('.plot')) {
  const drawn = {};
  for (const group of holder.querySelectorAll('svg [data-role]')) {
    const role = group.dataset.role;
    const marks = group.tagName === 'polyline' ? group.points.numberOfItems : group.childElementCount;
    drawn[role] = (drawn[role] || 0) + marks;
  }
  plots.push({id: holder.id, log: holder.closest('section').getAttribute('data-log'),
              rendered: holder.dataset.rendered === 'true',
              expected: {requests: Number(holder.dataset.requests), collapses: Number(holder.dataset.collapses),
                         header: Number(holder.dataset.headerChanges), compaction: Number(holder.dataset.compactions)},
              drawn: drawn});
}
const resources = performance.getEntriesByType('resource').map(e => e.name);
const summary = document.getElementById('summary');
return {plots: plots, resources: resources, location: location.href, ready: document.body.dataset.ready === 'true',
        summary: summary ? summary.textContent : null,
        summaryTop: summary ? summary.getBoundingClientRect().top : null,
        sessionRows: document.querySelectorAll('#sessions tbody tr').length,
        rankedRows: document.querySelectorAll('table.collapses tbody tr, #worst-collapses tbody tr').length};
"""


PAGE_FACTS = ("ready", "summary", "summaryTop", "sessionRows", "rankedRows")   # PageResult.extra


@dataclass
class PageResult:
    plots: list[dict[str, Any]]
    console: list[dict[str, Any]]
    requested: list[str]                # every URL the page asked for (CDP Network + Resource Timing)
    location: str
    screenshot: Path
    seconds_to_ready: float
    extra: dict[str, Any] = field(default_factory=dict)

    def console_errors(self) -> list[dict[str, Any]]:
        return [entry for entry in self.console if entry.get("level") in ("SEVERE", "ERROR")]

    def network(self) -> list[str]:
        """Requested URLs that are not the file itself, another local file or inline data."""
        return [url for url in self.requested if not url.startswith(("file:", "data:", "blob:", "about:"))]


def find_chromium() -> tuple[str, str] | None:
    browser = next((path for path in CHROMIUM_CANDIDATES if os.access(path, os.X_OK)), None)
    driver = next((path for path in CHROMEDRIVER_CANDIDATES if os.access(path, os.X_OK)), None)
    return (browser, driver) if browser and driver else None


def install_chromium() -> str | None:
    """Install Debian's chromium and chromium-driver when missing (as `make browser` does); None when they are
    there afterwards, else why not."""
    if find_chromium():
        return None
    if shutil.which("apt-get") is None:
        return "chromium is not installed and apt-get is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=600"]   # another pytest worker may be installing them too
    for command in (["apt-get", *wait, "update"],
                    ["apt-get", *wait, "install", "-y", "--no-install-recommends", "chromium", "chromium-driver"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[-500:]}"
    return None if find_chromium() else "chromium or chromedriver still missing after apt-get install"


@contextmanager
def browser_session(timeout: float = 120.0) -> Iterator[Any]:
    """A selenium WebDriver on headless Chromium with a new empty profile, the browser and performance
    (network) logs on; quit and its profile removed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_chromium()
    if found is None:
        raise RuntimeError(f"chromium/chromedriver not found; install them: {INSTALL_HINT}")
    browser, driver_path = found
    profile = tempfile.mkdtemp(prefix="dsh-audit-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.set_page_load_timeout(timeout)
        driver.set_script_timeout(timeout)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def load(driver: Any, page: Path) -> float:
    """Open `page` from file:// and wait until every plot is drawn; the seconds it took."""
    driver.get("about:blank")
    driver.get_log("performance")   # drain the start-up tab's own requests: only the report's are counted
    started = time.perf_counter()
    driver.get(page.resolve().as_uri())
    outcome = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const wait = () => window.dshReportReady ? window.dshReportReady.then(() => done(true), "
        "e => done(String(e))) : setTimeout(wait, 50); wait();")
    if outcome is not True:
        raise AssertionError(f"the report's plots failed to draw: {outcome}")
    return time.perf_counter() - started


@contextmanager
def driver_for(page: Path) -> Iterator[Any]:
    """A browser with `page` loaded and drawn, to click and hover in."""
    with browser_session() as driver:
        load(driver, page)
        yield driver


def save_whole_page(driver: Any, screenshot: Path, width: int = 1400) -> None:
    """A PNG of the whole page, not of the window: the window made as tall as the page (600 to 8,000 px) plus
    the browser's own frame, the page measured again after each resize (a table as tall as 40 % of the window
    grows with it) until it stays as tall."""
    frame = int(driver.execute_script("return window.outerHeight - window.innerHeight"))
    height = 0
    for _ in range(12):
        page = min(max(int(driver.execute_script("return document.documentElement.offsetHeight")), 600), 8000)
        if page == height:
            break
        height = page
        driver.set_window_size(width, height + frame)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(screenshot))


def open_report(page: Path, screenshot: Path, *, width: int = 1400) -> PageResult:
    """Open `page` from file:// in headless Chromium, wait until every plot is drawn, count, screenshot."""
    with browser_session() as driver:
        seconds = load(driver, page)
        counted: dict[str, Any] = driver.execute_script(COUNT_SCRIPT)
        save_whole_page(driver, screenshot, width)
        console = list(driver.get_log("browser"))
        requested = [*counted["resources"]]
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requested.append(message["params"]["request"]["url"])
        return PageResult(counted["plots"], console, requested, counted["location"], screenshot, seconds,
                          {key: counted[key] for key in PAGE_FACTS})
