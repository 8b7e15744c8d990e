"""Per-track appearance references: what each person looks like, sent now and then.

A reference is the picture inside one person's (decoded) box grown by :data:`REF_MARGIN`
(:func:`ref_region`) on the frame it is sent with, resized to at most :data:`MAX_REF_HEIGHT`
pixels high (never upscaled) and coded as one lossy WebP (libwebp through OpenCV). The decoder
draws the person from their latest reference, resized to the grown box of each frame
(:func:`draw_ref`).

The reference is the whole box, not a segmented person: on a static camera the background
inside the box is nearly the plate's, so the box pastes almost seamlessly, and the detector
finds the pasted people more often. Measured on PETS09-S2L1-full 501-600 (level 1, 0.004
BPP): MODA 0.384 with box references, 0.370 with the segmenter's mask dilated by 2 px as
alpha, 0.333 with the mask itself (limbs the mask missed were cut off). With fresh crops at
the edge detector's boxes on every 3rd frame of 301-400 (WebP quality 25), MODA went from
0.22 (the box itself) to 0.29 (grown 1.3x) and down to 0.16 (1.6x: stale surroundings cover
neighbours); the raw frames give 0.44 there.

:class:`AppearanceSelector` (edge) decides which tracks get a reference on a frame: a track
that has none, and a track whose reference has grown stale -- older than ``refresh_frames``,
its box height changed by more than ``size_change`` since, or the reference differs from the
frame's box by more than ``max_difference`` (mean absolute RGB difference) -- within a byte
budget per frame, new tracks first, then the stalest. A new person gets the largest picture
that fits the budget, halving its size down to a thumbnail :data:`MIN_THUMB_HEIGHT` pixels
high (tens of bytes), so nobody stays a grey silhouette for want of bytes (one tracked for
``overdue_frames`` without a reference gets the smallest thumbnail over budget, at the
stream's quality); a thumbnail is refined (sent again at full size) after a quarter of
``refresh_frames``, budget allowing. A refresh waits while another person's box covers more
than :data:`CROWD_COVER` of the person's box (the picture would carry a neighbour, whom the
decoder would then draw twice: on PETS09-S2L1-full 501-795 at level 1, 0.004, the false
positives of the benchmark's detector fell from 189 to 163 and MODA rose from 0.374 to
0.414, above 0.002's again; docs/journal.md, issue 51); a new person, or one whose reference
is of another shape, does not wait.
With ``scale`` below 1 a refresh is that fraction of the person's full reference size (a
first reference and a thumbnail's refinement stay full size), for a decoder that keeps the
detail of the sharper picture it holds (``restore``).
A reference taken when the person's box had another shape (aspect ratio off by more than
:data:`MAX_ASPECT_CHANGE`: the detector had seen a part of them, or two people as one) is
replaced at once, like a missing one, so a face is not pasted into a whole body's box.
With a ``check`` (:class:`WholePersonCheck`, what the encoder passes with ``check_refs``,
off by default: see :class:`codec.scaffold.levels.LevelConfig`), a picture is sent only
when the person detector, run again on the picture's surroundings alone, finds a person at
that box: a crop of a body part, of two people or of background the tracker coasted over is
not sent (an overdue thumbnail still is: a silhouette would be worse).

Payload of the APPEARANCE sub-stream (integers are LEB128 varints, :mod:`codec.bitstream`):
the number of references, then per reference the track id, the WebP's length and the WebP.
A decoder refuses a payload with more than :data:`MAX_REFS` references, a reference for a
track without a box in the frame, a WebP declaring more than ``2 * MAX_REF_HEIGHT`` x
:data:`MAX_REF_HEIGHT` pixels (checked before decoding), or trailing bytes.

With inter-coded references (the header's ``appearance_inter``; on at level 1, see
:class:`~codec.scaffold.levels.LevelConfig`) each reference's bytes are an **entry**: a
code, 0 for a whole WebP (:func:`intra_entry`) or ``1 + qp`` for a refresh coded against
the track's previous reference (:func:`inter_entry`: the width and height, then the bytes of
an HEVC P-picture at ``qp``, :mod:`codec.scaffold.interref`). The decoder holds each
track's latest reference (forgotten at a keyframe, as the edge's :class:`AppearanceSelector`
does) and refuses an unknown code, an inter entry for a track it holds none of, and a
declared size over the limit (before decoding). The edge's copy of each reference is the
decoder's picture, bit for bit, so a chain of inter refreshes does not drift.

With references coded against the plate as well (the header's ``appearance_plate``), a
reference that would be coded whole may instead be an entry of code ``PLATE_CODE + qp``: a
P-picture predicted from the plate under the person's box
(:func:`codec.scaffold.interref.plate_region`), the plate as the edge holds it when the
cloud decodes the frame's references (after the unit's keyframe, before its plate refresh
or tile). The box's surroundings come from the plate and cost next to nothing. A decoder
refuses such an entry in a stream without the setting.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from semcodec.codec.bitstream import BitstreamError, decode_uvarint, encode_uvarint
from semcodec.codec.core.types import Tracks
from semcodec.codec.keyframes import KeyframeError, webp_size
from semcodec.codec.scaffold.detector import box_area, intersection_area

#: Tallest reference in pixels (people are downscaled to it, never upscaled).
MAX_REF_HEIGHT = 96
#: Most references in one payload.
MAX_REFS = 64
#: Fewest bytes a reference can take in a payload: a RIFF/WebP file has at least 30 (RIFF and
#: VP8 chunk headers, frame header), plus its id and length varints.
_MIN_REF_COST = 36
#: Bytes of a simple lossy WebP file's container: ``RIFF``, its size, ``WEBP``, ``VP8 `` and
#: the chunk's size. A stream with ``appearance_vp8`` sends each reference without them (the
#: VP8 frame alone); the decoder puts them back.
WEBP_CONTAINER_BYTES = 20
#: Smallest box side (frame pixels) that gets a reference.
MIN_BOX_PX = 6
#: A reference covers the person's box grown by this factor about its centre. More context
#: helps the detector when references are fresh and hurts when they are stale (old
#: surroundings drawn over neighbours): on PETS09-S2L1-full 101-200 at level 1, MODA 0.095
#: with 1.0 and -0.087 with 1.25 (-0.022 with 1.3 fading out over the margin).
REF_MARGIN = 1.0


class AppearanceError(ValueError):
    """An APPEARANCE payload is malformed (counts, lengths, ids or pictures)."""


def ref_region(box: np.ndarray) -> np.ndarray:
    """``(4,)`` float64: ``box`` grown by :data:`REF_MARGIN` about its centre, the region a
    reference covers (frame pixels)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    hw, hh = (x2 - x1) * REF_MARGIN / 2, (y2 - y1) * REF_MARGIN / 2
    return np.array([cx - hw, cy - hh, cx + hw, cy + hh])


def ref_size(box: np.ndarray, scale: float = 1.0) -> tuple[int, int]:
    """``(width, height)`` of the reference of a person in ``box`` (frame pixels): ``scale``
    (0..1] of the box, at most :data:`MAX_REF_HEIGHT` high and twice that wide (what a
    decoder accepts), never upscaled."""
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    scale = min(scale, MAX_REF_HEIGHT / max(h, 1.0), 2 * MAX_REF_HEIGHT / max(w, 1.0))
    return (min(2 * MAX_REF_HEIGHT, max(2, round(w * scale))),
            min(MAX_REF_HEIGHT, max(2, round(h * scale))))


def crop_box(frame: np.ndarray, box: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The ``box`` region of ``(H, W, 3)`` uint8 ``frame`` resampled to ``size``
    ``(width, height)``: ``(h, w, 3)`` uint8, blurred first when shrinking by more than 1.5x
    (no aliasing); outside the frame, the edge pixels are repeated."""
    x1, y1, x2, y2 = (float(v) for v in box)
    width, height = size
    sx, sy = (x2 - x1) / width, (y2 - y1) / height
    # output pixel i has its centre at frame x = x1 + (i + 0.5) sx, source index x - 0.5
    m = np.array([[sx, 0, x1 + 0.5 * sx - 0.5], [0, sy, y1 + 0.5 * sy - 0.5]], np.float64)
    if sx > 1.5 or sy > 1.5:
        k = max(1, round(max(sx, sy))) | 1
        frame = cv2.blur(frame, (k, k))
    return cv2.warpAffine(frame, m, (width, height), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE)  # fmt: skip


def encode_ref(picture: np.ndarray, quality: int) -> bytes:
    """``(h, w, 3)`` uint8 RGB -> WebP bytes at ``quality`` 1..100."""
    bgr = cv2.cvtColor(picture, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".webp", bgr, [cv2.IMWRITE_WEBP_QUALITY, max(1, min(100, quality))])
    if not ok:
        raise AppearanceError("could not encode an appearance reference")
    return buf.tobytes()


def strip_container(webp: bytes) -> bytes:
    """The VP8 frame of a simple lossy WebP file (:func:`encode_ref`'s), without its
    :data:`WEBP_CONTAINER_BYTES` of container (nor the chunk's pad byte)."""
    if len(webp) < WEBP_CONTAINER_BYTES or webp[12:16] != b"VP8 ":
        raise AppearanceError("appearance reference: not a simple lossy WebP file")
    size = int.from_bytes(webp[16:20], "little")
    return webp[WEBP_CONTAINER_BYTES : WEBP_CONTAINER_BYTES + size]


def wrap_container(vp8: bytes) -> bytes:
    """The WebP file of a VP8 frame (inverse of :func:`strip_container`)."""
    pad = b"\0" * (len(vp8) % 2)
    riff = (4 + 8 + len(vp8) + len(pad)).to_bytes(4, "little")
    return b"RIFF" + riff + b"WEBPVP8 " + len(vp8).to_bytes(4, "little") + vp8 + pad


def _check_ref_size(width: int, height: int) -> None:
    if not (1 <= height <= MAX_REF_HEIGHT and 1 <= width <= 2 * MAX_REF_HEIGHT):
        raise AppearanceError(f"appearance reference of {width}x{height} is over the limit "
                              f"{2 * MAX_REF_HEIGHT}x{MAX_REF_HEIGHT}")  # fmt: skip


def decode_ref(data: bytes, bare: bool = False) -> np.ndarray:
    """WebP bytes (``bare``: a VP8 frame without its container, :func:`strip_container`) ->
    ``(h, w, 3)`` uint8 RGB, its size checked before decoding.

    Raises:
        AppearanceError: not a WebP, too large, or undecodable.
    """
    if bare:
        data = wrap_container(data)
    try:
        width, height = webp_size(data)
    except KeyframeError as exc:
        raise AppearanceError(f"appearance reference: {exc}") from exc
    _check_ref_size(width, height)
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None or bgr.shape[:2] != (height, width):
        raise AppearanceError("appearance reference does not decode")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


# ----------------------------------------------------------------------------- payload


def pack_refs(refs: dict[int, bytes]) -> bytes:
    """The APPEARANCE payload of ``{track id: WebP bytes}`` (ascending ids); with inter-coded
    references (``appearance_inter``), ``{track id: entry}`` (:func:`intra_entry`,
    :func:`inter_entry`)."""
    out = bytearray(encode_uvarint(len(refs)))
    for tid in sorted(refs):
        out += encode_uvarint(tid) + encode_uvarint(len(refs[tid])) + refs[tid]
    return bytes(out)


#: An entry's code for a whole WebP; ``INTER_CODE + qp``: a P-picture at ``qp`` (0..51)
#: predicted from the track's held reference; ``PLATE_CODE + qp``: one predicted from the
#: plate under the person's box (``appearance_plate``).
INTRA_CODE, INTER_CODE = 0, 1
#: The largest QP of an inter entry (:data:`codec.scaffold.interref.MAX_QP`).
MAX_INTER_QP = 51
PLATE_CODE = INTER_CODE + MAX_INTER_QP + 1
#: An inter refresh is not tried when it would have to fit in this many bytes or fewer (a
#: P-picture's slice header and a few blocks) ...
MIN_INTER_BYTES = 16
#: ... or in this fraction of the whole WebP's or less: at the WebP's PSNR the P-picture's
#: entry took 0.50 of it or more on 95 % of 73 refreshes of PETS09-S2L1-full 501-795 and
#: TUD-Stadtmitte 1-179 at quality 30 (median 0.67; the least 0.13, a person standing
#: still), so a refresh the budget cannot fit whole is tried inter only where it might fit.
INTER_FLOOR = 0.45


def intra_entry(webp: bytes) -> bytes:
    """The entry of a reference coded whole: its code 0, then the WebP."""
    return encode_uvarint(INTRA_CODE) + webp


def inter_entry(qp: int, size: tuple[int, int], data: bytes, from_plate: bool = False) -> bytes:
    """The entry of a reference of ``size`` ``(width, height)`` coded against the track's
    previous one (:func:`codec.scaffold.interref.encode_inter`) at ``qp`` -- or, with
    ``from_plate``, against the plate under the person's box
    (:func:`codec.scaffold.interref.plate_region`): its code ``INTER_CODE + qp`` (or
    ``PLATE_CODE + qp``), the width and height, then the P-picture's bytes."""
    code = (PLATE_CODE if from_plate else INTER_CODE) + int(qp)
    return encode_uvarint(code) + encode_uvarint(size[0]) + encode_uvarint(size[1]) + data


def decode_entry(entry: bytes, held: np.ndarray | None, bare: bool = False,
                 under=None) -> np.ndarray:  # fmt: skip
    """An entry as ``(h, w, 3)`` uint8 RGB; ``held`` is the track's reference the decoder
    holds (None: none); ``bare``: an intra entry's WebP is without its container;
    ``under``: ``() -> (h, w, 3)`` uint8, the plate under the person's box
    (:func:`codec.scaffold.interref.plate_region`) for a plate-coded entry (None: the stream
    has none). The size of each kind is checked before decoding.

    Raises:
        AppearanceError: an unknown code, an inter entry without a held reference, a
            plate-coded entry in a stream without them, a size over the limit, or bytes that
            do not decode.
    """
    from semcodec.codec.scaffold.interref import InterRefError, decode_inter

    try:
        code, pos = decode_uvarint(entry, 0)
        if code == INTRA_CODE:
            return decode_ref(entry[pos:], bare)
        if code > PLATE_CODE + MAX_INTER_QP:
            raise AppearanceError(f"appearance reference of unknown code {code} (0: intra, "
                                  f"{INTER_CODE}..{PLATE_CODE - 1}: inter, {PLATE_CODE}.."
                                  f"{PLATE_CODE + MAX_INTER_QP}: from the plate)")  # fmt: skip
        if code >= PLATE_CODE and under is None:
            raise AppearanceError("a plate-coded appearance reference in a stream without "
                                  "them (appearance_plate)")  # fmt: skip
        if code < PLATE_CODE and held is None:
            raise AppearanceError("an inter-coded appearance reference for a track the "
                                  "decoder holds no reference of")  # fmt: skip
        width, pos = decode_uvarint(entry, pos)
        height, pos = decode_uvarint(entry, pos)
    except BitstreamError as exc:
        raise AppearanceError(f"appearance reference: {exc}") from exc
    _check_ref_size(width, height)
    previous, qp = (under(), code - PLATE_CODE) if code >= PLATE_CODE else (held, code - INTER_CODE)
    try:
        return decode_inter(previous, (width, height), qp, entry[pos:])
    except InterRefError as exc:
        raise AppearanceError(f"appearance reference: {exc}") from exc


#: A decoder holds the latest references of this many tracks at most (the most recently
#: sent; 256 of at most 192 x 96 pixels: 14 MB), and the edge codes a refresh against a
#: held one only.
MAX_HELD_REFS = 256


def hold_refs(held: dict, refs: dict) -> None:
    """Updates ``held`` (track id -> reference, oldest sent first) with a payload's ``refs``
    in ascending track id order, then forgets the oldest beyond :data:`MAX_HELD_REFS`: the
    same rule on the edge (which holds no pictures here) and the cloud."""
    for tid in sorted(refs):
        held.pop(tid, None)
        held[tid] = refs[tid]
    while len(held) > MAX_HELD_REFS:
        del held[next(iter(held))]


def unpack_refs(payload: bytes, track_ids, held: dict[int, np.ndarray] | None = None,
                bare: bool = False, under=None) -> dict[int, np.ndarray]:  # fmt: skip
    """Inverse of :func:`pack_refs`, decoded to ``(h, w, 3)`` uint8 RGB; ``track_ids`` are the
    ids of the frame's boxes. ``held``: the stream codes entries (``appearance_inter``), and
    these are the references the decoder holds by track id (not changed here); None: every
    reference is a WebP. ``bare`` (``appearance_vp8``): the WebPs come without their
    container (:func:`strip_container`). ``under``: ``track id -> (h, w, 3)`` uint8, the
    plate under the person's box, for plate-coded entries (``appearance_plate``; None: the
    stream has none).

    Raises:
        AppearanceError: a malformed payload.
    """
    try:
        count, pos = decode_uvarint(payload, 0)
        if count > MAX_REFS:
            raise AppearanceError(f"appearance payload declares {count} references "
                                  f"(at most {MAX_REFS})")  # fmt: skip
        allowed = {int(i) for i in track_ids}
        refs: dict[int, np.ndarray] = {}
        for _ in range(count):
            tid, pos = decode_uvarint(payload, pos)
            length, pos = decode_uvarint(payload, pos)
            if tid not in allowed or tid in refs:
                raise AppearanceError(f"appearance reference for track {tid}, which has no "
                                      "box in this frame or comes twice")  # fmt: skip
            if pos + length > len(payload):
                raise AppearanceError("appearance payload is truncated")
            data = payload[pos : pos + length]
            if held is None:
                refs[tid] = decode_ref(data, bare)
            else:
                below = None if under is None else (lambda t=tid: under(t))
                refs[tid] = decode_entry(data, held.get(tid), bare, below)
            pos += length
    except BitstreamError as exc:
        raise AppearanceError(f"appearance payload: {exc}") from exc
    if pos != len(payload):
        raise AppearanceError(f"appearance payload has {len(payload) - pos} trailing bytes")
    return refs


# ----------------------------------------------------------------------------- drawing

#: Width of the soft border (frame pixels) a drawn reference fades in over.
FEATHER_PX = 2.0


def draw_ref(canvas: np.ndarray, ref: np.ndarray, region: np.ndarray,
             inner: np.ndarray | None = None, plate: np.ndarray | None = None,
             opacity: float = 1.0, ref_alpha: np.ndarray | None = None) -> None:  # fmt: skip
    """Draws ``(h, w, 3)`` uint8 ``ref`` resized to ``region`` onto ``(H, W, 3)`` float32
    ``canvas`` (in place). ``opacity`` (0..1) inside ``inner`` (default: ``region`` less
    :data:`FEATHER_PX`), fading linearly to nothing at the edge of ``region``; with the
    ``(H, W, 3)`` float32 background ``plate``, only where the reference differs from it
    (:func:`matte`); with ``ref_alpha`` ``(h, w)`` float32 0..1 (a person matte over the
    reference's pixels, resized with it), only where it says."""
    height, width = canvas.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in region)
    bw, bh = x2 - x1, y2 - y1
    c0, r0 = max(0, int(np.floor(x1))), max(0, int(np.floor(y1)))
    c1, r1 = min(width, int(np.ceil(x2))), min(height, int(np.ceil(y2)))
    if bw < 1 or bh < 1 or c1 <= c0 or r1 <= r0:
        return
    rh, rw = ref.shape[:2]
    sx, sy = rw / bw, rh / bh  # ref pixels per frame pixel
    m = np.array([[sx, 0, (c0 + 0.5 - x1) * sx - 0.5], [0, sy, (r0 + 0.5 - y1) * sy - 0.5]])
    patch = cv2.warpAffine(ref, m, (c1 - c0, r1 - r0),
                           flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                           borderMode=cv2.BORDER_REPLICATE)  # fmt: skip
    if inner is None:
        inner = np.array([x1 + FEATHER_PX, y1 + FEATHER_PX, x2 - FEATHER_PX, y2 - FEATHER_PX])
    alpha = _ramp(np.arange(c0, c1) + 0.5, x1, inner[0], inner[2], x2)
    alpha = _ramp(np.arange(r0, r1) + 0.5, y1, inner[1], inner[3], y2)[:, None] * alpha[None]
    alpha = alpha * opacity
    if ref_alpha is not None:
        alpha = alpha * cv2.warpAffine(np.ascontiguousarray(ref_alpha, np.float32), m,
                                       (c1 - c0, r1 - r0),
                                       flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                       borderMode=cv2.BORDER_REPLICATE)  # fmt: skip
    if plate is not None:
        alpha = alpha * matte(patch, plate[r0:r1, c0:c1])
    region_px = canvas[r0:r1, c0:c1]
    region_px += alpha[..., None].astype(np.float32) * (patch.astype(np.float32) - region_px)


def matte(patch: np.ndarray, plate: np.ndarray) -> np.ndarray:
    """``(h, w)`` float32 opacity in [0, 1] of a person's reference ``patch`` ``(h, w, 3)``
    uint8 drawn over ``plate`` ``(h, w, 3)`` float32 (the decoded background under it): the
    pixels that differ from the plate more than the box's sides do (a person's box holds
    background at its sides) are the person; holes closed, edges soft. A centred core of
    the box stays opaque, so a person dressed like the background keeps a body."""
    h, w = patch.shape[:2]
    sigma = max(0.6, h / 80)
    diff = np.abs(cv2.GaussianBlur(patch.astype(np.float32), (0, 0), sigma)
                  - cv2.GaussianBlur(plate, (0, 0), sigma)).max(axis=-1)  # fmt: skip
    side = max(1, w // 6)
    noise = float(np.median(np.concatenate([diff[:, :side].ravel(), diff[:, -side:].ravel()])))
    lo = noise + MATTE_MARGIN
    alpha = np.clip((diff - lo) / (noise + 2 * MATTE_MARGIN), 0.0, 1.0)
    k = max(3, (w // 6) | 1)
    alpha = cv2.morphologyEx(alpha, cv2.MORPH_CLOSE, np.ones((k, k), np.uint8))
    yy, xx = np.mgrid[0:h, 0:w]
    core = ((xx + 0.5 - w / 2) / (0.22 * w)) ** 2 + ((yy + 0.5 - h / 2) / (0.45 * h)) ** 2 <= 1
    alpha = np.maximum(alpha, core.astype(np.float32))
    return cv2.GaussianBlur(alpha, (0, 0), max(0.8, h / 60)).astype(np.float32)


#: Colour difference (0..255, max over RGB) above the box sides' median where a reference's
#: pixel starts to count as the person's (:func:`matte`).
MATTE_MARGIN = 12.0


def _ramp(x: np.ndarray, lo: float, a: float, b: float, hi: float) -> np.ndarray:
    """1 on ``[a, b]``, linear to 0 at ``lo`` and ``hi`` (a trapezoid)."""
    up = np.clip((x - lo) / max(a - lo, 1e-6), 0, 1)
    down = np.clip((hi - x) / max(hi - b, 1e-6), 0, 1)
    return np.minimum(up, down)


def draw_silhouette(canvas: np.ndarray, box: np.ndarray, rgb) -> None:
    """A filled ellipse in ``box`` of colour ``rgb`` on ``(H, W, 3)`` float32 ``canvas``."""
    x1, y1, x2, y2 = (float(v) for v in box)
    centre = (round((x1 + x2) / 2), round((y1 + y2) / 2))
    axes = (max(1, round((x2 - x1) / 2)), max(1, round((y2 - y1) / 2)))
    cv2.ellipse(canvas, centre, axes, 0, 0, 360, tuple(float(c) for c in rgb), -1)


# ----------------------------------------------------------------------------- edge


#: Smallest thumbnail height (pixels) a new person's first reference may shrink to.
MIN_THUMB_HEIGHT = 12


def thumbnail_sizes(size: tuple[int, int]) -> list[tuple[int, int]]:
    """``size`` ``(width, height)`` and its halvings down to :data:`MIN_THUMB_HEIGHT`
    pixels high (the aspect kept): the sizes a first reference may take, largest first."""
    width, height = size
    sizes = [(width, height)]
    while height // 2 >= MIN_THUMB_HEIGHT:
        width, height = max(2, round(width / 2)), height // 2
        sizes.append((width, height))
    return sizes


@dataclass
class _Ref:
    frame: int
    height: float
    picture: np.ndarray  # the decoded reference, as the decoder has it
    thumbnail: bool = False  # smaller than the person's full reference: refined soon
    aspect: float = 0.4  # width / height of the box it was taken in


#: With a pose mirror: a stale reference is not refreshed while the cloud remembers one of
#: the person taken in a pose this near the pose now (every joint shown in both within this
#: many box heights: the pose metric's PCK threshold; chosen a priori, not fitted to a
#: camera).
POSE_NEAR = 0.10
#: ... and a reference is sent before it is stale (after a quarter of the refresh period)
#: when every remembered pose has a joint further than this from the pose now (a pose the
#: cloud has not seen: twice the PCK threshold).
POSE_FAR = 0.20
#: ... but every reference is renewed after this many refresh periods whatever the poses
#: (light and clothes change).
POSE_MAX_PERIODS = 4


def _nearest_pose(remembered: list, uv: np.ndarray, visible: np.ndarray) -> float:
    """The least, over the remembered ``(uv, visible)`` poses sharing at least 4 shown
    joints with it, of the largest joint distance (box heights) to ``(13, 2)`` box-relative
    ``uv`` (joints ``visible``); ``inf``: none."""
    best = float("inf")
    for ref_uv, ref_visible in remembered:
        both = visible & ref_visible
        if int(both.sum()) >= 4:
            diff = ref_uv[both] - uv[both]
            best = min(best, float(np.max(np.hypot(diff[:, 0], diff[:, 1]))))
    return best


#: Urgency of a person without a reference (they go first).
NO_REF_URGENCY = 1e9
#: Urgency of a person whose reference is of another shape: sent again at once.
WRONG_SHAPE_URGENCY = 1e8
#: A reference whose box's aspect ratio differs from the person's box by more than this
#: fraction shows something else (a head or torso the detector saw as a person, or two
#: people in one box): it is replaced as if the person had none.
MAX_ASPECT_CHANGE = 0.5


#: A refresh waits while another person's box covers more than this fraction of the box.
CROWD_COVER = 0.1


def _crowded(boxes: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: the boxes (``(N, 4)`` ``x1, y1, x2, y2``) of which another box covers
    more than :data:`CROWD_COVER` of the area."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    cover = intersection_area(boxes, boxes)
    np.fill_diagonal(cover, 0.0)
    return (cover > CROWD_COVER * np.maximum(box_area(boxes), 1e-6)[:, None]).any(axis=1)


def _aspect(box: np.ndarray) -> float:
    """Width / height of an ``x1, y1, x2, y2`` box (>= 1e-3)."""
    return max(1e-3, float(box[2] - box[0])) / max(1e-3, float(box[3] - box[1]))


class WholePersonCheck:
    """Whether a box holds a whole person: the person detector run on the box's
    surroundings alone (a square :data:`CHECK_CONTEXT` times the box's longer side about its
    centre, as one window) finds a person of score at least ``min_score`` overlapping it by
    IoU :data:`CHECK_IOU` or more.

    Args:
        detector: a :class:`codec.scaffold.detector.PersonDetector` (its session is shared,
            its config is not used).
        min_score: the detections' score threshold (the profile's confirmation score).
    """

    def __init__(self, detector, min_score: float = 0.3) -> None:
        from semcodec.codec.scaffold.detector import DetectorConfig

        self._detector = detector.with_config(DetectorConfig(
            score_threshold=min_score, tiles=1, include_full_frame=False))  # fmt: skip
        self.checks = self.refused = 0

    def __call__(self, frame: np.ndarray, box: np.ndarray) -> bool:
        """``frame`` ``(H, W, 3)`` uint8 RGB; ``box`` ``x1, y1, x2, y2`` frame pixels."""
        from semcodec.codec.scaffold.detector import box_iou

        height, width = frame.shape[:2]
        x1, y1, x2, y2 = (float(v) for v in box)
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        half = CHECK_CONTEXT * max(x2 - x1, y2 - y1) / 2
        left, top = max(0, int(cx - half)), max(0, int(cy - half))
        right, bottom = min(width, int(np.ceil(cx + half))), min(height, int(np.ceil(cy + half)))
        self.checks += 1
        whole = False
        if right - left >= 2 and bottom - top >= 2:
            found = self._detector.detect(np.ascontiguousarray(frame[top:bottom, left:right]))
            boxes = found.boxes + np.array([left, top, left, top], np.float32)
            whole = bool(len(boxes)) and float(
                box_iou(np.asarray([box], np.float32), boxes).max()) >= CHECK_IOU  # fmt: skip
        self.refused += not whole
        return whole


#: The whole-person check looks at a square this many times the box's longer side: the
#: person is then :data:`codec.scaffold.profile.PREFERRED_HEIGHT` of the detector's window
#: (filling the window, the sample's people are missed; at a third they are found: the
#: known answers of ``tests/codec/test_people_streams.py``).
CHECK_CONTEXT = 3.0
#: And wants a detection overlapping the box by at least this IoU.
CHECK_IOU = 0.5


class AppearanceSelector:
    """The edge's choice of references per frame, with a copy of what the decoder holds.

    Args:
        quality: WebP quality 1..100.
        refresh_frames: a reference older than this many frames is refreshed.
        size_change: refresh when the box height changed by more than this fraction.
        max_difference: refresh when the reference differs from the frame's box by more
            than this mean absolute RGB difference (0..255).
        overdue_frames: a person tracked this many frames without any reference gets the
            smallest thumbnail whatever the budget (at ``quality``: at WebP quality 1 a
            12-px thumbnail was a smear, docs/journal.md, issue 51; default: an eighth of
            ``refresh_frames``, half a second at the default 4-second refresh).
        check: ``(frame, box) -> bool``, whether a box holds a whole person
            (:class:`WholePersonCheck`); a picture is sent only where it says so, except an
            overdue thumbnail. ``None``: every box does.
        scale: a refresh (not a first reference, nor a thumbnail's refinement) is this
            fraction (0..1] of the person's full reference size (:func:`ref_size`).
        inter: the payload holds entries (:func:`intra_entry`, :func:`inter_entry`), and a
            refresh is coded against the person's previous reference where that costs fewer
            bytes at the WebP's PSNR (a first reference, one after a keyframe and one
            replacing a reference of another shape are coded whole).
        bare: each WebP is sent without its container (:func:`strip_container`,
            ``appearance_vp8``).
        from_plate: with ``inter``, a reference coded whole (a new person's, one replacing
            a reference of another shape, the first after a keyframe) is coded instead
            against the plate under the person's box (``select(..., plate=...)``) where that
            costs fewer bytes at the WebP's PSNR (``appearance_plate``).

    With poses (``select(..., poses=...)``: each person's pose as the cloud has it this
    frame) the selector mirrors a cloud that remembers every reference with the pose it was
    taken in (``decoder=animate``): a stale reference is not refreshed while a remembered
    pose has every joint within :data:`POSE_NEAR` of the pose now (up to
    :data:`POSE_MAX_PERIODS` refresh periods), and one is sent after a quarter period when
    every remembered pose has a joint further than :data:`POSE_FAR` (a pose the cloud has
    not seen). :meth:`note_pose` records the pose a
    reference was sent with.
    """

    def __init__(self, quality: int, refresh_frames: int, size_change: float = 0.3,
                 max_difference: float = 28.0, overdue_frames: int | None = None,
                 check=None, scale: float = 1.0, inter: bool = False,
                 bare: bool = False, from_plate: bool = False) -> None:  # fmt: skip
        if not 0 < scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {scale}")
        if from_plate and not inter:
            raise ValueError("references coded against the plate are inter-coded: "
                             "from_plate needs inter")  # fmt: skip
        self.inter, self.bare, self.from_plate = bool(inter), bool(bare), bool(from_plate)
        self._min_cost = _MIN_REF_COST - WEBP_CONTAINER_BYTES * self.bare
        # where the next inter QP search starts: the last one chosen (against a held
        # reference, against the plate)
        self._qp = {False: 34, True: 34}
        #: references coded against the plate (``from_plate``)
        self.plate_refs = 0
        #: the tracks whose reference the decoder holds (:func:`hold_refs`), oldest first
        self._held: dict[int, None] = {}
        #: refreshes coded against the held reference, and those coded whole (``inter``)
        self.inter_refreshes = self.intra_refreshes = 0
        self.quality = int(quality)
        self.scale = float(scale)
        self.check = check
        self.refresh_frames = max(1, int(refresh_frames))
        self.size_change = float(size_change)
        self.max_difference = float(max_difference)
        self.overdue_frames = (max(1, self.refresh_frames // 8) if overdue_frames is None
                               else int(overdue_frames))  # fmt: skip
        self._refs: dict[int, _Ref] = {}
        self._first_seen: dict[int, int] = {}
        #: track id -> the poses ``(uv (13, 2), visible (13,))`` its references were sent in
        self._poses: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._pose_now: dict | None = None

    def reset(self) -> None:
        """Forgets every reference (a keyframe: the decoder starts over too)."""
        self._refs.clear()
        self._held.clear()
        self._first_seen.clear()
        self._poses.clear()

    def note_pose(self, track_id: int, uv: np.ndarray | None,
                  visible: np.ndarray | None = None) -> None:  # fmt: skip
        """Records ``(13, 2)`` box-relative ``uv`` and ``(13,)`` bool ``visible`` as the
        pose of the reference just sent for ``track_id``, replacing what :meth:`select`
        assumed (``uv`` None: it was sent without a pose, the cloud keeps it without)."""
        poses = self._poses.setdefault(int(track_id), [])
        if poses:
            poses.pop()
        if uv is not None:
            poses.append((np.asarray(uv, np.float64), np.asarray(visible, bool)))

    def select(self, frame: np.ndarray, number: int, tracks: Tracks, budget_bytes: int | None,
               new_budget_bytes: int | None = None, min_age: int | None = None,
               poses: dict | None = None, plate: np.ndarray | None = None,
               ) -> dict[int, bytes]:  # fmt: skip
        """The references to send with frame ``number``: ``{track id: WebP bytes}``.

        Args:
            frame: ``(H, W, 3)`` uint8 RGB.
            number: the frame's number (increasing).
            tracks: the frame's boxes as the decoder has them.
            budget_bytes: bound on the payload (``None``: none); stale references are
                refreshed stalest first while they fit.
            new_budget_bytes: the bound for people without any reference, who go first
                (default: ``budget_bytes``).
            min_age: also refresh any reference at least this many frames old (a rate
                controller with bytes to spare).
            poses: track id -> ``(uv (13, 2), visible (13,))`` the person's box-relative
                pose as the cloud has it this frame (class text); None: no pose mirror.
            plate: ``(H, W, 3)`` uint8, the plate the decoder holds when it decodes this
                frame's references (``from_plate``; None: none is coded against it).
        """
        self._pose_now = poses
        candidates = []
        crowded = _crowded(np.asarray(tracks.boxes, np.float64))
        for k, (box, tid) in enumerate(zip(tracks.boxes, tracks.ids.tolist(), strict=True)):
            self._first_seen.setdefault(tid, number)
            if min(box[2] - box[0], box[3] - box[1]) < MIN_BOX_PX:
                continue
            urgency = self._urgency(frame, number, box, tid, min_age)
            if crowded[k] and urgency < WRONG_SHAPE_URGENCY:
                continue  # a refresh now would carry a neighbour along: wait
            if urgency > 0:
                candidates.append((-urgency, tid, box))
        candidates.sort(key=lambda c: (c[0], c[1]))
        chosen: dict[int, bytes] = {}
        spent = 1
        # people without a reference, or whose reference is of another shape (a part of
        # them, or another person): they may use the new people's budget and thumbnails
        new_left = sum(-c[0] >= WRONG_SHAPE_URGENCY for c in candidates)
        for negative, tid, box in candidates:
            new = -negative >= WRONG_SHAPE_URGENCY
            bound = budget_bytes
            if new and new_budget_bytes is not None:
                bound = max(bound or 0, new_budget_bytes)
            # a person with no reference for overdue_frames gets a thumbnail whatever it costs
            waited = number - self._first_seen[tid]
            overdue = tid not in self._refs and waited >= self.overdue_frames
            if bound is not None and spent + self._min_cost > bound and not overdue:
                new_left -= new
                continue  # cannot fit whatever it costs: do not encode it
            if self.check is not None and not overdue and not self.check(frame, box):
                new_left -= new
                continue  # not a whole person at this box: wait for a frame where it is
            region = ref_region(box)
            full = ref_size(region)
            # a new person gets the largest picture that fits their share of what is left
            # for the new people, down to a thumbnail; a thumbnail's refinement is full size,
            # any other refresh ``scale`` of it (the decoder keeps the detail it had), or
            # nothing
            refresh = full if new or self._refs[tid].thumbnail else ref_size(region, self.scale)
            cap = bound
            if new and bound is not None:
                cap = spent + (bound - spent) // max(1, new_left)
                new_left -= 1
            under = None
            if new and self.from_plate and plate is not None:
                from semcodec.codec.scaffold.interref import plate_region

                under = plate_region(plate, region)
            for size in thumbnail_sizes(full) if new else [refresh]:
                held = None if new or tid not in self._held else self._refs[tid].picture
                limit = None if cap is None else cap - spent - 6
                data, picture = self._code(crop_box(frame, region, size), self.quality,
                                           held if under is None else under, limit,
                                           under is not None)  # fmt: skip
                if cap is None or spent + len(data) + 6 <= cap:
                    break
            else:
                if not overdue:
                    continue
                # over budget but overdue: the smallest thumbnail
                data, picture = self._code(crop_box(frame, region, size), self.quality, under,
                                           None, under is not None)  # fmt: skip
            chosen[tid] = data
            spent += len(data) + 6
            if self.inter and not new:
                self.inter_refreshes += data[0] != INTRA_CODE
                self.intra_refreshes += data[0] == INTRA_CODE
            self.plate_refs += under is not None and data[0] != INTRA_CODE
            self._refs[tid] = _Ref(number, float(box[3] - box[1]), picture,
                                   thumbnail=new and size != full,
                                   aspect=_aspect(box))  # fmt: skip
            if poses is not None:
                if new:
                    self._poses[tid] = []
                if tid in poses:
                    uv, visible = poses[tid]
                    self._poses.setdefault(tid, []).append(
                        (np.asarray(uv, np.float64), np.asarray(visible, bool)))  # fmt: skip
        hold_refs(self._held, {tid: None for tid in chosen})
        return chosen

    def _code(self, crop: np.ndarray, quality: int, held: np.ndarray | None,
              limit: int | None = None, from_plate: bool = False,
              ) -> tuple[bytes, np.ndarray]:  # fmt: skip
        """``(payload bytes, the picture the decoder will hold)`` of the ``(h, w, 3)`` uint8
        RGB ``crop`` at WebP ``quality``; with :attr:`inter` and the track's ``held``
        reference (``from_plate``: the plate under the person's box), coded against it
        instead where that is fewer bytes (and at most ``limit``) at a PSNR at least the
        WebP's (:func:`codec.scaffold.interref.code_inter`)."""
        webp = encode_ref(crop, quality)
        picture = decode_ref(webp)
        if self.bare:
            webp = strip_container(webp)
        if not self.inter:
            return webp, picture
        entry = intra_entry(webp)
        if held is None:
            return entry, picture
        from semcodec.codec.scaffold.interref import code_inter, psnr

        size = (crop.shape[1], crop.shape[0])
        most = len(entry) if limit is None else min(len(entry), limit + 1)
        most -= len(inter_entry(MAX_INTER_QP, size, b""))
        if most <= max(MIN_INTER_BYTES, INTER_FLOOR * len(entry)):
            return entry, picture
        found = code_inter(held, crop, psnr(crop, picture), most, self._qp[from_plate])
        if found is None:
            return entry, picture
        qp, data, recon = found
        self._qp[from_plate] = qp
        return inter_entry(qp, size, data, from_plate), recon

    def _urgency(self, frame: np.ndarray, number: int, box: np.ndarray, tid: int,
                 min_age: int | None) -> float:  # fmt: skip
        """0: keep the reference; larger: send one (people without a reference first)."""
        ref = self._refs.get(tid)
        if ref is None:
            return NO_REF_URGENCY
        if abs(np.log(_aspect(box) / ref.aspect)) > np.log(1 + MAX_ASPECT_CHANGE):
            return WRONG_SHAPE_URGENCY
        age = number - ref.frame
        refresh = max(1, self.refresh_frames // 4) if ref.thumbnail else self.refresh_frames
        stale = age >= refresh or (min_age is not None and age >= min_age)
        if abs(float(box[3] - box[1]) / ref.height - 1) > self.size_change:
            return float(age)
        now = (self._pose_now or {}).get(tid)
        if now is not None and not ref.thumbnail and self._poses.get(tid):
            near = _nearest_pose(self._poses[tid], np.asarray(now[0], np.float64),
                                 np.asarray(now[1], bool))  # fmt: skip
            if stale and near <= POSE_NEAR and age < POSE_MAX_PERIODS * self.refresh_frames:
                return 0.0  # the cloud has the person in this pose
            if not stale and near > POSE_FAR and age >= max(1, self.refresh_frames // 4):
                return float(age)  # a pose the cloud has not seen
        if stale:
            return float(age)
        size = (ref.picture.shape[1], ref.picture.shape[0])
        now = crop_box(frame, ref_region(box), size).astype(np.float32)
        if np.abs(now - ref.picture.astype(np.float32)).mean() > self.max_difference:
            return float(age)
        return 0.0
