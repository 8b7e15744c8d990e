"""Task-oriented features (issue 14): a person detector split between edge and cloud, and a
learned bottleneck that codes the features at the split.

This package's ``__init__`` imports nothing (the command lines read the constant below
before any model library loads)."""

#: Detect mode's default agreement floor: F1 (IoU 0.5) of the detections of the decoded
#: features against the uncompressed split detector's, on the edge's own frames
#: (:mod:`codec.task.ratecontrol`).
DEFAULT_MIN_AGREEMENT = 0.8
