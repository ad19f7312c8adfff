"""Rendering: a frame sequence as a playable MP4 file (OpenCV's ``mp4v`` codec) and a
contact sheet of a loop's cuts as a PNG (each row: the last frame before the jump, the
frame jumped to). Both need OpenCV (``opencv-python-headless``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .synthesis import Transition


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("rendering needs opencv-python-headless") from e
    return cv2


def write_mp4(frames: np.ndarray, sequence: Sequence[int], path: str, fps: float = 30.0) -> None:
    """Writes ``frames[sequence]`` (RGB) to ``path`` as an MP4 video at ``fps``."""
    cv2 = _cv2()
    h, w = frames.shape[1:3]
    out = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    if not out.isOpened():
        raise OSError(f"cannot write video {path!r}")
    try:
        for i in sequence:
            out.write(cv2.cvtColor(np.ascontiguousarray(frames[i]), cv2.COLOR_RGB2BGR))
    finally:
        out.release()


def contact_sheet(
    frames: np.ndarray, cuts: Sequence[Transition], path: str, thumb_width: int = 160
) -> None:
    """Writes a PNG with a row per cut: the cut's source frame, then its destination, at
    ``thumb_width`` pixels wide, with the frame numbers."""
    cv2 = _cv2()
    if not cuts:
        raise ValueError("a contact sheet needs at least one cut")
    h, w = frames.shape[1:3]
    th = max(1, round(h * thumb_width / w))
    rows = []
    for t in cuts:
        pair = []
        for i in (t.source, t.dest):
            img = cv2.resize(np.ascontiguousarray(frames[i]), (thumb_width, th))
            img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
            cv2.putText(img, str(i), (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1)
            pair.append(img)
        rows.append(np.hstack([pair[0], np.full((th, 8, 3), 255, np.uint8), pair[1]]))
    sheet = np.vstack([np.vstack([r, np.full((8, r.shape[1], 3), 255, np.uint8)]) for r in rows])
    if not cv2.imwrite(path, sheet):
        raise OSError(f"cannot write image {path!r}")


def read_frame_count(path: str) -> int:
    """The number of frames a video file decodes to."""
    cv2 = _cv2()
    cap = cv2.VideoCapture(path)
    n = 0
    try:
        while cap.read()[0]:
            n += 1
    finally:
        cap.release()
    return n
