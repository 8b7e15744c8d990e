"""``semcodec-bench train-restorer``: trains the ``restore`` reconstructor's network.

Examples are made from ground-truth tracks of the training ranges (never the held-out
501-795 / 91-179): for a person in frame ``t`` (box at least :data:`MIN_HEIGHT` px high),
the reference level 1 would send there (the box region at scale 1, 0.5 or 0.35 of the
person's full reference size, WebP quality :data:`QUALITIES`, decoded), an earlier full
reference of the same person (0.5 to 8 s before, full size, coded at the first quality) and
the original crop
at the full reference size; all three resampled to a :data:`CANVAS` canvas. The loss is
L1 plus ST-LPIPS (the benchmark's perceptual metric) between the restored and original
crops; the memory is blanked for one example in four (a new person has none) and every
second batch is mirrored. Adam, fixed seed and step count (800 made the shipped file).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

#: ``(height, width)`` of a training example.
CANVAS = (96, 48)
#: Smallest ground-truth box height (pixels) an example is made from.
MIN_HEIGHT = 24
#: WebP qualities of the references (level 1's ``appearance_quality``): each example's is
#: drawn from them; the memory's is the first.
QUALITIES = (30,)
#: Scales of the reference against its full size (level 1's ``appearance_scale``).
SCALES = (1.0, 0.5, 0.35)


@dataclass(frozen=True)
class Range:
    """Frames ``start .. start+frames-1`` of ``data``, through ``camera`` (a transform)."""

    data: str
    start: int
    frames: int
    camera: str | None = None
    every: int = 1  # an example from every n-th row of a track


#: The training ranges: PETS 1-500, TUD 1-90 and PETS 1-500 zoomed 2x (larger people).
DEFAULT_RANGES = (
    Range("PETS09-S2L1-full", 1, 500),
    Range("TUD-Stadtmitte", 1, 90),
    Range("PETS09-S2L1-full", 1, 500, "zoom=2,x=0.5,y=0.55", every=2),
)
#: Held-out ranges scored after training (not trained on).
HELD_OUT = (Range("PETS09-S2L1-full", 501, 295, every=6), Range("TUD-Stadtmitte", 91, 89, every=4))


def _canvas(picture: np.ndarray) -> np.ndarray:
    height, width = CANVAS
    shrink = picture.shape[0] > height
    return cv2.resize(picture, (width, height),
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)  # fmt: skip


def load_tracks(part: Range, data_dir=None):
    """``(frames (T, H, W, 3) uint8, SourceInfo, tracks)`` of ``part``: ``tracks`` maps each
    ground-truth track id to its counted rows at least :data:`MIN_HEIGHT` px high, as
    ``(frame number from 1, box x1, y1, x2, y2)``.

    Raises:
        ValueError: the sequence has no ground truth.
    """
    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.evaluation.data.sequences import load_sequence

    options = () if part.camera is None else (("camera_transform", part.camera),)
    pixels, info, gt = load_sequence(str(resolve_data_path(part.data, data_dir)), part.frames,
                                     options, part.start)  # fmt: skip
    if gt is None:
        raise ValueError(f"{part.data}: no ground truth to make examples from")
    tracks: dict[int, list[tuple[int, np.ndarray]]] = {}
    for row in range(len(gt)):
        x, y, w, h = gt.boxes[row]
        frame = int(gt.frame_numbers[row])
        if gt.counted[row] and h >= MIN_HEIGHT and 1 <= frame <= len(pixels):
            tracks.setdefault(int(gt.ids[row]), []).append((frame, np.array([x, y, x + w, y + h])))
    return pixels, info, tracks


def examples(part: Range, rng: np.random.Generator, data_dir=None,
             scale: float | None = None, scales: tuple[float, ...] = SCALES,
             qualities: tuple[int, ...] = QUALITIES) -> tuple[np.ndarray, ...]:  # fmt: skip
    """``(reference, memory, original)``, each ``(N, H, W, 3)`` uint8 on :data:`CANVAS`;
    each reference at ``scale`` of its full size, or at one of ``scales`` drawn at random,
    coded at one of ``qualities`` drawn at random (the memory at ``qualities[0]``)."""
    from semcodec.codec.scaffold.appearance import (
        crop_box,
        decode_ref,
        encode_ref,
        ref_region,
        ref_size,
    )

    pixels, info, tracks = load_tracks(part, data_dir)

    def coded(frame: int, box: np.ndarray, at: float, quality: int) -> np.ndarray:
        region = ref_region(box)
        return decode_ref(encode_ref(crop_box(pixels[frame - 1], region, ref_size(region, at)),
                                     quality))  # fmt: skip

    out: tuple[list, list, list] = ([], [], [])
    for track_id in sorted(tracks):
        rows = sorted(tracks[track_id], key=lambda r: r[0])
        for i in range(0, len(rows), part.every):
            frame, box = rows[i]
            earlier = [r for r in rows[:i] if 0.5 * info.fps <= frame - r[0] <= 8 * info.fps]
            if not earlier:
                continue
            then, then_box = earlier[int(rng.integers(len(earlier)))]
            at = scale if scale is not None else scales[int(rng.integers(len(scales)))]
            quality = qualities[int(rng.integers(len(qualities)))]
            region = ref_region(box)
            original = crop_box(pixels[frame - 1], region, ref_size(region))
            pictures = (coded(frame, box, at, quality), coded(then, then_box, 1.0, qualities[0]),
                        original)  # fmt: skip
            for bucket, picture in zip(out, pictures, strict=True):
                bucket.append(_canvas(picture))
    if not out[0]:
        raise ValueError(f"{part.data} {part.start}+{part.frames}: no example")
    return tuple(np.stack(bucket) for bucket in out)


def _tensor(pictures: np.ndarray):
    import torch

    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def score(model, held: tuple[np.ndarray, ...], metric) -> dict[str, float]:
    """Mean ST-LPIPS against the originals of the references enlarged (``warp``), restored
    without and with memory."""
    import torch

    reference, memory, original = (_tensor(a) for a in held)
    with torch.inference_mode():
        restored = model(reference, memory).clamp(-1, 1)
        alone = model(reference, torch.zeros_like(memory)).clamp(-1, 1)
        return {name: float(metric(x, original).mean())
                for name, x in (("enlarged", reference), ("restored_without_memory", alone),
                                ("restored", restored))}  # fmt: skip


def frozen_stlpips():
    """The benchmark's ST-LPIPS as a loss: eval mode, its own weights frozen."""
    from semcodec.evaluation.metrics.perceptual import load_stlpips

    metric = load_stlpips().eval()
    for p in metric.parameters():
        p.requires_grad_(False)
    return metric


def fit(model, batch_at, steps: int, lr: float, metric, log=print, extra=None) -> None:
    """Trains ``model`` (a :class:`~codec.reconstruct.restore.ReferenceRestorer`) in place
    with Adam at ``lr`` for ``steps`` steps on ``batch_at(step) -> (input, memory,
    target)`` (each ``(N, 3, H, W)`` float32 in -1..1): loss L1 plus ``metric`` (ST-LPIPS)
    of the output against the target, plus ``extra(output, target)`` (a scalar tensor) when
    given; logs every 100 steps; leaves it in eval mode."""
    import torch

    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr)
    started = time.perf_counter()
    for step in range(steps):
        x, memory, y = batch_at(step)
        out = model(x, memory)
        loss = (out - y).abs().mean() + metric(out.clamp(-1, 1), y).mean()
        if extra is not None:
            loss = loss + extra(out.clamp(-1, 1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % 100 == 0:
            log(f"step {step + 1}/{steps}: loss {loss.item():.4f} "
                f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    model.eval()


def train(out: Path, steps: int = 800, seed: int = 0, batch: int = 32, width: int = 32,
          blocks: int = 4, scales: tuple[float, ...] = SCALES,
          qualities: tuple[int, ...] = QUALITIES, data_dir=None, ranges=DEFAULT_RANGES,
          held_out=HELD_OUT, log=print) -> Path:  # fmt: skip
    """Trains a :class:`~codec.reconstruct.restore.ReferenceRestorer`; writes
    ``out/restorer.pt`` and ``out/scores.json`` (held-out scores, on examples made with the
    default :data:`SCALES` and :data:`QUALITIES` whatever ``scales`` and ``qualities`` the
    training used); returns the weights' path."""
    import torch

    from semcodec.codec.reconstruct.restore import ReferenceRestorer, save_restorer

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    if not qualities or not all(1 <= q <= 100 for q in qualities):
        raise ValueError(f"qualities must be WebP qualities 1..100, got {qualities}")
    parts = [examples(part, rng, data_dir, scales=scales, qualities=qualities) for part in ranges]
    reference, memory, original = (_tensor(np.concatenate(a)) for a in zip(*parts, strict=True))
    log(f"{len(reference)} training examples from {len(ranges)} ranges")
    metric = frozen_stlpips()
    model = ReferenceRestorer(width, blocks)
    generator = torch.Generator().manual_seed(seed)

    def batch_at(step: int):
        pick = torch.randint(0, len(reference), (batch,), generator=generator)
        x, m, y = reference[pick], memory[pick], original[pick]
        if step % 2:
            x, m, y = x.flip(3), m.flip(3), y.flip(3)
        return x, m * (torch.rand(batch, 1, 1, 1, generator=generator) > 0.25), y

    fit(model, batch_at, steps, 2e-3, metric, log)
    scores = {}
    for part in held_out:
        # the same held-out examples for every restorer (default scales and quality), so
        # that the scores of restorers trained with other --scales/--qualities compare
        held = examples(part, np.random.default_rng(1), data_dir)
        scores[f"{part.data} {part.start}-{part.start + part.frames - 1}"] = {
            "examples": len(held[0]), **score(model, held, metric)}  # fmt: skip
    metadata = {"steps": steps, "seed": seed, "batch": batch, "scales": list(scales),
                "qualities": list(qualities),
                "ranges": [vars(r) for r in ranges], "held_out": scores}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "scores.json").write_text(json.dumps(scores, indent=1) + "\n")
    return save_restorer(model, out / "restorer.pt", metadata)
