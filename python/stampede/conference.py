"""``python -m stampede.conference``: a video-conference participant in Python.

Joins the conference application as a client of the mixer's address space (see
``docs/conference.md``). A camera thread puts synthetic frames on the participant's own
channel ``conf/cam/<id>``, paced to a target rate; a display thread gets composites from
``conf/mix``, checks every tile, and counts the frame rate. A JSON line is printed per report
interval and a summary at exit; the C participant (``examples/c/conference_participant.c``)
and the Rust one print the same lines.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType

import numpy as np

import stampede as sp

SLICE = 0.2


def fill_byte(pid: int, ts: int) -> int:
    """The value of every byte of participant ``pid``'s frame ``ts`` outside its header."""
    return (pid * 37 + ts) & 0xFF


def make_frame(pid: int, ts: int, height: int, width: int) -> np.ndarray:
    """A synthetic frame: filled with :func:`fill_byte`, id and timestamp in the first bytes."""
    frame = np.full((height, width, 3), fill_byte(pid, ts), dtype=np.uint8)
    flat = frame.reshape(-1)
    flat[0:4] = np.frombuffer(pid.to_bytes(4, "little"), dtype=np.uint8)
    flat[4:12] = np.frombuffer(ts.to_bytes(8, "little"), dtype=np.uint8)
    return frame


def check_composite(
    composite: np.ndarray, ts: int, height: int, width: int
) -> tuple[list[int], int]:
    """The member ids in a composite's tiles, and how many tiles are wrong."""
    if composite.dtype != np.uint8 or composite.ndim != 3 or composite.shape[2] != 3:
        return [], 1
    if composite.shape[0] % height or composite.shape[1] % width:
        return [], 1
    members: list[int] = []
    bad = 0
    for r in range(composite.shape[0] // height):
        for c in range(composite.shape[1] // width):
            tile = composite[r * height : (r + 1) * height, c * width : (c + 1) * width]
            head = tile[0].reshape(-1)[:12].tobytes()
            pid = int.from_bytes(head[:4], "little")
            if pid == 0:
                continue
            members.append(pid)
            if int.from_bytes(head[4:12], "little") != ts or int(tile[-1, -1, 2]) != fill_byte(
                pid, ts
            ):
                bad += 1
    return members, bad


@dataclass
class Display:
    """What the display saw, shared with the reporting thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    composites: int = 0
    bad: int = 0
    last_ts: int = -1
    members: list[int] = field(default_factory=list)
    first_at: float = 0.0
    last_at: float = 0.0


class Participant:
    """One participant: a camera thread, a display thread and their counters."""

    def __init__(self, space: sp.Space, args: argparse.Namespace) -> None:
        self.space = space
        self.id: int = args.id
        self.fps: float = args.fps
        self.width: int = args.width
        self.height = max(1, round(args.size_kb * 1000 / (args.width * 3)))
        self.stop = threading.Event()
        self.display = Display()
        self.frames_put = 0
        self.put_timeouts = 0
        self.error: str | None = None

    def fail(self, what: str, e: BaseException) -> None:
        print(f"participant {self.id}: {what}: {e!r}", file=sys.stderr, flush=True)
        self.error = f"{what}: {e}"
        self.stop.set()

    def camera(self) -> None:
        try:
            channel = self.space.channel(f"conf/cam/{self.id}", capacity=4)
            with self.space.task(0, name="camera") as task:
                clock_in = task.attach_input(self.space.lookup_register("conf/clock", 10.0))
                _, raw = clock_in.read(timeout=5.0)
                clock_in.detach()
                lead = max(2, math.ceil(self.fps * 0.5)) if self.fps > 0 else 2
                t = int.from_bytes(bytes(raw), "little") + lead
                task.set_virtual_time(t)
                out = task.attach_output(channel)
                pacer = (
                    task.pacer(1.0 / self.fps, tolerance=1.0 / self.fps,
                               on_late=sp.LateAction.CONTINUE)
                    if self.fps > 0
                    else None
                )
                while not self.stop.is_set():
                    if pacer is not None:
                        pacer.sync(t)
                    frame = make_frame(self.id, t, self.height, self.width)
                    while not self.stop.is_set():
                        try:
                            out.put(t, frame, timeout=SLICE)
                            break
                        except sp.Full:
                            self.put_timeouts += 1  # the mixer is behind; keep waiting
                    else:
                        break
                    self.frames_put += 1
                    t += 1
                    task.set_virtual_time(t)
        except sp.StampedeError as e:
            self.fail("camera", e)

    def show(self) -> None:
        d = self.display
        try:
            mix = self.space.lookup_channel("conf/mix", 10.0)
            with self.space.task(0, name="display") as task:
                inp = task.attach_input(mix)
                while not self.stop.is_set():
                    try:
                        ts, composite = inp.get(sp.Selector.NEWEST_UNSEEN, timeout=SLICE)
                    except sp.Timeout:
                        continue
                    members, bad = check_composite(
                        np.asarray(composite), ts, self.height, self.width
                    )
                    now = time.monotonic()
                    with d.lock:
                        if d.composites == 0:
                            d.first_at = now
                        d.composites += 1
                        d.bad += bad
                        d.last_ts = ts
                        d.last_at = now
                        d.members = members
                    inp.consume_until(ts)
                    task.set_virtual_time(ts + 1)
        except sp.StampedeError as e:
            self.fail("display", e)

    def report(self, event: str, fps: float) -> None:
        d = self.display
        with d.lock:
            line = {
                "event": event,
                "id": self.id,
                "composites": d.composites,
                "ts": d.last_ts,
                "members": d.members,
                "fps": round(fps, 2),
                "bad": d.bad,
                "frames_put": self.frames_put,
                "put_timeouts": self.put_timeouts,
            }
        print(json.dumps(line, separators=(",", ":")), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m stampede.conference",
        description="A video-conference participant: paced camera and checking display.",
    )
    p.add_argument("--connect", required=True, help="the mixer's endpoint, e.g. tcp/127.0.0.1:7447")
    p.add_argument("--id", type=int, required=True, help="participant id (>= 1)")
    p.add_argument("--app", default="conference", help="application name (conference)")
    p.add_argument("--fps", type=float, default=15.0, help="camera rate; 0 = unpaced (15)")
    p.add_argument("--size-kb", type=float, default=74.0, help="frame size in KB (74)")
    p.add_argument("--width", type=int, default=176, help="frame width in pixels (176)")
    p.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until signalled")
    p.add_argument("--report-ms", type=int, default=500, help="report interval (500)")
    args = p.parse_args(argv)
    if args.id < 1 or args.width < 1 or args.size_kb <= 0 or args.fps < 0 or args.report_ms < 1:
        p.error("--id, --width, --size-kb and --report-ms must be positive, --fps >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signalled = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signalled.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        space = sp.Space.join(
            args.app, mode="client", connect=[args.connect], lease=5.0, op_timeout=5.0
        )
    except sp.StampedeError as e:
        print(f"participant {args.id}: joining: {e!r}", file=sys.stderr)
        return 1
    p = Participant(space, args)
    threads = [threading.Thread(target=f, daemon=True) for f in (p.camera, p.show)]
    for t in threads:
        t.start()
    start = time.monotonic()
    reported, reported_at = 0, start
    while not (signalled.is_set() or p.stop.is_set()):
        if args.duration > 0 and time.monotonic() - start >= args.duration:
            break
        signalled.wait(args.report_ms / 1000)
        now = time.monotonic()
        with p.display.lock:
            n = p.display.composites
        p.report("display", (n - reported) / (now - reported_at))
        reported, reported_at = n, now
    p.stop.set()
    for t in threads:
        t.join()
    d = p.display
    span = d.last_at - d.first_at
    p.report("summary", (d.composites - 1) / span if d.composites > 1 and span > 0 else 0.0)
    space.leave()
    return 1 if p.error else 0


if __name__ == "__main__":
    sys.exit(main())
