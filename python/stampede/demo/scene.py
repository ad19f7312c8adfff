"""Frame sources: a deterministic synthetic kiosk scene with ground truth, or a video file.

The synthetic scene is a textured, low-saturation background with moving, saturated colored
discs (the "customers" the kiosk tracks). Everything that does not depend on the frame number
(background, noise tiles, target paths) is computed once, so rendering a frame costs about one
frame copy, a few disc draws and one saturating add: the detection stages, not the camera,
are the expensive part of the pipeline, as in the paper's color tracker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np
import numpy.typing as npt

Image = npt.NDArray[np.uint8]

# Saturation and value of the targets' colors; the background stays far below this saturation.
TARGET_SATURATION = 230
TARGET_VALUE = 220


def hue_of(index: int, count: int) -> int:
    """The OpenCV hue (0..179) of target/model ``index`` of ``count``: evenly spread, so
    neighbouring models stay apart in hue."""
    return int(round(index * 180.0 / max(count, 1))) % 180


def bgr_of_hue(hue: int) -> tuple[int, int, int]:
    """The BGR color of a saturated target with this hue."""
    hsv = np.array([[[hue, TARGET_SATURATION, TARGET_VALUE]]], dtype=np.uint8)
    b, g, r = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0]
    return int(b), int(g), int(r)


@dataclass(frozen=True)
class Truth:
    """Where a target really is in a frame.

    ``scored`` is false when the target overlaps another one (its visible centroid is then
    not the disc's center), so accuracy is measured only where the truth is unambiguous.
    """

    index: int
    x: float
    y: float
    radius: int
    scored: bool


class FrameSource(Protocol):
    """What the digitizer reads frames from."""

    @property
    def width(self) -> int:
        """Frame width in pixels."""
        ...

    @property
    def height(self) -> int:
        """Frame height in pixels."""
        ...

    @property
    def has_truth(self) -> bool:
        """Whether :meth:`truth` knows where the targets are."""
        ...

    def frame(self, n: int) -> Image:
        """Frame number ``n`` (BGR, uint8, freshly allocated)."""
        ...

    def truth(self, n: int) -> list[Truth]:
        """The targets' true positions in frame ``n`` (empty when unknown)."""
        ...


@dataclass(frozen=True)
class _Path:
    """A Lissajous path: x = cx + ax sin(wx t + px), y = cy + ay sin(wy t + py)."""

    cx: float
    cy: float
    ax: float
    ay: float
    wx: float
    wy: float
    px: float
    py: float

    def at(self, t: float) -> tuple[float, float]:
        """The position at time ``t`` seconds."""
        return (
            self.cx + self.ax * math.sin(self.wx * t + self.px),
            self.cy + self.ay * math.sin(self.wy * t + self.py),
        )


class SyntheticScene:
    """A deterministic scene of ``targets`` colored discs moving over a textured background.

    Frame ``n`` depends only on ``n`` and the seed, so any stage can recompute the ground
    truth of any timestamp.
    """

    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        targets: int = 8,
        *,
        seed: int = 1,
        noise: float = 6.0,
        fps: float = 30.0,
    ) -> None:
        if width < 64 or height < 64:
            raise ValueError("frames must be at least 64x64")
        if targets < 1:
            raise ValueError("at least one target")
        self._width, self._height, self.targets = width, height, targets
        self.fps = fps
        rng = np.random.default_rng(seed)
        self.radius = max(6, int(min(width, height) * 0.045))
        self.colors = [bgr_of_hue(hue_of(i, targets)) for i in range(targets)]
        self.background = _texture(rng, width, height)
        # Noise tiles, a little taller than the frame: frame n adds one tile and subtracts
        # another, each from a row offset that depends on n (views, no allocation), so the
        # noise is zero-mean and changes every frame at the cost of two saturating adds.
        self._noise = [
            np.abs(rng.normal(0.0, noise, size=(height + 64, width, 3)))
            .clip(0, 255)
            .astype(np.uint8)
            for _ in range(3)
        ]
        self._paths = self._make_paths(rng)

    @property
    def width(self) -> int:
        """Frame width in pixels."""
        return self._width

    @property
    def height(self) -> int:
        """Frame height in pixels."""
        return self._height

    @property
    def has_truth(self) -> bool:
        """The synthetic scene always knows its ground truth."""
        return True

    def _make_paths(self, rng: np.random.Generator) -> list[_Path]:
        w, h, r = self._width, self._height, self.radius
        margin = r + 4
        paths = []
        for _ in range(self.targets):
            ax = rng.uniform(0.15, 0.45) * (w - 2 * margin)
            ay = rng.uniform(0.15, 0.45) * (h - 2 * margin)
            cx = rng.uniform(margin + ax, w - margin - ax)
            cy = rng.uniform(margin + ay, h - margin - ay)
            # Angular speeds in radians per second: targets cross the frame in a few seconds.
            wx, wy = rng.uniform(0.3, 1.1), rng.uniform(0.3, 1.1)
            px, py = rng.uniform(0, 2 * math.pi), rng.uniform(0, 2 * math.pi)
            paths.append(_Path(cx, cy, ax, ay, wx, wy, px, py))
        return paths

    def positions(self, n: int) -> list[tuple[float, float]]:
        """The targets' centers in frame ``n``."""
        t = n / self.fps
        return [p.at(t) for p in self._paths]

    def truth(self, n: int) -> list[Truth]:
        """The targets' true positions in frame ``n``."""
        pos = self.positions(n)
        r = self.radius
        out = []
        for i, (x, y) in enumerate(pos):
            # A target is scored unless another disc comes within touching distance (plus a
            # margin for morphology merging the two masks).
            clear = all(
                j == i or math.hypot(x - ox, y - oy) > 2 * r + 6 for j, (ox, oy) in enumerate(pos)
            )
            out.append(Truth(i, x, y, r, clear))
        return out

    def frame(self, n: int) -> Image:
        """Renders frame ``n``: background copy, discs (later targets in front), noise."""
        img = self.background.copy()
        for (x, y), color in zip(self.positions(n), self.colors):
            # Fixed-point drawing (shift=4) keeps sub-pixel centers, so the truth is exact.
            center = (int(round(x * 16)), int(round(y * 16)))
            cv2.circle(img, center, self.radius * 16, color, -1, cv2.LINE_8, 4)
        k, h = len(self._noise), self._height
        up, down = self._noise[n % k], self._noise[(n + 1) % k]
        a, b = (n * 37) % 64, (n * 53 + 17) % 64
        cv2.add(img, up[a : a + h], dst=img)
        cv2.subtract(img, down[b : b + h], dst=img)
        return img


def _texture(rng: np.random.Generator, width: int, height: int) -> Image:
    """A low-saturation textured background: smooth grey blotches, tiles and a little color,
    busy enough that change detection and segmentation see real texture."""
    coarse = rng.uniform(60, 190, size=(height // 16 + 1, width // 16 + 1, 3)).astype(np.float32)
    # Pull the channels together so saturation stays low (well below the targets').
    grey = coarse.mean(axis=2, keepdims=True)
    coarse = grey + 0.25 * (coarse - grey)
    smooth = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    fine = rng.normal(0.0, 10.0, size=(height, width, 1)).astype(np.float32)
    img = smooth + fine
    # A floor-tile grid, like the kiosk's surroundings.
    img[::40, :, :] *= 0.7
    img[:, ::40, :] *= 0.7
    return np.asarray(img.clip(0, 255).astype(np.uint8))


class VideoSource:
    """Frames from a video file read with OpenCV, looped when it ends, optionally resized.

    There is no ground truth: :meth:`truth` is empty.
    """

    def __init__(self, path: str, width: int | None = None, height: int | None = None) -> None:
        self._path = path
        self._cap = cv2.VideoCapture(path)
        if not self._cap.isOpened():
            raise OSError(f"cannot open video {path!r}")
        ok, first = self._cap.read()
        if not ok or first is None:
            raise OSError(f"no frames in video {path!r}")
        src_h, src_w = first.shape[:2]
        self._size = (width or src_w, height or src_h)
        self._first: Image | None = self._fit(np.asarray(first, dtype=np.uint8))

    @property
    def width(self) -> int:
        """Frame width in pixels."""
        return self._size[0]

    @property
    def height(self) -> int:
        """Frame height in pixels."""
        return self._size[1]

    @property
    def has_truth(self) -> bool:
        """A video has no ground truth."""
        return False

    def _fit(self, img: Image) -> Image:
        if img.ndim == 2:
            img = np.asarray(cv2.cvtColor(img, cv2.COLOR_GRAY2BGR), dtype=np.uint8)
        if (img.shape[1], img.shape[0]) != self._size:
            img = np.asarray(cv2.resize(img, self._size, interpolation=cv2.INTER_AREA))
        return img

    def frame(self, n: int) -> Image:
        """The next frame of the file (``n`` only names it); rewinds at the end."""
        if self._first is not None:
            first, self._first = self._first, None
            return first
        ok, raw = self._cap.read()
        if not ok or raw is None:
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, raw = self._cap.read()
            if not ok or raw is None:
                raise OSError(f"cannot read video {self._path!r}")
        return self._fit(np.asarray(raw, dtype=np.uint8))

    def truth(self, n: int) -> list[Truth]:
        """Unknown for a video."""
        return []

    def close(self) -> None:
        """Releases the file."""
        self._cap.release()
