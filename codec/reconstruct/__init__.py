"""Reconstructors: decoded scaffolds (+ state) -> frames, chosen per stream by name.

``warp`` is the deterministic reference; a conditional diffusion decoder registers itself
under another name behind the same :class:`Reconstructor` interface.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from semcodec.codec.registry import Registry
from semcodec.codec.scaffold.types import FrameScaffold


@dataclass
class DecodedFrame:
    """One decoded unit: the exact scaffolds plus the decoded keyframe picture, if any.

    Attributes:
        scaffold: what the edge sent, bit-exact after quantization.
        frame_size: ``(width, height)`` of the frames to rebuild.
        keyframe_image: ``(H, W, 3)`` uint8 RGB when this frame is a keyframe or carries a
            plate refresh, else None.
        appearances: track id -> ``(h, w, 4)`` uint8 RGBA appearance reference sent with
            this frame (the person inside their box, alpha the mask).
        plate: the keyframe picture is a person-free background plate (people are drawn
            from their boxes and appearance references), not the frame itself.
        plate_refresh: ``keyframe_image`` came in a frame unit: a better plate replacing
            the one held, everything else (references, tracks) kept.
        fps: the stream's frame rate (frames per second; 0: unknown).
    """

    scaffold: FrameScaffold
    frame_size: tuple[int, int]
    keyframe_image: np.ndarray | None = None
    appearances: dict[int, np.ndarray] = field(default_factory=dict)
    plate: bool = False
    plate_refresh: bool = False
    fps: float = 0.0


class Reconstructor(abc.ABC):
    """Turns a stream of :class:`DecodedFrame` into ``(H, W, 3)`` uint8 RGB frames, in order."""

    name: ClassVar[str] = ""

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

    def flops_per_frame(self) -> int | None:
        """Decoder FLOPs per frame for neural reconstructors; None for classical ones."""
        return None


class ReconstructionError(RuntimeError):
    """The stream cannot be reconstructed (e.g. it does not start with a keyframe)."""


class UnknownReconstructorError(ReconstructionError, ValueError):
    """No reconstructor is registered under that name (or it rejects the options given)."""


def _import_builtin_reconstructors() -> None:
    from semcodec.codec.reconstruct import (  # noqa: F401  (register "diffusion", "restore", "warp")
        diffusion,
        restore,
        warp,
    )


#: The options each reconstructor takes; the others take none. The cloud CLI and the
#: benchmark check options with it.
DECODER_OPTIONS: dict[str, tuple[str, ...]] = {
    "diffusion": ("steps", "seed", "weights", "previous"),
    "restore": ("weights", "memory_mb", "matte", "fade", "smooth_s"),
    "warp": ("matte", "fade", "smooth_s"),
}

RECONSTRUCTORS: Registry[Reconstructor] = Registry(
    "reconstructor", Reconstructor, UnknownReconstructorError, "semcodec.reconstructors",
    builtins=_import_builtin_reconstructors, builtin_names=tuple(DECODER_OPTIONS),
)  # fmt: skip
#: Class decorator registering a reconstructor under a name (a duplicate name is an error).
register_reconstructor = RECONSTRUCTORS.register


def available_reconstructors() -> list[str]:
    """Registered reconstructor names, sorted."""
    return RECONSTRUCTORS.names()


def create_reconstructor(name: str, **options: object) -> Reconstructor:
    """Instantiates reconstructor ``name`` (``"warp"``)."""
    return RECONSTRUCTORS.create(name, **options)
