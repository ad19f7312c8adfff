"""The face-detection application (apps/face_detect.py) on a small workload: the generator is
deterministic, every version finds the same boxes, the cascade agrees with the truth, and the
timeline is drawn."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "apps"))

import face_detect as fd  # noqa: E402  (apps/ is not a package)

IMAGES = 40
SIZE = 300
WORKERS = 2


@pytest.fixture(scope="module")
def work() -> fd.Workload:
    return fd.generate(IMAGES, SIZE)


@pytest.fixture(scope="module")
def runs(work: fd.Workload) -> dict[str, fd.Run]:
    return {v: fd.run_version(v, work, WORKERS) for v in fd.VERSIONS}


def test_the_generator_is_deterministic(work: fd.Workload) -> None:
    again = fd.generate(IMAGES, SIZE)
    assert again.truth == work.truth
    assert all(np.array_equal(a, b) for a, b in zip(again.images, work.images, strict=True))
    other = fd.generate(IMAGES, SIZE, seed=work.seed + 1)
    assert not all(np.array_equal(a, b) for a, b in zip(other.images, work.images, strict=True))
    assert all(img.shape == (SIZE, SIZE) and img.dtype == np.uint8 for img in work.images)


def test_faces_cluster_in_the_first_third() -> None:
    work = fd.generate(300, SIZE)
    head = sum(t is not None for t in work.truth[:100])
    tail = sum(t is not None for t in work.truth[100:])
    assert head > 50 and tail < 40, (head, tail)


def test_every_version_finds_the_same_boxes(runs: dict[str, fd.Run]) -> None:
    assert fd.identical(list(runs.values()))
    assert [r.version for r in runs.values()] == list(fd.VERSIONS)


def test_detections_agree_with_the_truth(work: fd.Workload, runs: dict[str, fd.Run]) -> None:
    acc = fd.accuracy(work, runs["sequential"].detections)
    assert 0 < acc.faces_true < acc.images
    assert acc.agreement >= fd.MIN_AGREEMENT, acc
    assert acc.false_positives == 0, acc
    assert acc.located == acc.faces_found, "a detection away from the pasted face"


def test_every_image_runs_the_stages_it_reaches(runs: dict[str, fd.Run]) -> None:
    """One face stage per image; the eye and mouth stages only for images that reach them,
    the same ones in every version."""
    stages = {v: Counter((r.image, r.stage) for r in run.records) for v, run in runs.items()}
    for counts in stages.values():
        assert counts == stages["sequential"]
    faces = {i for (i, s) in stages["sequential"] if s == "face"}
    eyes = {i for (i, s) in stages["sequential"] if s == "eyes"}
    mouths = {i for (i, s) in stages["sequential"] if s == "mouth"}
    assert faces == set(range(IMAGES)) and mouths <= eyes < faces
    found = {i for i, d in enumerate(runs["sequential"].detections) if d}
    assert found <= mouths
    for run in runs.values():
        assert all(0 <= r.worker < run.workers and 0 <= r.start <= r.end for r in run.records)


def test_the_timeline_is_drawn(runs: dict[str, fd.Run], tmp_path: Path) -> None:
    path = tmp_path / "timeline.png"
    fd.draw_timeline([runs["static"], runs["cnc"]], path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def test_the_command_line_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    timeline = tmp_path / "t.png"
    status = fd.main(["--images", "12", "--size", str(SIZE), "--workers", "2",
                      "--timeline", str(timeline)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "every version found the same boxes" in out and timeline.stat().st_size > 0
