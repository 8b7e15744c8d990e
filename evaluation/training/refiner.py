"""``semcodec-bench train-refiner``: trains the learned refiner of ``decoder=animate``
(:mod:`codec.reconstruct.refiner`).

Examples are made from the ground-truth tracks of the training ranges only (PETS09-S2L1-full
1-500, TUD-Stadtmitte 1-90, PETS 1-500 zoomed 2x; never the measured 501-795 / 91-179), the
way the decoder meets a person: for a person in frame ``t`` (box at least
:data:`~evaluation.training.restorer.MIN_HEIGHT` px high,
:func:`~evaluation.training.restorer.load_tracks`) and an earlier frame ``t'`` of the
same track (:data:`LAGS_S` seconds before),

* the reference level 1 would have sent at ``t'`` (the box region at one of :data:`SCALES`
  of its full size, WebP quality 30, decoded), with the cloud's matte of it
  (:class:`~codec.reconstruct.matte.PersonMatte`, ``selfie_segmentation``, over the range's
  plate: the per-pixel median of its frames);
* the edge's sparse pose at ``t'`` and at ``t`` (``pose_landmark_lite`` on the ground-truth
  box, quantized by the stream's :class:`~codec.entropy.sparse_pose.SparsePoseCoder`);
* the reference animated from the pose at ``t'`` to the pose at ``t``
  (:func:`~codec.reconstruct.animate.animate_ref`, the legs, as ``animate`` draws it), its
  alpha, the limb maps of the pose at ``t``;
* the original crop at ``t`` and the plate under it (the target, and what the refined person
  is composited over);

all on a :data:`~evaluation.training.restorer.CANVAS` canvas. The loss is L1 plus ST-LPIPS
(the benchmark's perceptual metric) of the refined person composited over the plate through
its refined alpha, against the original crop. Adam with cosine decay, fixed seed and step
count, every second batch mirrored (the limb maps hold left and right in one channel, so a
mirror is a mirror of every input). The refiner starts from the shipped reference restorer
of its width (``init``; :func:`~codec.reconstruct.refiner.from_restorer`) or from scratch.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import cv2
import numpy as np

from semcodec.evaluation.training.restorer import CANVAS, Range, _canvas, load_tracks

#: The training ranges (the restorer's): PETS 1-500, TUD 1-90, PETS 1-500 zoomed 2x.
DEFAULT_RANGES = (
    Range("PETS09-S2L1-full", 1, 500, every=3),
    Range("TUD-Stadtmitte", 1, 90, every=1),
    Range("PETS09-S2L1-full", 1, 500, "zoom=2,x=0.5,y=0.55", every=4),
)
#: Held-out ranges scored after training (never trained on).
HELD_OUT = (Range("PETS09-S2L1-full", 501, 120, every=6), Range("TUD-Stadtmitte", 91, 89, every=3))
#: Sizes of the reference against its full size (level 1's refreshes and thumbnails).
SCALES = (1.0, 0.5, 0.25)
#: How long before ``t`` the reference was taken, seconds (low, high).
LAGS_S = (0.2, 3.0)
#: The arrays of an example set, in order.
FIELDS = ("animated", "alpha", "reference", "maps", "target", "plate")


def _plate(pixels: np.ndarray) -> np.ndarray:
    """The per-pixel median of up to 31 frames spread over ``pixels``: a person-free plate
    of a fixed camera."""
    step = max(1, len(pixels) // 31)
    return np.median(pixels[::step], axis=0).astype(np.uint8)


def examples(part: Range, rng: np.random.Generator, data_dir=None,
             scales: tuple[float, ...] = SCALES, log=None) -> dict[str, np.ndarray]:  # fmt: skip
    """The examples of ``part`` (module text) as arrays named :data:`FIELDS` on the canvas:
    ``animated``, ``reference``, ``target``, ``plate`` ``(N, H, W, 3)`` uint8, ``alpha``
    ``(N, H, W)`` uint8 (0..255), ``maps`` ``(N, 5, H, W)`` uint8 (0..255)."""
    from semcodec.codec.core.types import Tracks
    from semcodec.codec.entropy.sparse_pose import SparsePoseCoder
    from semcodec.codec.reconstruct.animate import LEG_BONES, animate_ref, match_sides
    from semcodec.codec.reconstruct.matte import PersonMatte
    from semcodec.codec.reconstruct.refiner import pose_maps
    from semcodec.codec.scaffold.appearance import (
        crop_box,
        decode_ref,
        encode_ref,
        ref_region,
        ref_size,
    )
    from semcodec.codec.scaffold.pose import PoseConfig, PoseEstimator

    pixels, info, tracks = load_tracks(part, data_dir)
    plate = _plate(pixels)
    estimator = PoseEstimator(PoseConfig("pose_landmark_lite"))
    coder = SparsePoseCoder(16)
    matter = PersonMatte("selfie_segmentation")
    poses: dict[tuple[int, int], tuple[np.ndarray, np.ndarray] | None] = {}

    def pose(track_id: int, frame: int, box: np.ndarray):
        key = (track_id, frame)
        if key not in poses:
            found = estimator.estimate(pixels[frame - 1], Tracks(
                box.astype(np.float32)[None], np.ones(1, np.float32),
                np.array([track_id], np.int32)))  # fmt: skip
            poses[key] = None
            if found:
                sparse = coder.quantize(track_id, found[0].keypoints, found[0].visibility, box)
                poses[key] = (sparse.q.astype(np.float64) / sparse.steps,
                              np.asarray(sparse.visible, bool))  # fmt: skip
        return poses[key]

    out: dict[str, list] = {name: [] for name in FIELDS}
    low, high = (lag * info.fps for lag in LAGS_S)
    for track_id in sorted(tracks):
        rows = sorted(tracks[track_id], key=lambda r: r[0])
        for i in range(0, len(rows), part.every):
            frame, box = rows[i]
            earlier = [r for r in rows[:i] if low <= frame - r[0] <= high]
            now = pose(track_id, frame, box) if earlier else None
            if now is None:
                continue
            then, then_box = earlier[int(rng.integers(len(earlier)))]
            at = scales[int(rng.integers(len(scales)))]
            then_region = ref_region(then_box)
            ref = decode_ref(encode_ref(crop_box(pixels[then - 1], then_region,
                                                 ref_size(then_region, at)), 30))  # fmt: skip
            ref = np.ascontiguousarray(ref[..., :3])
            matte = matter.matte(ref, then_region, plate)
            animated, alpha = ref, matte
            taken = pose(track_id, then, then_box)
            if taken is not None:
                uv, visible = match_sides(taken[0], taken[1], now[0], now[1])
                animated, alpha = animate_ref(ref, taken[0], taken[1], uv, visible, matte,
                                              LEG_BONES)  # fmt: skip
            region = ref_region(box)
            size = (CANVAS[1], CANVAS[0])
            target = crop_box(pixels[frame - 1], region, ref_size(region))
            under = crop_box(plate, region, ref_size(region))
            out["animated"].append(_canvas(animated[..., :3]))
            out["alpha"].append(np.round(255 * np.clip(cv2.resize(
                np.asarray(alpha, np.float32), size, interpolation=cv2.INTER_LINEAR), 0, 1))
                .astype(np.uint8))  # fmt: skip
            out["reference"].append(_canvas(ref))
            out["maps"].append(np.round(255 * pose_maps(now[0], now[1], size)).astype(np.uint8))
            out["target"].append(_canvas(target))
            out["plate"].append(_canvas(under))
    if not out["animated"]:
        raise ValueError(f"{part.data} {part.start}+{part.frames}: no example")
    if log is not None:
        log(f"{part.data} {part.start}+{part.frames} {part.camera or ''}: "
            f"{len(out['animated'])} examples")  # fmt: skip
    return {name: np.stack(values) for name, values in out.items()}


def load_or_make(path: Path | None, parts, seed: int, data_dir=None, log=None) -> dict:
    """The examples of ``parts`` (concatenated), read from ``path`` (an ``.npz`` written here
    before) when it exists, else made and written there."""
    if path is not None and Path(path).is_file():
        with np.load(path) as data:
            return {name: data[name] for name in FIELDS}
    rng = np.random.default_rng(seed)
    sets = [examples(part, rng, data_dir, log=log) for part in parts]
    merged = {name: np.concatenate([s[name] for s in sets]) for name in FIELDS}
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **merged)
    return merged


def _tensors(arrays: dict, pick=None, device="cpu"):
    """``(animated, reference, alpha, maps, target, plate)`` float32 tensors of ``arrays``
    (rows ``pick``): RGB in -1..1, alpha and maps in 0..1."""
    import torch

    def rows(name):
        a = arrays[name] if pick is None else arrays[name][pick]
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    rgb = {n: rows(n).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
           for n in ("animated", "reference", "target", "plate")}  # fmt: skip
    alpha = rows("alpha")[:, None].float().div(255.0)
    maps = rows("maps").float().div(255.0)
    return rgb["animated"], rgb["reference"], alpha, maps, rgb["target"], rgb["plate"]


def composite(rgb, alpha, plate):
    """The person ``rgb`` drawn over ``plate`` through ``alpha`` (tensors)."""
    return alpha * rgb.clamp(-1, 1) + (1 - alpha) * plate


def score(model, arrays: dict, metric, batch: int = 64) -> dict[str, float]:
    """Mean ST-LPIPS against the original crops of the animated person and of the refined
    one, each composited over the plate (and the animated one's ``rectangle``: drawn with no
    alpha)."""
    import torch

    sums = {"rectangle": 0.0, "animated": 0.0, "refined": 0.0}
    n = len(arrays["animated"])
    with torch.inference_mode():
        for start in range(0, n, batch):
            animated, reference, alpha, maps, target, plate = _tensors(
                arrays, slice(start, start + batch))  # fmt: skip
            rgb, out_alpha = model(animated, reference, alpha, maps)
            drawn = (("rectangle", animated), ("animated", composite(animated, alpha, plate)),
                     ("refined", composite(rgb, out_alpha, plate)))  # fmt: skip
            for name, x in drawn:
                sums[name] += float(metric(x, target).sum())
    return {name: value / n for name, value in sums.items()}


def train(out: Path, width: int = 8, blocks: int = 4, steps: int = 400, batch: int = 32,
          lr: float = 2e-3, seed: int = 0, init: str | None = "auto",
          examples_file: Path | None = None, held_out_file: Path | None = None,
          data_dir=None, ranges=DEFAULT_RANGES, held_out=HELD_OUT, device: str = "cpu",
          max_seconds: float | None = None, log=print) -> Path:  # fmt: skip
    """Trains a :class:`~codec.reconstruct.refiner.PersonRefiner`; writes ``out/refiner.pt``
    and ``out/scores.json`` (held-out scores); returns the weights' path.

    Args:
        init: ``"auto"``: the shipped restorer of this width and blocks (``ref_restorer_w8``
            for 8, ``ref_restorer_v2`` for 32), from scratch for other widths; a restorer
            name or file; None or ``""``: from scratch.
        examples_file, held_out_file: ``.npz`` caches of the examples (made when absent).
        max_seconds: stop early (after the step that passes it); the step count reached is
            in the metadata.
    """
    import torch

    from semcodec.codec.reconstruct.refiner import PersonRefiner, from_restorer, save_refiner
    from semcodec.codec.reconstruct.restore import load_restorer, restorer_weights
    from semcodec.evaluation.metrics.perceptual import load_stlpips

    torch.manual_seed(seed)
    arrays = load_or_make(examples_file, ranges, seed, data_dir, log)
    n = len(arrays["animated"])
    log(f"{n} training examples")
    metric = load_stlpips(device=device).eval()
    for p in metric.parameters():
        p.requires_grad_(False)
    if init == "auto":
        init = {(8, 4): "ref_restorer_w8", (32, 4): "ref_restorer_v2"}.get((width, blocks))
    if init:
        model = from_restorer(load_restorer(restorer_weights(init)))
        if (model.width, model.blocks) != (width, blocks):
            raise ValueError(f"init {init} has width {model.width} and blocks {model.blocks}, "
                             f"not {width} and {blocks}")  # fmt: skip
    else:
        model = PersonRefiner(width, blocks)
    model = model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    generator = torch.Generator().manual_seed(seed)
    started, done, losses = time.perf_counter(), 0, []
    for step in range(steps):
        pick = torch.randint(0, n, (batch,), generator=generator).numpy()
        animated, reference, alpha, maps, target, plate = _tensors(arrays, pick, device)
        if step % 2:
            animated, reference, alpha, maps, target, plate = (
                t.flip(3) for t in (animated, reference, alpha, maps, target, plate))
        rgb, out_alpha = model(animated, reference, alpha, maps)
        drawn = composite(rgb, out_alpha, plate)
        loss = (drawn - target).abs().mean() + metric(drawn, target).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        done = step + 1
        if done % 50 == 0:
            log(f"step {done}/{steps}: loss {np.mean(losses[-50:]):.4f} "
                f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            log(f"stopped at step {done} after {max_seconds:.0f} s")
            break
    seconds = time.perf_counter() - started
    model = model.cpu().eval()
    metric = load_stlpips().eval()
    scores = {}
    if held_out:
        held = load_or_make(held_out_file, held_out, seed + 1, data_dir, log)
        scores = {"examples": len(held["animated"]), **score(model, held, metric)}
    metadata = {"steps": done, "planned_steps": steps, "seed": seed, "batch": batch, "lr": lr,
                "init": init or "", "examples": n, "seconds": round(seconds, 1),
                "loss_last_50": float(np.mean(losses[-50:])) if losses else None,
                "ranges": [vars(r) for r in ranges],
                "held_out_ranges": [vars(r) for r in held_out], "held_out": scores}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "scores.json").write_text(json.dumps(scores, indent=1) + "\n")
    return save_refiner(model, out / "refiner.pt", metadata)
