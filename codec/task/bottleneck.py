"""The learned bottleneck between the split detector's halves.

The edge maps a window's split features ``(64, 19, 19)`` float32 to a few channels and rounds
them (:meth:`FeatureBottleneck.quantize`); the integers are entropy-coded with
:mod:`codec.entropy.features`; the cloud maps the decoded integers back to split features
(:meth:`FeatureBottleneck.reconstruct`) and finishes the detection.

A bottleneck file (``torch.save`` of a plain dict, loaded with ``weights_only=True``) holds
the transforms' state dict, the symbol counts the entropy tables are rebuilt from (integers:
the same tables on every machine), the split config and the training metadata (β, data,
steps). :meth:`TaskBottleneck.sha256` names it in a stream header.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from semcodec.codec.entropy.features import FeatureTables, SymbolCounts, tables_from_counts
from semcodec.codec.task.split import SplitConfig

#: The file format this version reads and writes (2: with the update map's counts).
FORMAT = "semcodec-task-bottleneck/2"
#: Formats whose transforms can be read (version 1 had no update-map counts).
TRANSFORM_FORMATS = ("semcodec-task-bottleneck/1", FORMAT)
#: The most latent channels a bottleneck file may declare (a bound for untrusted files).
MAX_LATENT = 256


class BottleneckFileError(ValueError):
    """A bottleneck file that cannot be read or does not hold a bottleneck."""


@dataclass(frozen=True)
class BottleneckConfig:
    """Shape of the transforms.

    Attributes:
        channels: channels of the split features (64 after ``expanded_conv_6``).
        latent: channels sent (quantized to integers).
        hidden: channels of the transforms' inner layers.
    """

    channels: int = 64
    latent: int = 16
    hidden: int = 96


class FeatureBottleneck(nn.Module):
    """Analysis (edge) and synthesis (cloud) transforms, 3x3 convolutions at the features'
    resolution.

    Shapes: features ``(N, channels, S, S)`` float32 <-> latents ``(N, latent, S, S)``.
    """

    def __init__(self, config: BottleneckConfig | None = None) -> None:
        super().__init__()
        c = self.config = config or BottleneckConfig()
        self.analysis = nn.Sequential(
            nn.Conv2d(c.channels, c.hidden, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c.hidden, c.latent, 3, padding=1),
        )  # fmt: skip
        self.synthesis = nn.Sequential(
            nn.Conv2d(c.latent, c.hidden, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c.hidden, c.hidden, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c.hidden, c.channels, 1),
        )  # fmt: skip

    def latents(self, features: Tensor) -> Tensor:
        """Unrounded latents (training)."""
        return self.analysis(features)

    @torch.inference_mode()
    def quantize(self, features: Tensor) -> np.ndarray:
        """The edge: features -> ``(N, latent, S, S)`` int32 (rounded latents)."""
        return torch.round(self.analysis(features)).to(torch.int32).numpy()

    def synthesize(self, latents: Tensor) -> Tensor:
        """Latents (rounded or not) -> ``(N, channels, S, S)`` float32 features."""
        return self.synthesis(latents)

    @torch.inference_mode()
    def reconstruct(self, q: np.ndarray) -> Tensor:
        """The cloud: ``(N, latent, S, S)`` integers -> split features."""
        x = torch.from_numpy(np.ascontiguousarray(q, np.float32))
        return self.synthesis(x).contiguous(memory_format=torch.channels_last)


@dataclass
class TaskBottleneck:
    """A trained bottleneck: transforms, entropy tables and how it was made.

    Attributes:
        model: the transforms (eval mode).
        tables: the entropy tables of its integers.
        split: the detector cut and windows it was trained for.
        metadata: ``beta``, training data and steps, ``skip_threshold`` (JSON-able).
        counts: the symbol counts the tables come from.
    """

    model: FeatureBottleneck
    tables: FeatureTables
    split: SplitConfig
    counts: SymbolCounts
    metadata: dict = field(default_factory=dict)

    @property
    def skip_threshold(self) -> int:
        """The encoder's default skip threshold: the one the tables were counted with."""
        return int(self.metadata.get("skip_threshold", 0))

    def to_bytes(self) -> bytes:
        """The file's bytes (``torch.save`` of plain tensors, numbers and strings)."""
        blob = {
            "format": FORMAT,
            "config": dataclasses.asdict(self.model.config),
            "split": dataclasses.asdict(self.split),
            "state_dict": self.model.state_dict(),
            "factorized_counts": torch.from_numpy(self.counts.factorized),
            "temporal_counts": torch.from_numpy(self.counts.temporal),
            "groups": int(self.counts.groups),
            "update_counts": torch.from_numpy(self.counts.updates),
            "metadata": self.metadata,
        }
        buffer = io.BytesIO()
        torch.save(blob, buffer)
        return buffer.getvalue()

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the file atomically (a partial file never has the final name)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(self.to_bytes())
        partial.replace(path)
        return path

    def sha256(self) -> str:
        """Names the bottleneck: the transforms' weights, the tables and the split."""
        h = hashlib.sha256()
        for name, value in sorted(self.model.state_dict().items()):
            h.update(name.encode())
            h.update(value.detach().cpu().contiguous().numpy().tobytes())
        h.update(self.tables.sha256().encode())
        # the cut and the layout it was trained with, as hashed before the split config grew
        # per-camera fields (layouts now come from the camera's profile, in the header)
        split = self.split
        h.update(repr((split.after, split.tiles, split.tile_overlap, split.include_full_frame,
                       split.score_threshold, split.nms_iou)).encode())  # fmt: skip
        return h.hexdigest()


def _read_blob(path: Path, formats: tuple[str, ...]) -> dict:
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise BottleneckFileError(f"{path}: no such bottleneck file") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds on garbage
        raise BottleneckFileError(f"{path}: not a bottleneck file ({exc})") from None
    found = blob.get("format") if isinstance(blob, dict) else None
    if found not in formats:
        hint = (f" ({found}: refit its tables with `semcodec-bench train-bottleneck --refit`)"
                if found in TRANSFORM_FORMATS else "")  # fmt: skip
        raise BottleneckFileError(f"{path}: not a {FORMAT} file{hint}")
    return blob


def _transforms(blob: dict) -> tuple[FeatureBottleneck, SplitConfig]:
    config = BottleneckConfig(**blob["config"])
    if not 1 <= config.latent <= MAX_LATENT:
        raise ValueError(f"latent channels {config.latent} not in 1..{MAX_LATENT}")
    model = FeatureBottleneck(config)
    model.load_state_dict(blob["state_dict"])
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, SplitConfig(**blob["split"])


def load_transforms(path: str | os.PathLike) -> tuple[FeatureBottleneck, SplitConfig, dict]:
    """The transforms, split and metadata of a bottleneck file of any format (to refit its
    tables: :func:`evaluation.training.bottleneck.refit_tables`).

    Raises:
        BottleneckFileError: not a bottleneck file, or inconsistent transforms.
    """
    path = Path(path)
    blob = _read_blob(path, TRANSFORM_FORMATS)
    try:
        model, split = _transforms(blob)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise BottleneckFileError(f"{path}: inconsistent bottleneck file ({exc})") from None
    return model, split, dict(blob.get("metadata", {}))


def load_bottleneck(path: str | os.PathLike) -> TaskBottleneck:
    """Reads a file written by :meth:`TaskBottleneck.save`.

    Raises:
        BottleneckFileError: not a bottleneck file, or one whose parts do not fit together.
    """
    path = Path(path)
    blob = _read_blob(path, (FORMAT,))
    try:
        model, split = _transforms(blob)
        counts = SymbolCounts(blob["factorized_counts"].numpy(), blob["temporal_counts"].numpy(),
                              int(blob["groups"]), blob["update_counts"].numpy())  # fmt: skip
        tables = tables_from_counts(counts)
        if tables.channels != model.config.latent:
            raise ValueError(f"tables for {tables.channels} channels, latent "
                             f"{model.config.latent}")  # fmt: skip
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise BottleneckFileError(f"{path}: inconsistent bottleneck file ({exc})") from None
    return TaskBottleneck(model, tables, split, counts, dict(blob.get("metadata", {})))
