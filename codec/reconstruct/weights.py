"""Weight files of the neural reconstructors: ``torch.save`` of ``{"config", "metadata",
"state_dict"}`` (float32 tensors), written atomically; load with ``weights_only=True``;
:func:`inference`, the one way the decoders' small networks are run; and
:func:`conv_flops`, the way their FLOPs are counted."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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
    except OSError as exc:
        raise UnknownReconstructorError(f"cannot load {what} weights {path}: {exc}") from None
    except Exception as exc:  # torch's unpickler raises many kinds on bytes not its own
        raise UnknownReconstructorError(f"cannot load {what} weights {path}: not a weights "
                                        f"file ({type(exc).__name__}: {exc})") from None
    try:
        model = build(state["config"])
        model.load_state_dict(state["state_dict"])
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise UnknownReconstructorError(f"cannot load {what} weights {path}: {exc}") from None
    model.metadata = state.get("metadata", {})
    return model.eval()


def shipped_or_file(name: str | Path, shipped: dict[str, str], what: str) -> Path:
    """The file of ``name``: a shipped network's short name (a key of ``shipped``) or registry
    name (a value; resolved and its sha256 verified, a mismatch refused with
    :class:`~codec.core.models.ModelChecksumError`), or a file of a ``what``.

    Raises:
        UnknownReconstructorError: none of those.
    """
    from semcodec.codec.core.models import resolve_model

    registry = shipped.get(str(name), str(name))
    if registry in shipped.values():
        return resolve_model(registry)
    if not Path(name).is_file():
        raise UnknownReconstructorError(f"{what} {name}: not a shipped {what} "
                                        f"({', '.join(shipped)}) nor a {what} file")
    return Path(name)


#: Torch intra-op threads for the decoders' small per-person networks (the restorer, the
#: refiner). Their convolutions are a few milliseconds on 96x48 pictures: on two threads of
#: a CPU another process is also using, OpenMP's waiting between layers made one w8 refiner
#: call 313 ms against 2.3 ms on one thread (1.8 ms on two threads of an idle CPU; the
#: 2-core VM, `docs/journal.md`, issue 39 fifth session). One thread also makes the frames
#: independent of the machine's core count.
INFERENCE_THREADS = 1


@contextlib.contextmanager
def inference(threads: int = INFERENCE_THREADS) -> Iterator[None]:
    """Runs the block in ``torch.inference_mode`` on ``threads`` intra-op threads, then
    restores the process's count."""
    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


#: The layers :func:`conv_flops` counts.
_COUNTED = (torch.nn.Conv2d, torch.nn.ConvTranspose2d, torch.nn.Linear)


def conv_flops(model: torch.nn.Module, *inputs: torch.Tensor) -> int:
    """FLOPs of one call ``model(*inputs)`` in its convolutions and linear layers, counted
    as :class:`torch.utils.flop_counter.FlopCounterMode` counts them (a multiply-add is 2,
    biases are not counted, a transposed convolution is counted over its input's pixels;
    activations and additions are counted by neither), from forward hooks.

    The dispatch mode is not used: its first use in a process imports ``torch._dynamo``,
    about 3 s of a decoder's start on the 2-core VM. A network with other counted work
    (matrix products outside these layers, attention) must use the mode instead.
    """
    total = 0

    def count(layer: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
        nonlocal total
        if isinstance(layer, torch.nn.Linear):
            total += 2 * out.numel() * layer.in_features
            return
        x = args[0]
        over = x if isinstance(layer, torch.nn.ConvTranspose2d) else out
        total += 2 * over.shape[0] * over[0, 0].numel() * layer.weight.numel()

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, _COUNTED)]
    try:
        with torch.inference_mode():
            model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return total
