"""Task-oriented features (issue 14): a person detector split between edge and cloud, and a
learned bottleneck that codes the features at the split.

This package's ``__init__`` imports nothing (the command lines read the constant below
before any model library loads)."""

#: The header setting that marks a detect-mode stream (``mode=detect``); a scaffold stream has
#: none.
MODE_KEY, DETECT_MODE = "mode", "detect"


def is_detect_stream(header) -> bool:
    """Whether ``header`` (a :class:`~codec.bitstream.StreamHeader`) is a detect-mode
    stream's: read here, where no model library is imported, by the decoders, the service
    and the edge's client alike."""
    return header.settings.get(MODE_KEY) == DETECT_MODE


#: Detect mode's default agreement floor: F1 (IoU 0.5) of the detections of the decoded
#: features against the uncompressed split detector's, on the edge's own frames
#: (:mod:`codec.task.ratecontrol`).
DEFAULT_MIN_AGREEMENT = 0.8
