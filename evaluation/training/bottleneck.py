"""Training the task-feature bottleneck (issue 14): the deterministic information bottleneck.

Objective, per window of a frame: distillation from the unsplit detector on uncompressed
frames + β x rate, where

* distillation = binary cross-entropy of the person logits against the teacher's person
  probabilities (every anchor) + smooth-L1 of the box encodings weighted by the teacher's
  person probability + 0.1 x the split features' squared error relative to their power;
* rate = kbit per window under compressai's ``EntropyBottleneck`` densities (additive
  uniform noise in training); the decoder's path sees the latents rounded (straight-through).
  With ``rate_model="temporal"`` a window is trained with the same window of
  the frame before it, and the rate is what the codec mostly sends: the change of its
  rounded latents from the previous frame's (straight-through rounding, the mass of each
  integer change under a per-channel density), plus ``intra_weight`` x the per-frame rate
  (intra units are rare). This teaches the transform to keep a still scene's latents still.
  ``rate_model="factorized"`` (the default; it gave the better rate-MODA trade-off on the
  training frames) trains on the per-frame rate alone.

With ``ground_truth`` (where a range has MOT ground truth), the person targets of the
distillation are corrected by it: an anchor of a window with IoU >= 0.5 with a person box
(at least half inside the window), or the best anchor of such a box, gets at least logit
+6; an anchor with IoU < 0.3 with every such box gets at most logit -6; anchors near an
ignore region or a person mostly outside the window keep the teacher's target. The teacher's
false positives are taught away and its misses taught in, for the camera it is trained on.

The detector is frozen. Backbone features and teacher outputs of every training window are
computed once and cached (``--cache``), so training runs the small bottleneck and the cloud
half of the detector only. After training, the latents of the training windows are rounded
and counted: the counts are the entropy tables (per-frame and temporal, see
:mod:`codec.entropy.features`) stored with the transforms.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.codec.entropy.features import count_symbols, tables_from_counts
from semcodec.codec.task.bottleneck import BottleneckConfig, FeatureBottleneck, TaskBottleneck
from semcodec.codec.task.split import SplitConfig, SplitDetector

log = logging.getLogger(__name__)

#: The training ranges: ``(sequence, first frame, frames)`` plus, optionally, a layout
#: ``"tiles=N[,zoom=Z,x=X,y=Y|scale=S]"`` (the windows of that range, on the camera that
#: :mod:`evaluation.data.camera` makes; default: the split's windows on the sequence as it is).
#: A mix of person sizes and layouts, as the edge's camera profile picks them: PETS09-S2L1
#: 1-500 (small people, 2x2 tiles), TUD-Stadtmitte 1-90 (large people, one window) and
#: PETS 1-500 zoomed 2x and 3x about other centres than the held-out zoomed camera's
#: (people 2-3x taller, one window).
DEFAULT_DATA = (("PETS09-S2L1-full", 1, 500, "tiles=2"), ("TUD-Stadtmitte", 1, 90, "tiles=1"),
                ("PETS09-S2L1-full", 1, 250, "tiles=1,zoom=2,x=0.3,y=0.4"),
                ("PETS09-S2L1-full", 251, 250, "tiles=1,zoom=2,x=0.7,y=0.6"),
                ("PETS09-S2L1-full", 1, 250, "tiles=1,zoom=3,x=0.5,y=0.5"))  # fmt: skip
#: The ranges of the bottlenecks trained before layouts were mixed (2x2 windows only).
TILED_DATA = (("PETS09-S2L1-full", 1, 500), ("TUD-Stadtmitte", 1, 90))


def range_layout(data_range: Sequence, split: SplitConfig) -> tuple[SplitConfig, str]:
    """The split config (windows) and camera transform text of one training range.

    Raises:
        ValueError: a layout text that is not ``tiles=N`` followed by a camera transform.
    """
    from semcodec.evaluation.data.camera import parse_camera_transform

    if len(data_range) < 4 or not data_range[3]:
        return split, "none"
    head, _, camera = str(data_range[3]).partition(",")
    key, _, value = head.partition("=")
    if key.strip() != "tiles" or not value.strip().isdigit() or not 1 <= int(value) <= 4:
        raise ValueError(f"training range layout {data_range[3]!r}: expected tiles=N "
                         "(1..4), then optionally a camera transform")  # fmt: skip
    tiles = int(value)
    layout = dataclasses.replace(split, tiles=tiles, include_full_frame=False)
    return layout, parse_camera_transform(camera or None).describe()
#: The training objectives' rate terms (see :class:`BottleneckTrainConfig`).
RATE_MODELS = ("temporal", "factorized")


@dataclass(frozen=True)
class BottleneckTrainConfig:
    """One training run.

    Attributes:
        beta: weight of the rate (kbit per window) against the distillation loss.
        data: ``(sequence, first frame, frames)`` ranges to learn from.
        bottleneck: the transforms' shape.
        split: the detector cut and windows.
        epochs: passes over the cached windows.
        batch_size: windows per step.
        learning_rate: Adam's for the transforms (10x for the density model of the rate),
            cosine-decayed to 5 % at the end.
        seed: seeds initialisation, order and noise.
        rate_model: ``"temporal"`` (the rate of the change from the previous frame, plus
            ``intra_weight`` x the per-frame rate) or ``"factorized"`` (per-frame rate).
        intra_weight: weight of the per-frame rate in the temporal objective.
        skip_threshold: the encoder's skip threshold the tables are counted for (see
            :func:`codec.entropy.features.skip_small_changes`).
        ground_truth: correct the teacher's person targets with the ranges' ground truth
            (see the module docstring).
    """

    beta: float = 0.1
    data: tuple[tuple, ...] = DEFAULT_DATA
    bottleneck: BottleneckConfig = BottleneckConfig()
    split: SplitConfig = SplitConfig()
    epochs: int = 8
    batch_size: int = 16
    learning_rate: float = 1e-3
    seed: int = 0
    rate_model: str = "factorized"
    intra_weight: float = 1 / 32
    skip_threshold: int = 0
    ground_truth: bool = False

    def __post_init__(self) -> None:
        if self.rate_model not in RATE_MODELS:
            raise ValueError(f"rate_model must be one of {RATE_MODELS}, got {self.rate_model!r}")


@dataclass
class WindowCache:
    """Cached edge features and teacher outputs of consecutive frames of one range.

    Attributes:
        name: ``sequence:first:frames``.
        features: ``(T, W, C, S, S)`` float16 split features (T frames, W windows).
        encodings: ``(T, W, 1917, 4)`` float16 teacher box encodings.
        logits: ``(T, W, 1917)`` float16 teacher person logits.
    """

    name: str
    features: np.ndarray
    encodings: np.ndarray
    logits: np.ndarray


def _cache_name(name: str, split: SplitConfig) -> str:
    key = hashlib.sha256(f"{name}|{dataclasses.astuple(split)}".encode()).hexdigest()[:12]
    return f"windows-{name.replace('/', '_').replace(':', '-')}-{key}.npz"


def cache_windows(detector: SplitDetector, data: Sequence[tuple[str, int, int]],
                  cache_dir: Path, data_dir: str | None = None) -> list[WindowCache]:  # fmt: skip
    """The :class:`WindowCache` of each range, computed once and kept in ``cache_dir``."""
    from semcodec.codec.core.sources import resolve_data_path
    from semcodec.evaluation.data.sequences import load_sequence

    caches = []
    for data_range in data:
        sequence, first, count = data_range[:3]
        split, camera = range_layout(data_range, detector.config)
        name = f"{sequence}:{first}:{count}"
        if len(data_range) > 3:
            name += f"@{data_range[3]}"
        path = cache_dir / _cache_name(name, split)
        if path.exists():
            with np.load(path) as z:
                caches.append(WindowCache(name, z["features"], z["encodings"], z["logits"]))
            continue
        log.info("caching detector features of %s", name)
        options = () if camera == "none" else (("camera_transform", camera),)
        frames, _, _ = load_sequence(str(resolve_data_path(sequence, data_dir)), count,
                                     options, first)  # fmt: skip
        ranged = SplitDetector(detector.model, split)
        feats, encs, logits = [], [], []
        for frame in frames:
            f = ranged.edge_features(frame)
            enc, logit = teacher_outputs(ranged, f)
            feats.append(f.numpy().astype(np.float16))
            encs.append(enc)
            logits.append(logit)
        cache = WindowCache(name, np.stack(feats), np.stack(encs), np.stack(logits))
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.npz")
        np.savez(partial, features=cache.features, encodings=cache.encodings, logits=cache.logits)
        partial.replace(path)
        caches.append(cache)
    return caches


def every_kth_frame(caches: Sequence[WindowCache], k: int) -> list[WindowCache]:
    """The caches with only frames ``0, k, 2k, ...`` of each range (consecutive frames are
    near-duplicates; the temporal rate model then pairs frames ``k`` apart)."""
    if k < 1:
        raise ValueError(f"frame step must be >= 1, got {k}")
    return [WindowCache(c.name, c.features[::k], c.encodings[::k], c.logits[::k]) for c in caches]


def pack_windows(caches: Sequence[WindowCache], path: Path) -> Path:
    """Writes the split features of ``caches`` to the ``.npz`` ``path`` as 8-bit codes per
    channel and range (``value = low + code x step``; the error is at most half a step, about
    1 % of the features' mean magnitude on the default data), without the teacher outputs:
    a sixth of the float16 cache, to train elsewhere (a GPU machine whose copy is
    size-limited) with :func:`load_packed`."""
    arrays = {}
    for i, c in enumerate(caches):
        f = c.features.astype(np.float32)
        low = f.min(axis=(0, 1, 3, 4), keepdims=True)
        step = np.maximum((f.max(axis=(0, 1, 3, 4), keepdims=True) - low) / 255.0, 1e-8)
        arrays[f"codes{i}"] = np.round((f - low) / step).astype(np.uint8)
        arrays[f"low{i}"], arrays[f"step{i}"] = low, step
    arrays["names"] = np.array([c.name for c in caches])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial.npz")
    np.savez(partial, **arrays)
    partial.replace(path)
    return path


def load_packed(path: Path, detector: SplitDetector,
                device: str | torch.device = "cpu") -> list[WindowCache]:  # fmt: skip
    """The caches of a :func:`pack_windows` file: features decoded to float16, teacher
    outputs recomputed from them by ``detector``'s cloud half on ``device``.

    Raises:
        ValueError: not a packed windows file.
    """
    device = torch.device(device)
    with np.load(path) as z:
        if "names" not in z.files:
            raise ValueError(f"{path}: not a packed windows file (see --pack)")
        packed = [(str(name), z[f"codes{i}"], z[f"low{i}"], z[f"step{i}"])
                  for i, name in enumerate(z["names"])]  # fmt: skip
    detector.model.to(device)
    caches = []
    try:
        for name, codes, low, step in packed:
            f = (codes.astype(np.float32) * step + low).astype(np.float16)
            t, w = f.shape[:2]
            flat = torch.from_numpy(f.reshape(t * w, *f.shape[2:]).astype(np.float32))
            enc, logit = teacher_outputs(detector, flat, device)
            caches.append(WindowCache(name, f, enc.reshape(t, w, -1, 4), logit.reshape(t, w, -1)))
    finally:
        detector.model.cpu()
    return caches


def teacher_outputs(detector: SplitDetector, features: torch.Tensor,
                    device: str | torch.device = "cpu",
                    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The unsplit detector's outputs on float32 split ``features`` ``(N, C, S, S)``, run
    on ``device`` (where ``detector.model`` is) 256 windows at a time: float16 box
    encodings ``(N, 1917, 4)`` and person logits ``(N, 1917)``."""
    encs, logits = [], []
    with torch.inference_mode():
        for b in range(0, len(features), 256):
            enc, logit = detector.raw_outputs(features[b:b + 256].to(device))
            encs.append(enc.cpu().numpy().astype(np.float16))
            logits.append(logit[..., 1].cpu().numpy().astype(np.float16))
    return np.concatenate(encs), np.concatenate(logits)


#: Logits the ground truth sets: at least POSITIVE_LOGIT on person anchors, at most
#: NEGATIVE_LOGIT on background anchors.
POSITIVE_LOGIT, NEGATIVE_LOGIT = 6.0, -6.0


def _window_boxes(boxes: np.ndarray, window: tuple[int, int, int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(N, 4)`` pixel ``x1, y1, x2, y2`` boxes -> their parts inside ``window`` in the
    window's 0..1 units, ``x1, y1, x2, y2``, and the share of each box inside."""
    x0, y0, x1, y1 = window
    if len(boxes) == 0:
        return np.zeros((0, 4)), np.zeros(0)
    scale = np.array([x1 - x0, y1 - y0, x1 - x0, y1 - y0], np.float64)
    inside = (np.asarray(boxes, np.float64) - [x0, y0, x0, y0]) / scale
    clipped = np.clip(inside, 0.0, 1.0)
    area = (inside[:, 2] - inside[:, 0]) * (inside[:, 3] - inside[:, 1])
    kept = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
    return clipped, kept / np.maximum(area, 1e-9)


@functools.cache
def _anchors_xyxy() -> np.ndarray:
    """The detector's ``(1917, 4)`` anchors as ``x1, y1, x2, y2`` in window units (read-only)."""
    from semcodec.codec.detection.ssdlite import ssd_anchors

    anchors = np.ascontiguousarray(ssd_anchors()[:, [1, 0, 3, 2]])
    anchors.flags.writeable = False
    return anchors


def ground_truth_logits(logits: np.ndarray, people: np.ndarray, ignore: np.ndarray,
                        window: tuple[int, int, int, int]) -> np.ndarray:  # fmt: skip
    """One window's teacher person logits ``(1917,)`` corrected by the frame's ground truth
    (``people``, ``ignore``: ``(N, 4)`` pixel ``x1, y1, x2, y2``); see the module docstring."""
    from semcodec.codec.scaffold.detector import box_iou

    anchors = _anchors_xyxy()
    boxes, share = _window_boxes(people, window)
    regions, region_share = _window_boxes(ignore, window)
    unsure = np.concatenate([boxes[(share > 0) & (share < 0.5)], regions[region_share > 0]])
    boxes = boxes[share >= 0.5]
    out = np.asarray(logits, np.float32).copy()
    iou = box_iou(anchors, boxes) if len(boxes) else np.zeros((len(anchors), 0))
    best = iou.max(axis=1) if len(boxes) else np.zeros(len(anchors))
    positive = best >= 0.5
    positive[iou.argmax(axis=0)] = True
    near_unsure = np.zeros(len(anchors), bool)
    if len(unsure):
        near_unsure = box_iou(anchors, unsure).max(axis=1) > 0.2
    negative = (best < 0.3) & ~near_unsure
    out[positive] = np.maximum(out[positive], POSITIVE_LOGIT)
    out[negative] = np.minimum(out[negative], NEGATIVE_LOGIT)
    return out


def with_ground_truth(cache: WindowCache, split: SplitConfig,
                      data_dir: str | None = None) -> WindowCache:  # fmt: skip
    """``cache`` with its person logits corrected by its range's MOT ground truth (the
    cache unchanged when the sequence has none)."""
    from semcodec.codec.core.sources import open_source, resolve_data_path
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    if "@" in cache.name:
        raise ValueError(f"--ground-truth is for ranges without a layout; {cache.name} has one")
    sequence, first, count = cache.name.rsplit(":", 2)
    first, count = int(first), int(count)
    info = open_source(resolve_data_path(sequence, data_dir)).info
    if info.groundtruth is None:
        log.warning("%s has no ground truth: teacher targets only", sequence)
        return cache
    gt = load_mot_groundtruth(info.groundtruth).restrict(first, first + count - 1)
    gt = gt.renumbered(first)
    windows = split.windows(info.height, info.width)
    logits = np.stack([
        np.stack([ground_truth_logits(cache.logits[t, w], gt.boxes_xyxy(t + 1),
                                      gt.ignore_xyxy(t + 1), window)
                  for w, window in enumerate(windows)])
        for t in range(cache.logits.shape[0])
    ])  # fmt: skip
    return dataclasses.replace(cache, logits=logits.astype(np.float16))


def distillation_loss(detector: SplitDetector, reconstructed: torch.Tensor,
                      features: torch.Tensor, encodings: torch.Tensor,
                      logits: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The distillation term of a batch (see the module docstring); all ``(B, ...)``."""
    enc, out = detector.raw_outputs(reconstructed)
    target = torch.sigmoid(logits)
    cls = F.binary_cross_entropy_with_logits(out[..., 1], target)
    cls = cls - F.binary_cross_entropy_with_logits(logits, target)  # 0 for the teacher
    box = (F.smooth_l1_loss(enc, encodings, reduction="none").sum(-1) * target).sum()
    box = box / (target.sum() + 1.0)
    feat = F.mse_loss(reconstructed, features) / features.pow(2).mean().clamp_min(1e-6)
    return 10.0 * cls + box + 0.1 * feat


def train_bottleneck(config: BottleneckTrainConfig, detector: SplitDetector,
                     caches: list[WindowCache],
                     progress: Callable[[int, int, dict], None] | None = None,
                     device: str | torch.device = "cpu") -> TaskBottleneck:  # fmt: skip
    """Trains one bottleneck on ``caches`` and fits its entropy tables.

    ``device`` runs the transforms, the density models and the detector's cloud half there
    (``"cuda"`` where there is one); the returned bottleneck and the detector are on the CPU.
    """
    with warnings.catch_warnings():
        # ``import compressai`` imports torch_geometric, which calls the deprecated
        # ``torch.jit.script`` at import time: not ours to fix, not the user's to see
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*deprecated",
                                category=FutureWarning)  # fmt: skip
        from compressai.entropy_models import EntropyBottleneck

    device = torch.device(device)

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    feats = np.concatenate([c.features.reshape(-1, *c.features.shape[2:]) for c in caches])
    encs = np.concatenate([c.encodings.reshape(-1, *c.encodings.shape[2:]) for c in caches])
    logits = np.concatenate([c.logits.reshape(-1, c.logits.shape[-1]) for c in caches])
    previous = _previous_windows(caches)
    temporal = config.rate_model == "temporal"
    samples = np.flatnonzero(previous >= 0) if temporal else np.arange(len(feats))
    model = FeatureBottleneck(dataclasses.replace(config.bottleneck,
                                                  channels=int(feats.shape[1])))  # fmt: skip
    priors = {"intra": EntropyBottleneck(model.config.latent)}
    if temporal:
        priors["change"] = EntropyBottleneck(model.config.latent)
    model.to(device)
    detector.model.to(device)
    for prior in priors.values():
        prior.to(device)
    density = [p for prior in priors.values() for n, p in prior.named_parameters()
               if not n.endswith("quantiles")]  # fmt: skip
    optimizer = torch.optim.Adam([  # the density models learn 10x faster than the transforms
        {"params": list(model.parameters()), "lr": config.learning_rate},
        {"params": density, "lr": 10 * config.learning_rate},
    ])
    steps_per_epoch = max(1, len(samples) // config.batch_size)
    total = steps_per_epoch * config.epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    step = 0
    for _ in range(config.epochs):
        order = rng.permutation(samples)
        for b in range(steps_per_epoch):
            idx = np.sort(order[b * config.batch_size:(b + 1) * config.batch_size])
            f = _batch(feats, idx, device)
            y = model.latents(f)
            kbits = _kbits(priors["intra"], y)
            if temporal:
                with torch.no_grad():
                    reference = torch.round(model.latents(_batch(feats, previous[idx], device)))
                change = y + (torch.round(y) - y).detach() - reference
                kbits = _kbits_at(priors["change"], change) + config.intra_weight * kbits
            rounded = y + (torch.round(y) - y).detach()
            recon = model.synthesize(rounded).contiguous(memory_format=torch.channels_last)
            distill = distillation_loss(detector, recon, f,
                                        torch.from_numpy(encs[idx].astype(np.float32)).to(device),
                                        torch.from_numpy(logits[idx].astype(np.float32)).to(device))
            loss = distill + config.beta * kbits
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if progress is not None:
                values = {"loss": loss, "distill": distill, "kbit_per_window": kbits}
                progress(step, total, {k: float(v.detach()) for k, v in values.items()})
    model.cpu().eval()
    detector.model.cpu()
    for p in model.parameters():
        p.requires_grad_(False)
    metadata = {"beta": config.beta, "epochs": config.epochs, "steps": total,
                "data": [list(d) for d in config.data], "seed": config.seed,
                "rate_model": config.rate_model, "intra_weight": config.intra_weight,
                "ground_truth": config.ground_truth}  # fmt: skip
    return refit_tables(model, config.split, metadata, caches, config.skip_threshold)


def refit_tables(model: FeatureBottleneck, split: SplitConfig, metadata: dict,
                 caches: list[WindowCache], skip_threshold: int) -> TaskBottleneck:  # fmt: skip
    """The bottleneck of trained transforms with tables counted on the training windows'
    latents as an encoder with ``skip_threshold`` codes them (recorded in the metadata as
    the encoder's default)."""
    counts = count_symbols(_latent_sequences(model, caches), groups=model.config.latent,
                           skip_threshold=skip_threshold)  # fmt: skip
    metadata = {**metadata, "skip_threshold": int(skip_threshold)}
    return TaskBottleneck(model, tables_from_counts(counts), split, counts, metadata)


def _previous_windows(caches: list[WindowCache]) -> np.ndarray:
    """For each window of the concatenated caches (frame-major, window-minor), the index of
    the same window in the frame before it, or -1 for a range's first frame."""
    out, offset = [], 0
    for c in caches:
        t, w = c.features.shape[:2]
        index = np.arange(offset, offset + t * w) - w
        index[:w] = -1
        out.append(index)
        offset += t * w
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _batch(feats: np.ndarray, idx: np.ndarray, device: torch.device) -> torch.Tensor:
    """Cached float16 windows ``idx`` -> float32 ``(B, C, S, S)`` channels-last on ``device``."""
    f = torch.from_numpy(feats[idx].astype(np.float32)).to(device)
    return f.contiguous(memory_format=torch.channels_last)


def _kbits(prior: torch.nn.Module, y: torch.Tensor) -> torch.Tensor:
    """kbit per window of ``y`` ``(B, latent, S, S)`` under ``prior`` (uniform noise added
    in training mode)."""
    _, likelihoods = prior(y)
    return -torch.log2(likelihoods).sum() / (1000.0 * y.shape[0])


def _kbits_at(prior: torch.nn.Module, q: torch.Tensor) -> torch.Tensor:
    """kbit per window of integer-valued ``q`` ``(B, latent, S, S)``: the mass ``prior`` gives
    ``[q - 1/2, q + 1/2]``, no noise; gradients reach ``q`` (straight-through rounding) and
    the density."""
    values = q.transpose(0, 1).reshape(q.shape[1], 1, -1)
    likelihood, _, _ = prior._likelihood(values)  # noqa: SLF001 - compressai's mass function
    likelihood = prior.likelihood_lower_bound(likelihood)
    return -torch.log2(likelihood).sum() / (1000.0 * q.shape[0])


def _latent_sequences(model: FeatureBottleneck, caches: list[WindowCache]) -> list[list]:
    """Per range and window position, the rounded latents of consecutive frames."""
    sequences = []
    for c in caches:
        t, w = c.features.shape[:2]
        flat = torch.from_numpy(c.features.reshape(t * w, *c.features.shape[2:]).astype(np.float32))
        q = np.concatenate([model.quantize(flat[i:i + 256]) for i in range(0, t * w, 256)])
        q = q.reshape(t, w, *q.shape[1:])
        sequences += [[q[i, j] for i in range(t)] for j in range(w)]
    return sequences


def run_sweep(betas: Sequence[float], out_dir: Path, cache_dir: Path,
              base: BottleneckTrainConfig | None = None, data_dir: str | None = None,
              models_dir: str | None = None, device: str = "cpu", frame_step: int = 1,
              packed: Path | None = None) -> list[dict]:  # fmt: skip
    """Trains one bottleneck per β into ``out_dir/bottleneck-beta<β>.pt`` (training steps
    on ``device``, every ``frame_step``-th frame of each range; from a :func:`pack_windows`
    file instead of the cache when ``packed`` is given); returns (and writes to
    ``out_dir/sweep.json``) a row per β: file, sha256, seconds, last losses."""
    from semcodec.codec.task.split import load_split_model

    base = base or BottleneckTrainConfig()
    detector = SplitDetector(load_split_model(models_dir), base.split)
    if packed is not None:
        if base.ground_truth:
            raise ValueError("--ground-truth needs the sequences: train from the cache")
        caches = load_packed(packed, detector, device)
    else:
        caches = cache_windows(detector, base.data, cache_dir, data_dir)
    if base.ground_truth:
        caches = [with_ground_truth(c, base.split, data_dir) for c in caches]
    caches = every_kth_frame(caches, frame_step)
    rows = []
    for beta in betas:
        config = dataclasses.replace(base, beta=float(beta))
        last: dict = {}
        start = time.perf_counter()

        def progress(step: int, total: int, values: dict, last=last, beta=config.beta) -> None:
            last.update(values)
            if step % 50 == 0 or step == total:
                log.info("beta %g step %d/%d  %s", beta, step, total,
                         "  ".join(f"{k} {v:.4f}" for k, v in values.items()))  # fmt: skip

        trained = train_bottleneck(config, detector, caches, progress, device)
        trained.metadata["train_seconds"] = round(time.perf_counter() - start, 1)
        trained.metadata.update(frame_step=int(frame_step), packed=packed is not None,
                                device=str(device))  # fmt: skip
        path = trained.save(out_dir / f"bottleneck-beta{beta:g}.pt")
        rows.append({"beta": config.beta, "file": str(path), "sha256": trained.sha256(),
                     "seconds": trained.metadata["train_seconds"], **last})  # fmt: skip
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "sweep.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def run_pack(path: Path, cache_dir: Path, data: Sequence = DEFAULT_DATA, frame_step: int = 1,
             data_dir: str | None = None, models_dir: str | None = None) -> Path:  # fmt: skip
    """Writes the cached windows of ``data`` (every ``frame_step``-th frame, computed into
    ``cache_dir`` first where missing) to ``path`` with :func:`pack_windows`."""
    from semcodec.codec.task.split import load_split_model

    detector = SplitDetector(load_split_model(models_dir))
    caches = cache_windows(detector, data, cache_dir, data_dir)
    return pack_windows(every_kth_frame(caches, frame_step), path)


def run_refit(paths: Sequence[Path], skip_thresholds: Sequence[int], out_dir: Path,
              cache_dir: Path, data_dir: str | None = None,
              models_dir: str | None = None) -> list[dict]:  # fmt: skip
    """Recounts the tables of trained bottleneck files (any format) on their own training
    ranges for the encoder's ``skip_thresholds`` (one for all files or one per file); writes
    ``out_dir/<file name>`` and returns a row per file: file, sha256, skip threshold."""
    from semcodec.codec.task.bottleneck import load_transforms
    from semcodec.codec.task.split import load_split_model

    if len(skip_thresholds) not in (1, len(paths)):
        raise ValueError(f"{len(skip_thresholds)} skip thresholds for {len(paths)} files: "
                         "give one, or one per file")  # fmt: skip
    thresholds = list(skip_thresholds) * (len(paths) if len(skip_thresholds) == 1 else 1)
    weights = load_split_model(models_dir)
    rows = []
    for path, threshold in zip(paths, thresholds, strict=True):
        model, split, metadata = load_transforms(path)
        data = tuple(tuple(d) for d in metadata.get("data", TILED_DATA))
        caches = cache_windows(SplitDetector(weights, split), data, cache_dir, data_dir)
        refitted = refit_tables(model, split, metadata, caches, threshold)
        saved = refitted.save(out_dir / Path(path).name)
        rows.append({"file": str(saved), "sha256": refitted.sha256(),
                     "skip_threshold": int(threshold)})  # fmt: skip
    return rows
