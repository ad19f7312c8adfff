"""The auto-calibration toolkit: cost models of several implementations of one operation,
calibrated on the deployment they run on, to pick the fastest for each input.

A :class:`ModelSpec` names an implementation, its variables with the ranges to calibrate
over, and candidate terms (``"1"``, ``"n"``, ``"n*log2(n)"``, ``"n^2"``). ``profile`` times it
at ``sample_points`` (median of three runs per point); ``fit`` weights each sample by 1/y²,
so the model minimises relative error, and drops the terms whose confidence interval
contains zero. A model predicts ``inf`` outside its ranges; a :class:`ModelSelector` returns the
implementation predicted fastest. ``save_models`` and ``load_models`` store models with the
deployment's fingerprint, and refuse (or warn about) a file calibrated elsewhere.

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

from ._stampede import Model, ModelSelector, ModelSpec, fingerprint, load_models, save_models
from .errors import TuneError

__all__ = [
    "Model",
    "ModelSelector",
    "ModelSpec",
    "TuneError",
    "fingerprint",
    "load_models",
    "save_models",
]
