"""Video texture synthesis (Schödl et al.'s method, as the Stampede paper's Fig. 8 uses it):
transition costs from the distance matrix, future costs so play never runs into the end,
random play, and loops of a requested length built from backward transitions.

A transition ``i → j`` shows frame ``j`` after frame ``i``; it looks right when ``j`` is like
``i + 1``, so its cost is the distance between ``i + 1`` and ``j``, filtered over a few
neighbouring frames to keep the motion's dynamics (binomial weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WEIGHTS = np.array([1.0, 3.0, 3.0, 1.0]) / 8.0
"""The dynamics filter: ``D'(i, j) = Σ_k w_k D(i + k, j + k)`` for ``k = -2 .. 1``."""


def transition_costs(distances: np.ndarray) -> np.ndarray:
    """``T[i, j]``: the cost of showing frame ``j`` after frame ``i`` (infinite from the last
    frame, which has no next), normalised so the mean finite cost is 1. Near the clip's
    ends the filter uses the neighbours there are, its weights renormalised."""
    n = distances.shape[0]
    if distances.shape != (n, n) or n < 2:
        raise ValueError("distances must be a square matrix of 2+ frames")
    m = len(WEIGHTS) // 2
    acc = np.zeros((n, n))
    wsum = np.zeros((n, n))
    idx = np.arange(n)
    for k, w in zip(range(-m, m), WEIGHTS):
        ok = (idx + k >= 0) & (idx + k < n)
        rows = idx[ok]
        sub = np.ix_(rows, rows)
        acc[sub] += w * distances[np.ix_(rows + k, rows + k)]
        wsum[sub] += w
    filtered = acc / wsum
    t = np.full((n, n), np.inf)
    t[:-1, :] = filtered[1:, :]
    finite = np.isfinite(t) & (t > 0)
    scale = float(t[finite].mean()) if finite.any() else 1.0
    return t / scale


def future_costs(
    costs: np.ndarray, *, p: float = 2.0, alpha: float = 0.995, tol: float = 1e-9
) -> np.ndarray:
    """``F[i, j] = T[i, j]^p + α · min_k F[j, k]``: a transition's cost counts what it
    leads to, so play avoids dead ends (the clip's last frames). Solved by value
    iteration (α < 1 makes it converge)."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    tp = np.power(costs, p)
    m = np.zeros(costs.shape[0])
    for _ in range(100_000):
        nxt = np.min(tp + alpha * m[None, :], axis=1)
        nxt[~np.isfinite(nxt)] = np.inf
        if np.allclose(nxt, m, rtol=0, atol=tol, equal_nan=False) or np.array_equal(nxt, m):
            m = nxt
            break
        m = nxt
    out: np.ndarray = tp + alpha * m[None, :]
    return out


def probabilities(future: np.ndarray, sigma: float = 0.05) -> np.ndarray:
    """``P[i, j] ∝ exp(−F[i, j] / (σ · mean finite F))``, each row summing to 1 (a row
    with no finite transition stays zero)."""
    finite = np.isfinite(future)
    scale = sigma * float(future[finite].mean()) if finite.any() else 1.0
    z = np.where(finite, -future / scale, -np.inf)
    top = np.max(z, axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.where(finite, np.exp(z - top), 0.0)
    sums = e.sum(axis=1, keepdims=True)
    p: np.ndarray = np.divide(e, sums, out=np.zeros_like(e), where=sums > 0)
    return p


def random_play(p: np.ndarray, length: int, *, start: int = 0, seed: int = 0) -> list[int]:
    """``length`` frames of random play: from each frame the next is drawn from its row of
    ``p`` (going on to the next frame is by far the likeliest)."""
    rng = np.random.default_rng(seed)
    out = [start]
    for _ in range(length - 1):
        row = p[out[-1]]
        if row.sum() <= 0:
            out.append(0)
        else:
            out.append(int(rng.choice(len(row), p=row)))
    return out


@dataclass(frozen=True)
class Transition:
    """A backward transition ``source → dest`` (``dest <= source``): a primitive loop of
    frames ``dest .. source``."""

    source: int
    dest: int
    cost: float

    @property
    def length(self) -> int:
        return self.source - self.dest + 1


def best_transitions(costs: np.ndarray, count: int = 40, min_length: int = 2) -> list[Transition]:
    """The ``count`` cheapest backward transitions of loops at least ``min_length`` frames
    long, each a local minimum of the costs around it (so near-duplicates of one good
    transition do not crowd out the others), cheapest first."""
    n = costs.shape[0]
    c = costs.copy()
    cand: list[Transition] = []
    for i in range(n):
        for j in range(0, i - min_length + 2):
            v = c[i, j]
            if not np.isfinite(v):
                continue
            nb = c[max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2]
            if v <= np.min(nb[np.isfinite(nb)]):
                cand.append(Transition(i, j, float(v)))
    cand.sort(key=lambda t: t.cost)
    return cand[:count]


def schedule(loops: list[Transition]) -> list[int] | None:
    """The frames of one pass of the compound loop made of ``loops`` (each taken once), or
    None when they cannot be played as one loop. Play starts after the transition with the
    latest source, and from each jump goes forward to the latest source still ahead."""
    if not loops:
        return None
    rest = sorted(loops, key=lambda t: t.source)
    first = rest.pop()
    order = [first]
    pos = first.dest
    while rest:
        ahead = [t for t in rest if t.source >= pos]
        if not ahead:
            return None
        nxt = max(ahead, key=lambda t: t.source)
        rest.remove(nxt)
        order.append(nxt)
        pos = nxt.dest
    frames: list[int] = []
    pos = first.dest
    for t in order[1:] + [first]:
        frames.extend(range(pos, t.source + 1))
        pos = t.dest
    return frames


def loop(costs: np.ndarray, length: int, *, count: int = 40) -> tuple[list[int], list[Transition]]:
    """A loop of exactly ``length`` frames from the cheapest set of backward transitions
    whose lengths add up to it, each overlapping another of the set (the compound loops
    of the video-textures method, by dynamic programming over lengths); returns its frames
    and transitions. Raises ValueError when no set of the best transitions makes it."""
    ts = best_transitions(costs, count)
    k = len(ts)
    if length < 1 or k == 0:
        raise ValueError(f"no loop of {length} frames: no backward transition")
    overlap = np.array(
        [[a.dest <= b.source and b.dest <= a.source for b in ts] for a in ts], dtype=bool
    )
    inf = float("inf")
    best = np.full((length + 1, k), inf)
    back: dict[tuple[int, int], tuple[int, int] | None] = {}
    for ell in range(1, length + 1):
        for a, t in enumerate(ts):
            if t.length == ell and t.cost < best[ell, a]:
                best[ell, a] = t.cost
                back[(ell, a)] = None
            rest = ell - t.length
            if rest >= 1:
                for b in np.flatnonzero(overlap[a]):
                    v = best[rest, b] + t.cost
                    if v < best[ell, a]:
                        best[ell, a] = v
                        back[(ell, a)] = (rest, int(b))
    for a in np.argsort(best[length]):
        if not np.isfinite(best[length, a]):
            break
        chosen: list[Transition] = []
        cell: tuple[int, int] | None = (length, int(a))
        while cell is not None:
            chosen.append(ts[cell[1]])
            cell = back[cell]
        frames = schedule(chosen)
        if frames is not None and len(frames) == length:
            return frames, chosen
    raise ValueError(f"no loop of {length} frames from the {k} best transitions")
