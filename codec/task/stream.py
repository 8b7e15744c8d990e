"""``.semc`` streams of task features (``edge-agent encode --mode detect``) and the cloud's
detection outputs.

The stream header names the mode (setting ``mode=detect``), the two models the cloud needs
(the detector's PyTorch weights and the bottleneck, each with its sha256), the unit shape and
the intra period. Each frame is one unit (``KEYFRAME`` for an intra unit, ``FRAME`` for a
temporal one) with one ``FEATURES`` sub-stream: the unit of :mod:`codec.task.coder`. The cloud
writes ``detections.txt`` (MOTChallenge: ``frame, -1, x, y, w, h, score, -1, -1, -1``, frames
from 1) and ``detections.json``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semcodec.codec.bitstream import (
    ModelEntry,
    StreamHeader,
    SubStream,
    SubStreamType,
    Unit,
    UnitKind,
)
from semcodec.codec.scaffold.detector import Detections, PersonDetector
from semcodec.codec.scaffold.profile import PROFILE_SECONDS
from semcodec.codec.task import DEFAULT_MIN_AGREEMENT, DETECT_MODE, MODE_KEY, is_detect_stream
from semcodec.codec.task.bottleneck import TaskBottleneck, load_bottleneck
from semcodec.codec.task.calibrate import (
    DetectProfile,
    choose_layout,
    layout_settings,
    profile_detect,
    split_from_settings,
)
from semcodec.codec.task.coder import (
    RATE_STATUSES,
    TaskDecoder,
    TaskEncoder,
    UnitShape,
    is_intra,
    stack_latents,
    unstack_latents,
)
from semcodec.codec.task.ratecontrol import (
    DetectRateController,
    RateTable,
    agreement_counts,
    choose_setting,
    measure_rate_table,
)
from semcodec.codec.task.split import WEIGHTS_NAME, SplitConfig, SplitDetector, load_split_model

BOTTLENECK_MODEL = "task_bottleneck"
#: Header settings of a stream whose rate control may change bottleneck: the β of each
#: bottleneck a unit may switch to (index 0: the first, ``task_bottleneck``; index k >= 1:
#: the model entry ``task_bottleneck_<k>``) and the cloud's score threshold for each.
SWITCH_BETAS, SWITCH_THRESHOLDS = "switch_betas", "switch_thresholds"


def switch_model_name(index: int) -> str:
    """The header's model entry of the ``index``-th bottleneck a stream may use (0: the
    first, :data:`BOTTLENECK_MODEL`)."""
    return BOTTLENECK_MODEL if index == 0 else f"{BOTTLENECK_MODEL}_{index}"
#: Where the shipped bottlenecks are (package data), ``bottleneck-beta<β>.pt``.
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "weights" / "task"
#: The β of the bottleneck used when none is named.
DEFAULT_BETA = 0.01


class TaskStreamError(ValueError):
    """A detect-mode stream that cannot be decoded here (wrong mode, missing bottleneck,
    inconsistent header)."""


def _shipped_sums() -> dict[str, str]:
    """File name -> sha256 from ``SHIPPED_DIR/SHA256SUMS`` (``sha256  name`` lines)."""
    try:
        text = (SHIPPED_DIR / "SHA256SUMS").read_text(encoding="ascii")
    except FileNotFoundError:
        return {}
    return {name: digest for digest, name in (line.split() for line in text.splitlines()
                                              if line.strip())}  # fmt: skip


def shipped_bottlenecks() -> dict[float, Path]:
    """β -> path of every shipped bottleneck (those listed in ``SHA256SUMS``)."""
    out = {}
    for name in sorted(_shipped_sums()):
        try:
            out[float(Path(name).stem.removeprefix("bottleneck-beta"))] = SHIPPED_DIR / name
        except ValueError:
            continue
    return out


def verify_shipped(path: Path) -> Path:
    """``path`` after checking its sha256 against ``SHA256SUMS``.

    Raises:
        TaskStreamError: the file is missing or differs from the one shipped.
    """
    from semcodec.codec.core.packages import file_sha256

    expected = _shipped_sums().get(path.name)
    if not path.is_file():
        raise TaskStreamError(f"shipped bottleneck {path} is missing (reinstall semcodec)")
    if expected is not None and file_sha256(path) != expected:
        raise TaskStreamError(f"shipped bottleneck {path} has the wrong sha256 (expected "
                              f"{expected}); reinstall semcodec")  # fmt: skip
    return path


def bottleneck_path(beta: float | None = None, path: str | os.PathLike | None = None) -> Path:
    """The bottleneck file: ``path`` if given, else the shipped one of ``beta`` (default
    :data:`DEFAULT_BETA`).

    Raises:
        TaskStreamError: no shipped bottleneck has that β (the message lists those that do).
    """
    if path is not None:
        return Path(path)
    shipped = shipped_bottlenecks()
    beta = DEFAULT_BETA if beta is None else float(beta)
    if beta not in shipped:
        listed = ", ".join(f"{b:g}" for b in shipped) or "none"
        raise TaskStreamError(f"no shipped bottleneck for beta {beta:g}; shipped: {listed} "
                              "(or pass a file from `semcodec-bench train-bottleneck`)")
    return verify_shipped(shipped[beta])


@dataclass
class DetectEncodeStats:
    """What :func:`encode_detect` wrote: frames, intra units and bytes per part."""

    frames: int = 0
    intra_units: int = 0
    feature_bytes: int = 0
    header_bytes: int = 0
    #: what the camera's profile chose (empty: the windows were given)
    profile: str = ""
    #: with a target: what the rate control chose on the start-up frames, its moves (from
    #: which frame, which setting, why), what it spent (unit bytes, framing included) and
    #: what the self-check said (log lines)
    rate: str = ""
    switches: list = dataclasses.field(default_factory=list)
    unit_bytes: int = 0
    agreements: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)
    #: with a target: (frame index from 0, β) of each change of bottleneck, and the rate
    #: status at the end (``ok``, ``over_budget``, ``below_floor``)
    beta_switches: list = dataclasses.field(default_factory=list)
    status: str = ""


@dataclass(frozen=True)
class DetectRateRequest:
    """A budget for detect mode (:mod:`codec.task.ratecontrol`).

    Attributes:
        target_bps: the stream's target, bits per second (header and framing included).
        bottlenecks: β -> bottleneck to choose among (the shipped ones by default).
        min_agreement: the self-check's floor (F1 against the uncompressed split detector).
        table: the rate table of the stream's start-up frames when already measured
            (:func:`rate_table`; a benchmark of several targets measures it once).
        target_of: with a target that follows the link (``--auto``): frame index (from 0)
            -> the target of that frame, bits per second, asked before each frame is coded;
            ``target_bps`` is then the start, which chooses the bottleneck.
        report: called with each warning of the rate control as it is made (the start's,
            and mid-stream: the floor under the finest setting, the budget that cannot reach
            the floor); they are in the stats' ``warnings`` too.
    """

    target_bps: float
    bottlenecks: dict
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    table: RateTable | None = None
    target_of: Callable[[int], float] | None = None
    report: Callable[[str], None] | None = None


def rate_table(ahead: list[np.ndarray], bottlenecks: dict, model,
               person_detector: PersonDetector) -> RateTable:  # fmt: skip
    """The rate table of start-up frames ``ahead`` (``(H, W, 3)`` uint8 RGB, at least 2):
    the camera's windows chosen on them, then :func:`codec.task.ratecontrol.measure_rate_table`
    over ``bottlenecks`` (β -> bottleneck) with the units' framing counted."""
    if len(ahead) < 2:
        raise TaskStreamError("rate control needs at least 2 frames")
    camera = choose_layout(ahead, person_detector)
    return measure_rate_table(ahead, bottlenecks, model, camera, _unit_overhead())


def shipped_candidates() -> dict[float, TaskBottleneck]:
    """β -> every shipped bottleneck, loaded (checked against ``SHA256SUMS``)."""
    return {beta: load_bottleneck(verify_shipped(path))
            for beta, path in shipped_bottlenecks().items()}  # fmt: skip


def _unit_overhead() -> int:
    """Framing bytes of a detect-mode unit beyond its payload (a short sequence number)."""
    return len(Unit(UnitKind.FRAME, 0, (SubStream(SubStreamType.FEATURES, b""),)).to_bytes())


def detect_header(bottleneck: TaskBottleneck, shape: UnitShape, width: int, height: int,
                  fps: float, num_frames: int, intra_period: int,
                  skip_threshold: int = 0, split: SplitConfig | None = None,
                  profile: DetectProfile | None = None,
                  rate_settings: dict[str, str] | None = None) -> StreamHeader:  # fmt: skip
    """The stream header of a detect-mode stream: the unit shape, the windows and the
    cloud's threshold (``split``, default the bottleneck's), what the camera's profile saw
    (``profile``), ``skip_threshold`` and ``intra_period`` for the reader (the decoder needs
    neither; under rate control, the first frame's) and the rate control's entries
    (``rate_settings``)."""
    from fractions import Fraction

    from semcodec.codec.core.models import model_spec

    rate = Fraction(fps).limit_denominator(1001)
    settings = {MODE_KEY: DETECT_MODE, "split_after": str(bottleneck.split.after),
                "windows": str(shape.windows), "latent": str(shape.latent),
                "side": str(shape.side), "intra_period": str(intra_period),
                "skip_threshold": str(skip_threshold),
                "beta": f"{bottleneck.metadata.get('beta', 0):g}",
                **layout_settings(split or bottleneck.split),
                **(profile.to_settings() if profile is not None else {}),
                **(rate_settings or {})}  # fmt: skip
    models = (ModelEntry(WEIGHTS_NAME, model_spec(WEIGHTS_NAME).sha256),
              ModelEntry(BOTTLENECK_MODEL, bottleneck.sha256()))  # fmt: skip
    return StreamHeader(width=width, height=height, fps_num=rate.numerator,
                        fps_den=rate.denominator, level=0, num_frames=num_frames,
                        models=models, settings=settings)  # fmt: skip


def encode_detect(frames: Iterable[np.ndarray], bottleneck: TaskBottleneck | None,
                  detector: SplitDetector, fps: float, frame_size: tuple[int, int],
                  num_frames: int = 0, intra_period: int = 64,
                  skip_threshold: int | None = None,
                  person_detector: PersonDetector | None = None,
                  rate: DetectRateRequest | None = None,
                  ) -> tuple[StreamHeader, Iterator[Unit], DetectEncodeStats]:  # fmt: skip
    """``(header, units, stats)``: units are produced as ``frames`` are read (then ``END``);
    ``stats`` fills in as they are consumed. ``skip_threshold``: see
    :class:`~codec.task.coder.TaskEncoder` (default: the bottleneck's).

    With ``person_detector`` (the full detector) the first :data:`PROFILE_SECONDS` of
    ``frames`` are read ahead and choose the windows and the cloud's threshold
    (:func:`codec.task.calibrate.profile_detect`; ``stats.profile`` says what); without it,
    ``detector``'s windows and threshold are used as they are.

    With ``rate`` (and ``person_detector``), the same start-up frames also choose the
    bottleneck among ``rate.bottlenecks``, the skip threshold and the intra period for the
    target, and a controller holds it (:mod:`codec.task.ratecontrol`); ``bottleneck``,
    ``intra_period`` and ``skip_threshold`` are then not used."""
    if rate is not None:
        if person_detector is None:
            raise ValueError("rate control needs the person detector (the camera's profile)")
        return _encode_detect_at_rate(frames, rate, detector, fps, frame_size, num_frames,
                                      person_detector)  # fmt: skip
    width, height = frame_size
    frames, profile = iter(frames), None
    if person_detector is not None:
        ahead = list(itertools.islice(frames, max(1, round(PROFILE_SECONDS * fps))))
        profile = profile_detect(ahead, bottleneck, detector.model, person_detector)
        detector = SplitDetector(detector.model, profile.split(detector.config))
        frames = itertools.chain(ahead, frames)
    encoder = TaskEncoder(bottleneck, detector, intra_period, skip_threshold)
    header = detect_header(bottleneck, encoder.shape(height, width), width, height, fps,
                           num_frames, intra_period, encoder.skip_threshold, detector.config,
                           profile)  # fmt: skip
    stats = DetectEncodeStats(header_bytes=len(header.to_bytes()),
                              profile=profile.describe() if profile else "")  # fmt: skip

    def units() -> Iterator[Unit]:
        for index, frame in enumerate(frames):
            _check_size(frame, index, width, height)
            payload = encoder.encode(frame)
            intra = payload[0] == 0
            stats.frames, stats.intra_units = index + 1, stats.intra_units + intra
            stats.feature_bytes += len(payload)
            kind = UnitKind.KEYFRAME if intra else UnitKind.FRAME
            yield Unit(kind, index, (SubStream(SubStreamType.FEATURES, payload),))
        yield Unit(UnitKind.END, stats.frames)

    return header, units(), stats


def _encode_detect_at_rate(frames: Iterable[np.ndarray], rate: DetectRateRequest,
                           detector: SplitDetector, fps: float, frame_size: tuple[int, int],
                           num_frames: int, person_detector: PersonDetector,
                           ) -> tuple[StreamHeader, Iterator[Unit], DetectEncodeStats]:  # fmt: skip
    """:func:`encode_detect` with a target (its docstring)."""
    width, height = frame_size
    frames = iter(frames)
    ahead = list(itertools.islice(frames, max(2, round(PROFILE_SECONDS * fps))))
    table = rate.table or rate_table(ahead, rate.bottlenecks, detector.model, person_detector)
    choice = choose_setting(table.points, rate.target_bps / 8 / fps, rate.min_agreement)
    setting = choice.point.setting
    bottleneck = rate.bottlenecks[setting.beta]
    profile = table.profiles[setting.beta]
    detector = SplitDetector(detector.model, profile.split(detector.config))
    checker = SplitDetector(detector.model, dataclasses.replace(detector.config,
                                                                score_threshold=0.0))
    encoder = TaskEncoder(bottleneck, detector, setting.intra_period, setting.skip_threshold)
    control = DetectRateController(choice, fps, 0, num_frames)
    betas = control.betas
    settings = {"rate_target_bps": f"{rate.target_bps:g}", "rate_status": choice.status,
                "min_agreement": f"{rate.min_agreement:g}",
                "profile_agreement": f"{choice.point.agreement:.3f}",
                "profile_quality": f"{choice.point.rank_quality:.3f}",
                "rate_table_frames": str(table.frames)}  # fmt: skip
    extra = ()
    if len(betas) > 1:  # the bottlenecks a unit may switch to, with the cloud's threshold
        settings[SWITCH_BETAS] = ",".join(f"{b:g}" for b in betas)
        settings[SWITCH_THRESHOLDS] = ",".join(f"{table.profiles[b].score_threshold:g}"
                                               for b in betas)  # fmt: skip
        extra = tuple(ModelEntry(switch_model_name(k), rate.bottlenecks[b].sha256())
                      for k, b in enumerate(betas) if k)  # fmt: skip
    header = detect_header(bottleneck, encoder.shape(height, width), width, height, fps,
                           num_frames, setting.intra_period, setting.skip_threshold,
                           detector.config, profile, settings)  # fmt: skip
    header = dataclasses.replace(header, models=header.models + extra)
    stats = DetectEncodeStats(header_bytes=len(header.to_bytes()), profile=profile.describe(),
                              rate=choice.describe())  # fmt: skip
    control.spent = float(stats.header_bytes)
    if choice.status != "ok":
        control.warnings.append(choice.describe())
    stats.switches, stats.warnings = control.switches, control.warnings
    state = {"beta": setting.beta, "profile": profile, "told": 0}

    def tell() -> None:
        if rate.report is not None:
            for line in control.warnings[state["told"]:]:
                rate.report(line)
        state["told"] = len(control.warnings)

    tell()

    def follow(index: int) -> None:
        """The encoder follows the controller: skip threshold, intra period, status and,
        when it moved to another bottleneck, a switch (an intra unit) to it."""
        wanted = control.setting
        encoder.skip_threshold, encoder.intra_period = wanted.skip_threshold, wanted.intra_period
        encoder.status = control.status if control.status in RATE_STATUSES else "ok"
        if wanted.beta != state["beta"]:
            encoder.switch(rate.bottlenecks[wanted.beta], betas.index(wanted.beta))
            state["beta"], state["profile"] = wanted.beta, table.profiles[wanted.beta]
            stats.beta_switches.append((index, wanted.beta))

    def units() -> Iterator[Unit]:
        shape = encoder.shape(height, width)
        for index, frame in enumerate(itertools.chain(ahead, frames)):
            _check_size(frame, index, width, height)
            if rate.target_of is not None:
                control.set_target_bps(rate.target_of(index))
            follow(index)
            features = detector.edge_features(frame)
            coder = encoder.bottleneck
            payload = encoder.encode_latents(stack_latents(coder.model.quantize(features)))
            kind = UnitKind.KEYFRAME if is_intra(payload) else UnitKind.FRAME
            unit = Unit(kind, index, (SubStream(SubStreamType.FEATURES, payload),))
            size = len(unit.to_bytes())
            control.add_frame(size)
            stats.frames, stats.intra_units = index + 1, stats.intra_units + is_intra(payload)
            stats.feature_bytes, stats.unit_bytes = stats.feature_bytes + len(payload), \
                stats.unit_bytes + size
            if control.wants_check():
                counts = _self_check(checker, coder, features, encoder.decoded, shape,
                                     state["profile"], (height, width))  # fmt: skip
                stats.agreements.append((index, control.add_check(counts)))
            stats.status = control.status
            tell()
            yield unit
        yield Unit(UnitKind.END, stats.frames)

    return header, units(), stats


def _self_check(checker: SplitDetector, bottleneck: TaskBottleneck, features, decoded,
                shape: UnitShape, profile: DetectProfile,
                size: tuple[int, int]) -> tuple[int, int, int]:  # fmt: skip
    """Agreement counts of one coded frame: the uncompressed split detector at the
    camera's reference threshold (``profile.reference_threshold``) against the decoded
    latents at the cloud's threshold."""
    import torch

    height, width = size
    reference = checker.cloud_detect(features, height, width)
    with torch.inference_mode():
        rebuilt = bottleneck.model.reconstruct(unstack_latents(decoded, shape))
    got = checker.cloud_detect(rebuilt, height, width)
    keep_ref = reference.scores >= profile.reference_threshold
    keep_got = got.scores >= profile.score_threshold
    return agreement_counts(reference.boxes[keep_ref], got.boxes[keep_got])


def _check_size(frame: np.ndarray, index: int, width: int, height: int) -> None:
    if frame.shape[:2] != (height, width):
        raise TaskStreamError(f"frame {index + 1} is {frame.shape[1]}x{frame.shape[0]}, "
                              f"the stream is {width}x{height}")  # fmt: skip


def open_detect_decoder(header: StreamHeader,
                        bottleneck: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
                        models_dir: str | os.PathLike | None = None,
                        score_threshold: float | None = None,
                        search: Iterable[str | os.PathLike] = ()) -> TaskDecoder:  # fmt: skip
    """The cloud's decoder for a detect-mode stream: the bottleneck named in the header is
    ``bottleneck`` (a file, or one of several files) or one of the shipped ones;
    ``score_threshold`` replaces the bottleneck's (0.3) for the detections (a cloud-side
    choice, per camera). A stream whose rate control may change bottleneck (header
    ``switch_betas``) gets each of the others from ``bottleneck``, ``search`` (more files)
    or the shipped ones, with the cloud threshold the header gives it.

    Raises:
        TaskStreamError: not a detect-mode stream, no bottleneck with the header's sha256, or
            a header whose unit shape does not match the bottleneck.
    """
    if not is_detect_stream(header):
        raise TaskStreamError("not a detect-mode stream (its header has no mode=detect)")
    entries = {m.name: m for m in header.models}
    entry = entries.get(BOTTLENECK_MODEL)
    wanted = None if entry is None else entry.sha256
    if isinstance(bottleneck, (str, os.PathLike)):
        bottleneck = [bottleneck]
    given = [Path(p) for p in bottleneck or ()]
    candidates = (given if given
                  else [verify_shipped(p) for p in shipped_bottlenecks().values()])  # fmt: skip
    found = _find(entry, candidates)
    if found is None:
        which = (f"not {', '.join(map(str, given))}" if given
                 else "none of the shipped ones")  # fmt: skip
        raise TaskStreamError(f"the stream was coded with bottleneck sha256 {wanted}, which is "
                              f"{which}; pass the edge's file with --bottleneck")
    shape = unit_shape(header, found)
    split = header_split(header, found)
    if score_threshold is not None:
        if not 0.0 <= score_threshold <= 1.0:
            raise TaskStreamError(f"score threshold must be in [0, 1], got {score_threshold}")
        split = dataclasses.replace(split, score_threshold=float(score_threshold))
    alternatives = ()
    thresholds = switch_thresholds(header)
    if thresholds:
        pool = [*given, *[Path(p) for p in search],
                *[verify_shipped(p) for p in shipped_bottlenecks().values()]]  # fmt: skip
        alternatives = [(found, None if score_threshold is not None else thresholds[0])]
        for k, threshold in enumerate(thresholds[1:], start=1):
            other = _find(entries.get(switch_model_name(k)), pool)
            if other is None:
                raise TaskStreamError(f"the stream may switch to bottleneck {k} (model entry "
                                      f"{switch_model_name(k)}), which none of the shipped "
                                      "bottlenecks or files given is")  # fmt: skip
            if other.model.config.latent != found.model.config.latent:
                raise TaskStreamError(f"bottleneck {k} has {other.model.config.latent} latent "
                                      f"channels, the stream {found.model.config.latent}")
            alternatives.append((other, None if score_threshold is not None else threshold))
    detector = SplitDetector(load_split_model(models_dir), split)
    decoder = TaskDecoder(found, detector, shape, header.height, header.width,
                          tuple(alternatives))  # fmt: skip
    if alternatives:
        decoder.betas = tuple(header.settings[SWITCH_BETAS].split(","))
    return decoder


def _find(entry: ModelEntry | None, paths: Iterable[Path]) -> TaskBottleneck | None:
    """The bottleneck among ``paths`` whose sha256 the header's ``entry`` names."""
    if entry is None or not entry.sha256:
        return None
    for path in paths:
        candidate = load_bottleneck(path)
        if entry.matches(candidate.sha256()):
            return candidate
    return None


def switch_thresholds(header: StreamHeader) -> tuple[float, ...]:
    """The cloud's score threshold of each bottleneck a stream may switch to (empty: a
    stream that never switches).

    Raises:
        TaskStreamError: ``switch_betas`` and ``switch_thresholds`` that are not lists of
            numbers of one length, or a threshold outside [0, 1].
    """
    betas, thresholds = header.settings.get(SWITCH_BETAS), header.settings.get(SWITCH_THRESHOLDS)
    if betas is None and thresholds is None:
        return ()
    try:
        b = [float(v) for v in (betas or "").split(",")]
        t = tuple(float(v) for v in (thresholds or "").split(","))
    except ValueError:
        raise TaskStreamError(f"detect-mode header with bad switch entries ({betas!r}, "
                              f"{thresholds!r})") from None  # fmt: skip
    if len(b) != len(t) or len(t) > 256 or not all(0.0 <= v <= 1.0 for v in t):
        raise TaskStreamError(f"detect-mode header with {len(b)} switch betas and {len(t)} "
                              "thresholds (one each, in [0, 1], at most 256)")  # fmt: skip
    return t


def unit_shape(header: StreamHeader, bottleneck: TaskBottleneck) -> UnitShape:
    """The unit shape a detect-mode header declares, checked against ``bottleneck``.

    Raises:
        TaskStreamError: a header without a valid shape, or one the bottleneck cannot code.
    """
    try:
        shape = UnitShape(int(header.settings["windows"]), int(header.settings["latent"]),
                          int(header.settings["side"]))  # fmt: skip
    except (KeyError, ValueError) as exc:
        raise TaskStreamError(f"detect-mode header without a valid unit shape ({exc})") from None
    expected = len(header_split(header, bottleneck).windows(header.height, header.width))
    latent = bottleneck.model.config.latent
    if shape.latent != latent or shape.windows != expected or shape.side != 19:
        raise TaskStreamError(f"the header's unit shape (windows {shape.windows}, latent "
                              f"{shape.latent}, side {shape.side}) does not fit the bottleneck "
                              f"({latent} channels, {expected} windows)")  # fmt: skip
    return shape


def header_split(header: StreamHeader, bottleneck: TaskBottleneck) -> SplitConfig:
    """The windows and the cloud's threshold a detect-mode header declares (the
    bottleneck's own for a header from before per-camera layouts).

    Raises:
        TaskStreamError: layout entries that are not numbers or out of range.
    """
    try:
        return split_from_settings(header.settings, bottleneck.split)
    except ValueError as exc:
        raise TaskStreamError(f"detect-mode header with a bad layout ({exc})") from None


def decode_detect(units: Iterable[Unit], decoder: TaskDecoder) -> Iterator[tuple[int, Detections]]:
    """``(frame number from 1, detections)`` of each frame unit, up to ``END``.

    Raises:
        TaskStreamError: a unit out of order or without one ``FEATURES`` sub-stream.
        codec.entropy.features.FeatureCodingError: a corrupt payload.
    """
    for expected, unit in enumerate(units):
        if unit.kind == UnitKind.END:
            return
        if unit.seq != expected:
            raise TaskStreamError(f"unit {unit.seq} where unit {expected} was expected")
        payloads = [s.payload for s in unit.substreams if s.type == SubStreamType.FEATURES]
        if len(payloads) != 1 or len(unit.substreams) != 1:
            raise TaskStreamError(f"unit {unit.seq}: a detect-mode unit holds one FEATURES "
                                  "sub-stream")  # fmt: skip
        yield unit.seq + 1, decoder.decode(payloads[0])


def detection_rows(frame: int, detections: Detections) -> list[str]:
    """MOTChallenge detection lines of one frame: ``frame,-1,x,y,w,h,score,-1,-1,-1``."""
    rows = []
    for (x1, y1, x2, y2), score in zip(detections.boxes, detections.scores, strict=True):
        rows.append(f"{frame},-1,{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.4f},"
                    "-1,-1,-1")  # fmt: skip
    return rows


def detection_entry(frame: int, detections: Detections) -> dict:
    """One frame's entry in ``detections.json``: frame, boxes (2 decimals), scores (4)."""
    return {"frame": frame, "boxes": np.round(detections.boxes, 2).tolist(),
            "scores": np.round(detections.scores, 4).tolist()}  # fmt: skip


def write_detections(out_dir: str | os.PathLike, frames: Iterable[tuple[int, Detections]],
                     header: StreamHeader) -> int:  # fmt: skip
    """Writes ``detections.txt`` and ``detections.json`` under ``out_dir`` as frames come
    (partial files under hidden names, renamed at the end); returns the number of frames."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    txt, js = out / ".detections.txt.partial", out / ".detections.json.partial"
    count, per_frame = 0, []
    try:
        with open(txt, "w", encoding="utf-8") as fh:
            for frame, detections in frames:
                for line in detection_rows(frame, detections):
                    fh.write(line + "\n")
                per_frame.append(detection_entry(frame, detections))
                count = frame
        js.write_text(json.dumps({"width": header.width, "height": header.height,
                                  "fps": float(header.frame_rate), "format": "x1,y1,x2,y2",
                                  "frames": per_frame}) + "\n")  # fmt: skip
        txt.replace(out / "detections.txt")
        js.replace(out / "detections.json")
    finally:
        for partial in (txt, js):
            partial.unlink(missing_ok=True)
    return count
