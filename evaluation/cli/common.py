"""What every ``semcodec-bench`` sub-command shares: the program's name and defaults, the
user-error type and the argument types."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from semcodec.codec.core.console import (
    positive_float,
    positive_int,
)

PROG = "semcodec-bench"

DEFAULT_CODECS = "x264,x265,jpeg,scaffold,raw"
#: ST-LPIPS and MODA on every k-th frame in the default grid (the demo on the embedded
#: sample), the slowest metrics; explicit ``--data`` runs measure every frame unless told
#: otherwise.
DEMO_LPIPS_EVERY = 4
DEMO_MODA_EVERY = 2

DEFAULT_OUT = "runs/bench"

log = logging.getLogger("semcodec.evaluation.cli")

#: The static-camera x265 anchor (``--static-camera``): constant QP, first frame boosted.
STATIC_CAMERA_QPS = (45, 48, 51)
STATIC_CAMERA_IPRATIOS = (8, 16)
STATIC_CAMERA_SETTINGS = tuple(f"qp={q},ipratio={r}" for r in STATIC_CAMERA_IPRATIOS
                               for q in STATIC_CAMERA_QPS)  # fmt: skip

#: x265 settings the demo grid (no --data) adds to its CRF sweep so that its chart and
#: picture compare level 1 with x265 at level 1's rate (about 0.004 BPP on the embedded
#: sample, where x265 at full size cannot go): CRF 45/51 and the static-camera anchor (first
#: frame boosted) at half size, which bracket that rate on the sample.
DEMO_X265_AT_LEVEL1_RATE = ("crf=45,scale=0.5", "crf=51,scale=0.5", "qp=45,ipratio=8,scale=0.5",
                            "qp=48,ipratio=8,scale=0.5", "qp=51,ipratio=8,scale=0.5")  # fmt: skip

IMAGE_CODECS = ("jpeg", "webp")


class UsageError(ValueError):
    """A command line that names nothing to do, or contradicts itself."""

def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]

def numbers(text: str) -> list[str]:
    values = csv_list(text)
    for v in values:
        try:
            float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not a number") from None
    return values

def step_list(text: str) -> list[int]:
    return [positive_int(v) for v in csv_list(text)]

def probability(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value

def fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value

def webp_quality(text: str) -> int:
    """A WebP quality, 1..100."""
    value = positive_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"expected a WebP quality 1..100, got {text!r}")
    return value

def camera_transform(text: str) -> str:
    """``--camera-transform``: checked here, passed on in its canonical form."""
    from semcodec.evaluation.data.camera import CameraTransformError, parse_camera_transform

    try:
        return parse_camera_transform(text).describe()
    except CameraTransformError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

CAMERA_TRANSFORM_HELP = ("a new camera made from the sequence: zoom=Z[,x=X,y=Y] crops 1/Z of "
                         "the frame about (X, Y) (fractions, default the centre) and resizes "
                         "it back (people Z times taller); scale=S resizes the frames (people "
                         "smaller); the ground truth follows")  # fmt: skip

def accepted_names(kind: str) -> str:
    """The accepted names of ``kind`` (codecs, metrics, executors), comma-separated."""
    if kind == "codecs":
        from semcodec.evaluation.codecs.base import available_codecs

        return ", ".join(available_codecs())
    if kind == "metrics":
        from semcodec.evaluation.bench.options import ALL_METRICS

        return ", ".join(ALL_METRICS)
    from semcodec.evaluation.bench.executors import EXECUTORS

    return ", ".join(EXECUTORS)


def write_json(path: Path, data) -> None:
    """Writes ``data`` as indented JSON to ``path`` atomically (never a partial file under
    the final name)."""
    import json

    from semcodec.evaluation.report.markdown import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
