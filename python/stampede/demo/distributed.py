"""The kiosk pipeline over three address spaces on this host (``--distributed``).

The stages of :mod:`stampede.demo.pipeline`, unchanged, run in three processes, each its own
address space of one Stampede application, joined over Zenoh on loopback:

- **display** (the process the user started, and the Zenoh router): owns ``kiosk/frames``,
  ``meta``, ``change``, ``tracks``, ``lowfi`` and ``attention``; runs the decision stage,
  prints the status line and the report;
- **analysis** (a child): owns ``kiosk/hsv``, ``chunks`` and ``blobs``; runs histogram,
  splitter, the K workers, joiner and the low-fi tracker;
- **camera** (a child): runs the digitizer, putting frames into the display's channel.

Why this placement: the decision correlates tracks, frames, entry times and change summaries
by timestamp, and a correlator reads its channels directly, so they live with it; the HSV
images and the work items never leave the analysis process, which does all the heavy work.
Each frame crosses a process boundary twice (camera to display, display to analysis, where
the owner pushes it ahead of the get), and small results come back.

Children report on stdout, one line per event: ``READY``, ``STATUS {json}`` every half
second, then ``RESULT {json}``, and ``ERROR {json}`` as soon as a stage fails (with the
``time.monotonic()`` of the failure, which is one clock for every process on the host, so
the display can tell a cause from its echoes). The display sends ``GO`` on the camera's
stdin once every stage has attached; a child whose stdin closes stops, so children never
outlive the display, which closes their stdin and kills them if they do not exit in time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import stampede as sp

from .pipeline import (
    STAGES,
    Kiosk,
    Monitor,
    PipelineOptions,
    RunResult,
    StallWatch,
    digitizer,
    rss_mb,
    summarize,
    worker,
)
from .report import StatusLine
from .scene import FrameSource, Image, SyntheticScene, Truth, VideoSource
from .vision import ColorModel, build_models, configure_opencv

OWNS = {
    "camera": frozenset[str](),
    "analysis": frozenset({"hsv", "chunks", "blobs"}),
    "display": frozenset({"frames", "meta", "change", "tracks", "lowfi", "attention"}),
}
"""The containers each address space creates (and so owns)."""

USES = {
    "camera": frozenset({"frames", "meta"}),
    "analysis": frozenset({"frames", "hsv", "change", "chunks", "blobs", "tracks", "lowfi"}),
    "display": OWNS["display"],
}
"""The containers each address space's stages attach to."""

# How long a child waits for another space's container to be registered, and how long the
# display waits for the children to be ready: generous, they import numpy and OpenCV first.
LOOKUP_TIMEOUT = 60.0
START_TIMEOUT = 120.0
# How long a child may take to exit once its stdin is closed, before it is killed.
EXIT_GRACE = 5.0
STATUS_EVERY = 0.5
# Children listen on loopback only: the demo's spaces all live on this host.
LOOPBACK = "tcp/127.0.0.1:0"
# How long a silent link stays up. Longer than the default: three busy processes on a small
# host can starve one for a second, and a link given up for dead releases everything its
# space held. A process that dies closes its links, so it is noticed at once anyway.
LEASE = 5.0


def stages(role: str, workers: int) -> list[tuple[str, Callable[..., Any], int]]:
    """The stages ``role`` runs: (thread name, function, initial virtual time), as in
    :data:`~.pipeline.STAGES`."""
    if role == "camera":
        return [("digitizer", digitizer, 0)]
    if role == "display":
        return [s for s in STAGES if s[0] == "decision"]
    out = [s for s in STAGES if s[0] != "decision"]
    out += [(f"worker{k}", worker, sp.INFINITY) for k in range(workers)]
    return out


class Geometry:
    """The frame size of a video another process reads: no frames, no ground truth."""

    def __init__(self, width: int, height: int) -> None:
        self._size = (width, height)

    @property
    def width(self) -> int:
        """Frame width in pixels."""
        return self._size[0]

    @property
    def height(self) -> int:
        """Frame height in pixels."""
        return self._size[1]

    @property
    def has_truth(self) -> bool:
        """A video has no ground truth."""
        return False

    def frame(self, n: int) -> Image:
        """Only the camera reads frames."""
        raise RuntimeError("frames are read by the camera process")

    def truth(self, n: int) -> list[Truth]:
        """Unknown for a video."""
        return []


@dataclass
class RunConfig:
    """Everything a child needs to build its part of the run (passed as JSON)."""

    width: int
    height: int
    targets: int
    scene_fps: float
    video: str | None
    workers: int
    regions: int
    model_groups: int
    fps: float | None
    seconds: float
    capacity: int
    tolerance: float

    def options(self) -> PipelineOptions:
        """The pipeline's options."""
        return PipelineOptions(
            workers=self.workers,
            regions=self.regions,
            model_groups=self.model_groups,
            fps=self.fps,
            seconds=self.seconds,
            capacity=self.capacity,
            tolerance=self.tolerance,
        )

    def source(self, role: str) -> FrameSource:
        """The frame source as ``role`` sees it: only the camera opens a video."""
        if self.video is None:
            return SyntheticScene(self.width, self.height, self.targets, fps=self.scene_fps)
        if role == "camera":
            return VideoSource(self.video, self.width, self.height)
        return Geometry(self.width, self.height)


def space_figures(space: sp.Space, monitor: Monitor, rss_peak: float) -> dict[str, Any]:
    """A child's counters for the display: its stages' and its address space's."""
    s = space.stats()
    with monitor.lock:
        figures: dict[str, Any] = {
            "produced": monitor.produced,
            "digitizer_skipped": monitor.digitizer_skipped,
            "lowfi_frames": monitor.lowfi_frames,
            "chunks": monitor.chunks,
            "worker_attaches": monitor.worker_attaches,
            "cpu": dict(monitor.cpu),
        }
    figures.update(
        reclaimed=space.runtime.gc_stats().reclaimed,
        rss_mb=rss_mb(),
        rss_mb_peak=rss_peak,
        served=s.served,
        cache_hits=s.cache_hits,
        pushed=s.pushed,
        push_skipped=s.push_skipped,
        unreachable=s.unreachable,
    )
    return figures


def _emit(kind: str, payload: str | dict[str, Any] | None = None) -> bool:
    """Reports one event to the display (the protocol's only use of stdout); false when
    the display is gone."""
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    line = kind if payload is None else f"{kind} {' '.join(payload.splitlines())}"
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        # Nobody reads any more: later writes (and the flush at exit) go nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False


def _error(e: BaseException, at: float | None = None) -> None:
    """Reports a failure, and when it happened, to the display."""
    text = f"{type(e).__name__}: {e}"
    _emit("ERROR", {"error": text, "at": time.monotonic() if at is None else at})


def run_child(space: sp.Space, role: str, config: RunConfig) -> int:
    """Runs ``role``'s stages in ``space`` and reports to the display; returns the exit
    status.

    The camera starts its digitizer on ``GO``, once every stage of every space has attached
    (a task at ``INFINITY`` sees only items put after it attached); until then it holds no
    one's watermark.
    """
    source = config.source(role)
    options = config.options()
    monitor = Monitor()
    mine = stages(role, options.workers)
    go, display_gone = threading.Event(), threading.Event()

    def watch_display() -> None:
        # Pure Python on a daemon thread: it may still be blocked here when the process
        # exits, so it leaves every call into Stampede to the main thread.
        for line in sys.stdin:
            if line.strip() == "GO":
                go.set()
        display_gone.set()

    threading.Thread(target=watch_display, name="display-watch", daemon=True).start()
    gone = RuntimeError("the display process went away")
    try:
        kiosk = Kiosk(
            space,
            source,
            build_models(config.targets),
            options,
            monitor,
            names=USES[role],
            owns=OWNS[role],
            lookup_timeout=LOOKUP_TIMEOUT,
            parties=len(mine) + 1,
        )
        threads: dict[str, sp.TaskThread[Any]] = {}
        if role == "camera":
            _emit("READY")
            while not go.wait(STATUS_EVERY):
                if display_gone.is_set():
                    _error(gone)
                    return 2
        threads = {name: space.spawn(fn, kiosk, vt=vt, name=name) for name, fn, vt in mine}
        try:
            kiosk.ready.wait()  # every stage has attached
        except threading.BrokenBarrierError:
            pass  # a stage failed: reported below
        if role != "camera":
            _emit("READY")
        rss_peak = rss_mb()
        failed = False
        while any(t.is_alive() for t in threads.values()):
            next(t for t in threads.values() if t.is_alive()).join(STATUS_EVERY)
            rss_peak = max(rss_peak, rss_mb())
            reported = _emit("STATUS", space_figures(space, monitor, rss_peak))
            if (display_gone.is_set() or not reported) and not kiosk.stop.is_set():
                kiosk.abort(gone)
            if kiosk.error is not None and not failed:
                _error(kiosk.error, kiosk.failed_at)  # at once: the others' echoes follow
                failed = True
        if kiosk.error is not None:
            if not failed:
                _error(kiosk.error, kiosk.failed_at)
            return 2
        figures = space_figures(space, monitor, rss_peak)
        figures["threads"] = {name: int(t.result(0) or 0) for name, t in threads.items()}
        _emit("RESULT", figures)
        return 0
    finally:
        if isinstance(source, VideoSource):
            source.close()


class Child:
    """A child address space as the display sees it: its process and what it reported."""

    def __init__(self, role: str, app: str, router: str, config: RunConfig) -> None:
        self.role = role
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "stampede.demo.distributed",
                role, app, router, json.dumps(asdict(config)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            # Ctrl-C reaches the display alone, which stops the children in order.
            start_new_session=True,
        )
        self.ready = threading.Event()
        self.status: dict[str, Any] = {}
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.failed_at: float | None = None
        """When the child reported an error, or stopped without a result."""
        self._reader = threading.Thread(target=self._read, name=f"{role}-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            kind, _, rest = raw.rstrip("\n").partition(" ")
            if kind == "READY":
                self.ready.set()
            elif kind == "STATUS":
                self.status = json.loads(rest)
            elif kind == "RESULT":
                self.result = json.loads(rest)
                self.status = self.result
            elif kind == "ERROR":
                report = json.loads(rest)
                self.error = report["error"]
                self.failed_at = report["at"]
            else:
                sys.stderr.write(f"[{self.role}] {raw}")
        if self.result is None and self.failed_at is None:
            self.failed_at = time.monotonic()

    def send(self, line: str) -> None:
        """Writes a line to the child's stdin (ignored once it has exited)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it is gone: `failure` says why

    def failure(self) -> str | None:
        """Why the child failed, or ``None`` while it runs or after a clean exit."""
        if self.error is not None:
            return self.error
        rc = self.proc.poll()
        if rc is None:
            return None
        self._reader.join(EXIT_GRACE)  # its last lines
        if self.error is not None:
            return self.error
        if rc == 0 and self.result is not None:
            return None
        if self.failed_at is None:
            self.failed_at = time.monotonic()
        return f"exited with status {rc}" if rc != 0 else "exited without reporting its result"

    def finish(self, timeout: float) -> dict[str, Any]:
        """Waits for the child's exit; returns its result, or raises why it has none."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the {self.role} process did not finish") from None
        why = self.failure()
        if why is not None:
            raise RuntimeError(f"the {self.role} process failed: {why}")
        assert self.result is not None
        return self.result

    def stop(self) -> None:
        """Closes the child's stdin, which makes it stop, and kills it if it does not exit
        within the grace period."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(EXIT_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(EXIT_GRACE)


def _free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{s.getsockname()[1]}"


def _failed_child(children: list[Child]) -> str | None:
    """Why a child failed, if one did."""
    for c in children:
        why = c.failure()
        if why is not None:
            return f"the {c.role} process failed: {why}"
    return None


def _cause(children: list[Child], kiosk: Kiosk) -> BaseException:
    """The run's first failure: a failing space closes the containers it uses, so the
    others fail after it (with ``Closed``); the earliest is the cause."""
    now = time.monotonic()
    failures: list[tuple[float, BaseException]] = []
    for c in children:
        why = c.failure()
        if why is not None:
            error = RuntimeError(f"the {c.role} process failed: {why}")
            failures.append((c.failed_at or now, error))
    if kiosk.error is not None:
        failures.append((kiosk.failed_at or now, kiosk.error))
    return min(failures, key=lambda f: f[0])[1]


@dataclass
class SpaceReport:
    """One address space's figures in the distributed report."""

    role: str
    pid: int
    rss_mb_peak: float
    reclaimed: int
    served: int
    cache_hits: int
    pushed: int
    push_skipped: int
    unreachable: int

    def line(self) -> str:
        """The report's line for this space."""
        return (
            f"  {self.role:<8} pid {self.pid:<7} peak RSS {self.rss_mb_peak:4.0f} MB, "
            f"{self.reclaimed:,} items reclaimed, {self.served:,} requests served, "
            f"{self.cache_hits:,} cache hits, {self.pushed:,} items pushed "
            f"({self.push_skipped:,} not pushed), {self.unreachable} unreachable"
        )


def _report(role: str, pid: int, f: dict[str, Any]) -> SpaceReport:
    return SpaceReport(
        role, pid, f["rss_mb_peak"], f["reclaimed"], f["served"], f["cache_hits"],
        f["pushed"], f["push_skipped"], f["unreachable"],
    )


def run_distributed(
    source: FrameSource,
    models: list[ColorModel],
    options: PipelineOptions,
    *,
    video: str | None = None,
    status: StatusLine | None = None,
    stall_timeout: float = 10.0,
    on_start: Callable[[sp.Runtime], object] | None = None,
) -> tuple[RunResult, list[SpaceReport]]:
    """Runs the pipeline over three address spaces until the camera has produced for
    ``options.seconds`` and every stage has drained; this process is the display.
    ``on_start(space)`` is called once the display's space has joined (what it returns is
    kept until the run ends).

    Returns the run's figures (summed over the spaces where they are counts) and each
    space's own. Raises the earliest failure of the three spaces (the others then fail
    with closed containers), or :class:`RuntimeError` with every space's explanation of the
    watermark if no frame gets decided for ``stall_timeout`` seconds. The children are gone
    when it returns or raises.
    """
    config = RunConfig(
        width=source.width,
        height=source.height,
        targets=len(models),
        scene_fps=source.fps if isinstance(source, SyntheticScene) else 30.0,
        video=video,
        workers=options.workers,
        regions=options.regions,
        model_groups=options.model_groups,
        fps=options.fps,
        seconds=options.seconds,
        capacity=options.capacity,
        tolerance=options.tolerance,
    )
    monitor = Monitor(warmup=options.warmup)
    router = _free_endpoint()
    app = f"kiosk-{os.getpid()}"
    with sp.Space.join(app, mode="router", listen=[router], lease=LEASE) as space:
        started = on_start(space) if on_start else None
        kiosk = Kiosk(
            space, source, models, options, monitor, names=USES["display"], parties=2
        )
        [(name, fn, vt)] = stages("display", options.workers)
        children: list[Child] = []
        display: sp.TaskThread[Any] | None = None
        try:
            for role in ("analysis", "camera"):
                children.append(Child(role, app, router, config))
            analysis, camera = children
            print(
                f"address spaces: display pid {os.getpid()} (router {router}), "
                f"analysis pid {analysis.pid}, camera pid {camera.pid}",
                flush=True,
            )
            display = space.spawn(fn, kiosk, vt=vt, name=name)
            try:
                kiosk.ready.wait(START_TIMEOUT)  # the decision stage has attached
            except threading.BrokenBarrierError:
                raise kiosk.error or RuntimeError("the decision stage did not start") from None
            deadline = time.monotonic() + START_TIMEOUT
            for c in children:
                while not c.ready.wait(STATUS_EVERY):
                    why = c.failure()
                    if why is not None:
                        raise RuntimeError(f"the {c.role} process failed: {why}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the {c.role} process did not get ready")
            with monitor.lock:
                monitor.started = time.perf_counter()
            camera.send("GO")
            t0 = time.perf_counter()
            rss_peak = rss_mb()
            watch = StallWatch(kiosk, stall_timeout, lambda: "watermarks: " + "; ".join(
                str(w) for w in space.explain_cluster()))
            while display.is_alive():
                display.join(STATUS_EVERY)
                now = time.perf_counter()
                rss_peak = max(rss_peak, rss_mb())
                why = _failed_child(children)
                if why is not None and not kiosk.stop.is_set():
                    kiosk.abort(RuntimeError(why))
                if status is not None:
                    status.show(
                        kiosk,
                        now - t0,
                        reclaimed=space.runtime.gc_stats().reclaimed
                        + sum(c.status.get("reclaimed", 0) for c in children),
                        lowfi_skipped=kiosk.frames.stats().skipped,
                        rss=rss_mb() + sum(c.status.get("rss_mb", 0.0) for c in children),
                    )
                watch.check(now)
            elapsed = time.perf_counter() - t0
            if kiosk.error is not None:
                for c in children:
                    c.stop()  # they report how they ended
                raise _cause(children, kiosk)
            results = {c.role: c.finish(START_TIMEOUT) for c in children}
        except BaseException as e:
            kiosk.abort(e)
            raise
        finally:
            if display is not None:
                display.join(EXIT_GRACE)
            for c in children:
                c.stop()
        threads = {name: int(display.result(0) or 0)}
        for f in results.values():
            threads.update(f["threads"])
            monitor.cpu.update(f["cpu"])
        cam, ana = results["camera"], results["analysis"]
        with monitor.lock:
            monitor.produced = cam["produced"]
            monitor.digitizer_skipped = cam["digitizer_skipped"]
            monitor.lowfi_frames = ana["lowfi_frames"]
            monitor.chunks = ana["chunks"]
            monitor.worker_attaches = ana["worker_attaches"]
        mine = space_figures(space, monitor, rss_peak)
        reports = [_report("display", os.getpid(), mine)] + [
            _report(c.role, c.pid, results[c.role]) for c in children
        ]
        result = summarize(
            monitor,
            seconds=elapsed,
            reclaimed=sum(r.reclaimed for r in reports),
            lowfi_skipped=kiosk.frames.stats().skipped,
            rss_mb_peak=sum(r.rss_mb_peak for r in reports),
            threads=threads,
        )
    return result, reports


def main(argv: list[str] | None = None) -> int:
    """A child address space of ``python -m stampede.demo --distributed``."""
    p = argparse.ArgumentParser(
        prog="python -m stampede.demo.distributed",
        description="One address space of the distributed kiosk demo; "
        "started by `python -m stampede.demo --distributed`.",
    )
    p.add_argument("role", choices=["camera", "analysis"])
    p.add_argument("app", help="the application to join")
    p.add_argument("router", help="the display's Zenoh endpoint")
    p.add_argument("config", help="the run's settings (JSON)")
    args = p.parse_args(argv)
    config = RunConfig(**json.loads(args.config))
    configure_opencv()
    try:
        with sp.Space.join(
            args.app, connect=[args.router], listen=[LOOPBACK], lease=LEASE
        ) as space:
            return run_child(space, args.role, config)
    except Exception as e:  # joining or building failed: the display reports it
        _error(e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
