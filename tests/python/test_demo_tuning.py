"""The kiosk layout chosen by a calibrated model: calibration, the choice, the stored model
and the command line's ``auto``."""

from __future__ import annotations

from pathlib import Path

import pytest

from stampede import tune
from stampede.demo import __main__ as demo
from stampede.demo import tuning

SCENE = (160, 120, 4)


def test_a_small_calibration_picks_a_layout_in_range_and_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "kiosk.json"
    model, fresh = tuning.load_or_calibrate(
        *SCENE, path=path, points=8, seconds=0.4, max_workers=3, max_regions=3
    )
    assert fresh and path.exists()
    workers, regions, fps = tuning.best(model, max_workers=3, max_regions=3)
    assert 1 <= workers <= 3 and 1 <= regions <= 3 and fps > 0
    # Fixing one dimension leaves only the other to choose.
    assert tuning.best(model, workers=1, max_workers=3, max_regions=3)[0] == 1
    # The next run loads it; another scene is another deployment.
    again, fresh = tuning.load_or_calibrate(*SCENE, path=path)
    assert not fresh and again.formula == model.formula
    with pytest.raises(tune.TuneError):
        tune.load_models(path, tuning.deployment(320, 240, 4))


def test_auto_on_the_command_line() -> None:
    args = demo.parse_args(["--workers", "auto", "--regions", "3"])
    assert args.workers == demo.AUTO and args.regions == 3
    with pytest.raises(SystemExit):
        demo.parse_args(["--workers", "0"])
