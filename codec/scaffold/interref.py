"""Inter-coded appearance references: a person's refresh predicted from their previous one.

A refresh is coded as the P-picture of a two-picture HEVC stream (libx265 through PyAV)
whose first picture is the **prediction**: the person's previous reference, as the decoder
holds it, resized to the new reference's size (:func:`predict`, OpenCV's bit-exact
bilinear). Only the P-picture's bytes are sent. The decoder rebuilds the first picture's
bytes itself -- it holds the previous reference, so it codes the same prediction with the
same libx265 settings (:func:`_code_pair`: one thread, no look-ahead, integer colour
conversion, so the same bytes on every machine: the arm64 check of issue 52 found libx265
and FFmpeg's HEVC decoder byte-identical on both from the same YUV) -- and decodes the two
pictures with FFmpeg's HEVC decoder. The motion search of the P-picture finds the parts of
the person that moved in the box (arms, legs) where a residual of the resized picture alone
cannot.

The first picture is coded at a high quality (QP :data:`PREDICTION_QP`), the P-picture at
the QP the edge chooses (:func:`code_inter`: the cheapest whose PSNR reaches the whole
WebP's it replaces). Pictures are padded by edge replication to a multiple of :data:`ALIGN`
pixels, at least :data:`MIN_SIDE`, and cropped after decoding.

The price of not sending the first picture: edge and cloud must have the same libx265 (and
these settings). Another libx265 may code the prediction to other bytes, and the P-picture
is then decoded against another picture (a wrong reference, not an error). The known
answer of ``tests/codec/test_inter_refs.py`` fails when that happens.

Measured on the refreshes a level-1 encode sends (``docs/diagnostics/inter_refs.py``;
quality: PSNR and ST-LPIPS of the reference against the frame's crop it was made from;
docs/journal.md, issue 51): against whole WebP thumbnails at WebP quality 5..70, BD-rate
-37 % by PSNR and -35 % by ST-LPIPS on PETS09-S2L1-full 501-795 (177 refreshes; 1.60x and
1.54x fewer bytes), -36 % / -35 % on TUD-Stadtmitte 1-179 (24; 1.57x, 1.55x). The same
scheme with libx264 gave -28 % / -21 % and -28 % / -24 %; a WebP of the residual against the
resized previous reference (offset by 128) cost more than the whole thumbnail at every
quality (+188 % / +181 % on PETS): the resized picture alone is about 12 dB PSNR from the
new crop, a walking person's limbs having moved by more than a block, which the P-picture's
motion search finds and a residual cannot.
"""

from __future__ import annotations

from fractions import Fraction

import av
import cv2
import numpy as np

from semcodec.codec.core.yuv import i420_to_rgb, rgb_to_i420

#: Sides of a coded picture are padded to a multiple of this (x265's smallest CU) ...
ALIGN = 8
#: ... and to at least this. One 16-pixel CTU wide, libx265's sub-pixel motion search reads
#: memory it has not written: the same pair coded to other P-picture bytes in another process
#: (``MALLOC_PERTURB_`` 1, 85, 170 gave three), 24 pixels wide never did (docs/journal.md).
MIN_SIDE = 24
#: QP of the prediction picture (not sent, so any QP costs nothing; below 12 it is slower to
#: code and no better a prediction: 4 gave 4,258 bytes at 30.21 dB on 20 PETS refreshes at
#: QP 34, 12 gave 4,244 at 30.18).
PREDICTION_QP = 12
#: The step of :func:`code_inter`'s search.
QP_STEP = 3
#: The QPs a P-picture may take.
MIN_QP, MAX_QP = 0, 51
#: Annex-B start code the P-picture's bytes begin with (left out of the payload).
START_CODE = b"\x00\x00\x00\x01"
#: libx265 settings of both pictures: psycho-visual rate-distortion at half its default
#: strength (1: BD-rate against whole WebPs by PSNR -36 %, by ST-LPIPS -38 %; x265's default
#: 2 and 1: -33 % / -38 %; off: -38 % / -33 %, on 49 refreshes of PETS09-S2L1-full 501-795
#: and TUD-Stadtmitte 1-179), adaptive quantisation and SAO off, 16-pixel CTUs (pictures of
#: one CTU or a few), one thread and no look-ahead (the same bytes whatever the cores).
X265_PARAMS = ("keyint=10:min-keyint=10:scenecut=0:open-gop=0:bframes=0:rc-lookahead=0:"
               "frame-threads=1:pools=none:lookahead-slices=0:no-wpp=1:ctu=16:no-sao=1:"
               "psy-rd=1:psy-rdoq=1:aq-mode=0:info=0:log-level=error")  # fmt: skip
#: x265's preset: ``slower`` is as good as ``veryslow`` on these pictures (4,244 against
#: 4,258 bytes) at half the time (18 against 36 ms a pair on the 2 shared cores).
PRESET = "slower"


class InterRefError(ValueError):
    """An inter-coded reference's bytes do not decode against the prediction."""


def predict(previous: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The prediction of a reference of ``size`` ``(width, height)`` from ``(h, w, 3)`` uint8
    RGB ``previous``: resized bilinearly with OpenCV's bit-exact fixed point
    (``INTER_LINEAR_EXACT``), ``(height, width, 3)`` uint8."""
    if (previous.shape[1], previous.shape[0]) == tuple(size):
        return previous
    return cv2.resize(previous, tuple(size), interpolation=cv2.INTER_LINEAR_EXACT)


def plate_region(plate: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The pixels of ``plate`` ``(H, W, 3)`` uint8 under ``region`` ``(x1, y1, x2, y2)``
    (frame pixels, rounded to whole ones; outside the frame the edge pixels repeated; the
    region clipped to one frame beyond each side and to the frame's size, so that a box a
    stream makes up costs no more memory than the plate): ``(h, w, 3)`` uint8. A new
    person's reference coded against the plate is predicted from it (resized by
    :func:`predict`, as a held reference is): the background around the person costs next
    to nothing."""
    height, width = plate.shape[:2]
    x1, y1, x2, y2 = (int(np.floor(float(v) + 0.5)) for v in region)
    x1, y1 = min(max(x1, -width), 2 * width), min(max(y1, -height), 2 * height)
    x2, y2 = min(max(x2, x1 + 1), x1 + width), min(max(y2, y1 + 1), y1 + height)
    xs = np.clip(np.arange(x1, x2), 0, width - 1)
    ys = np.clip(np.arange(y1, y2), 0, height - 1)
    return np.ascontiguousarray(plate[ys][:, xs])


def coded_size(size: tuple[int, int]) -> tuple[int, int]:
    """The padded ``(width, height)`` a picture of ``size`` is coded at."""
    return tuple(max(MIN_SIDE, -(-s // ALIGN) * ALIGN) for s in size)


def _pad(picture: np.ndarray) -> np.ndarray:
    width, height = coded_size((picture.shape[1], picture.shape[0]))
    return cv2.copyMakeBorder(picture, 0, height - picture.shape[0], 0,
                              width - picture.shape[1], cv2.BORDER_REPLICATE)  # fmt: skip


def _code_pair(prediction: np.ndarray, picture: np.ndarray | None, qp: int) -> list[bytes]:
    """The packets of ``prediction`` (then ``picture``, if given) coded as one HEVC stream
    with the P-picture at ``qp``: both ``(h, w, 3)`` uint8 RGB of the coded size."""
    ctx = av.CodecContext.create("libx265", "w")
    ctx.width, ctx.height = prediction.shape[1], prediction.shape[0]
    ctx.pix_fmt = "yuv420p"
    ctx.time_base = Fraction(1, 1)
    # CQP: the I-picture's QP is the P-picture's less 6 log2(ipratio)
    ipratio = 2.0 ** ((qp - PREDICTION_QP) / 6)
    ctx.options = {"preset": PRESET,
                   "x265-params": f"qp={qp}:ipratio={ipratio:.6f}:{X265_PARAMS}"}  # fmt: skip
    packets = []
    for index, rgb in enumerate(p for p in (prediction, picture) if p is not None):
        frame = av.VideoFrame.from_ndarray(rgb_to_i420(rgb), format="yuv420p")
        frame.pts = index
        packets += ctx.encode(frame)
    packets += ctx.encode(None)
    return [bytes(p) for p in packets]


def _decode_pair(first: bytes, second: bytes, size: tuple[int, int]) -> np.ndarray:
    """The second picture of ``first + second`` (HEVC Annex B) of coded ``size``, ``(h, w, 3)``
    uint8 RGB; the decoder is capped at about ``size``'s pixels (with room for its block
    alignment, as :mod:`codec.keyframes` does) and fails on damage."""
    ctx = av.CodecContext.create("hevc", "r")
    ctx.options = {"err_detect": "explode", "max_pixels": str((size[0] + 64) * (size[1] + 64))}
    try:
        packets = list(ctx.parse(first + second)) + list(ctx.parse(None))
        frames = [f for p in packets for f in ctx.decode(p)] + list(ctx.decode(None))
    except (av.FFmpegError, ValueError) as exc:
        raise InterRefError(f"inter-coded reference does not decode ({exc})") from exc
    if len(frames) != 2 or any(f.is_corrupt for f in frames):
        raise InterRefError(f"inter-coded reference decodes to {len(frames)} picture(s), "
                            "not the prediction and one P-picture")  # fmt: skip
    frame = frames[1]
    if (frame.width, frame.height) != tuple(size) or frame.format.name != "yuv420p":
        raise InterRefError(f"inter-coded reference decodes to a {frame.width}x{frame.height} "
                            f"{frame.format.name} picture, expected {size[0]}x{size[1]}")
    return i420_to_rgb(frame.to_ndarray(), frame.width, frame.height)


def encode_inter(previous: np.ndarray, picture: np.ndarray, qp: int) -> tuple[bytes, np.ndarray]:
    """``(bytes, reconstruction)`` of ``(h, w, 3)`` uint8 RGB ``picture`` coded against
    ``previous`` (the held reference, any size) at P-picture ``qp`` (0..51); the
    reconstruction is what :func:`decode_inter` returns for the bytes."""
    height, width = picture.shape[:2]
    prediction = _pad(predict(previous, (width, height)))
    packets = _code_pair(prediction, _pad(picture), int(qp))
    if len(packets) != 2 or not packets[1].startswith(START_CODE):
        raise InterRefError(f"libx265 gave {len(packets)} packets for two pictures")
    data = packets[1][len(START_CODE):]
    recon = _decode_pair(packets[0], packets[1], coded_size((width, height)))
    return data, np.ascontiguousarray(recon[:height, :width])


#: HEVC NAL unit types a P-picture's bytes may be: TRAIL_N, TRAIL_R (a trailing picture).
P_SLICE_TYPES = (0, 1)


def _check_slice(data: bytes) -> None:
    """Refuses bytes that are not one NAL unit of a trailing picture's slice: no start code
    inside (a parameter set of another size, a second picture), no other NAL type.
    Damage inside the slice's data may decode to a wrong picture (the decoder conceals what
    it cannot notice): the unit's checksum is there for that."""
    if len(data) < 3 or START_CODE[1:] in data:
        raise InterRefError("inter-coded reference is not one NAL unit")
    nal_type = (data[0] >> 1) & 0x3F
    if data[0] & 0x80 or nal_type not in P_SLICE_TYPES:
        raise InterRefError(f"inter-coded reference is a NAL unit of type {nal_type}, not a "
                            "trailing picture's slice")  # fmt: skip


def decode_inter(previous: np.ndarray, size: tuple[int, int], qp: int, data: bytes) -> np.ndarray:
    """The reference of ``size`` ``(width, height)`` coded by :func:`encode_inter` as ``data``
    at ``qp`` against ``previous``: ``(height, width, 3)`` uint8 RGB.

    Raises:
        InterRefError: the bytes do not decode to one picture of the size.
    """
    _check_slice(data)
    width, height = size
    prediction = _pad(predict(previous, size))
    first = _code_pair(prediction, None, int(qp))
    recon = _decode_pair(b"".join(first), START_CODE + bytes(data), coded_size(size))
    return np.ascontiguousarray(recon[:height, :width])


def psnr(reference: np.ndarray, picture: np.ndarray) -> float:
    """PSNR (dB, RGB, peak 255) of ``picture`` against ``reference`` (same shape, uint8);
    ``inf`` for equal pictures."""
    error = np.mean((reference.astype(np.float64) - picture.astype(np.float64)) ** 2)
    return float("inf") if error == 0 else float(10 * np.log10(255.0**2 / error))


def code_inter(previous: np.ndarray, picture: np.ndarray, min_psnr: float,
               max_bytes: int | None = None, start: int = 34,
               ) -> tuple[int, bytes, np.ndarray] | None:  # fmt: skip
    """The cheapest inter coding of ``picture`` against ``previous`` whose PSNR against
    ``picture`` is at least ``min_psnr`` dB and whose bytes are fewer than ``max_bytes``:
    ``(qp, bytes, reconstruction)``, or None (none is).

    The largest such QP (PSNR falls and bytes fall as the QP grows), searched from
    ``start`` in steps of :data:`QP_STEP` and then one: about three encodes of tens of
    milliseconds each. Going down, a QP that misses the PSNR with ``max_bytes`` or more
    ends the search (every lower QP costs more)."""
    trials: dict[int, tuple[bytes, np.ndarray, bool]] = {}

    def passes(qp: int) -> bool:
        if qp not in trials:
            data, recon = encode_inter(previous, picture, qp)
            trials[qp] = (data, recon, psnr(picture, recon) >= min_psnr)
        return trials[qp][2]

    def over(qp: int) -> bool:
        return max_bytes is not None and len(trials[qp][0]) >= max_bytes

    qp = min(MAX_QP, max(MIN_QP, int(start)))
    if passes(qp):
        while qp + QP_STEP <= MAX_QP and passes(qp + QP_STEP):
            qp += QP_STEP
    else:
        while not passes(qp):
            if over(qp) or qp == MIN_QP:
                return None
            qp = max(MIN_QP, qp - QP_STEP)
    while qp < MAX_QP and passes(qp + 1):  # up to the failing QP a step above (tried)
        qp += 1
    if over(qp):
        return None
    return qp, trials[qp][0], trials[qp][1]
