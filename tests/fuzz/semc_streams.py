"""Small synthetic ``.semc`` streams built without any model, for decoder tests and fuzzing.

The frames are a textured background with a few moving rectangles ("people"); the scaffolds
are made from the rectangles directly (label maps, boxes, WebP references of the rectangles
with each keyframe, a constant flow field, stick poses) and
coded with the codec's own entropy and intra coders, exactly as the edge encoder lays out its
units. So every stream here decodes bit-exactly with ``ScaffoldDecoder`` and the
``cloud-decoder decode`` CLI, in milliseconds for tiny frames.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from semcodec.codec.bitstream import (
    ModelEntry,
    StreamHeader,
    SubStream,
    SubStreamType,
    Unit,
    UnitKind,
)
from semcodec.codec.core.types import NUM_KEYPOINTS, Pose
from semcodec.codec.scaffold.levels import LevelConfig, level_config


def synthetic_frames(count: int, size: tuple[int, int], seed: int = 0) -> np.ndarray:
    """``(count, height, width, 3)`` uint8 RGB: a smooth random background and 2 rectangles
    moving right by 1 pixel per frame."""
    width, height = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // max(width - 1, 1), yy * 255 // max(height - 1, 1),
                     (xx + yy) * 127 // max(width + height - 2, 1)], -1)  # fmt: skip
    base = (base + rng.integers(0, 16, base.shape)).clip(0, 255).astype(np.uint8)
    frames = np.repeat(base[None], count, axis=0)
    for t, (x, y, w, h) in _boxes(count, size):
        frames[t, y : y + h, x : x + w] = (200, 40, 40) if x % 2 else (40, 40, 200)
    return frames


def _boxes(count: int, size: tuple[int, int]) -> Iterator[tuple[int, tuple[int, int, int, int]]]:
    width, height = size
    w, h = max(2, width // 6), max(2, height // 3)
    for t in range(count):
        for k in range(2):
            x = min(width - w, 1 + t + k * width // 2)
            yield t, (x, height // 4 + k * 2, w, h)


def _labels(t: int, count: int, frame: tuple[int, int], shape: tuple[int, int]) -> np.ndarray:
    """The rectangles of frame ``t`` as a ``(h, w)`` uint16 label map (ids 1, 2)."""
    width, height = frame
    labels = np.zeros(shape, np.uint16)
    sy, sx = shape[0] / height, shape[1] / width
    boxes = [b for tt, b in _boxes(count, frame) if tt == t]
    for k, (x, y, w, h) in enumerate(boxes, start=1):
        labels[int(y * sy) : max(int(y * sy) + 1, int((y + h) * sy)),
               int(x * sx) : max(int(x * sx) + 1, int((x + w) * sx))] = k  # fmt: skip
    return labels


def _poses(t: int) -> list[Pose]:
    rng = np.random.default_rng(t)
    out = []
    for track_id in (1, 2):
        keypoints = (rng.random((NUM_KEYPOINTS, 2)) * 30 + 10 * track_id + t).astype(np.float32)
        visibility = np.full(NUM_KEYPOINTS, 0.9, np.float32)
        out.append(Pose(track_id, keypoints, visibility, 0.8))
    return out


def synthetic_config(level: int, **overrides: object) -> LevelConfig:
    """The level preset with a fast keyframe coder (WebP) unless overridden."""
    overrides.setdefault("keyframe_coder", "webp")
    overrides.setdefault("keyframe_interval", 3)
    return level_config(level, **overrides)


def synthetic_stream(level: int = 2, count: int = 4, size: tuple[int, int] = (48, 32),
                     seed: int = 0, config: LevelConfig | None = None,
                     ) -> tuple[StreamHeader, list[Unit]]:  # fmt: skip
    """A complete stream (header, units ending with END) of ``count`` synthetic frames."""
    from semcodec.codec.core.types import Tracks
    from semcodec.codec.entropy.boxes import BoxCoder
    from semcodec.codec.entropy.flow import FlowCoder, load_default_prior
    from semcodec.codec.entropy.pose import PoseCoder
    from semcodec.codec.entropy.segmentation import SegmentationCoder
    from semcodec.codec.keyframes import create_intra_coder
    from semcodec.codec.scaffold.appearance import (
        encode_ref,
        intra_entry,
        pack_refs,
        strip_container,
    )
    from semcodec.codec.scaffold.codec import flow_shape, segmentation_shape

    cfg = config or synthetic_config(level)
    frames = synthetic_frames(count, size, seed)
    boxes = BoxCoder(cfg.box_step_px, size) if cfg.sends_boxes else None
    previous_boxes: dict = {}
    intra = create_intra_coder(cfg.keyframe_coder, downscale=cfg.keyframe_scale)
    seg, pose = SegmentationCoder(), PoseCoder(step_px=cfg.pose_step_px)
    prior = load_default_prior(cfg.flow_step_px) if cfg.sends_flow else None
    flow = FlowCoder(prior, step=cfg.flow_step_px) if prior else None
    previous_labels, previous_poses = None, {}
    units = []
    for t in range(count):
        key = t == 0 or (cfg.keyframe_interval and t % cfg.keyframe_interval == 0)
        subs = []
        if key:
            seg.reset()
            previous_labels, previous_poses, previous_boxes = None, {}, {}
            subs.append(SubStream(SubStreamType.KEYFRAME_IMAGE, intra.encode(frames[t], 50)))
        if boxes is not None:
            rects = np.array([(x, y, x + w, y + h) for tt, (x, y, w, h) in _boxes(count, size)
                              if tt == t], np.float32)  # fmt: skip
            tracks = boxes.quantize(Tracks(rects, np.ones(2, np.float32), np.array([1, 2])))
            subs.append(SubStream(SubStreamType.TRACKS, boxes.encode(tracks, previous_boxes)))
            previous_boxes = boxes.update_state(previous_boxes, tracks)
        if cfg.sends_appearance and key:  # a reference of each rectangle with the keyframe
            refs = {}
            for tid, (x1, y1, x2, y2) in zip((1, 2), tracks.boxes.astype(int), strict=True):
                refs[tid] = encode_ref(np.ascontiguousarray(frames[t, y1:y2, x1:x2]), 30)
                if cfg.appearance_vp8:  # the VP8 frame without its container
                    refs[tid] = strip_container(refs[tid])
                if cfg.appearance_inter:  # a payload of entries: each coded whole
                    refs[tid] = intra_entry(refs[tid])
            subs.append(SubStream(SubStreamType.APPEARANCE, pack_refs(refs)))
        if cfg.sends_pose:
            poses = _poses(t)
            subs.append(SubStream(SubStreamType.POSE, pose.encode(poses, previous_poses)))
            previous_poses = pose.state(pose.quantize(poses))
        if cfg.sends_segmentation:
            labels = _labels(t, count, size, segmentation_shape(size, cfg.seg_scale))
            subs.append(SubStream(SubStreamType.SEGMENTATION, seg.encode(labels, previous_labels)))
            previous_labels = labels
        if cfg.plate_refine > 0 and cfg.plate != "frame" and not key:  # a plate tile
            from semcodec.codec.scaffold.codec import plate_tiles

            index = t % len(plate_tiles(size))
            x0, y0, x1, y1 = plate_tiles(size)[index]
            tile = create_intra_coder(cfg.keyframe_coder).encode(
                np.ascontiguousarray(frames[t, y0:y1, x0:x1]), 50)  # fmt: skip
            subs.append(SubStream(SubStreamType.PLATE_TILE, bytes([index]) + tile))
        if flow is not None and not key:
            h, w = flow_shape(size, cfg.flow_scale)
            field = np.zeros((h, w, 2), np.float32)
            field[..., 0] = -1.0
            subs.append(SubStream(SubStreamType.FLOW, flow.encode(field)))
        units.append(Unit(UnitKind.KEYFRAME if key else UnitKind.FRAME, t, tuple(subs)))
    units.append(Unit(UnitKind.END, count))
    models = (ModelEntry("flow_prior", prior.sha256),) if prior is not None else ()
    header = StreamHeader(size[0], size[1], 7, 1, cfg.level, count, models, cfg.to_dict())
    return header, units


def stream_bytes(header: StreamHeader, units: list[Unit]) -> bytes:
    """The encoded stream (header then units)."""
    return header.to_bytes() + b"".join(u.to_bytes() for u in units)


def with_settings(header: StreamHeader, **settings: object) -> StreamHeader:
    """``header`` with some settings (level config fields) replaced, as strings."""
    merged = dict(header.settings)
    merged.update({k: str(v) for k, v in settings.items()})
    return dataclasses.replace(header, settings=merged)
