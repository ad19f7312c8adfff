"""Video textures: the analysis equals a direct computation in every work layout, the
synthetic clip's best transitions are at its true period, loops have the requested length
and decode, and a failing worker fails the run instead of hanging it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stampede import textures as vt
from stampede.textures import analysis, render, synthesis


@pytest.fixture(scope="module")
def small() -> np.ndarray:
    return vt.synthetic(11, 20, 24, period=4, seed=7)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("tile", [1, 3, 16])
@pytest.mark.parametrize("stripe", [1, 2, 7, 20])
def test_the_distance_matrix_is_the_direct_one(
    small: np.ndarray, workers: int, tile: int, stripe: int
) -> None:
    a = vt.analyze(small, workers=workers, tile=tile, stripe_lines=stripe)
    assert np.allclose(a.distances, vt.direct(small))
    assert sum(a.tiles_done.values()) == len(vt.tiles(11, tile))
    assert np.allclose(vt.sequential(small, tile=tile, stripe_lines=stripe).distances, a.distances)


def test_tiles_cover_the_lower_triangle_once() -> None:
    covered = np.zeros((10, 10), dtype=int)
    for r0, r1, c0, c1 in vt.tiles(10, 3):
        assert c0 <= r0
        covered[r0:r1, c0:c1] += 1
    assert (covered[np.tril_indices(10)] >= 1).all() and covered.max() == 1
    with pytest.raises(ValueError):
        vt.tiles(10, 0)


def test_the_best_transitions_are_at_the_true_period() -> None:
    period = 12
    frames = vt.synthetic(60, 48, 64, period=period, seed=2)
    costs = synthesis.transition_costs(vt.analyze(frames, workers=2).distances)
    best = synthesis.best_transitions(costs, 6)
    assert best and all(t.length % period == 0 for t in best), best
    # Going on to the next frame is always the cheapest move.
    assert all(costs[i, i + 1] <= costs[i].min() + 1e-12 for i in range(58))


def test_a_loop_has_the_requested_length_and_plays_its_cuts(tmp_path: Path) -> None:
    frames = vt.synthetic(50, 32, 40, period=10, seed=5)
    costs = synthesis.transition_costs(vt.analyze(frames, workers=2).distances)
    seq, cuts = synthesis.loop(costs, 30)
    assert len(seq) == 30
    jumps = {(t.source, t.dest) for t in cuts}
    for a, b in zip(seq, seq[1:] + seq[:1]):
        assert b == a + 1 or (a, b) in jumps, (a, b)
    out = tmp_path / "loop.mp4"
    render.write_mp4(frames, seq, str(out))
    assert render.read_frame_count(str(out)) == 30
    sheet = tmp_path / "cuts.png"
    render.contact_sheet(frames, cuts, str(sheet))
    assert sheet.stat().st_size > 0
    with pytest.raises(ValueError):
        synthesis.loop(costs, 1)


def test_random_play_stays_in_the_clip() -> None:
    frames = vt.synthetic(30, 16, 16, period=6, seed=1)
    f = synthesis.future_costs(synthesis.transition_costs(vt.analyze(frames).distances))
    p = synthesis.probabilities(f)
    assert np.allclose(p[:-1].sum(axis=1), 1.0)
    seq = synthesis.random_play(p, 200, seed=3)
    assert len(seq) == 200 and 0 <= min(seq) and max(seq) < 30


def test_a_failing_worker_fails_the_run(monkeypatch: pytest.MonkeyPatch, small: np.ndarray) -> None:
    def broken(rows: np.ndarray, cols: np.ndarray, stripe_lines: int, lower: bool = False) -> np.ndarray:
        raise RuntimeError("the kernel broke")

    monkeypatch.setattr(analysis, "block", broken)
    with pytest.raises(RuntimeError, match="the kernel broke"):
        vt.analyze(small, workers=2, tile=4)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        vt.analyze(np.zeros((1, 4, 4, 3), np.uint8))
    with pytest.raises(ValueError):
        vt.analyze(np.zeros((4, 4, 4, 3), np.uint8), workers=0)
    with pytest.raises(ValueError):
        vt.synthetic(1)
    with pytest.raises(ValueError):
        synthesis.transition_costs(np.zeros((3, 4)))


def test_the_cli_writes_the_loop_and_the_sheet(tmp_path: Path) -> None:
    from stampede.textures.__main__ import main

    out, sheet = tmp_path / "l.mp4", tmp_path / "c.png"
    argv = ["--frames", "40", "--size", "64x48", "--period", "8", "--loop", "16"]
    assert main(argv + ["--out", str(out), "--sheet", str(sheet)]) == 0
    assert render.read_frame_count(str(out)) == 16 and sheet.exists()
