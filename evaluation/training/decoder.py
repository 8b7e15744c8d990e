"""``semcodec-bench train-decoder``: trains the ``diffusion`` reconstructor's denoiser.

Examples are made the way the decoder meets them: the frames are encoded at a scaffold
level (level 1 by default, at its default target), decoded and reconstructed by ``warp`` v2,
and every decoded person box gives one window: the original pixels (the target), the
``warp`` v2 pixels, the box mask, and the previous frame's original and ``warp`` pixels in
the same window (the previous output the decoder will condition on lies between them).

Everything a run writes goes to its output folder: ``examples.npz`` (cached, keyed by the
data list, level and canvas), ``checkpoint.pt`` (latest, for ``--resume``), ``loss.csv``
and ``loss.png``, and ``denoiser.pt``, the EMA weights that
:class:`~codec.reconstruct.diffusion.DiffusionReconstructor` loads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import math
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcodec.codec.reconstruct.denoiser import DenoiserConfig

log = logging.getLogger(__name__)
#: The arrays of one example set; every array's first axis is the window.
EXAMPLE_KEYS = ("target", "warp", "mask", "prev_target", "prev_warp", "has_prev", "frame")
#: The previous original stands in for the previous output blurred by this (canvas px)...
PREVIOUS_BLUR_PX = 2.0
#: ... and noised by this (0..255 levels, standard deviation).
PREVIOUS_NOISE = 6.0


class TrainConfigError(ValueError):
    """A training config that cannot be used (unknown key, bad value, no data)."""


@dataclass(frozen=True)
class DataRange:
    """Frames ``start .. start+frames-1`` of the sequence at ``path`` (a name under the data
    root, a folder or a video file)."""

    path: str
    start: int = 1
    frames: int | None = None


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (written into the checkpoint and the weights).

    Attributes:
        data: the frame ranges to learn from.
        level: scaffold level whose streams the examples come from.
        denoiser: the model's shape.
        steps: optimizer steps.
        batch_size: windows per step.
        learning_rate: AdamW's, after a linear warm-up over the first 5 % of the steps,
            cosine-decayed to 10 % at the end.
        ema_decay: the shipped weights are an exponential moving average of the trained ones.
        seed: seeds example order, flips, noise and sigma.
        checkpoint_every: steps between checkpoints (and loss-curve rewrites).
        p_no_previous: share of examples conditioned on no previous output.
        p_previous_warp: share conditioned on the previous ``warp`` pixels (the rest get the
            previous original pixels, blurred and noised: the decoder's previous output is
            its own guess, and a sharp previous original would teach it to copy a frame it
            will never have).
        init: weights to start from (camera adaptation), or None for a fresh model.
        perceptual_weight: weight of an ST-LPIPS term between the window the model's
            one-jump estimate gives (``warp`` + the residual read off the predicted velocity)
            and the original window, added to the flow loss. 0 trains on the flow loss alone
            (its one-step sample is the conditional mean: smooth); above 0 the estimate is
            pushed to look like a person, not an average of people.
        p_sigma_one: share of examples drawn at sigma 1 (pure noise), where a one-step
            sampler evaluates the model; the rest are logit-normal.
    """

    data: tuple[DataRange, ...] = (DataRange("PETS09-S2L1-full", 1, 500),)
    level: int = 1
    denoiser: DenoiserConfig = field(default_factory=DenoiserConfig)
    steps: int = 2500
    batch_size: int = 16
    learning_rate: float = 1e-3
    ema_decay: float = 0.998
    seed: int = 0
    checkpoint_every: int = 100
    p_no_previous: float = 0.5
    p_previous_warp: float = 0.25
    init: str | None = None
    perceptual_weight: float = 0.0
    p_sigma_one: float = 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TrainConfigError(f"unknown training config keys: {', '.join(unknown)}")
        values = dict(data)
        try:
            if "data" in values:
                values["data"] = tuple(DataRange(**d) for d in values["data"])
            if "denoiser" in values:
                values["denoiser"] = DenoiserConfig.from_dict(values["denoiser"])
            config = cls(**values)
        except (TypeError, ValueError) as exc:
            raise TrainConfigError(f"bad training config: {exc}") from None
        if not config.data or config.steps < 1 or config.batch_size < 1:
            raise TrainConfigError("a training config needs data, steps >= 1 and batch_size >= 1")
        return config

    @classmethod
    def from_toml(cls, path: Path) -> TrainConfig:
        try:
            return cls.from_dict(tomllib.loads(Path(path).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise TrainConfigError(f"{path}: {exc}") from None


# ----------------------------------------------------------------------------- examples


def examples_from_frames(frames: np.ndarray, fps: float, level: int,
                         canvas: tuple[int, int]) -> dict[str, np.ndarray]:  # fmt: skip
    """Encodes ``(T, H, W, 3)`` uint8 RGB ``frames`` at ``level``, reconstructs them with
    ``warp`` and returns one example per decoded person box (arrays of :data:`EXAMPLE_KEYS`:
    uint8 crops ``(N, height, width, 3)``, uint8 masks ``(N, height, width)``, bool
    ``has_prev`` and int32 1-based ``frame`` ``(N,)``)."""
    from semcodec.codec.bitstream import write_stream
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.reconstruct.windows import box_masks, crop_windows, person_windows
    from semcodec.codec.scaffold.codec import decode_stream, encode_frames
    from semcodec.codec.scaffold.levels import LEVELS

    t, h, w, _ = frames.shape
    header, units, _ = encode_frames(iter(frames), LEVELS[level], fps, (w, h), t)
    stream = io.BytesIO()
    write_stream(stream, header, units)
    parts: dict[str, list] = {k: [] for k in EXAMPLE_KEYS}
    previous_warp = None
    decoded_frames = decode_stream(stream.getvalue(), create_reconstructor("warp"))
    for k, (decoded, warp_image) in enumerate(decoded_frames):
        boxes = decoded.scaffold.tracks.boxes
        if len(boxes):
            windows = person_windows(boxes, canvas)
            n = len(windows)
            parts["target"].append(crop_windows(frames[k], windows, canvas))
            parts["warp"].append(crop_windows(warp_image, windows, canvas))
            parts["mask"].append(box_masks(boxes, windows, canvas).astype(np.uint8))
            before = max(k - 1, 0)
            prev_warp = warp_image if previous_warp is None else previous_warp
            parts["prev_target"].append(crop_windows(frames[before], windows, canvas))
            parts["prev_warp"].append(crop_windows(prev_warp, windows, canvas))
            parts["has_prev"].append(np.full(n, k > 0))
            parts["frame"].append(np.full(n, k + 1, np.int32))
        previous_warp = warp_image
    if not parts["target"]:
        raise TrainConfigError("no person was decoded in the training frames")
    return {key: np.concatenate(value) for key, value in parts.items()}


def load_examples(config: TrainConfig, cache_dir: Path,
                  data_dir: str | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """The examples of every range in ``config.data``, from ``cache_dir`` when made before
    (sequence names are looked up in ``data_dir`` first)."""
    key = json.dumps([[dataclasses.asdict(d) for d in config.data], config.level,
                      list(config.denoiser.canvas)])  # fmt: skip
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = cache_dir / f"examples-{digest}.npz"
    if path.exists():
        with np.load(path) as data:
            return {k: data[k] for k in EXAMPLE_KEYS}
    from semcodec.codec.core.sources import open_source, resolve_data_path

    sets = []
    for item in config.data:
        source = open_source(resolve_data_path(item.path, data_dir))
        frames = source.read(item.start, item.frames)
        log.info("examples: %s frames %d-%d", item.path, item.start, item.start + len(frames) - 1)
        sets.append(examples_from_frames(frames, source.info.fps, config.level,
                                         config.denoiser.canvas))  # fmt: skip
    examples = {k: np.concatenate([s[k] for s in sets]) for k in EXAMPLE_KEYS}
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    np.savez(partial, **examples)
    partial.replace(path)
    return examples


# ----------------------------------------------------------------------------- batches


def make_batch(examples: dict[str, np.ndarray], index: np.ndarray, config: TrainConfig,
               rng: np.random.Generator):  # fmt: skip
    """``(residual, cond)`` tensors for the windows ``index``: the scaled residual
    ``(B, 3, H, W)`` and the conditioning ``(B, 8, H, W)``, randomly mirrored, with the
    previous output drawn as the config says."""
    import cv2
    import torch

    from semcodec.codec.reconstruct.windows import conditioning

    target = examples["target"][index].astype(np.float32)
    warp = examples["warp"][index].astype(np.float32)
    mask = examples["mask"][index].astype(np.float32)
    choice = rng.random(len(index))
    use_warp = choice < config.p_previous_warp
    previous = examples["prev_target"][index].astype(np.float32)
    for k in np.flatnonzero(~use_warp):  # the decoder's previous output is never exact
        previous[k] = cv2.GaussianBlur(previous[k], (0, 0), PREVIOUS_BLUR_PX)
    previous += rng.normal(0, PREVIOUS_NOISE, previous.shape).astype(np.float32)
    previous[use_warp] = examples["prev_warp"][index][use_warp]
    has_previous = examples["has_prev"][index] & (choice >= 1 - config.p_no_previous)
    flip = rng.random(len(index)) < 0.5
    for array in (target, warp, mask, previous):
        array[flip] = array[flip][:, :, ::-1]
    cond = conditioning(warp, mask, np.clip(previous, 0, 255), has_previous)
    residual = (target - warp) / 127.5 * config.denoiser.residual_scale
    as_nchw = lambda a: torch.from_numpy(np.ascontiguousarray(a)).permute(0, 3, 1, 2)  # noqa: E731
    return as_nchw(residual), as_nchw(cond)


# ----------------------------------------------------------------------------- training


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up over 5 % of the steps, then cosine decay to 10 % of the peak."""
    warm = max(1, config.steps // 20)
    if step < warm:
        return config.learning_rate * (step + 1) / warm
    progress = (step - warm) / max(1, config.steps - warm)
    return config.learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def train(config: TrainConfig, out_dir: Path, resume: bool = False,
          cache_dir: Path | None = None, data_dir: str | None = None,
          show_progress: bool = True, examples: dict[str, np.ndarray] | None = None,
          stop_at: int | None = None, device: str = "cpu") -> Path:  # fmt: skip
    """Trains the denoiser; returns the path of the written ``denoiser.pt``. The examples
    are made from ``config.data`` and cached in ``cache_dir`` (default ``out_dir``) unless
    given (arrays of :data:`EXAMPLE_KEYS`). ``stop_at``: stop after that step with a
    checkpoint (go on later with ``resume``) and return the checkpoint's path. ``device``:
    a torch device for the model and the loss (the batches are made on the CPU; the weights
    are saved as CPU float32 either way)."""
    import torch
    from diffusers.training_utils import EMAModel
    from tqdm import tqdm

    from semcodec.codec.reconstruct.denoiser import ConditionalDenoiser, training_pair
    from semcodec.codec.reconstruct.diffusion import load_denoiser, save_denoiser

    out_dir.mkdir(parents=True, exist_ok=True)
    if examples is None:
        examples = load_examples(config, cache_dir or out_dir, data_dir)
    log.info("%d training windows", len(examples["target"]))
    torch.manual_seed(config.seed)
    model = ConditionalDenoiser(config.denoiser)
    if config.init:
        model.load_state_dict(load_denoiser(config.init).state_dict())
    model = model.to(device, memory_format=torch.channels_last).train()
    loss_fn = DenoiserLoss(config, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=1e-4)
    ema = EMAModel(model.parameters(), decay=config.ema_decay)
    rng, generator = np.random.default_rng(config.seed), torch.Generator().manual_seed(config.seed)
    losses: list[tuple[int, float, float]] = []
    step, checkpoint = 0, out_dir / "checkpoint.pt"
    if resume and checkpoint.exists():
        step, losses = _load_checkpoint(checkpoint, config, model, optimizer, ema, rng, generator)
    started = time.perf_counter()
    bar = tqdm(total=config.steps, initial=step, disable=not show_progress, unit="step")
    while step < config.steps:
        index = rng.integers(0, len(examples["target"]), config.batch_size)
        residual, cond = make_batch(examples, index, config, rng)
        noisy, sigma, velocity = training_pair(residual, generator, config.p_sigma_one)
        noisy, sigma, velocity, cond = (t.to(device) for t in (noisy, sigma, velocity, cond))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        loss = loss_fn(model(noisy, sigma, cond), noisy, sigma, velocity, cond)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        ema.step(model.parameters())
        step += 1
        losses.append((step, loss.item(), time.perf_counter() - started))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1][1]:.4f}")
        if step % config.checkpoint_every == 0 or step in (config.steps, stop_at):
            _save_checkpoint(checkpoint, config, model, optimizer, ema, rng, generator, step,
                             losses)  # fmt: skip
            write_loss_curve(losses, out_dir)
        if step == stop_at:
            bar.close()
            return checkpoint
    bar.close()
    ema.copy_to(model.parameters())
    return save_denoiser(model.cpu().eval(), out_dir / "denoiser.pt", {
        "train_config": config.to_dict(), "steps": step,
        "windows": int(len(examples["target"])),
        "train_seconds": round(losses[-1][2], 1) if losses else 0.0,
    })  # fmt: skip


class DenoiserLoss:
    """The training loss: mean squared velocity error, plus ``perceptual_weight`` x the mean
    ST-LPIPS between the one-jump window estimate and the original window (both -1..1)."""

    def __init__(self, config: TrainConfig, device: str = "cpu"):
        self.weight = config.perceptual_weight
        self.scale = config.denoiser.residual_scale
        self.lpips = None
        if self.weight > 0:
            from semcodec.evaluation.metrics.perceptual import load_stlpips

            self.lpips = load_stlpips(device=device)

    def __call__(self, predicted, noisy, sigma, velocity, cond):
        import torch

        loss = torch.nn.functional.mse_loss(predicted, velocity)
        if self.lpips is None:
            return loss
        s = sigma.view(-1, 1, 1, 1)
        warp = cond[:, :3]
        estimate = (warp + (noisy - s * predicted) / self.scale).clamp(-1, 1)
        target = (warp + (noisy - s * velocity) / self.scale).clamp(-1, 1)
        return loss + self.weight * self.lpips(estimate, target).mean()


def _save_checkpoint(path: Path, config, model, optimizer, ema, rng, generator, step,
                     losses) -> None:  # fmt: skip
    import torch

    state = {"config": config.to_dict(), "model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "ema": ema.state_dict(), "step": step,
             "rng": rng.bit_generator.state, "generator": generator.get_state(),
             "losses": losses}  # fmt: skip
    partial = path.with_suffix(".partial")
    torch.save(state, partial)
    partial.replace(path)


def _load_checkpoint(path: Path, config, model, optimizer, ema, rng, generator):
    import torch

    state = torch.load(path, weights_only=False)
    if TrainConfig.from_dict(state["config"]) != config:
        raise TrainConfigError(f"{path} was made with another config: start a new output "
                               "folder or train without --resume")  # fmt: skip
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    ema.load_state_dict(state["ema"])
    rng.bit_generator.state = state["rng"]
    generator.set_state(state["generator"])
    log.info("resumed at step %d", state["step"])
    return state["step"], [tuple(x) for x in state["losses"]]


def write_loss_curve(losses: list[tuple[int, float, float]], out_dir: Path) -> None:
    """``loss.csv`` (step, loss, seconds) and ``loss.png`` (loss and its running mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["step,loss,seconds"] + [f"{s},{v:.6f},{t:.1f}" for s, v, t in losses]
    (out_dir / "loss.csv").write_text("\n".join(lines) + "\n")
    steps = np.array([s for s, _, _ in losses])
    values = np.array([v for _, v, _ in losses])
    width = max(1, len(values) // 50)
    smooth = np.convolve(values, np.ones(width) / width, mode="valid")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, values, alpha=0.3, lw=0.5, label="loss")
    ax.plot(steps[width - 1 :], smooth, lw=1.5, label=f"mean of {width}")
    ax.set_xlabel("step")
    ax.set_ylabel("flow-matching MSE")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "loss.png", dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------- scoring


def score_windows(model, examples: dict[str, np.ndarray], steps: tuple[int, ...],
                  windows: int | None = None, seed: int = 0, device: str = "cpu",
                  batch: int = 64) -> dict[str, dict[str, float]]:  # fmt: skip
    """How much the denoiser improves on ``warp`` v2 in person windows it was not trained on.

    For each of ``steps`` (and for ``warp`` itself) returns ``{"st_lpips": mean window
    ST-LPIPS against the original, "box_mse": mean squared error inside the box (0..255
    levels)}``, over ``windows`` examples drawn with ``seed`` (all when None). The previous
    output is stood in for by the previous ``warp`` window (the decoder's own previous output
    lies between it and the original). Noise is drawn from ``seed``, one per window.
    """
    import torch

    from semcodec.codec.reconstruct.denoiser import sample_residual, to_tensor
    from semcodec.codec.reconstruct.windows import conditioning
    from semcodec.evaluation.metrics.perceptual import load_stlpips

    count = len(examples["target"])
    rng = np.random.default_rng(seed)
    index = np.arange(count) if windows is None or windows >= count else np.sort(
        rng.choice(count, windows, replace=False))  # fmt: skip
    cond = conditioning(examples["warp"][index].astype(np.float32),
                        examples["mask"][index].astype(np.float32),
                        examples["prev_warp"][index].astype(np.float32),
                        examples["has_prev"][index])  # fmt: skip
    cond = torch.from_numpy(cond).permute(0, 3, 1, 2).contiguous().to(device)
    target = to_tensor(examples["target"][index]).to(device)
    lpips = load_stlpips(device=device)
    model = model.to(device).eval()
    noise = torch.randn(target.shape, generator=torch.Generator().manual_seed(seed)).to(device)

    def measure(images: torch.Tensor) -> dict[str, float]:
        mask = cond[:, 3:4]
        distance = torch.cat([lpips(images[k:k + batch], target[k:k + batch])
                              for k in range(0, len(images), batch)])  # fmt: skip
        squared = ((images - target) * 127.5).pow(2) * mask
        box_mse = squared.sum((1, 2, 3)) / (3 * mask.sum((1, 2, 3)).clamp(min=1))
        return {"st_lpips": round(distance.mean().item(), 4),
                "box_mse": round(box_mse.mean().item(), 1)}  # fmt: skip

    scores = {"windows": {"count": float(len(index))}}
    with torch.inference_mode():
        scores["warp"] = measure(cond[:, :3])
        for s in steps:
            residual = torch.cat([sample_residual(model, cond[k:k + batch], s, noise[k:k + batch])
                                  for k in range(0, len(index), batch)])  # fmt: skip
            scores[f"S{s}"] = measure((cond[:, :3] + residual).clamp(-1, 1))
    return scores
