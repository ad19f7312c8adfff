"""The color tracker split at two levels across address spaces: the inner splitter's
pieces cover its outer chunk exactly, and every partition, the paper's and others, tracks
the scene's targets."""

from __future__ import annotations

import pytest

from stampede.demo import tracker
from stampede.demo.vision import Chunk, plan_chunks, split_chunk


def test_inner_pieces_cover_the_outer_chunk() -> None:
    for outer in plan_chunks(7, 480, (0, 1, 2, 3, 4, 5, 6, 7), 2, 4, 6):
        pieces = split_chunk(outer, 3, 2)
        assert all(p.outer == outer for p in pieces)
        assert {p.chunk.parts for p in pieces} == {len(pieces)}
        rows = sorted({(p.chunk.y0, p.chunk.y1) for p in pieces})
        assert rows[0][0] == outer.y0 and rows[-1][1] == outer.y1
        assert all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
        for band in rows:
            got = sorted(m for p in pieces if (p.chunk.y0, p.chunk.y1) == band
                         for m in p.chunk.models)
            assert got == sorted(outer.models)
    # Nothing to look for: one empty piece still carries the frame to the joiners.
    empty = Chunk(3, 0, 1, 0, 480, (), None)
    [piece] = split_chunk(empty, 4, 2)
    assert piece.chunk.models == () and piece.chunk.parts == 1


def test_bad_partitions_are_refused() -> None:
    with pytest.raises(ValueError):
        tracker.Partition.paper(0, 2).check(8)
    with pytest.raises(ValueError):
        tracker.Partition(1, 1, out_mp=9, out_rp=1, in_mp=1, in_rp=1).check(8)


@pytest.mark.parametrize(
    "partition",
    # Every configuration of the paper's sweep, and one that splits at every level.
    [tracker.Partition.paper(n, t) for n in (1, 2, 4) for t in (1, 2, 3)]
    + [tracker.Partition(2, 2, out_mp=2, out_rp=2, in_mp=2, in_rp=2)],
    ids=lambda p: f"{p.nodes}x{p.threads}," + p.label().replace(" ", ","),
)
def test_every_partition_tracks_the_targets(partition: tracker.Partition) -> None:
    r = tracker.run_two_level(partition, width=320, height=240, seconds=2.0, warmup=0.5)
    assert r.decided > 10 and r.scored > 0
    assert r.accuracy >= 0.9, r
    assert len(r.inner_chunks) == partition.nodes
    assert sum(r.inner_chunks) >= r.decided  # at least one piece per frame
    assert r.fps > 0 and r.latency_ms_p50 > 0
