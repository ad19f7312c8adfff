"""The live dashboard in a real browser: Debian's Chromium, headless, driven by Selenium,
against a running three-space application (this process as the router with the camera,
a relay and a sink in two child processes). The page must draw the application's graph and
update its figures between two screenshots, which are kept as test artifacts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import stampede as sp
from test_space import Cluster

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "target" / "test-artifacts"
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
PATIENCE = 30.0


def _camera(space: sp.Space, frames: sp.Channel, stop: threading.Event) -> None:
    """Puts a frame every 20 ms, its virtual time following."""
    with space.task(0, name="camera") as t:
        out = t.attach_output(frames)
        ts = 0
        while not stop.is_set():
            out.put(ts, b"\0" * 1024, timeout=PATIENCE)
            ts += 1
            t.set_virtual_time(ts)
            time.sleep(0.02)


def _page(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


def _until(driver: Any, script: str, what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        got = _page(driver, script)
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"the page never showed {what}")


def test_the_api_serves_samples_and_refuses_writes() -> None:
    with sp.Runtime() as rt, rt.dashboard() as d:
        rt.channel("frames")
        snap = json.loads(urllib.request.urlopen(d.url + "api/samples", timeout=10).read())
        assert snap["title"] == "stampede"
        names = {s["name"] for s in snap["samples"]}
        assert "stampede_container_items" in names
        page = urllib.request.urlopen(d.url, timeout=10).read().decode()
        assert "dashboard.js" in page and "uPlot" in page
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(d.url, data=b"x", method="POST"), timeout=10)
        assert refused.value.code == 405
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(d.url + "nothing", timeout=10)
        assert missing.value.code == 404


def test_an_executor_counts_its_jobs_and_shows_on_the_page() -> None:
    from stampede import cnc

    ex = cnc.Executor(2)
    g = cnc.Graph(ex)
    squares, numbers = g.items("squares"), g.tags("numbers")

    def square(ctx: cnc.StepContext, tag: tuple[int, ...]) -> None:
        (n,) = tag
        ctx.put(squares, n, n * n)

    numbers.prescribes(g.steps("square", square))
    for n in range(50):
        g.put_tag(numbers, n)
    g.wait()
    stats = ex.stats()
    assert len(stats.workers) == 2
    # Each job is counted just after it returns: wait for the last one's count.
    deadline = time.monotonic() + PATIENCE
    while sum(w.jobs for w in ex.stats().workers) < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(w.jobs for w in ex.stats().workers) >= 50
    with sp.Runtime() as rt, rt.dashboard(executors={"squares": ex}) as d:
        snap = json.loads(urllib.request.urlopen(d.url + "api/samples", timeout=10).read())
        jobs = [s for s in snap["samples"] if s["name"] == "stampede_executor_jobs"]
        assert {dict(s["labels"])["executor"] for s in jobs} == {"squares"}
        assert sum(s["value"] for s in jobs) >= 50


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="Chromium is not installed (`make browser` installs chromium and chromium-driver)",
)
def test_the_dashboard_shows_a_three_space_application_live() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM is not None and CHROMEDRIVER is not None
    cluster = Cluster("dashboard")
    stop = threading.Event()
    camera: threading.Thread | None = None
    driver: Any = None
    try:
        frames = cluster.space.channel("frames", capacity=16)
        camera = threading.Thread(target=_camera, args=(cluster.space, frames, stop))
        camera.start()
        for role in ("relay", "sink"):
            cluster.start(role).expect("READY")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu", "--window-size=1400,1700"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        # An executor the router's space runs shows as a timeline, whether busy or not.
        from stampede import cnc

        ex = cnc.Executor(2)
        with cluster.space.dashboard(executors={"cnc": ex}) as d:
            driver.get(d.url)
            # Every task and container of the three spaces, and the four connections.
            _until(driver, """
                const g = document.querySelector('#graph svg');
                return g && +g.dataset.nodes >= 5 && +g.dataset.edges >= 4
                    && +document.body.dataset.refreshes >= 2;""", "the whole graph")
            names = set(_page(driver, """return [...document.querySelectorAll('#graph .node')]
                .map(n => n.dataset.name);"""))
            assert {"camera", "frames", "relay", "features", "sink"} <= names, names
            rows = _page(driver, "return document.querySelectorAll('#spaces tbody tr').length;")
            assert rows == 3, f"{rows} address spaces shown"
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            vt = "return [...document.querySelectorAll('#tasks tbody tr')]" \
                ".find(r => r.cells[0].textContent === 'camera').cells[3].textContent;"
            first, seen = _page(driver, vt), int(_page(driver, "return document.body.dataset.refreshes;"))
            driver.save_screenshot(str(ARTIFACTS / "dashboard-1.png"))
            _until(driver, f"return +document.body.dataset.refreshes >= {seen + 2};", "two more refreshes")
            driver.save_screenshot(str(ARTIFACTS / "dashboard-2.png"))
            second = _page(driver, vt)
            assert int(second) > int(first), f"the camera's virtual time stayed at {first}"
            # The edges carry rates, and the zone chart its holder.
            labels = _page(driver, "return [...document.querySelectorAll('.edge-label')].map(e => e.textContent);")
            assert any(label != "0.0/s" and label != "–/s" for label in labels), labels
            holder = _page(driver, "return document.querySelector('.holder').textContent;")
            assert "held by" in holder, holder
            shown = _page(driver, "return !document.getElementById('executor-section').hidden;")
            assert shown, "the executor's timeline is hidden"
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert not errors, errors
    finally:
        if driver is not None:
            driver.quit()
        stop.set()
        cluster.close()
        if camera is not None:
            camera.join(PATIENCE)


def test_the_demo_prints_its_dashboard(tmp_path: Path) -> None:
    """``python -m stampede.demo --dashboard`` serves its run's page while it runs."""
    pytest.importorskip("cv2")
    demo = subprocess.Popen(
        [sys.executable, "-m", "stampede.demo", "--dashboard", "--width", "320", "--height",
         "240", "--targets", "4", "--seconds", "3", "--quiet",
         "--snapshot", str(tmp_path / "kiosk.png")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert demo.stdout is not None
        url = ""
        for line in demo.stdout:
            if line.startswith("dashboard: "):
                url = line.split()[1]
                break
        assert url.startswith("http://127.0.0.1:"), "no dashboard line"
        # The page is served from the start; the stages appear as they are spawned.
        tasks: set[str | None] = set()
        deadline = time.monotonic() + PATIENCE
        while "digitizer" not in tasks and time.monotonic() < deadline:
            snap = json.loads(urllib.request.urlopen(url + "api/samples", timeout=30).read())
            tasks = {dict(s["labels"]).get("task") for s in snap["samples"]}
            time.sleep(0.1)
        assert "digitizer" in tasks, tasks
        rest = demo.stdout.read()
        assert demo.wait(120) == 0, rest
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
