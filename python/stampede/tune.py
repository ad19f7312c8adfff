"""The auto-calibration toolkit: cost models of several implementations of one operation,
calibrated on the deployment they run on, to pick the fastest for each input.

A :class:`ModelSpec` names an implementation, its variables with the ranges to calibrate
over, and candidate terms (``"1"``, ``"n"``, ``"n*log2(n)"``, ``"n^2"``). ``profile`` times it
at ``sample_points`` (median of three runs per point); ``fit`` weights each sample by 1/y²,
so the model minimises relative error, and drops the terms whose confidence interval
contains zero. A model predicts ``inf`` outside its ranges; a :class:`ModelSelector` returns the
implementation predicted fastest. ``save_models`` and ``load_models`` store models with the
deployment's fingerprint, and refuse (or warn about) a file calibrated elsewhere.
``plot_fit`` draws a model against measurements, and ``winner_map`` the implementation
predicted fastest over two variables (both need matplotlib).

>>> from stampede import tune
>>> spec = tune.ModelSpec("linear", [("n", 1, 1000)], ["1", "n", "n^2"])
>>> model = spec.fit([([n], 2.0 + 0.5 * n) for n in range(1, 1001, 50)])
>>> model.dropped
['n^2']
>>> round(model.predict([100]), 6)
52.0
>>> model.predict([5000])
inf
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from types import ModuleType

from ._stampede import Model, ModelSelector, ModelSpec, fingerprint, load_models, save_models
from .errors import TuneError


def _pyplot() -> ModuleType:
    """matplotlib's pyplot on a file backend (an optional dependency, for pictures only)."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("drawing needs matplotlib (pip install matplotlib)") from e
    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def plot_fit(
    model: Model,
    samples: Sequence[tuple[Sequence[float], float]],
    path: str | os.PathLike[str],
) -> None:
    """Draws ``model`` against ``samples``: predicted against measured cost on log axes, the
    diagonal where they agree, and the mean relative error in the title (a PNG or SVG, by
    the file's suffix)."""
    plt = _pyplot()
    measured = [y for _, y in samples]
    predicted = [model.predict(x) for x, _ in samples]
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(measured, predicted, s=12)
    finite = [v for v in measured + predicted if math.isfinite(v) and v > 0]
    lo, hi = min(finite), max(finite)
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured")
    ax.set_ylabel("predicted")
    mre, _ = model.verify(samples, worst=0)
    ax.set_title(f"{model.name}: MRE {mre:.3f} on {len(samples)} samples", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def winner_map(
    selector: ModelSelector,
    base: Sequence[float],
    x_var: int,
    x_range: tuple[float, float],
    y_var: int,
    y_range: tuple[float, float],
    steps: int = 60,
    path: str | os.PathLike[str] | None = None,
    names: Sequence[str] | None = None,
) -> list[list[int | None]]:
    """The implementation predicted fastest over a grid of two variables (the others at
    ``base``): ``grid[j][i]`` for the i-th value of variable ``x_var`` and the j-th of
    ``y_var``, ``None`` where no model is valid. Ranges spanning more than a factor of ten
    are stepped geometrically. With ``path``, draws the map (the thesis' Fig. 4-7)."""

    def axis(lo: float, hi: float) -> list[float]:
        if lo > 0 and hi / lo > 10:
            return [lo * (hi / lo) ** (k / (steps - 1)) for k in range(steps)]
        return [lo + (hi - lo) * k / (steps - 1) for k in range(steps)]

    xs, ys = axis(*x_range), axis(*y_range)
    point = list(base)
    grid: list[list[int | None]] = []
    for y in ys:
        row: list[int | None] = []
        for x in xs:
            point[x_var], point[y_var] = x, y
            row.append(selector.best(point))
        grid.append(row)
    if path is not None:
        plt = _pyplot()
        count = 1 + max((c for row in grid for c in row if c is not None), default=0)
        fig, ax = plt.subplots(figsize=(6, 4.5))
        values = [[math.nan if c is None else c for c in row] for row in grid]
        mesh = ax.pcolormesh(xs, ys, values, cmap=plt.get_cmap("tab10", max(count, 2)),
                             vmin=-0.5, vmax=max(count, 2) - 0.5, shading="nearest")
        if x_range[0] > 0 and x_range[1] / x_range[0] > 10:
            ax.set_xscale("log")
        if y_range[0] > 0 and y_range[1] / y_range[0] > 10:
            ax.set_yscale("log")
        bar = fig.colorbar(mesh, ticks=range(count))
        bar.ax.set_yticklabels(list(names) if names else [str(k) for k in range(count)])
        ax.set_title("predicted fastest implementation", fontsize=10)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
    return grid

__all__ = [
    "Model",
    "ModelSelector",
    "ModelSpec",
    "TuneError",
    "fingerprint",
    "load_models",
    "plot_fit",
    "save_models",
    "winner_map",
]
