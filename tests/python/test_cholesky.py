"""The tiled Cholesky application (apps/cholesky.py): every version factors, at sizes the tile
divides and sizes it does not; the CnC graph gives the serial tiled code's factor and frees
every tile it no longer needs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "apps"))

import cholesky  # noqa: E402  (apps/ is not a package)

from stampede import cnc  # noqa: E402

# (n, tile): one tile, tiles dividing n, a ragged last tile, a tile larger than n.
SIZES = [(1, 1), (8, 8), (64, 16), (100, 32), (130, 64), (50, 64), (33, 4)]


@pytest.fixture(scope="module")
def executor() -> Iterator[cnc.Executor]:
    yield cnc.Executor(workers=2)


@pytest.mark.parametrize("mode", cholesky.MODES)
@pytest.mark.parametrize(("n", "tile"), SIZES)
def test_every_version_factors(n: int, tile: int, mode: str, executor: cnc.Executor) -> None:
    a = cholesky.random_spd(n, seed=n)
    f = cholesky.factor(a, tile, mode, 2, executor)
    assert cholesky.verify(a, f.l) <= cholesky.residual_bound(n)
    assert f.l.shape == (n, n)
    assert not np.triu(f.l, 1).any(), "L has entries above the diagonal"
    ref = np.linalg.cholesky(a)
    np.testing.assert_allclose(f.l, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("mode", cholesky.MODES)
def test_every_version_writes_all_of_out(mode: str, executor: cnc.Executor) -> None:
    a = cholesky.random_spd(70)
    out = np.full((70, 70), np.nan, order="F")
    f = cholesky.factor(a, 16, mode, 2, executor, out=out)
    assert f.l is out
    cholesky.verify(a, out)
    assert not np.triu(out, 1).any()


@pytest.mark.parametrize("tuned", [False, True])
@pytest.mark.parametrize(("n", "tile"), [(96, 16), (70, 16)])
def test_graph_gives_the_serial_factor(
    n: int, tile: int, tuned: bool, executor: cnc.Executor
) -> None:
    a = cholesky.random_spd(n, seed=7)
    serial = cholesky.factor_serial(a, tile)
    rounding = 4 * np.finfo(np.float64).eps * np.abs(serial).max()
    for _ in range(3):  # whatever order the steps happen to run in
        l = cholesky.factor_cnc(a, tile, tuned, executor)
        np.testing.assert_allclose(l, serial, rtol=0, atol=rounding)


@pytest.mark.parametrize("tuned", [False, True])
def test_get_counts_free_every_tile(tuned: bool, executor: cnc.Executor) -> None:
    n, tile = 120, 16  # 8 block rows, 120 step instances, 164 lkji puts
    p = 8
    run = cholesky.graph_run(cholesky.random_spd(n), tile, tuned, executor)
    cholesky.verify(cholesky.random_spd(n), run.l)
    assert run.p == p
    assert run.lkji_left == 0, "a tile outlived its last reader"
    assert run.l_tiles == p * (p + 1) // 2
    # One version of each tile position at a time: never every version put.
    assert 0 < run.lkji_peak <= p * (p + 1) // 2


def test_graph_reports_a_matrix_that_is_not_positive_definite(executor: cnc.Executor) -> None:
    a = cholesky.random_spd(40)
    a[30, 30] = -1e6
    with pytest.raises(cnc.StepFailed, match="potrf"):
        cholesky.factor_cnc(a, 16, True, executor)
    for mode in ("serial", "barrier"):
        with pytest.raises(cholesky.NotPositiveDefinite):
            cholesky.factor(a, 16, mode, 2)


def test_kernels_release_the_gil() -> None:
    # This thread wakes while a long GEMM runs on another, not after it: the GEMM does not
    # hold the GIL (through scipy.linalg.blas, it does).
    rng = np.random.default_rng(0)
    c, x, y = (np.asfortranarray(rng.uniform(-1, 1, (1500, 1500))) for _ in range(3))
    started = threading.Event()
    start = [0.0]

    def call() -> None:
        start[0] = time.perf_counter()
        started.set()
        cholesky.gemm(c, x, y)

    with cholesky.one_blas_thread():
        t0 = time.perf_counter()
        cholesky.gemm(c, x, y)
        alone = time.perf_counter() - t0
        t = threading.Thread(target=call)
        t.start()
        started.wait()
        woke = time.perf_counter() - start[0]
        t.join()
    assert woke < alone / 2, f"woke {woke:.3f} s into a {alone:.3f} s call"


def test_kernels_check_their_tiles() -> None:
    f = np.zeros((4, 4), order="F")
    with pytest.raises(ValueError, match="Fortran-ordered"):
        cholesky.gemm(f, np.zeros((4, 3), order="F"), np.zeros((5, 3), order="F"))
    with pytest.raises(ValueError, match="Fortran-ordered"):
        cholesky.syrk(np.zeros((4, 4)), np.zeros((4, 2), order="F"))  # C order, not Fortran
    f.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cholesky.trsm(f, np.eye(4, order="F"))


def test_verify_rejects_a_wrong_factor() -> None:
    a = cholesky.random_spd(48)
    l = cholesky.factor_serial(a, 16)
    l[40, 20] += 1e-6
    with pytest.raises(cholesky.ResidualTooLarge):
        cholesky.verify(a, l)
    l[40, 20] = np.nan
    with pytest.raises(cholesky.ResidualTooLarge):
        cholesky.verify(a, l)


def test_bad_arguments_are_rejected() -> None:
    a = cholesky.random_spd(8)
    with pytest.raises(ValueError, match="tile"):
        cholesky.factor(a, 0, "serial")
    with pytest.raises(ValueError, match="not square"):
        cholesky.factor(np.ones((4, 6)), 2, "serial")
    with pytest.raises(ValueError, match="unknown mode"):
        cholesky.factor(a, 4, "openmp")


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cholesky.main(["--n", "72", "--tile", "16", "--mode", "all", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    for mode in cholesky.MODES:
        assert f"{mode} " in out
    assert "residual" in out
