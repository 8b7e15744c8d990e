"""Weight files of the neural reconstructors: ``torch.save`` of ``{"config", "metadata",
"state_dict"}`` (float32 tensors), written atomically; load with ``weights_only=True``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from semcodec.codec.reconstruct import UnknownReconstructorError


def save_weights(model: torch.nn.Module, config: dict, path: str | Path, metadata: dict) -> Path:
    """Writes ``model``'s float32 weights with ``config`` (what rebuilds the model) and
    ``metadata`` to ``path``; a partial file never stands under the final name."""
    state = {"config": config, "metadata": metadata,
             "state_dict": {k: v.detach().float().contiguous()
                            for k, v in model.state_dict().items()}}  # fmt: skip
    partial = Path(path).with_suffix(".partial")
    torch.save(state, partial)
    partial.replace(path)
    return Path(path)


def load_weights(path: str | Path, build: Callable[[dict], torch.nn.Module],
                 what: str) -> torch.nn.Module:  # fmt: skip
    """The model :func:`save_weights` wrote to ``path``, rebuilt by ``build(config)``, in eval
    mode, with its ``metadata`` attribute.

    Raises:
        UnknownReconstructorError: ``path`` is not such a file of a ``what`` (its name, for
            the message).
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model = build(state["config"])
        model.load_state_dict(state["state_dict"])
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise UnknownReconstructorError(f"cannot load {what} weights {path}: {exc}") from None
    model.metadata = state.get("metadata", {})
    return model.eval()
