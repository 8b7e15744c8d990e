"""``restore``: ``warp`` v2 with every appearance reference restored by a small network.

Level 1 sends each person as a lossy WebP reference (WebP quality 30, at most 96 px high, or
a fraction of the person's size with ``appearance_scale``); ``warp`` v2 only resizes it into
the person's box, so a viewer sees the reference's blur and blocking. Here each reference,
when it arrives, is first enlarged to the person's size in the frame (at most
:data:`RESTORED_MAX_HEIGHT` high, twice the tallest reference), then restored by
:class:`ReferenceRestorer` -- conditioned on the sharpest earlier reference of the same
track that the decoder kept (its *memory*: the largest one received since the last
keyframe, ``None`` for a new person) -- and then drawn as ``warp`` v2 draws it. The network
runs once per reference, not per frame: the compute is people x refreshes. The memory is
bounded by ``memory_mb`` per stream (the memory knob): the tracks heard from least recently
are forgotten first, and 0 keeps nothing.

The network (:class:`ReferenceRestorer`): the enlarged reference and the memory resized to
it (6 channels, -1..1) -> a 3x3 convolution to ``width`` channels, one stride-2 stage of
``blocks`` residual blocks at twice the width, a transposed convolution back and one more
block; the output is a residual added to the enlarged reference. Trained by
``semcodec-bench train-restorer`` (L1 plus ST-LPIPS against the original crop) on pairs
made from the training ranges' ground-truth tracks: the reference as level 1 codes it at
a fraction of its full size (the default ``ref_restorer_v2``: 1, 0.5, 0.25 or 0.125, so
thumbnails too; the first ``ref_restorer``: 1, 0.5 or 0.35), an earlier full reference of
the same person (dropped one time in four), the original crop.

With ``redraw`` (:class:`PeopleRedrawer`, issue 54), each drawn frame is then passed once
more: every decoded person's window (the box grown :data:`WINDOW_GROW`x about its centre) is
resampled to :data:`REDRAW_CANVAS`, redrawn by a network of the restorer's architecture
trained on windows cut from level-1 streams as this decoder draws them (``semcodec-bench
train-redraw``), and the redrawing's change resampled back and added, feathered at the
window's edges. It runs every frame, per person: the compute is people x frames.

Everything is a fixed function of the decoded scaffolds (CPU float32 on one torch thread,
:func:`~codec.reconstruct.weights.inference`), so two runs give the same frames.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from semcodec.codec.core.packages import file_sha256
from semcodec.codec.core.types import DecodedFrame
from semcodec.codec.reconstruct import (
    UnknownReconstructorError,
    register_reconstructor,
)
from semcodec.codec.reconstruct.warp import SMOOTH_S, WarpReconstructor
from semcodec.codec.reconstruct.weights import (
    conv_flops,
    inference,
    load_weights,
    save_weights,
    shipped_or_file,
)
from semcodec.codec.scaffold.appearance import MAX_REF_HEIGHT, ref_region

#: Largest difference (0..255 levels) of a reference restored on a GPU from the CPU's: float32
#: convolutions summed in another order differ in the last bits, and a pixel at a rounding
#: boundary moves by one level.
GPU_TOLERANCE = 1
#: Tallest restored reference (pixels): twice the tallest reference sent.
RESTORED_MAX_HEIGHT = 2 * MAX_REF_HEIGHT


class _Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(channels, channels, 3, padding=1)
        self.b = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.b(F.relu(self.a(x)))


class ReferenceRestorer(nn.Module):
    """``(enlarged reference, memory) -> restored reference``, each ``(N, 3, H, W)`` float32
    in -1..1, ``H`` and ``W`` even.

    Args:
        width: channels at full resolution (twice that at half resolution).
        blocks: residual blocks at half resolution.
    """

    def __init__(self, width: int = 32, blocks: int = 4) -> None:
        super().__init__()
        self.width, self.blocks = int(width), int(blocks)
        self.head = nn.Conv2d(6, width, 3, padding=1)
        self.down = nn.Conv2d(width, width * 2, 3, stride=2, padding=1)
        self.mid = nn.Sequential(*[_Block(width * 2) for _ in range(blocks)])
        self.up = nn.ConvTranspose2d(width * 2, width, 4, stride=2, padding=1)
        self.fuse = nn.Sequential(_Block(width), nn.Conv2d(width, 3, 3, padding=1))

    def forward(self, reference: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.head(torch.cat([reference, memory], 1)))
        m = self.mid(F.relu(self.down(h)))
        return reference + self.fuse(h + self.up(m))


#: The memory's default budget, MB per stream: a 96x192 reference is 55 kB, so about 290
#: people's.
DEFAULT_MEMORY_MB = 16.0


def save_restorer(model: ReferenceRestorer, path: Path, metadata: dict) -> Path:
    """Writes ``model``'s float32 weights, shape and ``metadata`` to ``path`` atomically."""
    return save_weights(model, {"width": model.width, "blocks": model.blocks}, path, metadata)


def load_restorer(path: str | Path) -> ReferenceRestorer:
    """The restorer saved at ``path`` by :func:`save_restorer`, in eval mode.

    Raises:
        UnknownReconstructorError: a file that is not such a restorer.
    """
    return load_weights(path, lambda c: ReferenceRestorer(int(c["width"]), int(c["blocks"])),
                        "restorer")  # fmt: skip


#: The shipped restorers, by registry name: the default first (width 32, trained on
#: references from full size down to thumbnails), then the first restorer (width 32, full
#: to 0.35 size) and its width-8 sibling with 1/15 of the FLOPs (the compute knob; model card).
SHIPPED_RESTORERS = ("ref_restorer_v2", "ref_restorer", "ref_restorer_w8")


def restorer_weights(weights: str | Path | None = None) -> Path:
    """The file of ``weights``: a restorer file, the name of a shipped restorer
    (:data:`SHIPPED_RESTORERS`, resolved and its sha256 verified), or None for the default.

    Raises:
        UnknownReconstructorError: neither a file nor a shipped restorer's name.
    """
    from semcodec.codec.core.models import resolve_model

    if weights is None or str(weights) in SHIPPED_RESTORERS:
        return resolve_model(SHIPPED_RESTORERS[0] if weights is None else str(weights))
    if not Path(weights).is_file():
        raise UnknownReconstructorError(
            f"cannot load restorer weights {weights}: no such file, and not a shipped "
            f"restorer ({', '.join(SHIPPED_RESTORERS)})")
    return Path(weights)


def flops_per_pixel(model: ReferenceRestorer) -> int:
    """FLOPs of ``model`` per output pixel, counted once on a 96x48 input
    (:func:`~codec.reconstruct.weights.conv_flops`): every layer is a convolution whose
    output has a fixed ratio of the input's pixels (even sides), so one count gives every
    size exactly."""
    x = torch.zeros(1, 3, 96, 48)
    return conv_flops(model, x, x) // (96 * 48)


def restored_size(box: np.ndarray) -> tuple[int, int]:
    """``(width, height)`` a reference of a person in ``box`` is restored to: the box's own
    size, at most :data:`RESTORED_MAX_HEIGHT` high (a reference is at most
    :data:`~codec.scaffold.appearance.MAX_REF_HEIGHT`: large people are enlarged by the
    network, not by ``warp``'s resize)."""
    region = ref_region(box)
    width, height = float(region[2] - region[0]), float(region[3] - region[1])
    scale = min(1.0, RESTORED_MAX_HEIGHT / max(height, 1.0))
    return max(2, round(width * scale)), max(2, round(height * scale))


#: ``(width, height)`` of the canvas a person's window is redrawn on (the benchmark's person
#: crop, :mod:`evaluation.metrics.person_region`).
REDRAW_CANVAS = (64, 128)
#: A person's window is their decoded box grown by this factor about its centre (the
#: benchmark's margin), clipped to the frame.
WINDOW_GROW = 1.2
#: Narrowest or shortest window redrawn (pixels): under it a person is left as drawn.
MIN_WINDOW_PX = 8
#: The redrawing's change fades in over this fraction of the window's height from each edge
#: (at least 2 px), so that no seam shows where windows end or overlap.
FEATHER = 0.08
#: The shipped redrawers by short name (``redraw=w8``) -> registry name.
SHIPPED_REDRAWERS = {"w8": "people_redrawer_w8"}


def person_window(box: np.ndarray, width: int, height: int) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` integer pixels of the window of a person in ``box`` (``x1, y1,
    x2, y2`` pixels, float) in a ``width`` x ``height`` frame: the box grown
    :data:`WINDOW_GROW`x about its centre, clipped; None when under :data:`MIN_WINDOW_PX`."""
    x1, y1, x2, y2 = (float(v) for v in box)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    half_w, half_h = (x2 - x1) * WINDOW_GROW / 2, (y2 - y1) * WINDOW_GROW / 2
    left, top = max(0, round(cx - half_w)), max(0, round(cy - half_h))
    right, bottom = min(width, round(cx + half_w)), min(height, round(cy + half_h))
    if right - left < MIN_WINDOW_PX or bottom - top < MIN_WINDOW_PX:
        return None
    return int(left), int(top), int(right), int(bottom)


def on_canvas(picture: np.ndarray, window: tuple[int, int, int, int]) -> np.ndarray:
    """The ``window`` of ``picture`` ``(H, W, 3)`` uint8 resampled to :data:`REDRAW_CANVAS`:
    ``(128, 64, 3)`` uint8 (area when it shrinks, bilinear when it grows)."""
    left, top, right, bottom = window
    shrink = (right - left) > REDRAW_CANVAS[0] or (bottom - top) > REDRAW_CANVAS[1]
    return cv2.resize(picture[top:bottom, left:right], REDRAW_CANVAS,
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)  # fmt: skip


def _feather(width: int, height: int) -> np.ndarray:
    """``(height, width, 1)`` float32 weights: 1 inside, ramping to 0 over :data:`FEATHER`
    of ``height`` (at least 2 px) towards every edge."""
    ramp = max(2.0, FEATHER * height)
    ys, xs = np.arange(height) + 0.5, np.arange(width) + 0.5
    fy = np.clip(np.minimum(ys, height - ys) / ramp, 0, 1)
    fx = np.clip(np.minimum(xs, width - xs) / ramp, 0, 1)
    return (fy[:, None] * fx[None, :])[..., None].astype(np.float32)


class PeopleRedrawer:
    """Redraws every person of a drawn frame with ``model`` (a :class:`ReferenceRestorer`
    trained as ``drawn window -> original window`` on :data:`REDRAW_CANVAS` canvases, its
    memory input zero).

    Attributes:
        flops_per_window: FLOPs of the network on one window.
        windows: windows redrawn so far.
    """

    def __init__(self, model: ReferenceRestorer) -> None:
        self.model = model
        self.flops_per_window = flops_per_pixel(model) * REDRAW_CANVAS[0] * REDRAW_CANVAS[1]
        self.windows = 0

    def __call__(self, picture: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """``picture`` ``(H, W, 3)`` uint8 with the people in ``boxes`` ``(N, 4)`` (``x1, y1,
        x2, y2`` pixels) redrawn: a new ``(H, W, 3)`` uint8 array (``picture`` itself when no
        window is large enough). Where windows overlap, their changes are averaged by
        weight."""
        height, width = picture.shape[:2]
        windows = [w for w in (person_window(b, width, height) for b in boxes) if w is not None]
        if not windows:
            return picture
        drawn = _to_tensor_batch(np.stack([on_canvas(picture, w) for w in windows]))
        device = next(self.model.parameters()).device
        with inference():
            redrawn = self.model(drawn.to(device), torch.zeros_like(drawn, device=device))
            change = (redrawn.clamp(-1, 1).cpu() - drawn).mul(127.5)
        change = change.permute(0, 2, 3, 1).numpy()
        # the sums are kept over the windows' bounding box only (not the whole frame)
        x0, y0 = min(w[0] for w in windows), min(w[1] for w in windows)
        x1, y1 = max(w[2] for w in windows), max(w[3] for w in windows)
        total = np.zeros((y1 - y0, x1 - x0, 3), np.float32)
        weight = np.zeros((y1 - y0, x1 - x0, 1), np.float32)
        for (left, top, right, bottom), delta in zip(windows, change, strict=True):
            size = (right - left, bottom - top)
            feather = _feather(*size)
            rows, cols = slice(top - y0, bottom - y0), slice(left - x0, right - x0)
            total[rows, cols] += feather * cv2.resize(delta, size, interpolation=cv2.INTER_LINEAR)
            weight[rows, cols] += feather
        self.windows += len(windows)
        out = picture.copy()
        region = picture[y0:y1, x0:x1].astype(np.float32) + total / np.maximum(weight, 1.0)
        out[y0:y1, x0:x1] = np.clip(region + 0.5, 0, 255).astype(np.uint8)
        return out


def redrawer_weights(name: str) -> Path:
    """The file of redrawer ``name``: a shipped redrawer's short name (``w8``) or registry
    name (``people_redrawer_w8``; its sha256 verified), or a redrawer file.

    Raises:
        UnknownReconstructorError: none of those.
    """
    return shipped_or_file(name, SHIPPED_REDRAWERS, "redrawer")


def _to_tensor_batch(pictures: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` uint8 -> ``(N, 3, H, W)`` float32 in -1..1."""
    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def _to_tensor(picture: np.ndarray) -> torch.Tensor:
    """``(H, W, 3)`` uint8 -> ``(1, 3, H, W)`` float32 in -1..1."""
    return _to_tensor_batch(picture[None])


def _resized(picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``picture`` resampled to ``size`` ``(width, height)``: bicubic up, area down."""
    if (picture.shape[1], picture.shape[0]) == size:
        return picture
    shrink = size[1] < picture.shape[0]
    return cv2.resize(picture, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)


def restore_reference(model: ReferenceRestorer, reference: np.ndarray,
                      memory: np.ndarray | None, size: tuple[int, int]) -> np.ndarray:  # fmt: skip
    """``reference`` ``(h, w, 3)`` uint8 enlarged to ``size`` ``(width, height)`` and restored
    with ``memory`` (an earlier reference of the person, any size; ``None``: none):
    ``(height, width, 3)`` uint8."""
    width, height = size
    even = (width + width % 2, height + height % 2)
    device = next(model.parameters()).device
    base = _to_tensor(_resized(reference, even)).to(device)
    remembered = torch.zeros_like(base) if memory is None else \
        _to_tensor(_resized(memory, even)).to(device)  # fmt: skip
    with inference():
        out = model(base, remembered)
    out = out[0, :, :height, :width].clamp(-1, 1).add(1).mul(127.5).round()
    return out.permute(1, 2, 0).to(torch.uint8).cpu().numpy()


@register_reconstructor("restore")
class RestoreReconstructor(WarpReconstructor):
    """``warp`` v2 drawing references restored by :class:`ReferenceRestorer`.

    Args:
        weights: a restorer file (``semcodec-bench train-restorer``) or a shipped restorer's
            name (:data:`SHIPPED_RESTORERS`); default: the first of them (`ref_restorer_v2`).
        memory_mb: the memory's budget, MB (10**6 bytes of uint8 pixels) per stream; each
            track's sharpest earlier reference is kept while the budget allows (0: none).
        matte, fade, smooth_s, person_matte, near_floor: as for ``warp``.
        redraw: redraw every person of every frame with a :class:`PeopleRedrawer`: a shipped
            redrawer's short or registry name (:data:`SHIPPED_REDRAWERS`) or a file of
            ``semcodec-bench train-redraw``; "": no redrawing.
        device: where the restorer runs (``cpu``; ``cuda``: a GPU, its outputs within
            :data:`GPU_TOLERANCE` of the CPU's; the person matte stays on the CPU).

    Raises:
        ValueError: a negative or non-finite ``memory_mb``.
    """

    def __init__(self, weights: str | Path | None = None,
                 memory_mb: float = DEFAULT_MEMORY_MB, matte: bool = False,
                 fade: int = 0, smooth_s: float = SMOOTH_S,
                 person_matte: str = "", near_floor: float = 0.0, near_gap: float = 0.0,
                 redraw: str = "", device: str = "cpu") -> None:  # fmt: skip
        if not 0 <= float(memory_mb) < float("inf"):
            raise ValueError(f"memory_mb must be a finite number >= 0, got {memory_mb}")
        self.weights = restorer_weights(weights)
        self.device = str(device)
        self.model = load_restorer(self.weights).to(self.device)
        self.weights_sha256 = file_sha256(self.weights)
        self.memory_bytes = int(float(memory_mb) * 1e6)
        self._flops_per_pixel = flops_per_pixel(self.model)
        self.redraw = str(redraw)
        self.redrawer = None
        if self.redraw:
            redraw_file = redrawer_weights(self.redraw)
            self.redraw_sha256 = file_sha256(redraw_file)
            self.redrawer = PeopleRedrawer(load_restorer(redraw_file).to(self.device))
        super().__init__(matte=matte, fade=fade, smooth_s=smooth_s, person_matte=person_matte,
                         near_floor=near_floor, near_gap=near_gap)  # fmt: skip

    def reset(self) -> None:
        super().reset()
        #: track id -> the largest reference received since the last keyframe, least
        #: recently heard-from first
        self._memory: OrderedDict[int, np.ndarray] = OrderedDict()
        self.restored = 0

    def reconstruct(self, frame: DecodedFrame) -> np.ndarray:
        if frame.keyframe_image is not None and not frame.plate_refresh:
            self._memory = OrderedDict()
        if frame.appearances:
            frame = dataclasses.replace(frame, appearances=self._restored(frame))
        picture = super().reconstruct(frame)
        boxes = frame.scaffold.tracks.boxes
        if self.redrawer is None or "redraw" in self.skipped or not len(boxes):
            return picture
        before = self.redrawer.windows
        picture = self._previous = self.redrawer(picture, boxes)
        self.flops += (self.redrawer.windows - before) * self.redrawer.flops_per_window
        return picture

    def _restored(self, frame: DecodedFrame) -> dict[int, np.ndarray]:
        tracks = frame.scaffold.tracks
        boxes = {int(t): b for t, b in zip(tracks.ids.tolist(), tracks.boxes, strict=True)}
        out = {}
        for track_id, ref in frame.appearances.items():
            if "restorer" in self.skipped:  # stepped down: the reference as it came
                out[track_id] = ref
                continue
            box = boxes.get(int(track_id))
            size = restored_size(box) if box is not None else (ref.shape[1], ref.shape[0])
            memory = self._memory.get(track_id)
            out[track_id] = restore_reference(self.model, ref, memory, size)
            self.restored += 1
            self.flops += self._count(size)
            self._remember(track_id, ref if memory is None or ref.size >= memory.size else memory)
        return out

    def _remember(self, track_id: int, ref: np.ndarray) -> None:
        """Keeps ``ref`` as the track's memory, most recent, within the budget."""
        self._memory.pop(track_id, None)
        self._memory[track_id] = ref
        total = sum(r.nbytes for r in self._memory.values())
        while self._memory and total > self.memory_bytes:
            total -= self._memory.popitem(last=False)[1].nbytes

    def _count(self, size: tuple[int, int]) -> int:
        """FLOPs of one restoration at ``size`` (padded to even sides)."""
        return self._flops_per_pixel * (size[0] + size[0] % 2) * (size[1] + size[1] % 2)

    def _runs_network(self) -> bool:
        return True  # the restorer: ``flops`` counts its restorations

    def steps_down(self) -> tuple[str, ...]:
        """The redrawing first (where on), then the person matte, then the restorer
        (references drawn as they came)."""
        first = ("redraw",) if self.redrawer is not None else ()
        return (*first, *super().steps_down(), "restorer")

    def describe(self) -> dict:
        return {**super().describe(), "name": "restore", "weights": self.weights.name,
                "weights_sha256": self.weights_sha256,
                "memory_mb": self.memory_bytes / 1e6,
                **({"redraw": self.redraw, "redraw_sha256": self.redraw_sha256}
                   if self.redrawer is not None else {})}  # fmt: skip
