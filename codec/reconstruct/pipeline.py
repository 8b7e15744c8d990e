"""The decode pipeline: one description of a decoder, and a stream opened with it.

A :class:`DecoderSpec` says what rebuilds the frames of a scaffold stream: the
reconstructor (``warp``, ``restore``, ``animate``, ``diffusion``), its options, the
plate's upscaler (``sr``) and the device its networks run on. Every front end builds it the
same way from text -- ``cloud-decoder decode``'s flags, a benchmark setting
(``level=1,decoder=restore,person_matte=pose_landmark_full``), ``cloud-decoder serve``'s
``--decoder`` and a session's request (``restore,person_matte=pose_landmark_full``) -- and
each option is declared once, in :data:`OPTIONS`. :meth:`DecoderSpec.check` refuses,
against a stream's header, what cannot apply; :class:`DecodePipeline` is the stream opened
with it (the exact scaffold decoder, the reconstructor, the upscaler) and yields frames;
:meth:`DecodePipeline.record` is what ``stream.json`` and a benchmark row say of it.

:data:`DEFAULT_DECODER` is what a user gets without options: the decoder measured best for
a viewer (``docs/journal.md``, issues 50 and 51). ``warp`` stays, by name, the bit-exact
reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcodec.codec.reconstruct import (
    Reconstructor,
    UnknownReconstructorError,
    available_reconstructors,
    create_reconstructor,
)


class DecoderOptionError(UnknownReconstructorError):
    """A decoder or an option that does not exist, has a bad value, or cannot apply to the
    stream (the message names the option and what it accepts)."""


# ------------------------------------------------------------------ option parsers


def _integer(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = float(text)
        if not value.is_integer() or value < low:
            raise ValueError(f"expected an integer >= {low}")
        return int(value)

    return parse


def _number(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if not low <= value <= high:
            raise ValueError(f"expected a number {low:g}..{high:g}")
        return value

    return parse


def _switch(text: str) -> bool:
    if text.lower() not in ("0", "1", "false", "true"):
        raise ValueError("expected 0 or 1")
    return text.lower() in ("1", "true")


def _choice(names: Callable[[], Iterable[str]]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        allowed = list(names())
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return text

    return parse


def _matte_models() -> tuple[str, ...]:
    from semcodec.codec.reconstruct.matte import MATTE_MODELS

    return (*MATTE_MODELS, NO_MATTE)


def _upscalers() -> list[str]:
    from semcodec.codec.reconstruct.superres import upscaler_names

    return upscaler_names()


def _refiner(text: str) -> str:
    from semcodec.codec.reconstruct.refiner import SHIPPED_REFINERS

    if text not in SHIPPED_REFINERS and text not in SHIPPED_REFINERS.values() \
            and not Path(text).is_file():  # fmt: skip
        raise ValueError(f"expected one of {', '.join(SHIPPED_REFINERS)} or a refiner file")
    return text


def _redraw(text: str) -> str:
    from semcodec.codec.reconstruct.restore import SHIPPED_REDRAWERS

    if text not in (NO_REDRAW, *SHIPPED_REDRAWERS, *SHIPPED_REDRAWERS.values()) \
            and not Path(text).is_file():  # fmt: skip
        raise ValueError(f"expected one of {', '.join(SHIPPED_REDRAWERS)}, {NO_REDRAW} or a "
                         "redrawer file")  # fmt: skip
    return text


def _device(text: str) -> str:
    if text not in ("cpu", "cuda") and not text.startswith("cuda:"):
        raise ValueError("expected cpu, cuda or cuda:N")
    return text


# ------------------------------------------------------------------ the one declaration


@dataclass(frozen=True)
class DecoderOption:
    """One decoder option: its key (``memory_mb``; the flag is ``--memory-mb``), how its
    text is read, which reconstructors take it (empty: the pipeline's own, for every
    decoder), its placeholder and its help."""

    key: str
    parse: Callable[[str], object]
    decoders: tuple[str, ...]
    metavar: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


#: Every decoder option, declared once: the CLI's flags, the benchmark's setting keys and the
#: service's decoder text are read with it.
OPTIONS: dict[str, DecoderOption] = {o.key: o for o in (
    DecoderOption("steps", _integer(1), ("diffusion",), "S",
                  "diffusion: sampling steps (1, 2, 4, 8, 16; default 2)"),
    DecoderOption("seed", _integer(0), ("diffusion",), "N", "diffusion: noise seed (default 0)"),
    DecoderOption("weights", str, ("diffusion", "restore"), "FILE",
                  "diffusion: denoiser weights; restore: restorer weights, or a shipped "
                  "restorer's name: ref_restorer_v2 (default), ref_restorer (the first), "
                  "ref_restorer_w8 (1/15 of the compute)"),
    DecoderOption("previous", _switch, ("diffusion",), "0|1",
                  "diffusion: condition on the previous output (default 1)"),
    DecoderOption("memory_mb", _number(0, 1e6), ("restore", "animate"), "MB",
                  "restore, animate: the memory of earlier references kept, MB per stream "
                  "(default 16; 0: none)"),
    DecoderOption("matte", _switch, ("warp", "restore"), "0|1",
                  "warp, restore: draw a reference only where it differs from the plate "
                  "(default 0)"),
    DecoderOption("fade", _integer(0), ("warp", "restore"), "FRAMES",
                  "warp, restore: a refreshed reference replaces the last over this many "
                  "frames (default 0)"),
    DecoderOption("smooth_s", _number(0, 60), ("warp", "restore", "animate"), "SECONDS",
                  "warp, restore, animate: time constant of the people's drawn boxes "
                  "(default 0.058: half of each frame's jitter kept at 25 frames/s; 0: the "
                  "boxes as decoded)"),
    DecoderOption("person_matte", _choice(_matte_models), ("warp", "restore", "animate"),
                  "MODEL",
                  "warp, restore, animate: cut each person out of their reference with a "
                  "matte the cloud computes itself (zero bits): selfie_segmentation (every "
                  "person in the crop), pose_landmark_full or pose_landmark_lite (the one "
                  "person centred in it); 'none': the reference's rectangle"),
    DecoderOption("near_floor", _number(0, 1), ("warp", "restore"), "OPACITY",
                  "warp, restore: with --person-matte, the opacity a person's rectangle keeps "
                  "while their box overlaps another person's (neighbours apart) (default 0)"),
    DecoderOption("near_gap", _number(0, 2), ("warp", "restore"), "FRACTION",
                  "warp, restore: people whose boxes come within this fraction of their "
                  "height of each other count as overlapping for --near-floor (default 0)"),
    DecoderOption("redraw", _redraw, ("restore",), "NAME",
                  "restore: redraw every person of every frame with a network trained on "
                  "frames as this decoder draws them: w8 (width 8), a redrawer file "
                  "(semcodec-bench train-redraw) or none"),
    DecoderOption("limbs", _switch, ("animate",), "0|1",
                  "animate: move the legs to the pose (default 1)"),
    DecoderOption("arms", _switch, ("animate",), "0|1",
                  "animate: move the arms too (default 0)"),
    DecoderOption("pose_s", _number(0, 60), ("animate",), "SECONDS",
                  "animate: time constant of the decoded poses (default as --smooth-s)"),
    DecoderOption("min_turn", _number(0, 60), ("animate",), "DEGREES",
                  "animate: bones turned less than this stay as in the reference (default 0)"),
    DecoderOption("refiner", _refiner, ("animate",), "NAME",
                  "animate: redraw each posed person with a learned refiner: w8 or w32 (its "
                  "width, the compute knob) or a refiner file; needs a stream sent with pose "
                  "(edge setting pose_every)"),
    DecoderOption("sr", _choice(_upscalers), (), "NAME",
                  "the plate's super-resolution when the edge sent it smaller than the frame: "
                  "bicubic (default), span-x2, span-x4 (SPAN, ncnn models from PyPI; the "
                  "best measured on plates and people), esrgan-slim, esrgan-medium, "
                  "esrgan-slim-plates, esrgan-medium-plates (fetched on first use)"),
    DecoderOption("device", _device, (), "DEVICE",
                  "where the decoder's networks run: cpu (default) or cuda (a GPU; the "
                  "person matte stays on the CPU)"),
)}
#: The options that belong to the pipeline, not to one reconstructor.
PIPELINE_KEYS = tuple(k for k, o in OPTIONS.items() if not o.decoders)
#: The reconstructors whose networks can run on a GPU (``device=cuda``).
GPU_DECODERS = ("restore",)
#: The reconstructors that always run a network of their own (the others run one only with
#: an option of :data:`NETWORK_OPTIONS`).
NETWORK_DECODERS = ("diffusion", "restore")
#: Options that make any decoder run a network (a person matte model, a refiner, an sr
#: network: any value but the default's).
NETWORK_OPTIONS = ("person_matte", "refiner", "redraw", "sr")
#: Values that spell "no person matte" and "no redrawing" (the reconstructors' own default).
NO_MATTE = NO_REDRAW = "none"


def decoder_options(name: str) -> tuple[str, ...]:
    """The option keys reconstructor ``name`` takes (besides the pipeline's own)."""
    return tuple(k for k, o in OPTIONS.items() if name in o.decoders)


@dataclass(frozen=True)
class DecoderSpec:
    """What decodes a scaffold stream (module text). Build it with :meth:`parse` or
    :meth:`from_mapping`; ``options`` holds parsed values of :data:`OPTIONS`, sorted."""

    name: str
    options: tuple[tuple[str, object], ...] = ()
    sr: str = "bicubic"
    device: str = "cpu"

    # -------------------------------------------------------------- building

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], base: DecoderSpec | None = None
                     ) -> DecoderSpec:  # fmt: skip
        """The decoder that ``values`` (``decoder`` and option keys to their text, or values
        as TOML gives them; None: not given) describe. Without ``decoder``, ``base`` (default
        :data:`DEFAULT_DECODER`) with ``values`` laid over its options; with one, that
        reconstructor with ``values`` alone.

        Raises:
            DecoderOptionError: an unknown decoder or key, a bad value, or an option the
                decoder does not take.
        """
        given = {k: v for k, v in values.items() if v is not None}
        base = DEFAULT_DECODER if base is None else base
        name = str(given.pop("decoder", "") or "")
        if name and name not in available_reconstructors():
            raise DecoderOptionError(f"decoder {name!r}: expected one of "
                                     f"{', '.join(available_reconstructors())}")  # fmt: skip
        unknown = sorted(set(given) - set(OPTIONS))
        if unknown:
            raise DecoderOptionError(f"decoder option {unknown[0]!r}: expected one of "
                                     f"decoder, {', '.join(OPTIONS)}")  # fmt: skip
        parsed = {key: _parsed(key, text) for key, text in given.items()}
        pipeline = {k: parsed.pop(k) for k in PIPELINE_KEYS if k in parsed}
        if name:
            spec = cls(name, sr=base.sr, device=base.device)
        else:
            spec, name = base, base.name
        options = {**dict(spec.options), **parsed}
        for key, off in (("person_matte", NO_MATTE), ("redraw", NO_REDRAW)):
            if options.get(key) == off:  # the reconstructor's own default
                del options[key]
        extra = [k for k in parsed if name not in OPTIONS[k].decoders]
        if extra:
            owners = " or ".join(sorted(OPTIONS[extra[0]].decoders))
            raise DecoderOptionError(f"{OPTIONS[extra[0]].flag}: only for --decoder {owners}, "
                                     f"not {name} (option {extra[0]})")  # fmt: skip
        spec = cls(name, tuple(sorted(options.items())), pipeline.get("sr", spec.sr),
                   pipeline.get("device", spec.device))  # fmt: skip
        spec._check_device()
        return spec

    @classmethod
    def parse(cls, text: str, base: DecoderSpec | None = None) -> DecoderSpec:
        """The decoder ``text`` names: ``NAME[,key=value...]`` (``restore,person_matte=
        pose_landmark_full``), or ``key=value,...`` over ``base``; "" is ``base``."""
        values: dict[str, str] = {}
        for k, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
            key, sep, value = part.partition("=")
            if not sep and k == 0:
                key, value = "decoder", key
            elif not sep or not value:
                raise DecoderOptionError(f"decoder {text!r}: {part!r} is not key=value")
            if key.strip() in values:
                raise DecoderOptionError(f"decoder {text!r}: {key.strip()} given twice")
            values[key.strip()] = value.strip()
        return cls.from_mapping(values, base)

    def __str__(self) -> str:
        parts = [self.name, *(f"{k}={_text(v)}" for k, v in self.options)]
        parts += [f"{k}={getattr(self, k)}" for k in PIPELINE_KEYS
                  if getattr(self, k) != getattr(_PLAIN, k)]  # fmt: skip
        return ",".join(parts)

    def runs_networks(self) -> bool:
        """Whether this decoder runs a network (a service's compute limit bounds those)."""
        options = dict(self.options)
        return (self.name in NETWORK_DECODERS or self.sr != _PLAIN.sr
                or any(options.get(k) for k in NETWORK_OPTIONS))  # fmt: skip

    def _check_device(self) -> None:
        if self.device == "cpu":
            return
        if self.name not in GPU_DECODERS and self.sr == _PLAIN.sr:
            raise DecoderOptionError(f"device={self.device}: decoder {self.name} with sr="
                                     f"{self.sr} runs no network on the device (the GPU "
                                     f"decoders: {', '.join(GPU_DECODERS)}, or an sr network)")
        import torch

        if not torch.cuda.is_available():
            raise DecoderOptionError(f"device={self.device}: torch sees no CUDA device here "
                                     "(use device=cpu)")  # fmt: skip

    # -------------------------------------------------------------- against a stream

    def check(self, header) -> None:
        """Refuses what cannot apply to the stream of ``header`` (a scaffold stream's
        :class:`~codec.bitstream.StreamHeader`).

        Raises:
            DecoderOptionError: the refiner on a stream without the sparse pose.
        """
        options = dict(self.options)
        if options.get("refiner") and not carries_pose(header):
            raise DecoderOptionError("--refiner: this stream carries no pose (the edge sent it "
                                     "without pose_every), and the refiner redraws posed "
                                     "people only")  # fmt: skip

    def reconstructor(self) -> Reconstructor:
        """A new reconstructor of this decoder.

        Raises:
            DecoderOptionError: a reconstructor that refuses the options.
        """
        kwargs = dict(self.options)
        if self.device != "cpu" and self.name in GPU_DECODERS:
            kwargs["device"] = self.device
        try:
            return create_reconstructor(self.name, **kwargs)
        except (TypeError, ValueError) as exc:
            raise DecoderOptionError(f"decoder {self}: {exc}") from None

    def build(self, models_dir=None) -> tuple[Reconstructor, object]:
        """``(reconstructor, plate upscaler)`` of this decoder, their networks fetched and
        checked (what a server does at start to refuse a decoder it cannot run).

        Raises:
            DecoderOptionError: options a reconstructor or upscaler refuses.
            codec.core.models.ModelError: a network whose files cannot be had.
        """
        from semcodec.codec.reconstruct.superres import SuperResolutionError, create_upscaler

        reconstructor = self.reconstructor()
        try:
            return reconstructor, create_upscaler(self.sr, models_dir, self.device)
        except SuperResolutionError as exc:
            raise DecoderOptionError(str(exc)) from None

    def open(self, header, models_dir=None, flow_prior=None) -> DecodePipeline:
        """The stream of ``header`` opened with this decoder (checked first)."""
        self.check(header)
        return DecodePipeline(self, header, models_dir, flow_prior)


def _parsed(key: str, value: object) -> object:
    """``value`` (text, or a TOML number or boolean) of option ``key``, read by its parser."""
    option = OPTIONS[key]
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    try:
        return option.parse(text)
    except ValueError as exc:
        raise DecoderOptionError(f"{option.flag} {text} ({key}={text}): {exc}") from None


def _text(value: object) -> str:
    """An option's value as a setting writes it."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def carries_pose(header) -> bool:
    """Whether a level-1 stream was sent with the sparse pose (header ``pose_every`` >= 1)."""
    try:
        return int(header.settings.get("pose_every", "0")) >= 1
    except ValueError:
        return False


#: A decoder of no options (the pipeline's defaults: bicubic, CPU).
_PLAIN = DecoderSpec("warp")
#: What every front end decodes with unless told otherwise: the best measured for a viewer.
#: ``restore`` with the selfie model's matte and every person redrawn by the width-8 redrawer
#: (issue 54, ninth session, docs/journal.md): on the short clips (PETS 501-560, TUD 91-179,
#: zoomed PETS, TUD at half size; 0.002 and 0.004 BPP) a better person region on all eight,
#: MODA better or within 0.3 point on six (TUD at half size: -2.3 and -6.4 points); on PETS
#: 501-795 person region 0.2103 -> 0.1984 and MODA 0.371 -> 0.416 at 0.004; about 0.12
#: GFLOP a person a frame, the first part a live decoder drops when behind. Before it:
#: ``restore`` with the selfie model's matte, every person cut out (issue 51, fifth session,
#: docs/journal.md): on the short clips (PETS 501-560, TUD 91-179, zoomed PETS, TUD at half
#: size; 0.002 and 0.004 BPP) MODA +69 points summed over the eight against the former
#: default (BlazePose full's matte, neighbours within a quarter of their height drawn as
#: rectangles: ``near_floor=1,near_gap=0.25``), better on seven, equal on one, person-region
#: ST-LPIPS better on six; on the crowded PETS09-S2L1-full 501-795 MODA 0.385 -> 0.336 and
#: 0.433 -> 0.400 (neighbours cut out side by side are found as one) with person-region
#: 0.271 -> 0.257 and 0.224 -> 0.212; the demo's clip 0.213 -> 0.206, 0.313 -> 0.285. The
#: selfie model is 116 MFLOP a reference against BlazePose full's 772.
DEFAULT_DECODER = DecoderSpec("restore", (("person_matte", "selfie_segmentation"),
                                           ("redraw", "w8")))
#: The bit-exact reference decoder of the reference streams.
REFERENCE_DECODER = _PLAIN


@dataclass
class DecodePipeline:
    """A scaffold stream opened with a :class:`DecoderSpec`: the exact scaffold decoder,
    the reconstructor and the plate's upscaler. Feed it the stream's units in order
    (:meth:`decode_unit`, or :meth:`frames` for them all)."""

    spec: DecoderSpec
    header: object
    models_dir: object = None
    flow_prior: object = None
    #: ``(h, w)`` of every plate the upscaler brought to the frame's size
    upscaled: list = field(default_factory=list)

    def __post_init__(self) -> None:
        from semcodec.codec.scaffold.codec import ScaffoldDecoder

        self.reconstructor, self.upscaler = self.spec.build(self.models_dir)
        self.reconstructor.reset()
        self._sr_flops = 0.0
        self.count = 0
        #: the rung of :meth:`ladder` decoding now (0: the full decoder)
        self.rung = 0
        #: ``(frame, rung name)`` each time the rung changed (the first frame it applies to)
        self.steps: list[tuple[int, str]] = []
        self.decoder = ScaffoldDecoder(self.header, flow_prior=self.flow_prior,
                                       upscale=self._upscale)  # fmt: skip

    def _upscale(self, picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        self.upscaled.append(picture.shape[:2])
        self._sr_flops += self.upscaler.flops((picture.shape[1], picture.shape[0]))
        return self.upscaler(picture, size)

    def decode_unit(self, unit):
        """``(decoded scaffold, (H, W, 3) uint8 RGB frame)`` of the next unit; None at END.

        Raises:
            the scaffold decoder's and the reconstructor's errors on a damaged stream.
        """
        decoded = self.decoder.decode_unit(unit)
        if decoded is None:
            return None
        self.count += 1
        return decoded, self.reconstructor.reconstruct(decoded)

    def finish(self) -> None:
        """Checks that the stream ended where its header says (``IncompleteStreamError``)."""
        self.decoder.finish()

    def frames(self, units: Iterable) -> Iterator[tuple[object, np.ndarray]]:
        """``(decoded, frame)`` of every unit up to END, then :meth:`finish`."""
        for unit in units:
            out = self.decode_unit(unit)
            if out is None:
                break
            yield out
        self.finish()

    def ladder(self) -> tuple[str, ...]:
        """The rungs this decoder can step down to, best first: ``full``, then
        ``no <part>`` for each part the reconstructor can skip (``no person_matte``,
        ``no restorer``), each skipping the ones before too."""
        return ("full", *(f"no {part}" for part in self.reconstructor.steps_down()))

    def step_to(self, rung: int) -> None:
        """Decodes what arrives from now on at ``rung`` of :meth:`ladder` (state is kept)."""
        parts = self.reconstructor.steps_down()
        rung = max(0, min(int(rung), len(parts)))
        if rung != self.rung:
            self.rung = rung
            self.reconstructor.skipped = frozenset(parts[:rung])
            self.steps.append((self.count + 1, self.ladder()[rung]))

    def flops_per_frame(self) -> float | None:
        """Decoder FLOPs per frame so far: the reconstructor's networks and the plate's
        super-resolution; None where neither runs a network."""
        own = self.reconstructor.flops_per_frame()
        if own is None and not self._sr_flops:
            return None
        return float(own or 0) + self._sr_flops / max(1, self.count)

    def record(self) -> dict:
        """What ``stream.json`` and a benchmark row say of the decoder: the reconstructor's
        description, the upscaler and the device where not the defaults, and the text that
        rebuilds the decoder (``spec``)."""
        out = dict(self.reconstructor.describe())
        if self.spec.sr != _PLAIN.sr:
            out["sr"] = self.spec.sr
        if self.spec.device != _PLAIN.device:
            out["device"] = self.spec.device
        out["spec"] = str(self.spec)
        if self.steps:
            out["steps"] = [{"frame": frame, "rung": rung} for frame, rung in self.steps]
        return out


class PaceKeeper:
    """Keeps a live decode at its camera's pace: steps the pipeline down its
    :meth:`~DecodePipeline.ladder` while decoding a frame takes longer than the camera takes
    to make one, and back up once it has been well ahead for a while.

    Each frame's wall time (waiting for a decode slot included) goes into a moving average
    over about ``window_s`` of frames. Behind (the average above the frame interval) for
    ``window_s`` after the last change: one rung down. Ahead (the average under
    :data:`UP_MARGIN` x the interval) for ``retry_s``: one rung up; a step up that falls
    behind again within ``retry_s`` doubles the wait before the next try (at most
    :data:`MAX_RETRY_S`), so a decoder that cannot hold the better rung does not flap.

    Args:
        pipeline: the session's :class:`DecodePipeline`.
        fps: the camera's frames per second (the stream header's).
        window_s, retry_s: seconds, > 0.
        on_step: called with ``(rung name, frame)`` after each change (logs, metrics).
    """

    UP_MARGIN = 0.6
    MAX_RETRY_S = 120.0

    def __init__(self, pipeline: DecodePipeline, fps: float, window_s: float = 2.0,
                 retry_s: float = 10.0, on_step=None) -> None:  # fmt: skip
        if not fps > 0 or not window_s > 0 or not retry_s > 0:
            raise ValueError(f"fps {fps}, window_s {window_s}, retry_s {retry_s}: must be > 0")
        self.pipeline, self.interval = pipeline, 1.0 / float(fps)
        self.window = max(1, round(window_s * fps))
        self.retry = self.base_retry = max(1, round(retry_s * fps))
        self.average: float | None = None
        self._since_change = 0
        self._last_up_at: int | None = None
        self.on_step = on_step

    def frame_done(self, seconds: float) -> None:
        """Books one frame that took ``seconds`` of wall time; may change the rung."""
        gain = 1.0 / self.window
        self.average = seconds if self.average is None else \
            self.average + gain * (seconds - self.average)  # fmt: skip
        self._since_change += 1
        pipeline = self.pipeline
        if self.average > self.interval and self._since_change >= self.window \
                and pipeline.rung < len(pipeline.ladder()) - 1:  # fmt: skip
            if self._last_up_at is not None and pipeline.count - self._last_up_at < self.retry:
                self.retry = min(2 * self.retry, round(self.MAX_RETRY_S / self.interval))
            self._change(pipeline.rung + 1)
        elif self.average < self.UP_MARGIN * self.interval and pipeline.rung > 0 \
                and self._since_change >= self.retry:  # fmt: skip
            self._last_up_at = pipeline.count
            self._change(pipeline.rung - 1)

    def _change(self, rung: int) -> None:
        self.pipeline.step_to(rung)
        self._since_change = 0
        self.average = None  # the new rung's own pace from its first frame
        if self.on_step is not None:
            self.on_step(self.pipeline.ladder()[rung], self.pipeline.count + 1)


def decode_frames(source, spec: DecoderSpec = DEFAULT_DECODER, models_dir=None,
                  flow_prior=None) -> Iterator[tuple[object, np.ndarray]]:  # fmt: skip
    """``(decoded, frame)`` of every frame of a ``.semc`` source (path, bytes or binary
    file) decoded with ``spec``."""
    from semcodec.codec.bitstream import read_stream

    header, units = read_stream(source)
    yield from spec.open(header, models_dir, flow_prior).frames(units)
