"""stampede.tune from Python: specifying, profiling a Python task, fitting with pruning,
selection and validity, and model files with the deployment's fingerprint."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from stampede import InvalidArgument, tune


def quadratic(name: str) -> tune.ModelSpec:
    return tune.ModelSpec(name, [("n", 1, 1e4)], ["1", "n", "n*log2(n)", "n^2"])


def samples(a: float, b: float, c: float, noise: float, seed: int) -> list[tuple[list[float], float]]:
    rng = random.Random(seed)
    spec = quadratic("s")
    return [
        (x, (a + b * x[0] + c * x[0] ** 2) * (1 + noise * (2 * rng.random() - 1)))
        for x in spec.sample_points(80, seed)
    ]


def test_fitting_recovers_coefficients_and_prunes() -> None:
    model = quadratic("q").fit(samples(1e-5, 2e-8, 0.0, 0.01, 1))
    assert "n^2" in model.dropped or "n*log2(n)" in model.dropped
    terms = {t: c for t, c, _ in model.coefficients}
    assert abs(terms["n"] / 2e-8 - 1) < 0.1, model.formula
    assert model.mre < 1.02
    mre, worst = model.verify(samples(1e-5, 2e-8, 0.0, 0.01, 2), worst=2)
    assert mre < 1.03 and len(worst) == 2 and worst[0][3] >= worst[1][3]
    for _, _, (lo, hi) in model.coefficients:
        assert lo < hi


def test_selection_and_validity() -> None:
    steep = quadratic("steep").fit(samples(1e-6, 1e-7, 0.0, 0.0, 3))
    flat = quadratic("flat").fit(samples(1e-4, 1e-9, 0.0, 0.0, 4))
    pick = tune.ModelSelector([steep, flat])
    near, far = pick.choose([10]), pick.choose([9000])
    assert near is not None and near[1] == "steep"
    assert far is not None
    index, name, predicted = far
    assert (index, name) == (1, "flat") and len(predicted) == 2
    assert steep.predict([2e4]) == float("inf")
    assert pick.best([2e4]) is None


def test_profiling_a_python_task() -> None:
    spec = tune.ModelSpec("sum", [("n", 10, 5000, True)], ["1", "n"])
    seen: list[tuple[int, int]] = []
    points = spec.sample_points(12, 5)
    measured = spec.profile(
        points,
        task=lambda x, data: sum(data),
        setup=lambda x: list(range(int(x[0]))),
        progress=lambda done, total, elapsed, eta: seen.append((done, total)),
    )
    assert [x for x, _ in measured] == points
    assert all(y > 0 for _, y in measured)
    assert seen[-1] == (12, 12)
    model = spec.fit(measured)
    assert model.predict([5000]) > model.predict([10])

    def broken(x: list[float], state: object) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        spec.profile(points, task=broken)


def test_model_files_round_trip_and_refuse_another_deployment(tmp_path: Path) -> None:
    model = quadratic("q").fit(samples(1e-5, 2e-8, 0.0, 0.01, 6))
    path = tmp_path / "models.json"
    tune.save_models(path, [model], "threads")
    (back,), warnings = tune.load_models(path, "threads")
    assert warnings == [] and back.formula == model.formula
    assert back.predict([123]) == model.predict([123])
    with pytest.raises(tune.TuneError) as info:
        tune.load_models(path, "processes")
    assert info.value.differences == ["deployment: threads -> processes"]
    _, warnings = tune.load_models(path, "processes", policy="warn")
    assert warnings == ["deployment: threads -> processes"]
    stored = json.loads(path.read_text())
    assert stored["fingerprint"]["cores"] == tune.fingerprint("x")["cores"]
    with pytest.raises(InvalidArgument):
        tune.load_models(path, "threads", policy="maybe")


def test_bad_specifications_are_typed_errors() -> None:
    with pytest.raises(tune.TuneError, match="unknown variable"):
        tune.ModelSpec("m", [("n", 1, 2)], ["k"])
    with pytest.raises(tune.TuneError, match="the term"):
        tune.ModelSpec("m", [("n", 1, 2)], ["n +"])
    with pytest.raises(tune.TuneError):
        quadratic("q").fit([([1.0], 1.0)])


def test_pictures_of_a_fit_and_of_the_predicted_winners(tmp_path: Path) -> None:
    spec = tune.ModelSpec("two", [("n", 1, 1e4), ("p", 1, 8, True)], ["1", "n", "n*p^-1", "p"])

    def costs(a: float, b: float, c: float) -> list[tuple[list[float], float]]:
        return [(x, a + b * x[0] + c * x[0] / x[1]) for x in spec.sample_points(60, 3)]

    serial = spec.fit(costs(1e-6, 1e-8, 0.0))
    parallel = spec.fit(costs(5e-5, 0.0, 1e-8))
    tune.plot_fit(serial, costs(1e-6, 1e-8, 0.0), tmp_path / "fit.png")
    assert (tmp_path / "fit.png").stat().st_size > 1000
    pick = tune.ModelSelector([serial, parallel])
    grid = tune.winner_map(pick, [1, 1], 0, (1, 1e4), 1, (1, 8), steps=20,
                           path=tmp_path / "map.svg", names=["serial", "parallel"])
    assert len(grid) == 20 and all(len(row) == 20 for row in grid)
    # Small inputs go to the serial code; large ones on many processors to the parallel.
    assert grid[0][0] == 0 and grid[-1][-1] == 1
    assert (tmp_path / "map.svg").read_text().startswith("<?xml")
    outside = tune.winner_map(pick, [1, 1], 0, (2e4, 3e4), 1, (1, 8), steps=3)
    assert all(c is None for row in outside for c in row)
