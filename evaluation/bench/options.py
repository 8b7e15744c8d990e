"""The benchmark's options that a command line names before anything runs: the metrics, the
protocols and each codec's options under a protocol. Kept apart from :mod:`.grid` so that
``semcodec-bench --help`` loads no codec, metric or video library."""

from __future__ import annotations

#: ``person``: PSNR and ST-LPIPS on crops around the ground-truth people (needs ground truth;
#: see :mod:`evaluation.metrics.person_region`).
#: ``temporal``: flicker and temporal warping error (see :mod:`evaluation.metrics.temporal`).
#: ``pose``: pose agreement PCK@0.1 of the people, the pose model on the original and the
#: decoded ground-truth boxes (needs ground truth; :mod:`evaluation.metrics.pose_agreement`).
ALL_METRICS = ("psnr", "ms_ssim", "st_lpips", "person", "temporal", "pose", "moda", "fvd")
DEFAULT_METRICS = ("psnr", "ms_ssim", "st_lpips", "person", "temporal", "moda")

#: How a codec meets the measured range (``--protocol``): ``cold`` starts every codec at
#: the range's first frame (a new stream: its first intra frame or plate is paid inside the
#: range); ``steady`` runs every codec from the sequence's first frame without a break and
#: charges it only for the bytes of the range's frames, as a camera that has been streaming
#: for a while is (stream headers sent before the range are not charged).
PROTOCOLS = ("cold", "steady")
#: Frames between intra frames (x264/x265 ``keyint``, the scaffold's plates) under the
#: steady-state protocol unless ``--gop`` says otherwise: one period for every codec.
STEADY_INTRA_PERIOD = 300
#: The codecs whose intra period and preset ``codec_options_for`` sets.
VIDEO_CODECS = ("x264", "x265")


def codec_options_for(protocol: str, gop: int | None = None,
                      preset: str = "medium") -> dict[str, dict[str, object]]:  # fmt: skip
    """Each codec's options under ``protocol``: one intra period for every codec (``gop``
    frames; default 0, the first frame only, when cold and :data:`STEADY_INTRA_PERIOD` when
    steady): x264/x265's ``keyint`` and, when steady, the scaffold's plate period."""
    steady = protocol == "steady"
    gop = gop if gop is not None else STEADY_INTRA_PERIOD if steady else 0
    options: dict[str, dict[str, object]] = {name: {"preset": preset, "gop": gop}
                                             for name in VIDEO_CODECS}  # fmt: skip
    if steady:
        options["scaffold"] = {"keyframe_interval": gop}
    return options
