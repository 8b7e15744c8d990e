"""``semcodec-bench plate``: the plates a level-1 stream gives the cloud, checked against the
clip's person-free median (:mod:`evaluation.metrics.plate`)."""

from __future__ import annotations

import numpy as np


def decoded_plates(pixels: np.ndarray, fps: float, setting: str) -> tuple[list, str]:
    """Encodes ``pixels`` (``(T, H, W, 3)`` uint8) with the scaffold codec's ``setting``
    (e.g. ``level=1,target_bpp=0.002``) and decodes it: ``([(frame number, plate)], the
    encoder's profile line)``, each plate the decoder holds after a keyframe picture or a
    plate tile."""
    from semcodec.codec.scaffold.codec import ScaffoldDecoder, encode_frames
    from semcodec.evaluation.codecs.base import Setting, create_codec

    codec = create_codec("scaffold")
    config = codec.level_config(Setting.parse(setting))
    size = (pixels.shape[2], pixels.shape[1])
    header, units, stats = encode_frames(iter(pixels), config, fps, size, len(pixels))
    decoder = ScaffoldDecoder(header)
    plates = []
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is not None and decoded.keyframe_image is not None:
            plates.append((decoded.scaffold.number, decoded.keyframe_image))
    decoder.finish()
    return plates, stats.profile


def check_plates(pixels: np.ndarray, gt, fps: float, setting: str) -> list[dict]:
    """Each decoded plate of ``setting`` on the clip against its person-free median (from
    the ground truth ``gt``): rows ``{frame, luma_error, blob_share, blobs, judged}``, and
    the last plate's picture under ``"picture"`` of the last row."""
    from semcodec.evaluation.data.groundtruth import xywh_to_xyxy
    from semcodec.evaluation.metrics.plate import blob_picture, person_free_median, plate_check

    boxes = []
    for number in range(1, len(pixels) + 1):
        rows = (gt.frame_numbers == number) & gt.counted
        boxes.append(xywh_to_xyxy(gt.boxes[rows]))
    reference, shown = person_free_median(pixels, boxes)
    plates, profile = decoded_plates(pixels, fps, setting)
    out = []
    for number, plate in plates:
        check = plate_check(plate, reference, shown)
        out.append({"frame": number, "luma_error": check.luma_error,
                    "blob_share": check.blob_share, "blobs": check.blobs,
                    "judged": check.judged, "profile": profile})  # fmt: skip
    if plates:
        out[-1]["picture"] = blob_picture(plates[-1][1], reference, shown)
    return out
