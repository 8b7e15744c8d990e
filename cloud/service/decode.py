"""A session's decoder: reads stored units back from the log and writes the outputs.

It runs in its own thread and follows the log as units are stored, with the same decoder,
reconstructor and :class:`~cloud.outputs.DecodeOutputs` as ``cloud-decoder decode``, so
the files are the same. Memory is bounded: units are read from the log one at a time (the
backlog waits on disk, not in memory) and the outputs go to their files frame by frame.

A detect-mode stream (:mod:`cloud.service.detect`) is decoded to ``detections.txt`` and
``detections.json`` instead, as ``cloud-decoder decode`` writes them, and each frame's
detections are handed to the session for the edge's feedback.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from semcodec.cloud.service.store import read_json
from semcodec.codec.core.console import one_line

log = logging.getLogger("semcodec.cloud.service")


@dataclass(frozen=True)
class DecodeSettings:
    """How sessions are decoded: the decoder (text of a
    :class:`~codec.reconstruct.pipeline.DecoderSpec`, "": the default; a session's own, or the
    server's default), overview video, flow prior file, a folder of extra bottleneck files
    for detect-mode streams (beside the shipped ones), and whether a decoder steps down its
    ladder (behind its camera, or its tenant over its compute limit)."""

    decoder: str = ""
    overview: bool = True
    flow_prior: Path | None = None
    bottleneck_dir: Path | None = None
    #: step a session's decoder down its ladder while it falls behind the camera or its
    #: tenant is over its compute limit
    ladder: bool = True

    @property
    def spec(self):
        """The :class:`~codec.reconstruct.pipeline.DecoderSpec` sessions are decoded with.

        Raises:
            codec.reconstruct.pipeline.DecoderOptionError: a decoder that does not exist or
                options it does not take.
        """
        from semcodec.codec.reconstruct.pipeline import DecoderSpec

        return DecoderSpec.parse(self.decoder)


class FairSlots:
    """``n`` slots handed out first come, first served (a context manager). A releasing
    thread hands its slot to the longest waiter, so a decoder that goes straight back for
    the next frame queues behind the others instead of taking the slot again (a plain
    semaphore lets it, and one session's decoder could wait for seconds while others ran)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"{n} slots: at least 1")
        self._free = n
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._lock = threading.Lock()

    def __enter__(self) -> FairSlots:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the slot was handed over with it
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


class Abandoned(Exception):
    """The server stops: outputs are discarded, the log stays for a later resume."""


class WorkSource(Protocol):
    """What the decoder asks its session (see :class:`~cloud.service.session.Session`)."""

    def next_work(self, decoded: int) -> str: ...

    def frame_decoded(self, decoded: int, seconds: float, detections=None) -> None: ...

    def rate_status(self, frame: int, status: str) -> None: ...

    def frame_shown(self, frame, picture) -> None: ...

    def decode_done(self, frames: int, complete: bool, error: str | None) -> None: ...

    # optional (a source without them is not told): the decoder's compute and its rung

    def decoder_opened(self, ladder: tuple[str, ...]) -> None: ...

    def decoder_ran(self, flops: float) -> None: ...

    def compute_rung(self) -> int: ...

    def decoder_stepped(self, rung: str, frame: int, down: bool, cause: str) -> None: ...

    def decoder_closed(self) -> None: ...


def load_flow_prior(path: Path | None):
    """The flow prior at ``path`` (None: the shipped ones are used)."""
    if path is None:
        return None
    from semcodec.codec.entropy.flow import FlowPrior

    return FlowPrior.load(path)


def committed_decode(out_dir: Path) -> tuple[int, bool] | None:
    """``(frames, complete)`` of the outputs already committed in ``out_dir`` (its
    ``stream.json``, written last and moved into place with the rest), or None."""
    info = Path(out_dir) / "stream.json"
    if not info.is_file():
        return None
    done = read_json(info)
    return len(done.get("frames", [])), bool(done.get("complete"))


def remove_own_partials(out_dir: Path) -> None:
    """Removes hidden partial output folders of ``out_dir`` left by this process (a server
    stopped and started again in one process); other processes' are left to DecodeOutputs."""
    import os

    for path in out_dir.parent.glob(f".{out_dir.name}.{os.getpid()}-*.partial"):
        if not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


class Rungs:
    """The rung of its ladder a live session's pipeline decodes at: the deeper of the pace
    keeper's (the decoder behind its camera) and the tenant's compute rung (the tenant over
    its compute limit). It stands in for the pipeline to the
    :class:`~codec.reconstruct.pipeline.PaceKeeper`, which reads ``rung``, ``count`` and
    ``ladder()`` and calls ``step_to``: those are the pace keeper's own rung.

    Args:
        pipeline: the session's :class:`~codec.reconstruct.pipeline.DecodePipeline`.
        on_change: called with ``(rung index, previous index, cause)`` after each change of
            the pipeline's rung; cause ``pace`` or ``compute``.
    """

    def __init__(self, pipeline, on_change) -> None:
        self.pipeline, self.on_change = pipeline, on_change
        self.rung = 0  # the pace keeper's
        self.floor = 0  # the tenant's compute rung

    @property
    def count(self) -> int:
        return self.pipeline.count

    def ladder(self) -> tuple[str, ...]:
        return self.pipeline.ladder()

    def _clamped(self, rung: int) -> int:
        return max(0, min(int(rung), len(self.pipeline.ladder()) - 1))

    def step_to(self, rung: int) -> None:
        """The pace keeper's step."""
        self.rung = self._clamped(rung)
        self._apply("pace")

    def hold_at(self, floor: int) -> None:
        """The tenant's compute rung: the pipeline decodes there or further down."""
        floor = self._clamped(floor)
        if floor != self.floor:
            self.floor = floor
            self._apply("compute")

    def _apply(self, cause: str) -> None:
        before = self.pipeline.rung
        self.pipeline.step_to(max(self.rung, self.floor))
        if self.pipeline.rung != before:
            self.on_change(self.pipeline.rung, before, cause)


class OutputMeter:
    """The bytes a session's decoder has written to its outputs' hidden folder, measured
    after each frame: the frame's picture (``frames/NNNNNN.png``, as
    :class:`~cloud.outputs.DecodeOutputs` names it) and the files that grow beside it
    (scaffolds, overview, index): a few ``stat`` calls a frame."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.total = 0  # bytes counted so far
        self._pictures = 0

    def measure(self, number: int) -> int:
        """Counts frame ``number``'s outputs; returns the bytes added since the last call."""
        with contextlib.suppress(OSError):
            self._pictures += (self.work_dir / "frames" / f"{number:06d}.png").stat().st_size
        beside = 0
        with contextlib.suppress(OSError), os.scandir(self.work_dir) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    beside += entry.stat(follow_symlinks=False).st_size
        total = self._pictures + beside
        added, self.total = total - self.total, total
        return added


class DecodeWorker(threading.Thread):
    """Decodes one session's log into ``out_dir`` as units are stored.

    Args:
        log_path: the session's ``.semc`` log.
        out_dir: the final output folder (``OUT/<tenant>/<session-id>``).
        settings: reconstructor, overview, flow prior.
        source: the session: says when a unit is stored, a unit was dropped, or to finish.
        slots: :class:`FairSlots` shared by the server's decoders: a frame is decoded,
            reconstructed and written while holding one (None: no bound). More decoders than
            cores only queue for the interpreter lock, and the server's event loop with them.
    """

    def __init__(self, log_path: Path, out_dir: Path, settings: DecodeSettings,
                 source: WorkSource, slots: FairSlots | None = None) -> None:  # fmt: skip
        super().__init__(name=f"decode-{out_dir.name[:8]}", daemon=True)
        self.log_path, self.out_dir = log_path, out_dir
        self.settings, self.source = settings, source
        self.slots = slots if slots is not None else contextlib.nullcontext()

    def _tell(self, name: str, *args):
        """Calls the source's optional method ``name`` (None without it)."""
        method = getattr(self.source, name, None)
        return None if method is None else method(*args)

    def run(self) -> None:
        try:
            self._run()
        finally:
            self._tell("decoder_closed")

    def _run(self) -> None:
        frames, complete, error = 0, False, None
        try:
            frames, complete = self._decode()
        except Abandoned:
            return
        except Exception as exc:  # a hostile stream or a full disk: the session fails
            committed = committed_decode(self.out_dir)
            if committed is None:
                error = one_line(exc)
                log.warning("session %s: decoding failed: %s", self.out_dir.name, error)
            else:  # another server (a replica on the same storage) committed it first
                frames, complete = committed
                log.info("session %s: outputs committed by another server meanwhile, kept",
                         self.out_dir.name)  # fmt: skip
        self.source.decode_done(frames, complete, error)

    def _decode(self) -> tuple[int, bool]:
        from semcodec.cloud.outputs import DecodeOutputs
        from semcodec.codec.bitstream import read_stream
        from semcodec.codec.task import is_detect_stream

        remove_own_partials(self.out_dir)
        with open(self.log_path, "rb") as fh:
            header, units = read_stream(fh)
            if is_detect_stream(header):
                return self._decode_detect(header, units)
            first = self.source.next_work(0)  # the decoder's networks load for a first unit
            if first == "abandon":
                raise Abandoned
            pipeline = self.settings.spec.open(
                header, flow_prior=load_flow_prior(self.settings.flow_prior))
            with DecodeOutputs(self.out_dir, header, overview=self.settings.overview,
                               decoder=pipeline.record()) as outputs:  # fmt: skip
                meter = OutputMeter(outputs.work_dir)
                try:
                    self._loop(pipeline, units, outputs, first, meter)
                    self._finish(pipeline, outputs)
                except BaseException:  # the partial outputs go: no longer counted
                    self._tell("outputs_grew", -meter.total)
                    raise
                finally:  # stream.json says where the decoder stepped down its ladder
                    outputs.decoder = pipeline.record()
                return outputs.count, outputs.incomplete is None

    def _ladder(self, pipeline):
        """``(rungs, pace keeper)`` of a live session's decoder: :class:`Rungs` and its
        :class:`~codec.reconstruct.pipeline.PaceKeeper` (None: the camera states no frame
        rate), or ``(None, None)`` where the ladder is off or has no cheaper rung."""
        from semcodec.codec.reconstruct.pipeline import PaceKeeper

        if not self.settings.ladder or len(pipeline.ladder()) < 2:
            return None, None
        rungs = Rungs(pipeline, self._stepped)
        fps = pipeline.header.fps_num / max(1, pipeline.header.fps_den)
        return rungs, (PaceKeeper(rungs, fps) if fps > 0 else None)

    def _stepped(self, rung: int, before: int, cause: str) -> None:
        name, frame, down = self._pipeline.ladder()[rung], self._pipeline.count + 1, rung > before
        why = {("pace", True): "behind the camera", ("pace", False): "caught up",
               ("compute", True): "the tenant is over its compute limit",
               ("compute", False): "the tenant is under its compute limit"}[cause, down]
        log.info("session %s: decoding %s from frame %d (%s)", self.out_dir.name, name, frame,
                 why)  # fmt: skip
        self._tell("decoder_stepped", name, frame, down, cause)

    def _ran(self, pipeline, before: float) -> float:
        """Books the FLOPs the pipeline ran since its total was ``before``; returns the
        total (the pipeline's FLOPs per frame so far x its frames)."""
        total = (pipeline.flops_per_frame() or 0.0) * pipeline.count
        self._tell("decoder_ran", max(0.0, total - before))
        return total

    def _loop(self, pipeline, units, outputs, first: str, meter: OutputMeter) -> None:
        """Decodes units as the session says they are stored, ``first`` its answer for the
        first one; each frame's outputs are counted in the tenant's (``meter``)."""
        self._pipeline = pipeline
        rungs, keeper = self._ladder(pipeline)
        self._tell("decoder_opened", pipeline.ladder() if rungs is not None else ("full",))
        decoded, flops, pending = 0, 0.0, first
        while True:
            work, pending = pending or self.source.next_work(decoded), None
            if work == "abandon":
                raise Abandoned
            if work == "finish":
                return
            if work == "dropped":
                outputs.mark_incomplete(f"unit {decoded} was dropped by the edge (spool policy); "
                                        "the stream cannot be decoded past a gap")
                self._wait_for_finish()
                return
            available = time.perf_counter()  # the unit is there: the camera's clock runs
            if rungs is not None:
                rungs.hold_at(self._tell("compute_rung") or 0)
            with self.slots:
                start = time.perf_counter()
                frame = pipeline.decode_unit(next(units))
                if frame is not None:
                    outputs.add(*frame)
                    self._tell("outputs_grew", meter.measure(frame[0].scaffold.number))
                    self.source.frame_shown(*frame)
            decoded += 1
            done = time.perf_counter()
            flops = self._ran(pipeline, flops)
            self.source.frame_decoded(decoded, done - start)
            if frame is None:  # END: nothing may follow
                return
            if keeper is not None:
                keeper.frame_done(done - available)

    def _decode_detect(self, header, units) -> tuple[int, bool]:
        """A detect-mode stream: detections files, and each frame's detections to the
        session; returns ``(frames, complete)``."""
        from semcodec.cloud.service.detect import (
            DetectionFiles,
            FrameDetections,
            bottleneck_candidates,
            find_bottleneck,
            header_bottleneck,
        )
        from semcodec.codec.task.stream import TaskStreamError, decode_detect, open_detect_decoder

        path = find_bottleneck(header_bottleneck(header), self.settings.bottleneck_dir)
        if path is None:  # OpenSession checked it: the file went away since
            raise TaskStreamError(f"no bottleneck with sha256 {header_bottleneck(header)}")
        decoder = open_detect_decoder(header, path,
                                      search=bottleneck_candidates(self.settings.bottleneck_dir))
        files = DetectionFiles(self.out_dir, header)
        state = {"decoded": 0, "ended": False, "gap": False, "start": 0.0}
        try:
            for frame, detections in decode_detect(self._units(units, state), decoder):
                files.add(frame, detections)
                self.source.rate_status(frame, decoder.status)
                self.source.frame_decoded(frame, time.perf_counter() - state["start"],
                                          FrameDetections.of(frame, detections))  # fmt: skip
            if state["ended"]:  # END counts as a decoded unit, as in the scaffold loop
                self.source.frame_decoded(state["decoded"], 0.0)
            files.commit()
        except BaseException:
            files.discard()
            raise
        declared = header.num_frames
        complete = state["ended"] and declared in (0, files.count)
        return files.count, complete

    def _units(self, units, state: dict):
        """The stored units, as the session says they are there (see :meth:`_loop`)."""
        from semcodec.codec.bitstream import UnitKind

        while True:
            work = self.source.next_work(state["decoded"])
            if work == "abandon":
                raise Abandoned
            if work == "finish":
                return
            if work == "dropped":  # a temporal unit needs the one before: stop at a gap
                state["gap"] = True
                self._wait_for_finish()
                return
            unit = next(units)
            state["start"] = time.perf_counter()
            state["decoded"] += 1
            if unit.kind == UnitKind.END:
                state["ended"] = True
                yield unit
                return
            yield unit

    def _wait_for_finish(self) -> None:
        while (work := self.source.next_work(-1)) != "finish":
            if work == "abandon":
                raise Abandoned

    @staticmethod
    def _finish(pipeline, outputs) -> None:
        from semcodec.codec.scaffold.codec import IncompleteStreamError

        if outputs.incomplete is not None:
            return
        try:
            pipeline.finish()
        except IncompleteStreamError as exc:
            outputs.mark_incomplete(str(exc))
