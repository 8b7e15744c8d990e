"""Issue 51, Deliver 3: what a reference coded against the plate saves against a whole WebP.

    python docs/diagnostics/plate_refs.py SEQ START FRAMES [SETTING] [CAMERA]

e.g. ``python docs/diagnostics/plate_refs.py ../shared/data/TUD-Stadtmitte 91 89 level=1``
(SETTING: a level-1 setting, default ``level=1``, with ``appearance_plate`` off so that every
first reference is coded whole; CAMERA: a ``--camera-transform``, e.g. ``scale=0.5``).
The encode records every reference it codes whole (a new person's, at each thumbnail size
it tries) with the plate it held then, and codes each again as the encoder would with
``appearance_plate``: the cheapest P-picture predicted from the plate under the box
(:func:`codec.scaffold.interref.plate_region`) at the WebP's PSNR or better. Printed: the
pictures, their WebP and plate-coded bytes (entries as sent: code, size, P-picture), and the
PSNR of each on the person's pixels (those differing from the plate by more than 25 levels).
"""

from __future__ import annotations

import sys

import numpy as np

from semcodec.codec.scaffold import appearance as A
from semcodec.codec.scaffold import encoder as scaffold_encoder
from semcodec.codec.scaffold import interref as I
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence

#: A pixel is the person's where it differs from the plate by more than this (0..255).
PERSON_DIFFERENCE = 25


def record_whole_references(pixels: np.ndarray, fps: float, setting: str) -> list[tuple]:
    """``(crop, WebP entry bytes, its PSNR, region, plate)`` of every reference the encode
    codes whole (``appearance_plate`` off)."""
    held, region, rows = {}, {}, []
    select, crop_box, code = (scaffold_encoder.ScaffoldEncoder._select_refs, A.crop_box,
                              A.AppearanceSelector._code)  # fmt: skip

    def held_picture(self, *args, **kwargs):
        held["plate"] = self.plate.held_picture()
        return select(self, *args, **kwargs)

    def recorded_crop(frame, box, size):
        region["box"] = np.asarray(box, np.float64)
        return crop_box(frame, box, size)

    def recorded_code(self, crop, quality, previous, limit=None, from_plate=False):
        data, picture = code(self, crop, quality, previous, limit, from_plate)
        if previous is None and held.get("plate") is not None:
            rows.append((crop.copy(), len(data), I.psnr(crop, picture), region["box"].copy(),
                         held["plate"]))  # fmt: skip
        return data, picture

    scaffold_encoder.ScaffoldEncoder._select_refs = held_picture
    A.crop_box, A.AppearanceSelector._code = recorded_crop, recorded_code
    try:
        ScaffoldCodec().encode(pixels, Setting.parse(f"{setting},appearance_plate=False"), fps)
    finally:
        scaffold_encoder.ScaffoldEncoder._select_refs = select
        A.crop_box, A.AppearanceSelector._code = crop_box, code
    return rows


def person_psnr(crop: np.ndarray, picture: np.ndarray, person: np.ndarray) -> float:
    error = np.mean((crop.astype(np.float64) - picture.astype(np.float64))[person] ** 2)
    return float(10 * np.log10(255.0**2 / max(error, 1e-9)))


def main(sequence: str, start: int, count: int, setting: str, camera: str | None) -> None:
    options = (("camera_transform", camera),) if camera else ()
    pixels, info, _ = load_sequence(sequence, count, options, start)
    rows = record_whole_references(pixels, info.fps, setting)
    whole = plate = 0
    gains = []
    for crop, nbytes, quality, region, held in rows:
        size = (crop.shape[1], crop.shape[0])
        under = I.plate_region(held, region)
        found = I.code_inter(under, crop, quality, None)
        coded = nbytes if found is None else min(nbytes, len(A.inter_entry(found[0], size,
                                                                           found[1], True)))
        whole, plate = whole + nbytes, plate + coded
        person = np.abs(crop.astype(int) - I.predict(under, size).astype(int)).max(-1) \
            > PERSON_DIFFERENCE  # fmt: skip
        if found is not None and person.sum() >= 20:
            webp = A.decode_ref(A.encode_ref(crop, 30))
            gains.append(person_psnr(crop, found[2], person) - person_psnr(crop, webp, person))
        print(f"{size[0]}x{size[1]}: WebP {nbytes} B at {quality:.1f} dB, against the plate "
              f"{coded} B")  # fmt: skip
    print(f"{sequence} {start}-{start + count - 1} {setting} {camera or ''}: {len(rows)} "
          f"pictures coded whole, {whole} B; against the plate {plate} B "
          f"({whole / max(1, plate):.2f}x fewer); person pixels' PSNR, plate-coded minus "
          f"WebP: median {np.median(gains):+.2f} dB over {len(gains)}")  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], int(args[1]), int(args[2]), args[3] if len(args) > 3 else "level=1",
         args[4] if len(args) > 4 else None)
