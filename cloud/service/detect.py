"""Detect-mode sessions (issue 14): the bottleneck a stream names, its detections on disk and
in the feedback.

A detect-mode stream (``edge-agent stream --mode detect``; header setting ``mode=detect``) is
decoded by :func:`codec.task.stream.open_detect_decoder` with the bottleneck whose sha256 the
header names, looked up among the shipped bottlenecks and the files of the server's
``bottleneck_dir`` (:func:`find_bottleneck`; a file's sha256 is computed once per version of
the file). :class:`DetectionFiles` writes ``detections.txt`` and ``detections.json`` -- the
bytes ``cloud-decoder decode`` writes -- frame by frame into a hidden partial folder beside the
session's output folder, renamed to it at the end (memory stays bounded by one frame).

Torch is imported only when a detect-mode stream comes: a server of scaffold streams never
loads it for this module.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from semcodec.codec.bitstream import StreamHeader

log = logging.getLogger("semcodec.cloud.service")

#: ``codec.task.stream.BOTTLENECK_MODEL``, repeated here so that this module does not import
#: torch (a test checks they agree).
BOTTLENECK_MODEL = "task_bottleneck"
#: Bottleneck files of a ``bottleneck_dir`` (what ``semcodec-bench train-bottleneck`` writes).
BOTTLENECK_GLOB = "*.pt"


@dataclass(frozen=True)
class FrameDetections:
    """The detections of one decoded frame.

    Attributes:
        frame: 1, 2, ... (the frame of unit ``frame - 1``).
        boxes: ``(x1, y1, x2, y2, score)`` per detection, frame pixels (float32 values).
        ids: the track id of each box (tracked boxes of a generative stream; empty in task
            mode).
    """

    frame: int
    boxes: tuple[tuple[float, float, float, float, float], ...] = ()
    ids: tuple[int, ...] = ()

    @classmethod
    def of_tracks(cls, entry: dict) -> FrameDetections:
        """From a frame's :func:`~cloud.outputs.track_entry` (score 1: a box stream sends
        none)."""
        boxes = tuple((*map(float, box), 1.0) for box in entry["boxes"])
        return cls(int(entry["frame"]), boxes, tuple(int(i) for i in entry["ids"]))

    @classmethod
    def of(cls, frame: int, detections) -> FrameDetections:
        """From a :class:`~codec.scaffold.detector.Detections`."""
        rows = zip(detections.boxes.tolist(), detections.scores.tolist(), strict=True)
        return cls(frame, tuple((*box, score) for box, score in rows))


# ------------------------------------------------------------------------------ bottlenecks


_sha_cache: dict[Path, tuple[tuple[int, int], str | None]] = {}
_sha_lock = threading.Lock()


def _sha256_of(path: Path) -> str | None:
    """The bottleneck's sha256 (None: not a bottleneck file), cached per file version."""
    from semcodec.codec.task.bottleneck import BottleneckFileError, load_bottleneck

    try:
        stat = path.stat()
    except OSError:
        return None
    version = (stat.st_mtime_ns, stat.st_size)
    with _sha_lock:
        cached = _sha_cache.get(path)
    if cached is not None and cached[0] == version:
        return cached[1]
    try:
        sha = load_bottleneck(path).sha256()
    except BottleneckFileError as exc:
        log.warning("ignoring %s: %s", path, exc)
        sha = None
    with _sha_lock:
        _sha_cache[path] = (version, sha)
    return sha


def bottleneck_candidates(extra_dir: Path | None = None) -> list[Path]:
    """The shipped bottlenecks, then the files of ``extra_dir`` (sorted by name)."""
    from semcodec.codec.task.stream import shipped_bottlenecks

    paths = list(shipped_bottlenecks().values())
    if extra_dir is not None:
        paths += sorted(p for p in Path(extra_dir).glob(BOTTLENECK_GLOB) if p.is_file())
    return paths


def find_bottleneck(sha256: str | None, extra_dir: Path | None = None) -> Path | None:
    """The bottleneck file whose sha256 is ``sha256`` (None: none here)."""
    if not sha256:
        return None
    for path in bottleneck_candidates(extra_dir):
        if (_sha256_of(path) or "").startswith(sha256):  # a version-3 header holds a prefix
            return path
    return None


def is_bottleneck_entry(name: str) -> bool:
    """Whether a detect-mode header's model entry ``name`` is a bottleneck: the first
    (``task_bottleneck``) or one a unit may switch to (``task_bottleneck_<k>``:
    ``codec.task.stream.switch_model_name``)."""
    rest = name.removeprefix(BOTTLENECK_MODEL)
    return rest == "" or (rest.startswith("_") and rest[1:].isdigit())


def header_bottleneck(header: StreamHeader) -> str | None:
    """The sha256 of the bottleneck the header names."""
    return {m.name: m.sha256 for m in header.models}.get(BOTTLENECK_MODEL)


def check_unit_shape(header: StreamHeader, path: Path) -> None:
    """Raises ``ValueError`` when the header's unit shape does not fit the bottleneck at
    ``path`` (:func:`codec.task.stream.unit_shape`, without loading the detector)."""
    from semcodec.codec.task.bottleneck import load_bottleneck
    from semcodec.codec.task.stream import unit_shape

    unit_shape(header, load_bottleneck(path))


# ------------------------------------------------------------------------------ outputs


class DetectionFiles:
    """``detections.txt`` and ``detections.json`` of a detect-mode session, as frames come.

    Both are written into a fresh hidden folder beside ``out_dir``
    (``.NAME.PID-XXXXXXXX.partial``, as :class:`~cloud.outputs.DecodeOutputs` names its own)
    and moved to ``out_dir`` by :meth:`commit`; :meth:`discard` removes them. The bytes are
    those of :func:`codec.task.stream.write_detections` (the JSON is written as a stream: its
    head, one frame after another, then its tail).
    """

    def __init__(self, out_dir: Path, header: StreamHeader) -> None:
        from semcodec.cloud.outputs import (
            DIR_MODE,
            OutputError,
            open_new_file,
            remove_stale_partials,
        )

        self.out_dir, self.count = Path(out_dir), 0
        if self.out_dir.is_symlink() or self.out_dir.exists():
            raise OutputError(f"{self.out_dir} exists: the session's outputs are committed")
        try:
            self.out_dir.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            remove_stale_partials(self.out_dir)
            self.tmp = self.out_dir.parent / (f".{self.out_dir.name}.{os.getpid()}-"
                                              f"{secrets.token_hex(4)}.partial")  # fmt: skip
            self.tmp.mkdir(mode=DIR_MODE)
        except OSError as exc:
            raise OutputError(f"cannot create the output folder beside {out_dir}: {exc}") from exc
        self._txt = open_new_file(self.tmp / "detections.txt")
        self._json = open_new_file(self.tmp / "detections.json")
        head = json.dumps({"width": header.width, "height": header.height,
                           "fps": float(header.frame_rate), "format": "x1,y1,x2,y2",
                           "frames": []})  # fmt: skip
        assert head.endswith("[]}")
        self._write(self._json, head[:-2])

    def _write(self, fh, text: str) -> None:
        from semcodec.cloud.outputs import OutputError

        try:
            fh.write(text.encode("utf-8"))
        except OSError as exc:
            raise OutputError(f"cannot write under {self.tmp}: {exc.strerror or exc}") from exc

    def add(self, frame: int, detections) -> None:
        """Appends the frame's lines and its JSON entry."""
        from semcodec.codec.task.stream import detection_entry, detection_rows

        rows = detection_rows(frame, detections)
        if rows:
            self._write(self._txt, "".join(line + "\n" for line in rows))
        entry = json.dumps(detection_entry(frame, detections))
        self._write(self._json, (", " if self.count else "") + entry)
        self.count += 1

    def commit(self) -> None:
        """Ends the JSON and moves the folder to ``out_dir``."""
        from semcodec.cloud.outputs import commit_output

        self._write(self._json, "]}\n")
        for fh in (self._txt, self._json):
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        commit_output(self.tmp, self.out_dir)

    def discard(self) -> None:
        """Removes the partial folder (nothing is left under the final name)."""
        for fh in (self._txt, self._json):
            fh.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def committed_frames(out_dir: Path) -> int | None:
    """Frames in a committed ``detections.json`` under ``out_dir`` (None: none there)."""
    path = Path(out_dir) / "detections.json"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        return len(json.load(fh).get("frames", []))
