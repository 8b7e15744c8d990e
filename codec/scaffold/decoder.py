"""The cloud's scaffold decoder: entropy-coded units -> the scaffolds, exactly as the edge
quantized them, which a :class:`~codec.reconstruct.Reconstructor` turns into frames.

The decoder trusts nothing in a stream: the header is checked against
:class:`~codec.scaffold.streams.StreamLimits` (frame size, frame rate, scales, quantization
steps, label-map and flow-grid sizes) before anything is allocated; units must be numbered
0, 1, 2, ... from a keyframe, each carrying exactly the sub-streams its kind and the level send
(a frame unit of a plate level may add a keyframe picture: a plate refresh, which replaces
the plate and keeps every other state; or a plate tile); an END unit must close the stream
(:meth:`ScaffoldDecoder.finish`). Every failure is a
:class:`~codec.scaffold.streams.ScaffoldCodecError` subclass (or a ``BitstreamError`` /
``KeyframeError`` from the layers below) saying what is wrong. The plate it holds is
:class:`~codec.scaffold.plate.PlateDecoder`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from semcodec.codec.bitstream import StreamHeader, SubStreamType, Unit, UnitKind, read_stream
from semcodec.codec.core.types import DecodedFrame, Flow, FrameScaffold, Segmentation, Tracks
from semcodec.codec.scaffold.levels import LevelConfig
from semcodec.codec.scaffold.plate.decoder import PlateDecoder
from semcodec.codec.scaffold.streams import (
    DEFAULT_LIMITS,
    IncompleteStreamError,
    PayloadError,
    ScaffoldCodecError,
    StreamCoders,
    StreamLimits,
    StreamStructureError,
    default_flow_prior,
    flow_shape,
    segmentation_shape,
)

_SCAFFOLD_NAMES = {
    SubStreamType.KEYFRAME_IMAGE: "keyframe picture",
    SubStreamType.SEGMENTATION: "segmentation",
    SubStreamType.POSE: "pose",
    SubStreamType.FLOW: "flow",
    SubStreamType.TRACKS: "box",
    SubStreamType.SPARSE_POSE: "sparse pose",
}


class ScaffoldDecoder:
    """The cloud's decoder for one stream: units -> :class:`DecodedFrame` (exact scaffolds).

    Units must come in stream order: the first a KEYFRAME with seq 0, then seq 1, 2, ...
    without gaps or repeats, then at most one END whose seq is the number of frames. Each
    unit must carry exactly the sub-streams its kind and the header's level config send (each
    once; a METADATA sub-stream is allowed and ignored). Call :meth:`finish` after the last
    unit to check that the stream was complete.

    Args:
        header: the stream's header (it carries every setting the encoder used).
        flow_prior: the flow prior whose sha256 the header names; default: the shipped one.
        limits: what the header may ask for (checked here, before anything is allocated).
        upscale: ``(picture, (width, height)) -> picture``, brings a plate coded smaller to
            the frame size (default: bicubic; the cloud's super-resolution passes its own).

    Raises:
        ScaffoldCodecError (or a subclass): settings that are not a level config
            (:class:`ScaffoldCodecError`), outside ``limits`` (:class:`StreamLimitError`), or a
            flow prior that is not the edge's; :class:`~codec.keyframes.KeyframeError` for an
            unknown keyframe coder.
    """

    def __init__(self, header: StreamHeader, flow_prior=None,
                 limits: StreamLimits = DEFAULT_LIMITS, upscale=None):  # fmt: skip
        from semcodec.codec.entropy.rans import EntropyCodingError

        self.header = header
        try:
            self.config = LevelConfig.from_dict(dict(header.settings))
        except (ValueError, TypeError) as exc:
            raise ScaffoldCodecError(f"stream settings are not a level config: {exc}") from exc
        limits.check(header, self.config)
        self.limits = limits
        self.frame_size = (header.width, header.height)
        try:
            self.flow_prior = flow_prior or default_flow_prior(self.config)
            self._check_prior()
            self._coders = StreamCoders(self.config, self.flow_prior, self.frame_size)
        except EntropyCodingError as exc:
            raise ScaffoldCodecError(
                f"the stream's entropy coders cannot be set up: {exc}"
            ) from exc
        self.plate = PlateDecoder(self.config, self.frame_size, upscale)
        #: most frames from one that sends boxes to the next (``box_rate``; what the edge
        #: leaves out is predicted, so a stream may not leave out more)
        self._box_every = self.config.box_every(header.frame_rate)
        #: track id -> its latest appearance reference, ``(h, w, 3)`` uint8 RGB: what an
        #: inter-coded refresh is predicted from (``appearance_inter``; forgotten at a keyframe,
        #: at most ``MAX_HELD_REFS``: :func:`codec.scaffold.appearance.hold_refs`)
        self._held_refs: dict[int, np.ndarray] = {}
        self._started = False
        self._next_seq = 0
        self._end_seq: int | None = None

    @property
    def frames_decoded(self) -> int:
        """Frames decoded so far."""
        return self._next_seq

    @property
    def ended(self) -> bool:
        """Whether the END unit was decoded."""
        return self._end_seq is not None

    def _check_prior(self) -> None:
        entry = {m.name: m for m in self.header.models}.get("flow_prior")
        if entry is not None and entry.sha256 and not entry.matches(self.flow_prior.sha256):
            wanted = entry.sha256
            raise ScaffoldCodecError(
                f"the stream was coded with flow prior sha256 {wanted}, this decoder has "
                f"{self.flow_prior.sha256}: pass the prior file the edge used"
            )

    def decode_unit(self, unit: Unit) -> DecodedFrame | None:
        """The decoded frame of a KEYFRAME/FRAME unit; None for END.

        Raises:
            StreamStructureError: the unit is out of order or carries the wrong sub-streams.
            PayloadError: a sub-stream payload does not decode.
            KeyframeError: the keyframe picture does not decode to the frame size.
        """
        self._check_order(unit)
        if unit.kind == UnitKind.END:
            self._end_seq = unit.seq
            return None
        parts = self._parts(unit)
        is_key = unit.kind == UnitKind.KEYFRAME
        if is_key:
            self._coders.reset()
            self._held_refs.clear()
            self._started = True
        scaffold = FrameScaffold(number=unit.seq + 1)
        image = None
        # a reference coded against the plate is predicted from the plate held at the end
        # of the last frame, or this keyframe's (the edge codes a refresh or tile after them)
        plate = self.plate.exact
        if SubStreamType.KEYFRAME_IMAGE in parts:
            scaffold.keyframe = parts[SubStreamType.KEYFRAME_IMAGE]
            image = self.plate.keyframe(scaffold.keyframe)
        elif SubStreamType.PLATE_TILE in parts:
            image = self.plate.tile(parts[SubStreamType.PLATE_TILE], scaffold.number)
        self._decode_scaffolds(parts, scaffold)
        plate = self.plate.exact if is_key else plate
        refs = self._decode_appearance(parts.get(SubStreamType.APPEARANCE), scaffold, plate)
        self._next_seq += 1
        return DecodedFrame(scaffold, self.frame_size, image, refs,
                            plate=self.config.plate != "frame",
                            plate_refresh=image is not None and not is_key,
                            fps=float(self.header.frame_rate))  # fmt: skip


    def _decode_appearance(self, payload: bytes | None, scaffold: FrameScaffold,
                           plate: np.ndarray | None) -> dict:  # fmt: skip
        """The frame's references ``{track id: (h, w, 3) uint8 RGB}``, each also held as the
        track's latest (what the next inter-coded one is predicted from); ``plate``: what a
        reference coded against the plate is predicted from (``appearance_plate``)."""
        if payload is None:
            return {}
        from semcodec.codec.scaffold.appearance import (
            AppearanceError,
            hold_refs,
            ref_region,
            unpack_refs,
        )
        from semcodec.codec.scaffold.interref import plate_region

        held = self._held_refs if self.config.appearance_inter else None
        under = None
        if self.config.appearance_plate and plate is not None:
            boxes = dict(zip(scaffold.tracks.ids.tolist(), scaffold.tracks.boxes, strict=True))

            def under(track_id: int) -> np.ndarray:
                return plate_region(plate, ref_region(boxes[track_id]))

        try:
            refs = unpack_refs(payload, scaffold.tracks.ids, held, self.config.appearance_vp8,
                               under)  # fmt: skip
        except AppearanceError as exc:
            raise PayloadError(f"frame {scaffold.number}: {exc}") from exc
        if held is not None:  # copies: a reconstructor may change the pictures it is given
            hold_refs(held, {tid: ref.copy() for tid, ref in refs.items()})
        return refs

    def finish(self) -> None:
        """Checks that the stream was complete: an END unit came, and as many frames as the
        header declares (when it declares a number).

        Raises:
            IncompleteStreamError: the stream ended early.
        """
        declared = self.header.num_frames or None
        got = self._next_seq
        if self._end_seq is None:
            expected = f" of the {declared} the header declares" if declared else ""
            raise IncompleteStreamError(
                f"the stream ends after {got} frame(s){expected} without an END unit "
                "(cut short?)", got, declared)  # fmt: skip
        if declared is not None and got != declared:
            raise IncompleteStreamError(
                f"the stream has {got} frame(s) but its header declares {declared}",
                got, declared)  # fmt: skip

    def _check_order(self, unit: Unit) -> None:
        where = f"unit {unit.kind.name} seq {unit.seq}"
        if self._end_seq is not None:
            raise StreamStructureError(f"{where}: follows the END unit")
        if unit.kind == UnitKind.END:
            if unit.seq != self._next_seq:
                raise StreamStructureError(
                    f"END unit says {unit.seq} frames, {self._next_seq} came before it"
                )
            return  # fmt: skip
        if not self._started and unit.kind != UnitKind.KEYFRAME:
            raise ScaffoldCodecError(f"unit {unit.seq}: decoding must start at a keyframe unit")
        if unit.seq != self._next_seq:
            problem = "repeats an earlier frame" if unit.seq < self._next_seq else "skips frames"
            raise StreamStructureError(
                f"{where}: {problem} (expected seq {self._next_seq}; units must be numbered "
                "0, 1, 2, ... in order)"
            )
        declared = self.header.num_frames
        if declared and unit.seq >= declared:
            raise StreamStructureError(
                f"{where}: the header declares only {declared} frame(s)")  # fmt: skip

    def _expected(self, kind: UnitKind) -> set[SubStreamType]:
        cfg = self.config
        wanted = {SubStreamType.KEYFRAME_IMAGE} if kind == UnitKind.KEYFRAME else set()
        if cfg.sends_segmentation:
            wanted.add(SubStreamType.SEGMENTATION)
        if cfg.sends_pose:
            wanted.add(SubStreamType.POSE)
        if cfg.sends_flow and kind == UnitKind.FRAME:
            wanted.add(SubStreamType.FLOW)
        if cfg.sends_boxes and not cfg.box_rate:
            wanted.add(SubStreamType.TRACKS)
        return wanted

    def _parts(self, unit: Unit) -> dict[SubStreamType, bytes]:
        """The unit's payloads by type, checked against what its kind and the level send."""
        where = f"unit {unit.kind.name} seq {unit.seq}"
        parts: dict[SubStreamType, bytes] = {}
        for sub in unit.substreams:
            if sub.type in parts:
                raise StreamStructureError(f"{where}: sub-stream {sub.type.name} appears twice")
            parts[sub.type] = sub.payload
        parts.pop(SubStreamType.METADATA, None)
        wanted = self._expected(unit.kind)
        if self.config.box_rate and SubStreamType.TRACKS in parts:
            wanted.add(SubStreamType.TRACKS)  # optional: without it, the boxes are predicted
        if self.config.sends_appearance and SubStreamType.APPEARANCE in parts:
            wanted.add(SubStreamType.APPEARANCE)  # optional: only when a reference is sent
        if self.config.sends_sparse_pose and SubStreamType.SPARSE_POSE in parts:
            wanted.add(SubStreamType.SPARSE_POSE)  # optional: only when a pose is sent
        if self.config.plate != "frame" and SubStreamType.KEYFRAME_IMAGE in parts:
            wanted.add(SubStreamType.KEYFRAME_IMAGE)  # optional in a frame: a plate refresh
        if (self.config.plate_refine > 0 and unit.kind == UnitKind.FRAME
                and SubStreamType.PLATE_TILE in parts
                and SubStreamType.KEYFRAME_IMAGE not in parts):  # fmt: skip
            wanted.add(SubStreamType.PLATE_TILE)  # optional in a frame: a plate tile
        extra = sorted(t.name for t in set(parts) - wanted)
        missing = sorted(t.name for t in wanted - set(parts))
        if extra or missing:
            raise StreamStructureError(
                f"{where}: level {self.config.level} settings send "
                f"{sorted(t.name for t in wanted)}; "
                + "; ".join(
                    f"{label} {names}"
                    for label, names in (("unexpected", extra), ("missing", missing))
                    if names
                )  # fmt: skip
            )
        return parts

    def _decode_scaffolds(self, parts: dict[SubStreamType, bytes],
                          scaffold: FrameScaffold) -> None:  # fmt: skip
        from semcodec.codec.entropy.rans import EntropyCodingError

        kind = None
        try:
            if self.config.sends_boxes:
                kind, coders = SubStreamType.TRACKS, self._coders
                previous, ahead = coders.previous_boxes, coders.boxes_ahead
                if kind in parts:
                    scaffold.tracks = coders.boxes.decode(parts[kind], previous, ahead)
                    coders.advance_boxes(scaffold.tracks)
                else:  # a frame that sent no boxes (box_rate): everyone as predicted
                    if ahead[0] >= self._box_every:
                        raise StreamStructureError(
                            f"frame {scaffold.number}: {ahead[0]} frames without boxes since "
                            f"the last that sent them; box_rate {self.config.box_rate:g} at "
                            f"{float(self.header.frame_rate):g} fps allows "
                            f"{self._box_every - 1}")  # fmt: skip
                    scaffold.tracks = coders.boxes.predicted(previous, ahead)
                    coders.advance_boxes(None)
            if self._coders.sparse is not None:
                kind = SubStreamType.SPARSE_POSE
                self._decode_sparse_pose(parts.get(kind), scaffold)
            if SubStreamType.POSE in parts:
                kind = SubStreamType.POSE
                self._decode_pose(parts[kind], scaffold)
            if SubStreamType.SEGMENTATION in parts:
                kind = SubStreamType.SEGMENTATION
                self._decode_segmentation(parts[kind], scaffold)
            if SubStreamType.FLOW in parts:
                kind = SubStreamType.FLOW
                shape = flow_shape(self.frame_size, self.config.flow_scale)
                field_q = self._coders.flow.decode(parts[kind], shape)
                scaffold.flow = Flow(field_q, self.frame_size)
        except EntropyCodingError as exc:
            raise PayloadError(
                f"frame {scaffold.number}: the {_SCAFFOLD_NAMES[kind]} payload does not "
                f"decode ({exc}); the stream is damaged or was not made by a matching encoder"
            ) from exc

    def _decode_sparse_pose(self, payload: bytes | None, scaffold: FrameScaffold) -> None:
        """The frame's sparse poses (``payload`` None: none sent) into the held state and
        ``scaffold.body_poses``."""
        coders, ids = self._coders, scaffold.tracks.ids.tolist()
        sent = []
        if payload is not None:
            sent = coders.sparse.decode(payload, ids, coders.sparse_previous())
            if not sent:
                raise PayloadError(f"frame {scaffold.number}: a sparse pose sub-stream that "
                                   "carries no pose (the edge leaves it out)")  # fmt: skip
        scaffold.body_poses = coders.advance_sparse(scaffold.tracks, sent, scaffold.number)

    def _decode_pose(self, payload: bytes, scaffold: FrameScaffold) -> None:
        poses = self._coders.pose.decode(payload, self._coders.previous_poses)
        self._coders.previous_poses = self._coders.pose.state(poses)
        scaffold.poses = poses

    def _decode_segmentation(self, payload: bytes, scaffold: FrameScaffold) -> None:
        shape = segmentation_shape(self.frame_size, self.config.seg_scale)
        labels = self._coders.seg.decode(payload, self._coders.previous_labels, shape)
        self._coders.previous_labels = labels
        scaffold.segmentation = Segmentation(labels, self.frame_size)
        if not self.config.sends_boxes:
            scaffold.tracks = tracks_from_labels(labels, self.frame_size)


def tracks_from_labels(labels: np.ndarray, frame_size: tuple[int, int]) -> Tracks:
    """People boxes (frame pixels) and ids recovered from a label map.

    Args:
        labels: ``(h, w)`` uint16 label map (0 background).
        frame_size: ``(width, height)`` of the frame the map covers.

    Returns:
        :class:`Tracks`, one box per id in ascending id order, ``x1, y1, x2, y2`` float32 frame
        pixels of the cells the id covers. One pass over the map, whatever the number of ids.
    """
    flat = labels.reshape(-1)
    ids, inverse = np.unique(flat, return_inverse=True)
    if ids.size == 0 or ids[-1] == 0:
        return Tracks.empty()
    h, w = labels.shape
    ys, xs = np.divmod(np.arange(flat.size), w)
    n = ids.size
    x0, y0 = np.full(n, w), np.full(n, h)
    x1, y1 = np.full(n, -1), np.full(n, -1)
    np.minimum.at(x0, inverse, xs)
    np.minimum.at(y0, inverse, ys)
    np.maximum.at(x1, inverse, xs)
    np.maximum.at(y1, inverse, ys)
    keep = ids > 0
    sx, sy = frame_size[0] / w, frame_size[1] / h
    boxes = np.stack([x0[keep] * sx, y0[keep] * sy, (x1[keep] + 1) * sx, (y1[keep] + 1) * sy], 1)
    return Tracks(np.asarray(boxes, np.float32), np.ones(int(keep.sum()), np.float32),
                  ids[keep].astype(np.int32))  # fmt: skip


# ----------------------------------------------------------------------------- files

def decode_stream(source, reconstructor=None, flow_prior=None, upscale=None,
                  ) -> Iterator[tuple[DecodedFrame, np.ndarray | None]]:  # fmt: skip
    """Decodes a ``.semc`` file (path, bytes or binary file): yields ``(decoded, frame)``.

    ``frame`` is the reconstruction when a :class:`~codec.reconstruct.Reconstructor` is given;
    ``flow_prior`` must be the prior the edge used when it was not the shipped one;
    ``upscale`` brings the plate from its coded size to the frame's (default bicubic; e.g. a
    :func:`~codec.reconstruct.superres.create_upscaler`).
    """
    header, units = read_stream(source)
    decoder = ScaffoldDecoder(header, flow_prior=flow_prior, upscale=upscale)
    if reconstructor is not None:
        reconstructor.reset()
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is None:
            break
        image = reconstructor.reconstruct(decoded) if reconstructor is not None else None
        yield decoded, image
    decoder.finish()
