"""``python -m stampede.textures``: analyse a clip with Stampede tasks and write a loop of a
requested length (MP4), a contact sheet of its cuts (PNG), and optionally random play."""

from __future__ import annotations

import argparse
import sys

from . import analysis, clip, distributed, render, synthesis


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m stampede.textures", description=__doc__)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--video", help="a video file (default: a synthetic clip)")
    ap.add_argument("--frames", type=int, default=316, help="frames to use (default 316)")
    ap.add_argument("--size", default="640x480", help="synthetic frame size WxH")
    ap.add_argument("--period", type=int, default=40, help="the synthetic clip's period")
    ap.add_argument("--workers", type=int, default=2, help="workers per address space")
    ap.add_argument("--spaces", type=int, default=1,
                    help="address spaces (this one and the rest attached); default 1")
    ap.add_argument("--distribution", choices=["single", "chain"], default="chain",
                    help="with --spaces > 1: single source, or tiling with chaining")
    ap.add_argument("--tile", type=int, default=16, help="frames per tile side")
    ap.add_argument("--stripe", type=int, default=2, help="lines of pixels per stripe")
    ap.add_argument("--loop", type=int, default=120, help="the loop's length in frames")
    ap.add_argument("--out", default="loop.mp4", help="the loop's MP4 file")
    ap.add_argument("--sheet", default="cuts.png", help="the contact sheet of its cuts")
    ap.add_argument("--play", type=int, default=0, help="also write this many frames of random play")
    ap.add_argument("--play-out", default="play.mp4")
    ap.add_argument("--fps", type=float, default=30.0)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.video:
        frames = clip.read_video(a.video, a.frames)
    else:
        w, h = (int(x) for x in a.size.lower().split("x"))
        frames = clip.synthetic(a.frames, h, w, period=a.period)
    n = frames.shape[0]
    pairs = n * (n - 1) // 2
    if a.spaces > 1:
        d = distributed.analyze_distributed(
            frames, spaces=a.spaces, distribution=a.distribution, workers=a.workers,
            tile=a.tile, stripe_lines=a.stripe,
        )
        distances, seconds = d.distances, d.seconds
        where = f"{a.spaces} address spaces ({a.distribution}; the source sent {d.source_frames_sent} frames)"
    else:
        r = analysis.analyze(frames, workers=a.workers, tile=a.tile, stripe_lines=a.stripe)
        distances, seconds = r.distances, r.seconds
        where = "this address space"
    print(
        f"analysis: {n} frames, {pairs} pairs in {seconds:.2f} s "
        f"({pairs / seconds:.0f} pairs/s), {a.workers} workers in {where}"
    )
    costs = synthesis.transition_costs(distances)
    best = synthesis.best_transitions(costs, 5)
    print("best transitions: " + ", ".join(f"{t.source}->{t.dest} ({t.length} frames)" for t in best))
    try:
        frames_of_loop, cuts = synthesis.loop(costs, a.loop)
    except ValueError as e:
        print(f"loop: {e}", file=sys.stderr)
        return 1
    render.write_mp4(frames, frames_of_loop, a.out, a.fps)
    render.contact_sheet(frames, cuts, a.sheet)
    print(f"loop of {len(frames_of_loop)} frames with cuts "
          + ", ".join(f"{t.source}->{t.dest}" for t in cuts) + f": {a.out}, {a.sheet}")
    if a.play > 0:
        p = synthesis.probabilities(synthesis.future_costs(costs))
        seq = synthesis.random_play(p, a.play)
        render.write_mp4(frames, seq, a.play_out, a.fps)
        print(f"random play of {a.play} frames: {a.play_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
