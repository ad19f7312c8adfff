"""Tiled Cholesky factorization A = L Lᵀ on Concurrent Collections, with scipy's BLAS and
LAPACK on the tiles (docs/cholesky.md).

    python apps/cholesky.py --n 2048 --tile 256 --mode tuned

The matrix of order ``n`` is cut into ``p = ceil(n / b)`` block rows and columns of ``b`` (the
last one smaller when ``b`` does not divide ``n``); only the tiles on and below the diagonal
take part. Buttari et al.'s right-looking algorithm is

    for k in 0..p
        L(k,k) = potrf(A(k,k))
        for j in k+1..p:                L(j,k) = A(j,k) L(k,k)⁻ᵀ     trsm
        for j in k+1..p, i in k+1..=j:  A(j,i) −= L(j,k) L(i,k)ᵀ     syrk if i == j, else gemm

and it runs six ways (``MODES``):

* ``serial``: the loop above on one thread, the yardstick of the speedups;
* ``barrier``: per ``k``, the POTRF, then the TRSMs on a thread pool, then the updates on the
  pool, with a barrier after each phase (the OpenMP-style version);
* ``untuned`` and ``tuned``: the CnC graph of Chandramowlishwaran, Knobe and Vuduc (IPDPS
  2010, Fig. 13). Its item collection ``lkji`` holds the tile in block row ``j``, block column
  ``i`` as it is at the start of iteration ``k``, keyed ``(k, j, i)``::

    [lkji: k,k,k]                                   -> (potrf: k)       -> [lkji: k+1,k,k]
    [lkji: k,j,k], [lkji: k+1,k,k]                  -> (trsm: k, j)     -> [lkji: k+1,j,k]
    [lkji: k,j,i], [lkji: k+1,j,k], [lkji: k+1,i,k] -> (update: k,j,i)  -> [lkji: k+1,j,i]

  The critical path runs at high priority: POTRF, TRSM, and the updates of block column
  ``k + 1``, which the next POTRF and TRSMs wait for. Untuned, a step whose input is missing
  is run again once it is put; tuned, each step declares its inputs (``depends``) and starts
  only when all are there. Get-counts free every tile after its last reader.
* ``snet1`` and ``snet2``: the S-Net networks of Zaichenkov et al. (their Fig. 10), on
  :mod:`stampede.snet`. ``snet1`` (``cholesky_direct.snet``) carries the whole tiled matrix
  in one record around a feedback loop over ``k``, fanning out a job per TRSM and per update
  and joining them with a counting synchrocell: a barrier after each phase, as the paper's
  direct version has. ``snet2`` (``cholesky_flow.snet``) sends each tile as a record named
  for the step that reads it next; a synchrocell per step instance gathers the step's
  inputs, so every kernel runs once its own inputs exist. A tile has one owner at a time
  there, so the kernels update it in place: no copies.

The kernels are scipy's BLAS and LAPACK routines (dpotrf, dtrsm, dsyrk, dgemm), called
without the GIL (see ``_routine``), so Python threads run them in parallel. Every version holds
BLAS to one thread while it runs (threadpoolctl), so two workers do not start four BLAS
threads on two cores; ``serial`` too, being the one-core yardstick.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from scipy.linalg import cython_blas, cython_lapack
from threadpoolctl import ThreadpoolController

from pathlib import Path

from stampede import cnc, snet

Matrix = npt.NDArray[np.float64]
TileKey = tuple[int, int]
Inputs = list[tuple[cnc.ItemCollection, tuple[int, ...]]]

MODES = ("serial", "barrier", "untuned", "tuned", "snet1", "snet2")
HERE = Path(__file__).parent


class NotPositiveDefinite(ValueError):
    """A diagonal tile's POTRF failed: the matrix is not (numerically) positive definite."""


class ResidualTooLarge(AssertionError):
    """‖L Lᵀ − A‖_F / ‖A‖_F exceeds what a backward-stable Cholesky can produce."""


# Kernels: scipy's BLAS and LAPACK routines, called through the function pointers that
# scipy.linalg.cython_blas and cython_lapack export. The wrappers in scipy.linalg.blas and
# .lapack hold the GIL while the routine runs, so two threads calling them take as long as
# one doing both calls; a ctypes call releases it. Each kernel works in place on a writable
# Fortran-ordered tile and returns it; shapes are checked here, since BLAS cannot.

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_CHAR = ctypes.c_char_p
_INT = ctypes.POINTER(ctypes.c_int)
_DOUBLE = ctypes.POINTER(ctypes.c_double)
_ARRAY = ctypes.c_void_p


def _routine(capsule: object, *argtypes: Any) -> Callable[..., None]:
    """The C function behind one of scipy's Cython BLAS/LAPACK capsules, callable without the
    GIL."""
    address = _capsule_pointer(capsule, _capsule_name(capsule))
    return cast(Callable[..., None], ctypes.CFUNCTYPE(None, *argtypes)(address))


_dpotrf = _routine(cython_lapack.__pyx_capi__["dpotrf"], _CHAR, _INT, _ARRAY, _INT, _INT)
_dtrsm = _routine(
    cython_blas.__pyx_capi__["dtrsm"],
    _CHAR, _CHAR, _CHAR, _CHAR, _INT, _INT, _DOUBLE, _ARRAY, _INT, _ARRAY, _INT,
)
_dsyrk = _routine(
    cython_blas.__pyx_capi__["dsyrk"],
    _CHAR, _CHAR, _INT, _INT, _DOUBLE, _ARRAY, _INT, _DOUBLE, _ARRAY, _INT,
)
_dgemm = _routine(
    cython_blas.__pyx_capi__["dgemm"],
    _CHAR, _CHAR, _INT, _INT, _INT, _DOUBLE, _ARRAY, _INT, _ARRAY, _INT, _DOUBLE, _ARRAY, _INT,
)


def _int(x: int) -> Any:
    return ctypes.byref(ctypes.c_int(x))


def _double(x: float) -> Any:
    return ctypes.byref(ctypes.c_double(x))


def _at(x: Matrix, rows: int, cols: int, out: bool = False) -> int:
    """The address of ``x``'s elements, once it is checked to be a ``rows`` × ``cols``
    Fortran-ordered float64 matrix (and writable when it is the output)."""
    if x.shape != (rows, cols) or x.dtype != np.float64 or not x.flags.f_contiguous:
        raise ValueError(f"a tile is {x.dtype} {x.shape}, not a Fortran-ordered ({rows}, {cols})")
    if out and not x.flags.writeable:
        raise ValueError("the output tile is read-only")
    return int(x.ctypes.data)


def potrf(akk: Matrix) -> Matrix:
    """A(k,k) to its lower Cholesky factor L(k,k) (the upper part zeroed)."""
    b = akk.shape[0]
    info = ctypes.c_int()
    _dpotrf(b"L", _int(b), _at(akk, b, b, out=True), _int(b), ctypes.byref(info))
    if info.value != 0:
        raise NotPositiveDefinite(
            f"dpotrf: the leading minor of order {info.value} is not positive definite"
        )
    akk[...] = np.tril(akk)
    return akk


def trsm(ajk: Matrix, lkk: Matrix) -> Matrix:
    """L(j,k) = A(j,k) L(k,k)⁻ᵀ."""
    rows, b = ajk.shape
    _dtrsm(
        b"R", b"L", b"T", b"N", _int(rows), _int(b), _double(1.0),
        _at(lkk, b, b), _int(b), _at(ajk, rows, b, out=True), _int(rows),
    )
    return ajk


def syrk(ajj: Matrix, ljk: Matrix) -> Matrix:
    """A(j,j) −= L(j,k) L(j,k)ᵀ, lower triangle only."""
    rows, b = ljk.shape
    _dsyrk(
        b"L", b"N", _int(rows), _int(b), _double(-1.0), _at(ljk, rows, b), _int(rows),
        _double(1.0), _at(ajj, rows, rows, out=True), _int(rows),
    )
    return ajj


def gemm(aji: Matrix, ljk: Matrix, lik: Matrix) -> Matrix:
    """A(j,i) −= L(j,k) L(i,k)ᵀ."""
    rows, b = ljk.shape
    cols = lik.shape[0]
    _dgemm(
        b"N", b"T", _int(rows), _int(cols), _int(b), _double(-1.0), _at(ljk, rows, b),
        _int(rows), _at(lik, cols, b), _int(cols), _double(1.0),
        _at(aji, rows, cols, out=True), _int(rows),
    )
    return aji


# Matrices and tiles.


def random_spd(n: int, seed: int = 1) -> Matrix:
    """A random symmetric positive definite matrix, A = B Bᵀ + n I with B uniform in
    [-1, 1), exactly symmetric and in Fortran order."""
    rng = np.random.default_rng(seed)
    b = rng.uniform(-1.0, 1.0, size=(n, n))
    a = b @ b.T
    a = (a + a.T) / 2
    a[np.diag_indices(n)] += n
    return np.asfortranarray(a)


def blocks(n: int, tile: int) -> list[slice]:
    """The block rows (and columns) of a matrix of order ``n``: ``tile`` each, the last one
    what is left (so ``tile`` need not divide ``n``)."""
    if n < 1 or tile < 1:
        raise ValueError(f"need n ≥ 1 and a tile ≥ 1 (n = {n}, tile = {tile})")
    return [slice(s, min(s + tile, n)) for s in range(0, n, tile)]


def tiling(a: Matrix, tile: int) -> list[slice]:
    """The block rows of ``a``, which must be a square float64 matrix."""
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"the matrix is {' × '.join(map(str, a.shape))}, not square")
    if a.dtype != np.float64:
        raise ValueError(f"the matrix is {a.dtype}, not float64")
    return blocks(a.shape[0], tile)


def split(a: Matrix, tile: int) -> dict[TileKey, Matrix]:
    """The tiles of ``a`` on and below the diagonal, keyed (block row, block column), each a
    Fortran-ordered copy."""
    bl = tiling(a, tile)
    p = len(bl)
    return {(j, i): np.array(a[bl[j], bl[i]], order="F") for j in range(p) for i in range(j + 1)}


def assemble(
    n: int, tile: int, tiles: Mapping[TileKey, npt.ArrayLike], out: Matrix | None = None
) -> Matrix:
    """L from its tiles on and below the diagonal (the diagonal tiles with zeros above their
    diagonal), written into ``out`` when given, every element of it (above the tiles, L is
    zero)."""
    bl = blocks(n, tile)
    if out is None:
        out = np.zeros((n, n), order="F")
    elif out.shape != (n, n) or out.dtype != np.float64:
        raise ValueError(f"out is {out.dtype} {out.shape}, not float64 ({n}, {n})")
    else:
        for cols in bl:
            out[: cols.start, cols] = 0.0
    for j in range(len(bl)):
        for i in range(j + 1):
            out[bl[j], bl[i]] = tiles[(j, i)]
    return out


# The process's BLAS threads and memory.

_blas: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """threadpoolctl's handle on the BLAS libraries loaded (scipy's and numpy's), found once."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()
    return _blas


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS runs one thread per call while this lasts. The limit is process-wide, so it is set
    once around a whole factorization rather than by each concurrent tile step."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


def blas_info() -> list[dict[str, Any]]:
    """threadpoolctl's report of the BLAS libraries loaded: file, version, kernel
    architecture, threads."""
    return cast(list[dict[str, Any]], _controller().info())


def keep_freed_memory() -> bool:
    """Has glibc's allocator keep freed blocks of up to 32 MiB for reuse instead of returning
    them to the system. A factorization allocates and frees a tile per step; fresh pages cost
    a fault each on first touch, which on a virtual machine can take longer than the tile's
    kernel. Process-wide, so the command line and the benchmark call it, not the functions
    below. False where the C library has no ``mallopt``."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


# The four versions. Each takes the matrix (only its lower triangle is read) and returns L.


def factor_serial(a: Matrix, tile: int, out: Matrix | None = None) -> Matrix:
    """The tiled algorithm on this thread. Every version writes L into ``out`` when given (a
    new array otherwise) and returns it."""
    n = a.shape[0]
    t = split(a, tile)
    p = len(blocks(n, tile))
    with one_blas_thread():
        for k in range(p):
            potrf(t[(k, k)])
            for j in range(k + 1, p):
                trsm(t[(j, k)], t[(k, k)])
            for j in range(k + 1, p):
                syrk(t[(j, j)], t[(j, k)])
                for i in range(k + 1, j):
                    gemm(t[(j, i)], t[(j, k)], t[(i, k)])
    return assemble(n, tile, t, out)


def factor_barrier(a: Matrix, tile: int, workers: int, out: Matrix | None = None) -> Matrix:
    """Per ``k``: POTRF, barrier, the TRSMs in parallel, barrier, the updates in parallel,
    barrier."""
    n = a.shape[0]
    t = split(a, tile)
    p = len(blocks(n, tile))

    def trsm_j(kj: TileKey) -> None:
        k, j = kj
        trsm(t[(j, k)], t[(k, k)])

    def update(kji: tuple[int, int, int]) -> None:
        k, j, i = kji
        if i == j:
            syrk(t[(j, j)], t[(j, k)])
        else:
            gemm(t[(j, i)], t[(j, k)], t[(i, k)])

    with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
        for k in range(p):
            potrf(t[(k, k)])
            # list() waits for every task and raises the first failure: the barrier.
            list(pool.map(trsm_j, [(k, j) for j in range(k + 1, p)]))
            updates = [(k, j, i) for j in range(k + 1, p) for i in range(k + 1, j + 1)]
            list(pool.map(update, updates))
    return assemble(n, tile, t, out)


@dataclass(frozen=True)
class GraphRun:
    """The factor from the CnC graph and what the graph held."""

    l: Matrix
    lkji_left: int
    """Items left in ``lkji`` at quiescence (get-counts promise none)."""
    lkji_peak: int
    """The most items ``lkji`` held when a step started (at most p (p + 1) / 2)."""
    l_tiles: int
    """Tiles in the result collection ``l`` (p (p + 1) / 2)."""
    p: int


def _frozen(x: Matrix) -> Matrix:
    """A Fortran-ordered tile as an item: its transpose (C-contiguous, rows × columns of the
    stored array) in memory a ``bytes`` object owns. That memory can never change, so every
    put of it, into ``lkji`` and into ``l``, stores it without a copy: this copy is the only
    one."""
    return np.frombuffer(x.tobytes(order="F"), dtype=np.float64).reshape(x.shape[::-1])


def _tile(x: Any) -> Matrix:
    """A tile from its item (see ``_frozen``): a read-only Fortran-ordered view."""
    return cast(Matrix, x).T


def _writable(x: Matrix) -> Matrix:
    """A writable copy of a tile gotten from a collection, for an in-place kernel."""
    return np.array(x, order="F")


def graph_run(
    a: Matrix,
    tile: int,
    tuned: bool,
    executor: cnc.Executor | None = None,
    out: Matrix | None = None,
) -> GraphRun:
    """Factors ``a`` as a CnC graph on ``executor`` (the process-wide default when None).
    Raises ``cnc.StepFailed`` naming the step when a tile is not positive definite."""
    n = a.shape[0]
    bl = tiling(a, tile)
    p = len(bl)
    g = cnc.Graph(executor=executor)
    lkji = g.items("lkji")
    lres = g.items("l")
    potrf_tags = g.tags("potrf_tags")
    trsm_tags = g.tags("trsm_tags")
    update_tags = g.tags("update_tags")
    peak = [0]

    def observe() -> None:
        peak[0] = max(peak[0], len(lkji))

    def put_l(ctx: cnc.StepContext, k: int, j: int, l_jk: Matrix) -> None:
        """A finished L(j,k): into ``lkji`` at (k+1, j, k) for its p − k − 1 readers (the
        trsms of column k when j == k; otherwise the updates of iteration k in block row or
        column j), and, uncounted, into ``l`` at (j, k) for the environment."""
        item = _frozen(l_jk)
        if p - k - 1 > 0:
            ctx.put(lkji, (k + 1, j, k), item, gets=p - k - 1)
        ctx.put(lres, (j, k), item)

    def potrf_step(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        (k,) = cast(tuple[int], tag)
        observe()
        put_l(ctx, k, k, potrf(_writable(_tile(ctx.get(lkji, (k, k, k))))))
        for j in range(k + 1, p):
            ctx.put_tag(trsm_tags, (k, j))

    def trsm_step(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        k, j = cast(tuple[int, int], tag)
        observe()
        ajk = _tile(ctx.get(lkji, (k, j, k)))
        lkk = _tile(ctx.get(lkji, (k + 1, k, k)))
        put_l(ctx, k, j, trsm(_writable(ajk), lkk))
        for i in range(k + 1, j + 1):
            ctx.put_tag(update_tags, (k, j, i))

    def update_step(ctx: cnc.StepContext, tag: tuple[int | str, ...]) -> None:
        k, j, i = cast(tuple[int, int, int], tag)
        observe()
        aji = _tile(ctx.get(lkji, (k, j, i)))
        ljk = _tile(ctx.get(lkji, (k + 1, j, k)))
        if i == j:
            aji_next = syrk(_writable(aji), ljk)
        else:
            lik = _tile(ctx.get(lkji, (k + 1, i, k)))  # every get before the copy
            aji_next = gemm(_writable(aji), ljk, lik)
        # Read once: by potrf(k+1), trsm(k+1, j) or update(k+1, j, i).
        ctx.put(lkji, (k + 1, j, i), _frozen(aji_next), gets=1)

    def potrf_inputs(tag: tuple[int | str, ...]) -> Inputs:
        (k,) = cast(tuple[int], tag)
        return [(lkji, (k, k, k))]

    def trsm_inputs(tag: tuple[int | str, ...]) -> Inputs:
        k, j = cast(tuple[int, int], tag)
        return [(lkji, (k, j, k)), (lkji, (k + 1, k, k))]

    def update_inputs(tag: tuple[int | str, ...]) -> Inputs:
        k, j, i = cast(tuple[int, int, int], tag)
        inputs: Inputs = [(lkji, (k, j, i)), (lkji, (k + 1, j, k))]
        if i != j:
            inputs.append((lkji, (k + 1, i, k)))
        return inputs

    def critical(tag: tuple[int | str, ...]) -> bool:
        return True

    def next_column(tag: tuple[int | str, ...]) -> bool:
        """The updates of block column k + 1, which the next POTRF and TRSMs wait for."""
        k, _, i = cast(tuple[int, int, int], tag)
        return i == k + 1

    steps = [
        (potrf_tags, "potrf", potrf_step, potrf_inputs, critical),
        (trsm_tags, "trsm", trsm_step, trsm_inputs, critical),
        (update_tags, "update", update_step, update_inputs, next_column),
    ]
    for tags, name, body, inputs, priority in steps:
        tags.prescribes(g.steps(name, body, depends=inputs if tuned else None, priority=priority))

    # The environment: the potrf tags, then the input tiles at k = 0, each read once, a block
    # column at a time, so the first steps run while the later tiles are being put.
    for k in range(p):
        g.put_tag(potrf_tags, (k,))
    for i in range(p):
        for j in range(i, p):
            g.put(lkji, (0, j, i), _frozen(a[bl[j], bl[i]]), gets=1)
    g.wait()

    tiles: dict[TileKey, Matrix] = {}
    for j in range(p):
        for i in range(j + 1):
            got = g.get(lres, (j, i))
            if got is None:
                raise RuntimeError(f"L({j},{i}) is missing from the result collection")
            tiles[(j, i)] = _tile(got)
    return GraphRun(assemble(n, tile, tiles, out), len(lkji), peak[0], len(lres), p)


def factor_cnc(
    a: Matrix,
    tile: int,
    tuned: bool,
    executor: cnc.Executor | None = None,
    out: Matrix | None = None,
) -> Matrix:
    """The CnC graph, untuned or tuned."""
    with one_blas_thread():
        return graph_run(a, tile, tuned, executor, out).l


# Checking.


def residual(a: Matrix, l: Matrix, panel: int = 256) -> float:
    """‖L Lᵀ − A‖_F / ‖A‖_F, both symmetric, from their lower triangles: a block column of
    ``panel`` at a time, using only L's nonzero columns (n³/3 operations, on numpy's BLAS
    with as many threads as it has)."""
    n = a.shape[0]
    if l.shape != a.shape:
        raise ValueError(f"L is {l.shape}, A {a.shape}")
    squares = [0.0, 0.0]  # of L Lᵀ − A, of A
    for s in range(0, n, panel):
        e = min(s + panel, n)
        r = l[s:, :e] @ l[s:e, :e].T - a[s:, s:e]
        for i, m in enumerate((r, a[s:, s:e])):
            top, below = m[: e - s], m[e - s :]
            strict = np.tril(top, -1)
            diag = np.diagonal(top)
            squares[i] += 2 * float(np.vdot(below, below)) + 2 * float(np.vdot(strict, strict))
            squares[i] += float(np.vdot(diag, diag))
    return math.sqrt(squares[0]) / math.sqrt(squares[1])


def residual_bound(n: int) -> float:
    """What ‖L Lᵀ − A‖_F / ‖A‖_F can reach for a backward-stable Cholesky of order ``n``, in
    any summation order (tiled or not), the error of evaluating it included.

    The computed factor satisfies L Lᵀ = A + ΔA with |ΔA| ≤ γ(n+1) |L| |Lᵀ| (Higham, Accuracy
    and Stability of Numerical Algorithms, Thm. 10.3), γ(m) = m u / (1 − m u), and
    ‖|L| |Lᵀ|‖_F ≤ ‖L‖_F² = trace(A + ΔA) ≲ √n ‖A‖_F; evaluating L Lᵀ − A adds at most as much
    again. Twice that covers the second-order terms: 4 γ(n+1) √n. A wrong tile gives a
    residual near 1."""
    u = float(np.finfo(np.float64).eps) / 2
    m = n + 1
    return 4 * (m * u / (1 - m * u)) * math.sqrt(n)


def verify(a: Matrix, l: Matrix) -> float:
    """The residual of ``l`` as the Cholesky factor of ``a``; raises ``ResidualTooLarge`` when
    it exceeds ``residual_bound`` or is not a number."""
    res = residual(a, l)
    bound = residual_bound(a.shape[0])
    if not res <= bound:
        raise ResidualTooLarge(
            f"‖LLᵀ − A‖/‖A‖ = {res:.3e} exceeds the bound {bound:.3e} (n = {a.shape[0]})"
        )
    return res


# The S-Net versions.


def factor_snet_direct(
    a: Matrix, tile: int, executor: cnc.Executor | None = None, out: Matrix | None = None,
    policy: str = "furthest-advanced",
) -> Matrix:
    """S-Net (1): ``cholesky_direct.snet``, the whole matrix in one record, a barrier after
    each phase of each iteration."""
    n = a.shape[0]
    tiles = split(a, tile)
    p = len(blocks(n, tile))
    net = snet.Network.load(HERE / "cholesky_direct.snet")

    def start(ctx: snet.BoxContext, t: dict[TileKey, Matrix], p_: int) -> None:
        ctx.emit(0, t, 0, p_)

    def factor_k(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, p_: int) -> None:
        potrf(t[(k, k)])
        if k == p_ - 1:
            ctx.emit(1, t, 1)
        else:
            ctx.emit(0, t, k, p_, p_ - k - 1)

    def fan_trsm(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, p_: int,
                 n_: int) -> None:
        ctx.emit(0, t, k, p_, n_)
        for j in range(k + 1, p_):
            ctx.emit(1, t, k, j, 1)

    def trsm_job(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, j: int,
                 job: int) -> None:
        trsm(t[(j, k)], t[(k, k)])
        ctx.emit(0, 1)

    def fan_update(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, p_: int) -> None:
        jobs = [(j, i) for j in range(k + 1, p_) for i in range(k + 1, j + 1)]
        ctx.emit(0, t, k, p_, len(jobs))
        for j, i in jobs:
            ctx.emit(1, t, k, j, i, 1)

    def update_job(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, j: int, i: int,
                   job: int) -> None:
        if i == j:
            syrk(t[(j, j)], t[(j, k)])
        else:
            gemm(t[(j, i)], t[(j, k)], t[(i, k)])
        ctx.emit(0, 1)

    def next_k(ctx: snet.BoxContext, t: dict[TileKey, Matrix], k: int, p_: int) -> None:
        ctx.emit(0, t, k + 1, p_)

    def count(ctx: snet.BoxContext, n_: int, ack: int) -> None:
        if n_ > 1:
            ctx.emit(0, n_ - 1)
        else:
            ctx.emit(1)

    boxes: dict[str, Callable[..., None]] = {"start": start, "factor": factor_k, "fan_trsm": fan_trsm, "trsm": trsm_job,
             "fan_update": fan_update, "update": update_job, "next": next_k, "count": count}
    with one_blas_thread():
        run = net.run(boxes, executor=executor, policy=policy)
        run.send({"tiles": tiles, "<p>": p})
        (done,) = run.finish()
    return assemble(n, tile, done["tiles"], out)


def factor_snet_flow(
    a: Matrix, tile: int, executor: cnc.Executor | None = None, out: Matrix | None = None,
    policy: str = "furthest-advanced",
) -> Matrix:
    """S-Net (2): ``cholesky_flow.snet``, a record per tile, each kernel started by its own
    inputs. The kernels update their tiles in place: a tile record has one reader."""
    n = a.shape[0]
    bl = tiling(a, tile)
    p = len(bl)
    net = snet.Network.load(HERE / "cholesky_flow.snet")

    def potrf_box(ctx: snet.BoxContext, akk: Matrix, k: int) -> None:
        lkk = potrf(akk)
        for j in range(k + 1, p):
            ctx.emit(0, lkk, k, j)
        ctx.emit(1, lkk, k, k)

    def trsm_box(ctx: snet.BoxContext, ajk: Matrix, lkk: Matrix, k: int, j: int) -> None:
        ljk = trsm(ajk, lkk)
        # The updates of block column k + 1 first: the next POTRF and TRSMs wait for them.
        ctx.emit(0, ljk, k, j)
        for i in range(k + 1, j):
            ctx.emit(1, ljk, k, j, i)
        for jj in range(j + 1, p):
            ctx.emit(2, ljk, k, jj, j)
        ctx.emit(3, ljk, j, k)

    def syrk_box(ctx: snet.BoxContext, ajj: Matrix, ljk: Matrix, k: int, j: int) -> None:
        ajj = syrk(ajj, ljk)
        if j == k + 1:
            ctx.emit(0, ajj, k + 1)
        else:
            ctx.emit(1, ajj, k + 1, j)

    def gemm_box(ctx: snet.BoxContext, aji: Matrix, ljk: Matrix, lik: Matrix, k: int, j: int,
                 i: int) -> None:
        aji = gemm(aji, ljk, lik)
        if i == k + 1:
            ctx.emit(0, aji, k + 1, j)
        else:
            ctx.emit(1, aji, k + 1, j, i)

    boxes: dict[str, Callable[..., None]] = {"potrf": potrf_box, "trsm": trsm_box, "syrk": syrk_box, "gemm": gemm_box}
    tiles: dict[TileKey, Matrix] = {}
    with one_blas_thread():
        run = net.run(boxes, executor=executor, policy=policy)
        # The input tiles a block column at a time, so the first kernels run meanwhile.
        for i in range(p):
            for j in range(i, p):
                t = np.array(a[bl[j], bl[i]], order="F")
                if i == j == 0:
                    run.send({"akk": t, "<k>": 0})
                elif i == 0:
                    run.send({"tri_a": t, "<k>": 0, "<j>": j})
                elif i == j:
                    run.send({"syrk_a": t, "<k>": 0, "<j>": j})
                else:
                    run.send({"gemm_a": t, "<k>": 0, "<j>": j, "<i>": i})
        for r in run.finish():
            tiles[(r["<j>"], r["<i>"])] = r["out"]
    if len(tiles) != p * (p + 1) // 2:
        raise RuntimeError(f"the network finished with {len(tiles)} of {p * (p + 1) // 2} tiles")
    return assemble(n, tile, tiles, out)


# Timing.


@dataclass(frozen=True)
class Factorization:
    """One run: the factor, how it was computed, and how long it took."""

    l: Matrix
    """L, n × n, lower triangular, Fortran order."""
    mode: str
    tile: int
    workers: int
    seconds: float
    """From the matrix to its factor: tiling, the factorization, writing L out."""


def default_workers() -> int:
    return os.cpu_count() or 1


def factor(
    a: Matrix,
    tile: int,
    mode: str,
    workers: int | None = None,
    executor: cnc.Executor | None = None,
    out: Matrix | None = None,
) -> Factorization:
    """Factors ``a`` in ``mode`` (one of ``MODES``) and times it; does not verify. The CnC
    modes run on ``executor``, by default a new one with ``workers`` threads (one per core
    when None). L is written into ``out`` when given (as LAPACK overwrites its argument),
    else into a new array allocated while the clock runs."""
    tiling(a, tile)  # rejects a bad matrix or tile before the clock starts
    w = 1 if mode == "serial" else workers or default_workers()
    run: Callable[[], Matrix]
    if mode == "serial":
        run = lambda: factor_serial(a, tile, out)
    elif mode == "barrier":
        run = lambda: factor_barrier(a, tile, w, out)
    elif mode in ("untuned", "tuned"):
        ex = executor or cnc.Executor(workers=w)
        w = ex.workers
        run = lambda: factor_cnc(a, tile, mode == "tuned", ex, out)
    elif mode in ("snet1", "snet2"):
        ex = executor or cnc.Executor(workers=w)
        w = ex.workers
        version = factor_snet_direct if mode == "snet1" else factor_snet_flow
        run = lambda: version(a, tile, ex, out)
    else:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    start = time.perf_counter()
    l = run()
    return Factorization(l, mode, tile, w, time.perf_counter() - start)


def gflops(n: int, seconds: float) -> float:
    """A Cholesky's n³/3 floating-point operations per second, in billions."""
    return n**3 / 3 / seconds / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Tiled Cholesky on Concurrent Collections, each run checked against A."
    )
    ap.add_argument("--n", type=int, default=2048, help="matrix order (default 2048)")
    ap.add_argument("--tile", type=int, default=256, help="tile size (default 256)")
    ap.add_argument(
        "--mode", choices=(*MODES, "all"), default="tuned", help="version (default tuned)"
    )
    ap.add_argument("--workers", type=int, help="threads (default: one per core)")
    ap.add_argument("--reps", type=int, default=1, help="runs per version; the best is shown")
    ap.add_argument("--seed", type=int, default=1, help="of the random matrix")
    args = ap.parse_args(argv)
    if min(args.n, args.tile, args.reps, args.workers or 1) < 1:
        ap.error("--n, --tile, --reps and --workers must be positive")

    keep_freed_memory()
    a = random_spd(args.n, args.seed)
    kernels = ", ".join(
        f"{i['internal_api']} {i['version']} ({i['architecture']})" for i in blas_info()
    )
    print(f"n = {args.n}, tile = {args.tile}, {len(blocks(args.n, args.tile))} block rows")
    print(f"BLAS: {kernels}")
    executor = cnc.Executor(workers=args.workers)
    # L goes into one array, written to before the first run: a new one per run would cost a
    # page fault per 4 KiB of it inside the timed run, more than some factorizations take.
    out = np.array(a, order="F")
    for mode in MODES if args.mode == "all" else (args.mode,):
        runs = []
        for _ in range(args.reps):
            f = factor(a, args.tile, mode, args.workers, executor, out)
            runs.append((f.seconds, verify(a, f.l), f.workers))  # every run is checked
        secs, res, workers = min(runs)
        print(
            f"{mode:<8} {workers} worker{'s' if workers > 1 else ' '}, best of {args.reps}: "
            f"{secs:.3f} s, {gflops(args.n, secs):6.2f} GFLOP/s, residual {res:.1e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
