"""Weight files of the neural reconstructors: ``torch.save`` of ``{"config", "metadata",
"state_dict"}`` (float32 tensors), written atomically; load with ``weights_only=True``."""

from __future__ import annotations

from pathlib import Path

import torch


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
