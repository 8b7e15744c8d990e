"""Reading a sequence for a measurement: its frames (a range of them, optionally through a
camera transform) and its ground truth cut to the same range."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from semcodec.codec.core.sources import SourceError, open_source


@lru_cache(maxsize=2)
def load_sequence(path: str, frames: int | None, source_options: tuple = (), start: int = 1):
    """``(frames (T,H,W,3) uint8 RGB, SourceInfo, GroundTruth | None)`` for a sequence.

    Frames ``start .. start+frames-1`` are read; the ground truth is cut to them and
    renumbered so that ``frames[0]`` is frame 1 (as everything downstream counts).

    ``source_options`` are ``(key, value)`` pairs for :func:`codec.core.sources.open_source`
    (``fps``, ``width``, ``height``: what a raw ``.yuv`` needs), and ``camera_transform``
    (:mod:`evaluation.data.camera`: a new camera made from the sequence; the frames, the ground
    truth and the info's size follow, and its name gets the transform in brackets). Cached
    per process, so the cells of one sequence read it once.
    """
    from semcodec.evaluation.data.camera import parse_camera_transform
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    options = dict(source_options)
    camera = parse_camera_transform(options.pop("camera_transform", None))
    source = open_source(path, **options)
    pixels = source.read(start=start, count=frames)
    if len(pixels) == 0:
        raise SourceError(f"{path}: no frames could be read")
    info, gt = source.info, None
    if info.groundtruth is not None:
        gt = load_mot_groundtruth(info.groundtruth)
        gt = gt.restrict(start, start + len(pixels) - 1).renumbered(start)
    if not camera.is_identity:
        gt = None if gt is None else camera.groundtruth(gt, info.width, info.height)
        pixels = camera.frames(pixels)
        info = dataclasses.replace(info, name=f"{info.name}[{camera.describe()}]",
                                   width=pixels.shape[2], height=pixels.shape[1])  # fmt: skip
    return pixels, info, gt


def sequence_name(path: str) -> str:
    """The display name of a sequence (``seqinfo.ini`` name, else the file or folder name)."""
    return open_source(path).info.name
