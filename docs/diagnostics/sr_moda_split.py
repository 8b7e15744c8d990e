"""Where super-resolution of the plate changes MODA (issue 38): misses or false alarms, and
whether the false alarms lie on a drawn person or on the plate.

Usage: ``python docs/diagnostics/sr_moda_split.py ../shared/data/PETS09-S2L1-full 501 295
'level=1,target_bpp=0.001' 'none,esrgan-slim-plates,esrgan-medium-plates' RUN_DIR/detector/X.json``

Codes the range once (cold start), decodes it with each upscaler, runs the benchmark's person
detector (the configuration a run chose, from its ``detector/*.json``) on every frame and
prints one JSON line per upscaler: CLEAR MOD counts, and how many detections overlap
(IoU >= 0.3) a ground-truth person or a person the scaffolds carry (drawn by the decoder):
the rest lie on the plate alone."""
import json
import sys

import numpy as np

from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.detector import DetectorConfig, PersonDetector
from semcodec.evaluation.metrics.moda import clear_mod

data, start, n, setting = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
upscalers, detector_file = sys.argv[5].split(","), sys.argv[6]
pix, info, gt = load_sequence(data, n, (), start=start)
with open(detector_file) as fh:
    detector = PersonDetector(DetectorConfig(**json.load(fh)["config"]))
numbers = list(range(1, len(pix) + 1))


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(len(a), len(b))`` IoU of ``x1, y1, x2, y2`` boxes."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda z: (z[:, 2] - z[:, 0]) * (z[:, 3] - z[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter + 1e-9)


for name in upscalers:
    text = setting if name == "none" else f"{setting},sr={name}"
    codec = ScaffoldCodec()
    encoded = codec.encode(pix, Setting.parse(text), info.fps)
    decoded = codec.decode(encoded)
    sent = encoded.metadata["person_boxes"]  # the people the scaffolds carry, per frame
    boxes = {k: detector.detect(decoded[k - 1]).boxes for k in numbers}
    result = clear_mod(boxes, gt, numbers)
    gt_boxes = {k: gt.boxes[(gt.frame_numbers == k) & gt.counted] for k in numbers}
    on_gt = on_drawn = 0
    for k in numbers:
        found, truth, drawn = boxes[k], gt_boxes[k], np.asarray(sent[k - 1]).reshape(-1, 4)
        if len(found) and len(truth):
            xyxy = np.c_[truth[:, :2], truth[:, :2] + truth[:, 2:]]
            on_gt += int((iou(found, xyxy).max(1) >= 0.3).sum())
        if len(found) and len(drawn):
            on_drawn += int((iou(found, drawn).max(1) >= 0.3).sum())
    print(json.dumps({"upscaler": name, "moda": round(result.moda, 4),
                      "true_positives": result.true_positives, "misses": result.misses,
                      "false_positives": result.false_positives, "gt_objects": result.gt_objects,
                      "detections_near_a_person_iou_0.3": on_gt,
                      "detections_near_a_drawn_person_iou_0.3": on_drawn,
                      "detections": int(sum(len(b) for b in boxes.values()))}), flush=True)
