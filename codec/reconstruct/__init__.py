"""Reconstructors: decoded scaffolds (+ state) -> frames, chosen per stream by name.

``warp`` is the deterministic reference; a conditional diffusion decoder registers itself
under another name behind the same :class:`Reconstructor` interface.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import numpy as np

from semcodec.codec.core.registry import Registry
from semcodec.codec.core.types import DecodedFrame


class Reconstructor(abc.ABC):
    """Turns a stream of :class:`DecodedFrame` into ``(H, W, 3)`` uint8 RGB frames, in order."""

    name: ClassVar[str] = ""
    #: The parts (networks) skipped for what arrives from now on: a decoder that falls
    #: behind its camera steps down (:meth:`steps_down`) and keeps its state.
    skipped: frozenset[str] = frozenset()

    @abc.abstractmethod
    def reset(self) -> None:
        """Forgets all state (a new stream begins)."""

    @abc.abstractmethod
    def reconstruct(self, frame: DecodedFrame) -> np.ndarray:
        """The frame for ``frame`` (frames must arrive in order, the first a keyframe)."""

    def describe(self) -> dict:
        """The name and settings that decide this reconstructor's output (for ``stream.json``
        and benchmark rows)."""
        return {"name": self.name}

    def steps_down(self) -> tuple[str, ...]:
        """The parts this reconstructor can skip to run cheaper, the first to go first
        (none: it cannot)."""
        return ()

    def flops_per_frame(self) -> int | None:
        """Decoder FLOPs per frame for neural reconstructors; None for classical ones."""
        return None


class ReconstructionError(RuntimeError):
    """The stream cannot be reconstructed (e.g. it does not start with a keyframe)."""


class UnknownReconstructorError(ReconstructionError, ValueError):
    """No reconstructor is registered under that name (or it rejects the options given)."""


#: The built-in reconstructors (each imported on first use). Their options are declared in
#: :data:`codec.reconstruct.pipeline.OPTIONS`.
BUILTIN_RECONSTRUCTORS = ("animate", "diffusion", "restore", "warp")

RECONSTRUCTORS: Registry[Reconstructor] = Registry(
    "reconstructor", Reconstructor, UnknownReconstructorError, "semcodec.reconstructors",
    builtins={name: f"semcodec.codec.reconstruct.{name}" for name in BUILTIN_RECONSTRUCTORS},
)  # fmt: skip
#: Class decorator registering a reconstructor under a name (a duplicate name is an error).
register_reconstructor = RECONSTRUCTORS.register


def available_reconstructors() -> list[str]:
    """Reconstructor names, sorted (built-ins and plugins; imports none of them)."""
    return RECONSTRUCTORS.names()


def create_reconstructor(name: str, **options: object) -> Reconstructor:
    """Instantiates reconstructor ``name`` (``"warp"``)."""
    return RECONSTRUCTORS.create(name, **options)
