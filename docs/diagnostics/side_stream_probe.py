"""Issue 54's person side stream, tried without a network: a level-1 stream's frames fused
with a low-rate x265 layer, scored as the benchmark scores people (person-region and
whole-frame ST-LPIPS, BPP from both streams' bytes).

    python docs/diagnostics/side_stream_probe.py SEQ START FRAMES SCAFFOLD_SETTINGS X265_SETTINGS

``SCAFFOLD_SETTINGS`` and ``X265_SETTINGS`` are lists separated by ``;`` (``level=1,
target_bpp=0.002`` and ``qp=51,ipratio=16,scale=0.25``); ``CAMERA`` as for
``person_region_probe.py``. Two fusions of the same side stream, each printed per pair:

* ``lowpass``: the whole frame x265 codes at its size; the cloud adds the low frequencies of
  (side - drawn) (a Gaussian of sigma 0.5 or 1 side-stream pixels), everywhere (``all``) or
  only where they disagree by more than 12 levels (``gate``);
* ``roi``: x265 codes only the people (the decoded boxes grown 1.25x, feathered), the rest of
  the picture replaced by the plate the cloud holds (``plate``) or by grey (``grey``), which
  costs nothing to predict; the cloud pastes the coded people over its drawing.
"""

from __future__ import annotations

import sys

import cv2
import numpy as np

from semcodec.codec.scaffold.decoder import decode_stream
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.baselines import X265
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from person_region_probe import load, scores  # noqa: E402

GATE_LEVELS = 12.0
ROI_GROW = 1.25
FEATHER_PX = 3.0


def lowpass_fused(drawn: np.ndarray, side: np.ndarray, sigma: float, gate: bool) -> np.ndarray:
    out = np.empty_like(drawn)
    for t in range(len(drawn)):
        a = drawn[t].astype(np.float32)
        diff = cv2.GaussianBlur(side[t].astype(np.float32) - a, (0, 0), sigma)
        if gate:
            weight = np.clip((np.abs(diff).max(-1) - GATE_LEVELS) / GATE_LEVELS, 0, 1)
            diff = cv2.GaussianBlur(weight, (0, 0), sigma)[..., None] * diff
        out[t] = np.clip(a + diff + 0.5, 0, 255).astype(np.uint8)
    return out


def person_masks(boxes_per_frame: list[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """``(T, H, W, 1)`` float32: each frame's boxes grown :data:`ROI_GROW`x, feathered."""
    height, width = shape
    masks = np.zeros((len(boxes_per_frame), height, width), np.float32)
    for t, boxes in enumerate(boxes_per_frame):
        for x1, y1, x2, y2 in boxes:
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            hw, hh = (x2 - x1) * ROI_GROW / 2, (y2 - y1) * ROI_GROW / 2
            masks[t, max(0, int(cy - hh)):int(cy + hh) + 1,
                  max(0, int(cx - hw)):int(cx + hw) + 1] = 1  # fmt: skip
        masks[t] = cv2.GaussianBlur(masks[t], (0, 0), FEATHER_PX)
    return masks[..., None]


def main(sequence: str, start: int, count: int, scaffolds: str, sides: str) -> None:
    frames, info, gt = load(sequence, start, count)
    pixels = frames[..., 0].size
    for text in scaffolds.split(";"):
        codec = ScaffoldCodec()
        encoded = codec.encode(frames, Setting.parse(text), info.fps)
        drawn = codec.decode(encoded)
        plates, boxes, plate = [], [], None
        for decoded, _ in decode_stream(encoded.payload):
            plate = decoded.keyframe_image if decoded.keyframe_image is not None else plate
            plates.append(plate)
            boxes.append(decoded.scaffold.tracks.boxes.copy())
        person, whole = scores(frames, drawn, gt)
        print(f"{text}: bpp {8 * len(encoded.payload) / pixels:.5f} person {person:.4f} "
              f"whole {whole:.4f}", flush=True)  # fmt: skip
        masks = person_masks(boxes, frames.shape[1:3])
        backs = {"plate": np.stack(plates).astype(np.float32),
                 "grey": np.full(frames.shape, 128, np.float32)}  # fmt: skip
        for side_text in sides.split(";"):
            setting, x265 = Setting.parse(side_text), X265()
            fused = {}
            side_stream = x265.encode(frames, setting, info.fps)
            side = x265.decode(side_stream)
            for sigma in (0.5, 1.0):
                for gate in (False, True):
                    name = f"lowpass {'gate' if gate else 'all'} sigma {sigma:g}"
                    sigma_px = sigma / setting.number("scale", 1.0)
                    fused[name] = (len(side_stream.payload),
                                   lowpass_fused(drawn, side, sigma_px, gate))  # fmt: skip
            for back_name, back in backs.items():
                composed = np.clip(back * (1 - masks) + frames * masks + 0.5, 0, 255)
                roi_stream = x265.encode(composed.astype(np.uint8), setting, info.fps)
                roi = x265.decode(roi_stream)
                out = np.clip(drawn * (1 - masks) + roi * masks + 0.5, 0, 255).astype(np.uint8)
                fused[f"roi {back_name}"] = (len(roi_stream.payload), out)
            for name, (side_bytes, out) in fused.items():
                person, whole = scores(frames, out, gt)
                total = 8 * (len(encoded.payload) + side_bytes) / pixels
                print(f"  + {side_text} {name}: side bpp {8 * side_bytes / pixels:.5f} total "
                      f"{total:.5f} person {person:.4f} whole {whole:.4f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
