"""Video textures (the Stampede paper's §VI-A): find the frames of a clip where it can jump
back on itself, then play it for ever or loop it at a chosen length.

- :func:`clip.synthetic` and :func:`clip.read_video` give the input;
- :func:`analysis.analyze` computes the all-pairs distance matrix with Stampede tasks,
  channels and queues (:func:`analysis.sequential` is the single-thread baseline);
- :mod:`synthesis` turns distances into transition costs with future costs, and plays or
  loops the clip.
"""

from __future__ import annotations

from .analysis import Analysis, analyze, direct, sequential, tiles
from .clip import read_video, synthetic

__all__ = ["Analysis", "analyze", "direct", "read_video", "sequential", "synthetic", "tiles"]
