"""The scaffold codec: frames -> scaffolds -> entropy-coded units, and back, exactly.

The public names of the codec, gathered from where they live:

* :mod:`codec.scaffold.encoder` -- the edge: :class:`ScaffoldEncoder`, :func:`encode_frames`,
  :func:`encode_to_file`, :func:`with_lookahead`;
* :mod:`codec.scaffold.decoder` -- the cloud: :class:`ScaffoldDecoder`,
  :func:`decode_stream`, :func:`tracks_from_labels`;
* :mod:`codec.scaffold.streams` -- what both share: the errors (every failure is a
  :class:`ScaffoldCodecError` subclass), :class:`StreamLimits`, the entropy coders' state,
  :class:`EncoderStats`;
* :mod:`codec.scaffold.plate` -- the background plate, on both sides.
"""

from __future__ import annotations

from semcodec.codec.scaffold.decoder import ScaffoldDecoder, decode_stream, tracks_from_labels
from semcodec.codec.scaffold.encoder import (
    OVERDUE_S,
    SPARSE_POSE_MODEL,
    ScaffoldEncoder,
    encode_frames,
    encode_to_file,
    with_lookahead,
)
from semcodec.codec.scaffold.plate.coding import plate_tiles
from semcodec.codec.scaffold.streams import (
    DEFAULT_LIMITS,
    STREAM_NAMES,
    UHD_4K,
    EncoderStats,
    IncompleteStreamError,
    PayloadError,
    ScaffoldCodecError,
    StreamLimitError,
    StreamLimits,
    StreamStructureError,
    default_flow_prior,
    flow_shape,
    segmentation_shape,
    unit_stream_bytes,
)

__all__ = [
    "DEFAULT_LIMITS", "OVERDUE_S", "SPARSE_POSE_MODEL", "STREAM_NAMES", "UHD_4K",
    "EncoderStats", "IncompleteStreamError", "PayloadError", "ScaffoldCodecError",
    "ScaffoldDecoder", "ScaffoldEncoder", "StreamLimitError", "StreamLimits",
    "StreamStructureError", "decode_stream", "default_flow_prior", "encode_frames",
    "encode_to_file", "flow_shape", "plate_tiles", "segmentation_shape", "tracks_from_labels",
    "unit_stream_bytes", "with_lookahead",
]  # fmt: skip
