"""Video textures (the Stampede paper's §VI-A): find the frames of a clip where it can jump
back on itself, then play it for ever or loop it at a chosen length.

- :func:`clip.synthetic` and :func:`clip.read_video` give the input;
- :func:`analysis.analyze` computes the all-pairs distance matrix with Stampede tasks,
  channels and queues (:func:`analysis.sequential` is the single-thread baseline);
- :func:`distributed.analyze_distributed` spreads it over address spaces, single source or
  tiling with chaining;
- :mod:`synthesis` turns distances into transition costs with future costs, and plays or
  loops the clip.
"""

from __future__ import annotations

from .analysis import (
    Analysis,
    WorkerTimes,
    analyze,
    direct,
    sequential,
    speedup_limit,
    tile_pairs,
    tiles,
)
from .clip import read_video, synthetic
from .distributed import DISTRIBUTIONS, Distributed, analyze_distributed, split_rows

__all__ = [
    "DISTRIBUTIONS",
    "Analysis",
    "Distributed",
    "WorkerTimes",
    "analyze",
    "analyze_distributed",
    "direct",
    "read_video",
    "sequential",
    "speedup_limit",
    "split_rows",
    "synthetic",
    "tile_pairs",
    "tiles",
]
