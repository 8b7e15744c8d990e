"""``semcodec-bench train-sr``: fine-tunes a super-resolution network of the cloud's plate to
the plates level 1 sends (issue 38).

Examples are frames of the training ranges only (PETS09-S2L1-full 1-450 and TUD-Stadtmitte
1-80; never the measured 501-795 / 91-179), coded as level 1 codes a plate sent at half
size: HEVC intra at a quality drawn from :data:`QUALITIES` (the range the plate's rate fit
lands in) or WebP, decoded at the coded size; the target is the frame. A batch is random
:data:`PATCH`-pixel crops (mirrored at random). The loss is L1 plus ST-LPIPS (the
benchmark's perceptual metric). Validation: PETS 451-500 and TUD 81-90 (still training
ranges), upscaled whole by bicubic, the network it started from and the tuned one: the
tuned network is kept only where it measures better than bicubic, and the scores say so.

The examples can be written once to a file (:func:`save_pairs`, ``train-sr --write-pairs``)
and trained from elsewhere (``--pairs FILE --device cuda``): a GPU machine needs neither the
sequences nor the intra coders, only PyTorch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Intra qualities of the training plates (HEVC; level 1's fitted plates land in 15..50).
QUALITIES = (15, 25, 35, 50)
#: Side of a low-resolution training crop, pixels.
PATCH = 48


@dataclass(frozen=True)
class Range:
    """Every ``every``-th frame of ``start .. start+frames-1`` of ``data``."""

    data: str
    start: int
    frames: int
    every: int = 10


TRAIN = (Range("PETS09-S2L1-full", 1, 450), Range("TUD-Stadtmitte", 1, 80, every=4))
VALIDATE = (Range("PETS09-S2L1-full", 451, 50, every=25), Range("TUD-Stadtmitte", 81, 10,
                                                                 every=5))  # fmt: skip


def plate_pairs(part: Range, rng: np.random.Generator, data_dir=None,
                qualities: tuple[int, ...] = QUALITIES) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(sent, frame)]``: each frame of ``part`` and its plate as sent at half size
    (``(h/2, w/2, 3)`` uint8, decoded at that size), HEVC at a quality of ``qualities`` drawn
    at random (one frame in four WebP at the same quality)."""
    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.codec.keyframes import create_intra_coder
    from semcodec.evaluation.data.sequences import load_sequence

    pixels, _, _ = load_sequence(str(resolve_data_path(part.data, data_dir)), part.frames, (),
                                 part.start)  # fmt: skip
    out = []
    for frame in pixels[:: part.every]:
        name = "webp" if rng.random() < 0.25 else "hevc"
        coder = create_intra_coder(name, downscale=0.5)
        quality = int(qualities[int(rng.integers(len(qualities)))])
        data = coder.encode(frame, quality)
        size = (frame.shape[1], frame.shape[0])
        sent = coder.decode(data, size, upscale=lambda picture, _size: picture)
        out.append((sent, frame))
    return out


def save_pairs(path: Path, train_pairs: list, validate_pairs: list) -> Path:
    """Writes training and validation examples (``[(sent, frame)]``, ``(h, w, 3)`` uint8 RGB)
    to one ``.npz`` of lossless WebP pictures (through a temporary name); :func:`load_pairs`
    reads it back exactly."""
    import cv2

    arrays = {}
    for part, pairs in (("train", train_pairs), ("validate", validate_pairs)):
        for i, pair in enumerate(pairs):
            for kind, picture in zip(("sent", "frame"), pair, strict=True):
                ok, data = cv2.imencode(".webp", np.ascontiguousarray(picture[..., ::-1]),
                                        [cv2.IMWRITE_WEBP_QUALITY, 101])  # fmt: skip
                arrays[f"{part}_{i:04d}_{kind}"] = data
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path


def load_pairs(path: Path) -> tuple[list, list]:
    """``(train_pairs, validate_pairs)`` written by :func:`save_pairs`.

    Raises:
        ValueError: a file whose arrays are not such pairs (a sent plate larger than its frame).
    """
    import cv2

    def picture(data: np.ndarray):
        decoded = cv2.imdecode(data, cv2.IMREAD_COLOR)
        return None if decoded is None else np.ascontiguousarray(decoded[..., ::-1])

    with np.load(path) as data:
        names = sorted(k[: -len("_sent")] for k in data.files if k.endswith("_sent"))
        parts: dict[str, list] = {"train": [], "validate": []}
        for name in names:
            sent, frame = picture(data[f"{name}_sent"]), picture(data[f"{name}_frame"])
            if sent is None or frame is None or sent.shape[0] > frame.shape[0]:
                raise ValueError(f"{path}: {name} is not a (sent plate, frame) uint8 pair")
            parts[name.split("_")[0]].append((sent, frame))
    return parts["train"], parts["validate"]


def _batch(pairs, rng: np.random.Generator, batch: int, factor: int):
    import torch

    lows, highs = [], []
    for _ in range(batch):
        low, high = pairs[int(rng.integers(len(pairs)))]
        y = int(rng.integers(0, low.shape[0] - PATCH + 1))
        x = int(rng.integers(0, low.shape[1] - PATCH + 1))
        lo = low[y:y + PATCH, x:x + PATCH]
        hi = high[y * factor:(y + PATCH) * factor, x * factor:(x + PATCH) * factor]
        if rng.random() < 0.5:
            lo, hi = lo[:, ::-1], hi[:, ::-1]
        lows.append(np.ascontiguousarray(lo))
        highs.append(np.ascontiguousarray(hi))

    def tensor(pictures):
        return torch.from_numpy(np.stack(pictures)).permute(0, 3, 1, 2).float()

    return tensor(lows), tensor(highs)


def validate(upscalers: dict, pairs, metric, device: str = "cpu") -> dict[str, dict[str, float]]:
    """Mean PSNR (dB) and ST-LPIPS of each upscaler's whole frames against the originals."""
    import torch

    from semcodec.evaluation.metrics.image import psnr

    scores = {}
    for name, upscale in upscalers.items():
        values, lpips = [], []
        for sent, frame in pairs:
            out = upscale(sent, (frame.shape[1], frame.shape[0]))
            values.append(psnr(frame[None], out[None]))
            a, b = (torch.from_numpy(p).permute(2, 0, 1)[None].float().to(device) / 127.5 - 1
                    for p in (out, frame))  # fmt: skip
            with torch.inference_mode():
                lpips.append(float(metric(a, b).mean()))
        scores[name] = {"psnr": round(float(np.mean(values)), 4),
                        "st_lpips": round(float(np.mean(lpips)), 5)}  # fmt: skip
    return scores


def examples(data_dir=None, seed: int = 0, train_ranges=TRAIN,
             validate_ranges=VALIDATE) -> tuple[list, list]:  # fmt: skip
    """``(train_pairs, validate_pairs)`` of the ranges (:func:`plate_pairs`)."""
    rng = np.random.default_rng(seed)
    pairs = [p for part in train_ranges for p in plate_pairs(part, rng, data_dir)]
    held = [p for part in validate_ranges
            for p in plate_pairs(part, np.random.default_rng(1), data_dir)]  # fmt: skip
    return pairs, held


def train(out: Path, base: str = "esrgan-slim", steps: int = 300, batch: int = 8,
          seed: int = 0, lr: float = 1e-4, data_dir=None, train_ranges=TRAIN,
          validate_ranges=VALIDATE, log=print, device: str = "cpu",
          pairs_file: Path | None = None, models_dir=None) -> Path:  # fmt: skip
    """Fine-tunes ``base`` (a network of :data:`~codec.reconstruct.superres.NETWORKS`) on
    ``device`` with Adam, the rate decayed to a tenth by a cosine over ``steps``; the examples
    come from ``pairs_file`` (:func:`save_pairs`) or are made from the ranges. Writes
    ``out/sr.pt`` (its weights and how they were made) and ``out/scores.json`` (validation:
    bicubic, the base and the tuned network); returns the weights' path."""
    import torch

    from semcodec.codec.reconstruct.superres import (
        NETWORKS,
        NetworkUpscaler,
        Upscaler,
        create_upscaler,
        save_tuned,
    )
    from semcodec.evaluation.metrics.perceptual import load_stlpips

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    if pairs_file is not None:
        pairs, held = load_pairs(pairs_file)
    else:
        pairs, held = examples(data_dir, seed, train_ranges, validate_ranges)
    log(f"{len(pairs)} training plates, {len(held)} validation plates, on {device}")
    metric = load_stlpips(models_dir, device=device).eval()
    start = create_upscaler(base, models_dir, device=device)
    tuned = NetworkUpscaler(f"{base}-tuned", create_upscaler(base, models_dir).graph,
                            NETWORKS[base].factor, device)  # fmt: skip
    params = list(tuned.graph.modules.parameters())
    optimizer = torch.optim.Adam(params, lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps, eta_min=lr / 10)
    started = time.perf_counter()
    tuned.graph.modules.train()
    every = max(1, steps // 20)
    for step in range(steps):
        low, high = (t.to(device) for t in _batch(pairs, rng, batch, NETWORKS[base].factor))
        restored = tuned.graph(low)
        loss = (restored - high).abs().mean() / 255 + metric(
            restored.clamp(0, 255) / 127.5 - 1, high / 127.5 - 1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if (step + 1) % every == 0:
            log(f"step {step + 1}/{steps}: loss {loss.item():.4f} "
                f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    tuned.graph.modules.eval()
    scores = validate({"bicubic": Upscaler(), base: start, "tuned": tuned}, held, metric,
                      device)  # fmt: skip
    log(f"validation: {scores}")
    metadata = {"base": base, "steps": steps, "batch": batch, "seed": seed, "lr": lr,
                "patch": PATCH, "qualities": list(QUALITIES), "device": str(device),
                "examples": str(pairs_file) if pairs_file else "made from the ranges",
                "train": [vars(r) for r in train_ranges],
                "validate": [vars(r) for r in validate_ranges], "scores": scores}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "scores.json").write_text(json.dumps(metadata, indent=1) + "\n")
    tuned.graph.to("cpu")
    return save_tuned(tuned.graph, out / "sr.pt", metadata)
