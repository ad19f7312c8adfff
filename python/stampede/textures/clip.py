"""Input clips: a video file, or a synthetic clip whose motion repeats with a known period
(so the best transitions are known: from frame i back to frame i - period + 1)."""

from __future__ import annotations

import numpy as np


def synthetic(
    frames: int = 316,
    height: int = 480,
    width: int = 640,
    *,
    period: int = 40,
    noise: float = 6.0,
    seed: int = 0,
) -> np.ndarray:
    """``frames`` RGB frames (uint8, ``frames × height × width × 3``): a textured disc that
    circles the image once every ``period`` frames over a fixed background, plus Gaussian
    noise of standard deviation ``noise`` drawn afresh for every frame."""
    if frames < 2 or height < 8 or width < 8 or period < 2:
        raise ValueError("a clip needs 2+ frames of 8x8+ pixels and a period of 2+ frames")
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    background = np.stack(
        [
            96 + 64 * np.sin(xx / width * 2 * np.pi),
            96 + 64 * np.cos(yy / height * 3 * np.pi),
            np.full_like(xx, 128),
        ],
        axis=-1,
    )
    radius = min(height, width) / 6
    out = np.empty((frames, height, width, 3), dtype=np.uint8)
    for t in range(frames):
        phase = 2 * np.pi * (t % period) / period
        cy = height / 2 + (height / 4) * np.sin(phase)
        cx = width / 2 + (width / 4) * np.cos(phase)
        d2 = (yy - cy) ** 2 + (xx - cx) ** 2
        disc = d2 < radius**2
        img = background.copy()
        stripes = 128 + 127 * np.sin((xx - cx) / 4)
        img[disc] = np.stack([stripes[disc], 255 - stripes[disc], np.full(disc.sum(), 40)], -1)
        img += rng.normal(0, noise, img.shape).astype(np.float32)
        out[t] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def read_video(path: str, max_frames: int | None = None) -> np.ndarray:
    """The frames of the video file ``path`` (RGB uint8), up to ``max_frames``. Needs
    OpenCV (``opencv-python-headless``)."""
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("reading a video file needs opencv-python-headless") from e
    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        raise OSError(f"cannot open video {path!r}")
    frames: list[np.ndarray] = []
    try:
        while max_frames is None or len(frames) < max_frames:
            ok, bgr = cap.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    finally:
        cap.release()
    if len(frames) < 2:
        raise ValueError(f"{path!r} has {len(frames)} readable frames; video textures need 2+")
    return np.stack(frames)
