"""``semcodec-bench train-redraw``: trains the network of ``restore``'s ``redraw`` step.

Unlike the restorer's, its examples are cut from **decoded level-1 streams**: each training
range is coded by level 1 at every target of :data:`TARGETS` and decoded by the default
decoder without redrawing (what the redrawer is given); on every ``every``-th frame, each
person's window (:func:`~codec.reconstruct.restore.person_window`) is taken from the decoded
frame and from the original, both resampled to
:data:`~codec.reconstruct.restore.REDRAW_CANVAS` -- at the ground-truth boxes (the
benchmark's person crops) and at the boxes the stream carries (what the decoder redraws).
The network (a restorer's architecture, memory input zero) starts from a shipped restorer of
its width and learns ``decoded window -> original window``: L1 plus ST-LPIPS plus the person
detector's evidence (:func:`evidence_loss`: the redrawn window should give the benchmark's
detector the original's logits; weight 0.1 made the shipped file), Adam, batch 16, every
second batch mirrored, a fixed seed and step count (600 made the shipped files).
Held-out short clips (never trained on) are scored before and after, on their ground-truth
windows.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from semcodec.evaluation.training.restorer import Range, fit, frozen_stlpips

#: Level-1 targets (BPP) the training streams are coded at.
TARGETS = (0.002, 0.004)
#: The training ranges (PETS 1-300 and TUD 1-90, and PETS 1-300 zoomed 2x: larger people).
DEFAULT_RANGES = (
    Range("PETS09-S2L1-full", 1, 300, every=2),
    Range("TUD-Stadtmitte", 1, 90),
    Range("PETS09-S2L1-full", 1, 300, "zoom=2,x=0.5,y=0.55", every=2),
)
#: Held-out short clips scored after training (the benchmark's short clips).
HELD_OUT = (
    Range("PETS09-S2L1-full", 501, 60, every=4),
    Range("TUD-Stadtmitte", 91, 89, every=4),
    Range("PETS09-S2L1-full", 501, 60, "zoom=2,x=0.5,y=0.55", every=4),
)
#: The shipped restorer each width starts from.
INIT = {8: "ref_restorer_w8", 32: "ref_restorer_v2"}
#: The decoder whose frames are redrawn: the default one, without redrawing.
DRAWN_BY = "redraw=none"
#: Scales at which the detector-evidence term and score look at a window: a window's person
#: is about 107 px tall on the canvas, so 53-107 px, the heights at which the benchmark's
#: tiled detector sees the people of the training and held-out cameras.
DETECTOR_SCALES = (1.0, 0.5)


def window_pairs(part: Range, data_dir=None) -> dict[str, np.ndarray]:
    """The windows of ``part``: ``decoded`` and ``original`` ``(N, 128, 64, 3)`` uint8,
    ``target`` ``(N,)`` float (BPP) and ``ground_truth`` ``(N,)`` bool (a ground-truth
    window, else one at a box the stream carries).

    Raises:
        ValueError: a range without ground truth or without any window.
    """
    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.codec.reconstruct.restore import on_canvas, person_window
    from semcodec.evaluation.codecs.base import Setting
    from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
    from semcodec.evaluation.data.sequences import load_sequence
    from semcodec.evaluation.metrics.person_region import crop_windows

    options = () if part.camera is None else (("camera_transform", part.camera),)
    pixels, info, gt = load_sequence(str(resolve_data_path(part.data, data_dir)), part.frames,
                                     options, part.start)  # fmt: skip
    if gt is None:
        raise ValueError(f"{part.data}: no ground truth to make windows from")
    frames = np.stack(pixels)
    height, width = frames.shape[1:3]
    rows: dict[str, list] = {"decoded": [], "original": [], "target": [], "ground_truth": []}
    for target in TARGETS:
        codec = ScaffoldCodec(decoder=DRAWN_BY)
        encoded = codec.encode(frames, Setting.parse(f"level=1,target_bpp={target}"), info.fps)
        decoded = codec.decode(encoded)
        for t in range(0, len(frames), part.every):
            at_truth = [(w, True) for w in crop_windows(gt, t + 1, width, height)]
            carried = encoded.metadata["person_boxes"][t]
            at_boxes = [(person_window(b, width, height), False) for b in carried]
            for window, truth in at_truth + at_boxes:
                if window is None:
                    continue
                rows["decoded"].append(on_canvas(decoded[t], window))
                rows["original"].append(on_canvas(frames[t], window))
                rows["target"].append(target)
                rows["ground_truth"].append(truth)
    if not rows["target"]:
        raise ValueError(f"{part.data} {part.start}+{part.frames}: no window")
    return {k: np.asarray(v) for k, v in rows.items()}


def _tensor(pictures: np.ndarray):
    import torch

    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def person_evidence(detector, pictures) -> list:
    """The person detector's logit maps (:meth:`~codec.detection.ssdlite.SSDLiteMobileNetV2.
    person_logit_maps`) of ``pictures`` ``(N, 3, 128, 64)`` float32 in -1..1 at each of
    :data:`DETECTOR_SCALES` (four maps), differentiable in ``pictures``."""
    import torch.nn.functional as F

    maps = []
    for scale in DETECTOR_SCALES:
        x = pictures if scale == 1 else F.interpolate(pictures, scale_factor=scale,
                                                      mode="bilinear", antialias=True)  # fmt: skip
        maps += detector.person_logit_maps(x)
    return maps


def evidence_loss(detector, weight: float):
    """``(output, target) -> weight x`` the mean absolute difference of their
    :func:`person_evidence` logits: the redrawn window should give the detector the
    original's evidence of a person (the target's side carries no gradient)."""
    import torch

    def loss(output, target):
        with torch.no_grad():
            wanted = person_evidence(detector, target)
        got = person_evidence(detector, output)
        gaps = [(g - w).abs().mean() for g, w in zip(got, wanted, strict=True)]
        return weight * torch.stack(gaps).mean()

    return loss


def person_confidence(detector, pictures) -> float:
    """Mean over ``pictures`` of the detector's highest person probability anywhere in the
    window (any anchor, map or scale of :func:`person_evidence`)."""
    import torch

    best = torch.stack([m.flatten(1).amax(1) for m in person_evidence(detector, pictures)], 1)
    return float(torch.sigmoid(best.amax(1)).mean())


def score(model, held: dict[str, np.ndarray], metric, detector=None) -> dict[str, float]:
    """Mean ST-LPIPS against the originals of the ground-truth windows as drawn and as
    redrawn, per target (``"0.002 drawn"``, ``"0.002 redrawn"``, ...); with ``detector``,
    also its :func:`person_confidence` in the original, drawn and redrawn windows
    (``"0.002 confidence original"``, ...)."""
    import torch

    scores, device = {}, next(model.parameters()).device
    with torch.inference_mode():
        for target in TARGETS:
            keep = (held["target"] == target) & held["ground_truth"]
            if not keep.any():
                continue
            drawn = _tensor(held["decoded"][keep]).to(device)
            original = _tensor(held["original"][keep]).to(device)
            redrawn = model(drawn, torch.zeros_like(drawn)).clamp(-1, 1)
            scores[f"{target} drawn"] = float(metric(drawn, original).mean())
            scores[f"{target} redrawn"] = float(metric(redrawn, original).mean())
            if detector is not None:
                for name, x in (("original", original), ("drawn", drawn), ("redrawn", redrawn)):
                    scores[f"{target} confidence {name}"] = person_confidence(detector, x)
    return scores


def cached_windows(parts, cache: Path | None, data_dir=None) -> list[dict[str, np.ndarray]]:
    """:func:`window_pairs` of every range of ``parts``, each read from its own file in the
    folder ``cache`` (named by a digest of the range, :data:`TARGETS` and
    :data:`DRAWN_BY`) when there, else made (and written there when a folder is given): a
    range added later makes only its own windows."""
    return [_cached_range(part, cache, data_dir) for part in parts]


def _cached_range(part: Range, cache: Path | None, data_dir=None) -> dict[str, np.ndarray]:
    key = json.dumps({"range": vars(part), "targets": list(TARGETS), "drawn_by": DRAWN_BY})
    if cache is None:
        return window_pairs(part, data_dir)
    path = Path(cache) / f"windows-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
    if path.is_file():
        with np.load(path) as data:
            if str(data["key"]) == key:
                return {k: data[k] for k in data.files if k != "key"}
    made = window_pairs(part, data_dir)
    Path(cache).mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    np.savez_compressed(partial, key=np.asarray(key), **made)
    partial.replace(path)
    return made


def train(out: Path, width: int = 8, steps: int = 600, seed: int = 0, batch: int = 16,
          data_dir=None, ranges=DEFAULT_RANGES, held_out=HELD_OUT, windows: Path | None = None,
          detector_weight: float = 0.1, device: str = "cpu", log=print) -> Path:  # fmt: skip
    """Fine-tunes the shipped restorer of ``width`` (:data:`INIT`) as a redrawer; writes
    ``out/redraw.pt`` and ``out/scores.json`` (held-out scores before and after); returns the
    weights' path. ``windows``: a folder caching the training and held-out windows (made
    when absent; two widths share them). ``detector_weight``: the weight of
    :func:`evidence_loss` in the loss (0: L1 + ST-LPIPS only). ``device``: where the
    networks train and score (the windows stay in host memory; each batch is moved); the
    weights are written from the CPU either way.

    Raises:
        ValueError: a width with no shipped restorer to start from.
    """
    import torch

    from semcodec.codec.reconstruct.restore import load_restorer, restorer_weights, save_restorer
    from semcodec.codec.task.split import load_split_model

    if width not in INIT:
        raise ValueError(f"width {width}: a redrawer starts from a shipped restorer, widths "
                         f"{', '.join(map(str, INIT))}")  # fmt: skip
    torch.manual_seed(seed)
    started = time.perf_counter()
    cache = None if windows is None else Path(windows)
    parts = cached_windows(ranges, cache, data_dir)
    drawn = _tensor(np.concatenate([p["decoded"] for p in parts]))
    original = _tensor(np.concatenate([p["original"] for p in parts]))
    names = [f"{h.data} {h.start}-{h.start + h.frames - 1}" + (f" [{h.camera}]" if h.camera
                                                                 else "") for h in held_out]
    held = dict(zip(names, cached_windows(held_out, cache, data_dir), strict=True))
    log(f"{len(drawn)} training windows from {len(ranges)} ranges "
        f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    metric = frozen_stlpips().to(device)
    detector = load_split_model().to(device)
    model = load_restorer(restorer_weights(INIT[width])).to(device)
    before = {name: score(model, h, metric, detector) for name, h in held.items()}
    generator = torch.Generator().manual_seed(seed)

    def batch_at(step: int):
        pick = torch.randint(0, len(drawn), (batch,), generator=generator)
        x, y = drawn[pick], original[pick]
        if step % 2:
            x, y = x.flip(3), y.flip(3)
        x, y = x.to(device), y.to(device)
        return x, torch.zeros_like(x), y

    extra = evidence_loss(detector, detector_weight) if detector_weight else None
    fit(model, batch_at, steps, 5e-4, metric, log, extra)
    scores = {name: {"windows": int(h["ground_truth"].sum()), "before": before[name],
                     "after": score(model, h, metric, detector)}
              for name, h in held.items()}  # fmt: skip
    metadata = {"steps": steps, "seed": seed, "batch": batch, "init": INIT[width],
                "detector_weight": detector_weight, "device": str(device),
                "targets": list(TARGETS), "drawn_by": DRAWN_BY,
                "ranges": [vars(r) for r in ranges], "held_out": scores}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "scores.json").write_text(json.dumps(scores, indent=1) + "\n")
    return save_restorer(model.cpu(), out / "redraw.pt", metadata)
