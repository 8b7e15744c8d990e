"""What the cloud writes for a decoded stream: frames, scaffolds, an overview video.

* ``DIR/frames/000001.png ...``: the reconstructed frames (RGB PNG, 1-based numbers).
* ``DIR/scaffolds.npz``: the decoded scaffolds, exactly as the edge quantized them, per
  frame ``k``: ``seg_k`` ``(h, w)`` uint16 label map, ``flow_k`` ``(h, w, 2)`` float32
  (frame pixels), ``pose_ids_k`` ``(n,)`` int32, ``pose_keypoints_k`` ``(n, 33, 2)``
  float32 (frame pixels), ``pose_visibility_k`` ``(n, 33)`` float32, ``boxes_k`` ``(n, 4)``
  float32 ``x1, y1, x2, y2`` (frame pixels) with ``box_ids_k`` ``(n,)`` int32, and
  ``appearance_k_ID`` ``(h, w, 3)`` uint8 RGB for each appearance reference sent with frame
  ``k``; absent when the level does not send that scaffold. Written array by array as
  frames come (``np.load`` reads it).
* ``DIR/stream.json``: the stream header (size, rate, level, settings, models), whether the
  stream was complete (``"complete"``; ``"incomplete"`` says why not), and, per frame,
  whether it was a keyframe and the ids of the people in it.
* ``DIR/overview.mp4``: the scaffolds drawn over the dimmed reconstruction (H.264, 4:2:0;
  odd frame sides are padded by one replicated pixel row/column).
* ``DIR/tracks.txt`` and ``DIR/tracks.json`` (streams that send tracked boxes: level 1):
  every frame's decoded tracked boxes, exactly as sent. ``tracks.txt`` is in the MOT
  challenge's result format, one line per box, ``frame,id,x,y,w,h,conf,-1,-1,-1`` (frames
  from 1, frame pixels, 2 decimals; ``conf`` 1: the box stream sends no scores), the format
  ``motmetrics`` and the MOT evaluation kit read; ``tracks.json`` holds the same boxes per
  frame as ``x1, y1, x2, y2`` with their ids (:func:`track_rows`, :func:`track_entry`).

Safety: everything is written into a fresh hidden folder beside ``DIR``
(``.DIR.PID-XXXXXXXX.partial``; ones left by a killed decode are removed by the next decode
into the same ``DIR``), renamed to ``DIR`` only when the whole decode succeeded; a failed
or interrupted decode removes it (a ``kill -9`` leaves only that hidden folder, never a
partial ``DIR``). An existing non-empty ``DIR`` is refused unless ``force``, which swaps it
for the new one (atomically on Linux: ``renameat2(RENAME_EXCHANGE)``); a symlink at ``DIR``
is always refused. Files are created with ``O_EXCL | O_NOFOLLOW``, never through a link, and
every write is checked (a full disk is an error). Folders are 0700 and files 0600 (private
to the user; a umask may only take bits away): share outputs by copying or chmod.
Memory is bounded by one frame: scaffolds, overview and the per-frame index go to their
files as frames come.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import hashlib
import json
import os
import secrets
import shutil
import socket
import zipfile
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import av
import cv2
import numpy as np

from semcodec.codec.core.types import DecodedFrame, Tracks

#: BlazePose limbs (pairs of keypoint indices) drawn in the overview.
SKELETON = ((11, 12), (11, 13), (13, 15), (12, 14), (14, 16), (11, 23), (12, 24), (23, 24),
            (23, 25), (25, 27), (24, 26), (26, 28), (0, 11), (0, 12))  # fmt: skip

_NEW_FILE = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


#: Modes of what is written: private to the user who decodes (folders 0700, files 0600).
DIR_MODE, FILE_MODE = 0o700, 0o600

#: The per-frame index, written as frames come and folded into stream.json at the end.
_INDEX = ".frames.jsonl"


class OutputError(RuntimeError):
    """The output folder cannot be prepared or written (exists, symlink, disk full, ...)."""


def id_colour(track_id: int) -> tuple[int, int, int]:
    """A stable, distinct RGB colour for a track id (golden-ratio hue steps)."""
    return tuple(int(c) for c in id_colours(np.array([track_id]))[0])


def id_colours(track_ids: np.ndarray) -> np.ndarray:
    """:func:`id_colour` of every id of ``(n,)`` integers: ``(n, 3)`` uint8 RGB."""
    hues = ((np.asarray(track_ids, np.float64) * 0.61803398875 % 1.0) * 180).astype(np.uint8)
    hsv = np.stack([hues, np.full_like(hues, 200), np.full_like(hues, 255)], -1)[None]
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0]


def _point(xy, limit: int) -> tuple[int, int]:
    """Pixel coordinates for OpenCV's drawing (int32): rounded, clipped to ``±limit``."""
    x, y = np.clip(np.nan_to_num(np.asarray(xy, np.float64)), -limit, limit)
    return int(round(x)), int(round(y))


def _tint_people(canvas: np.ndarray, labels: np.ndarray, size: tuple[int, int]) -> None:
    """Blends each person's id colour into ``canvas`` (in place), in one pass over it."""
    labels = cv2.resize(labels, size, interpolation=cv2.INTER_NEAREST)
    mask = labels > 0
    if not mask.any():
        return
    ids, inverse = np.unique(labels[mask], return_inverse=True)
    tint = id_colours(ids).astype(np.float32)[inverse.reshape(-1)]
    canvas[mask] = (0.5 * canvas[mask] + 0.5 * tint).astype(np.uint8)


def _draw_flow(canvas: np.ndarray, field: np.ndarray, size: tuple[int, int], limit: int) -> None:
    width, height = size
    gh, gw = field.shape[:2]
    step = max(1, gw // 24)
    for gy in range(step // 2, gh, step):
        for gx in range(step // 2, gw, step):
            x, y = (gx + 0.5) * width / gw, (gy + 0.5) * height / gh
            dx, dy = (float(v) for v in field[gy, gx])
            if not abs(dx) + abs(dy) >= 0.5:
                continue
            cv2.arrowedLine(canvas, _point((x, y), limit), _point((x - 3 * dx, y - 3 * dy), limit),
                            (255, 255, 255), 1, tipLength=0.3)  # fmt: skip


def _draw_boxes(canvas: np.ndarray, tracks, limit: int) -> None:
    """Each tracked box (``tracks.boxes``, frame pixels) and its ``#id``, in the id's colour."""
    for box, track_id in zip(tracks.boxes, tracks.ids, strict=True):
        colour = id_colour(int(track_id))
        top_left, bottom_right = _point(box[:2], limit), _point(box[2:], limit)
        cv2.rectangle(canvas, top_left, bottom_right, colour, 2)
        label = (top_left[0], max(top_left[1] - 4, 12))
        cv2.putText(canvas, f"#{int(track_id)}", label, cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    colour, 1, cv2.LINE_AA)  # fmt: skip


def render_overview(frame: np.ndarray, decoded: DecodedFrame) -> np.ndarray:
    """The scaffolds of ``decoded`` drawn over a dimmed ``frame``: ``(H, W, 3)`` uint8 RGB.

    Person masks are tinted by id, skeletons drawn as lines, flow as arrows on a sparse grid,
    tracked boxes as rectangles in their id's colour labelled ``#id``. Coordinates far outside
    the frame (possible with hostile streams) are clipped.
    """
    scaffold = decoded.scaffold
    width, height = decoded.frame_size
    limit = 4 * max(width, height) + 64
    canvas = (frame.astype(np.float32) * 0.55).astype(np.uint8)
    if scaffold.segmentation is not None:
        _tint_people(canvas, scaffold.segmentation.labels, (width, height))
    if scaffold.flow is not None:
        _draw_flow(canvas, scaffold.flow.field, (width, height), limit)
    _draw_boxes(canvas, scaffold.tracks, limit)
    for pose in scaffold.poses:
        colour = id_colour(pose.track_id)
        for a, b in SKELETON:
            if min(pose.visibility[a], pose.visibility[b]) < 0.3:
                continue
            pa, pb = _point(pose.keypoints[a], limit), _point(pose.keypoints[b], limit)
            cv2.line(canvas, pa, pb, colour, 2, cv2.LINE_AA)
    if scaffold.keyframe is not None:
        cv2.putText(canvas, "KEYFRAME", (8, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6,
                    (255, 255, 0), 2)  # fmt: skip
    return canvas


def even_padded(picture: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` picture padded to even sides by replicating the last row/column (H.264
    4:2:0 needs even sides); returned unchanged when both are already even."""
    height, width = picture.shape[:2]
    if height % 2 == 0 and width % 2 == 0:
        return picture
    return np.pad(picture, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")


# ----------------------------------------------------------------------------- tracks


def track_rows(frame: int, tracks: Tracks) -> list[str]:
    """MOT challenge result lines of one frame's tracked boxes, in the order given.

    Args:
        frame: the frame's number, from 1 (``FrameScaffold.number``).
        tracks: the decoded boxes, ``(N, 4)`` float32 ``x1, y1, x2, y2`` frame pixels,
            their ``(N,)`` int32 ids and ``(N,)`` float32 scores.

    Returns:
        ``frame,id,x,y,w,h,conf,-1,-1,-1`` per box: ``x, y`` the top-left corner, ``w, h``
        the size (frame pixels, 2 decimals), ``conf`` the score (4 decimals; 1 for a box
        stream, which sends none).
    """
    rows = []
    for (x1, y1, x2, y2), track_id, score in zip(np.asarray(tracks.boxes, np.float64),
                                                  tracks.ids, tracks.scores, strict=True):
        rows.append(f"{frame},{int(track_id)},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},"
                    f"{float(score):.4g},-1,-1,-1")  # fmt: skip
    return rows


def track_entry(frame: int, tracks: Tracks) -> dict:
    """One frame's entry in ``tracks.json``: ``{"frame", "ids", "boxes"}`` (boxes
    ``x1, y1, x2, y2`` frame pixels, 2 decimals; ids as ints), JSON-ready."""
    return {"frame": int(frame), "ids": [int(i) for i in tracks.ids],
            "boxes": np.round(np.asarray(tracks.boxes, np.float64), 2).reshape(-1, 4).tolist()}


class TrackFiles:
    """``tracks.txt`` and ``tracks.json`` of a stream's tracked boxes, written as frames
    come (memory: one frame) into ``folder``, which the caller makes and commits (as
    :class:`DecodeOutputs` does). ``tracks.json`` is ``{"width", "height", "fps",
    "format": "x1,y1,x2,y2", "frames": [track_entry, ...]}``.

    Raises:
        OutputError: a file exists at either name, or a write fails.
    """

    def __init__(self, folder: Path, width: int, height: int, fps: float) -> None:
        self._txt = open_new_file(Path(folder) / "tracks.txt")
        try:
            self._json = open_new_file(Path(folder) / "tracks.json")
        except BaseException:
            self._txt.close()
            raise
        head = {"width": int(width), "height": int(height), "fps": float(fps),
                "format": "x1,y1,x2,y2"}  # fmt: skip
        self._json.write((json.dumps(head)[:-1] + ', "frames": [').encode("utf-8"))
        self.frames = 0

    def add(self, frame: int, tracks: Tracks) -> None:
        """Appends one frame's boxes (see :func:`track_rows`)."""
        lines = "".join(row + "\n" for row in track_rows(frame, tracks))
        self._txt.write(lines.encode("ascii"))
        sep = b",\n  " if self.frames else b"\n  "
        self._json.write(sep + json.dumps(track_entry(frame, tracks)).encode("utf-8"))
        self.frames += 1

    def close(self, finish: bool = True) -> None:
        """Closes both files; ``finish`` ends the JSON document (else it is left unfinished
        for the caller to remove)."""
        try:
            if finish:
                self._json.write(b"\n]}\n")
        finally:
            self._txt.close()
            self._json.close()


# ----------------------------------------------------------------------------- files


def open_new_file(path: Path) -> BinaryIO:
    """A new file at ``path`` for writing; never follows a symlink, never reuses a file.

    Raises:
        OutputError: ``path`` exists (a file or a link) or cannot be created.
    """
    try:
        fd = os.open(path, _NEW_FILE, FILE_MODE)
    except OSError as exc:
        raise OutputError(f"cannot create {path}: {exc.strerror}") from exc
    return os.fdopen(fd, "wb")


def write_new_file(path: Path, data: bytes) -> None:
    """Writes ``data`` to a new file at ``path`` (see :func:`open_new_file`); a short or
    failed write (e.g. a full disk) raises :class:`OutputError`."""
    fh = open_new_file(path)
    try:
        with fh:
            fh.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def prepare_output(target: Path, force: bool = False) -> Path:
    """Checks ``target`` and makes the hidden temporary folder beside it; returns that folder.

    Raises:
        OutputError: ``target`` is a symlink or a file, or a non-empty folder without
            ``force``, or its parent cannot be created.
    """
    if target.is_symlink():
        raise OutputError(f"{target} is a symbolic link: give the real folder")
    if target.exists():
        if not target.is_dir():
            raise OutputError(f"{target} exists and is not a folder")
        if not force and any(target.iterdir()):
            raise OutputError(f"{target} is not empty: pass --force to replace it, or choose "
                              "another output folder")  # fmt: skip
    try:
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        remove_stale_partials(target)
        tmp = target.parent / (f".{target.name}.{os.getpid()}-{HOST_TAG}-"
                               f"{secrets.token_hex(4)}.partial")
        tmp.mkdir(mode=DIR_MODE)
        (tmp / "frames").mkdir(mode=DIR_MODE)
    except OSError as exc:
        raise OutputError(f"cannot create the output folder beside {target}: {exc}") from exc
    return tmp


def remove_stale_partials(target: Path) -> list[Path]:
    """Removes the hidden ``.DIR.PID-HOST-XXXXXXXX.partial`` folders of ``target`` that a
    killed decode of this machine left behind (their process no longer runs); returns them.

    Folders of a running decode, of another machine (on shared storage), and any name that
    does not parse are left alone.
    """
    removed = []
    for path in target.parent.glob(f".{glob.escape(target.name)}.*.partial"):
        owner = owner_of(path.name[len(target.name) + 2 : -len(".partial")])
        if owner is None or not is_stale(*owner) or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)  # rmtree never follows symlinks
        removed.append(path)
    return removed


#: This machine as the names of partial outputs say it (a hash of its host name): a process
#: id is only this machine's to judge (on shared storage another machine's look dead here).
HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def owner_of(tag: str) -> tuple[int, str | None] | None:
    """``(pid, host tag or None)`` of a partial's ``PID-HOST-RANDOM`` (or older
    ``PID-RANDOM``) tag; None when it does not parse."""
    parts = tag.split("-")
    if not parts[0].isdigit() or len(parts) > 3:
        return None
    return int(parts[0]), parts[1] if len(parts) == 3 else None


def is_stale(pid: int, host: str | None) -> bool:
    """Whether a partial of process ``pid`` on ``host`` (None: an older name, taken as this
    machine's) is left from a process of this machine that no longer runs."""
    return (host is None or host == HOST_TAG) and not process_runs(pid)


def process_runs(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine. A zombie (killed, not yet reaped by its
    parent) does not: it writes nothing any more, so what it left is stale."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    with contextlib.suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), str(b))


def commit_output(tmp: Path, target: Path, force: bool = False) -> None:
    """Moves the finished ``tmp`` folder to ``target``.

    An existing ``target`` (empty, or any folder with ``force``) is swapped with ``tmp`` in
    one atomic step where the system allows it (else two renames), then deleted.

    Raises:
        OutputError: ``target`` became a symlink, a file or (without ``force``) non-empty
            meanwhile, or the rename failed; ``tmp`` is left for the caller to remove.
    """
    try:
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise OutputError(f"{target} is no longer a folder: refusing to replace it")
        if not target.exists():
            os.rename(tmp, target)
            return
        if not force and any(target.iterdir()):
            raise OutputError(f"{target} was filled during the decode: pass --force to "
                              "replace it")  # fmt: skip
        if not _exchange(tmp, target):
            old = target.parent / f".{target.name}.{secrets.token_hex(4)}.old"
            os.rename(target, old)
            os.rename(tmp, target)
            tmp = old
    except OSError as exc:
        raise OutputError(f"cannot move the output into place at {target}: {exc}") from exc
    shutil.rmtree(tmp, ignore_errors=True)  # the old folder; rmtree never follows symlinks


class _NpzWriter:
    """An ``.npz`` archive written one array at a time (same format as ``np.savez_compressed``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = open_new_file(path)
        self._zip = zipfile.ZipFile(self._fh, "w", zipfile.ZIP_DEFLATED, allowZip64=True)

    def add(self, name: str, array: np.ndarray) -> None:
        with self._zip.open(f"{name}.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)

    def close(self) -> None:
        try:
            self._zip.close()
        finally:
            self._fh.close()


class _OverviewWriter:
    """overview.mp4, encoded frame by frame straight into its file (H.264, yuv420p)."""

    def __init__(self, path: Path, rate: Fraction) -> None:
        self.path, self.rate = path, rate
        self._fh = open_new_file(path)
        self._container = av.open(self._fh, mode="w", format="mp4")
        self._stream = None

    def add(self, picture: np.ndarray) -> None:
        picture = even_padded(picture)
        if self._stream is None:
            self._stream = self._container.add_stream("libx264", rate=self.rate)
            self._stream.width, self._stream.height = picture.shape[1], picture.shape[0]
            self._stream.pix_fmt = "yuv420p"
            self._stream.options = {"crf": "23", "preset": "veryfast"}
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(picture), format="rgb24")
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def close(self, flush: bool = True) -> None:
        try:
            if flush and self._stream is not None:
                for packet in self._stream.encode(None):
                    self._container.mux(packet)
            self._container.close()
        finally:
            self._fh.close()


class DecodeOutputs:
    """Writes frames, scaffolds, the overview and (box streams) the tracks of a decoded
    stream into ``out_dir``.

    Use as a context manager: the outputs appear at ``out_dir`` when the block ends without
    an exception; on any exception (``KeyboardInterrupt`` included) nothing is left (see the
    module docstring).

    Args:
        out_dir: the output folder (must not exist, or be empty, unless ``force``).
        header: the stream's :class:`~codec.bitstream.StreamHeader`.
        overview: also write ``overview.mp4``.
        force: replace an existing non-empty ``out_dir``.
        decoder: what reconstructed the frames (``Reconstructor.describe()``: name and
            settings), recorded in ``stream.json`` as ``"decoder"``.

    Raises:
        OutputError: the folder cannot be prepared, or a write fails.
    """

    def __init__(self, out_dir: str | Path, header, overview: bool = True, force: bool = False,
                 decoder: dict | None = None):  # fmt: skip
        self.out_dir = Path(out_dir)
        self.header = header
        self.decoder = decoder
        # a box stream's boxes are saved even for frames without people
        self._sends_boxes = float(dict(header.settings).get("box_step_px", "0") or 0) > 0
        self.count = 0
        self.incomplete: str | None = None
        self._force = force
        self._tmp = prepare_output(self.out_dir, force)
        self._npz = self._overview = self._index = self._tracks = None
        try:
            self._index = open_new_file(self._tmp / _INDEX)
            self._npz = _NpzWriter(self._tmp / "scaffolds.npz")
            if self._sends_boxes:
                self._tracks = TrackFiles(self._tmp, header.width, header.height,
                                          float(header.frame_rate))  # fmt: skip
            if overview:
                rate = Fraction(header.fps_num, header.fps_den)
                self._overview = _OverviewWriter(self._tmp / "overview.mp4", rate)
        except BaseException:
            self._discard()
            raise

    @property
    def work_dir(self) -> Path:
        """The hidden folder the outputs are written to until they are complete."""
        return self._tmp

    def __enter__(self) -> DecodeOutputs:
        return self

    def add(self, decoded: DecodedFrame, image: np.ndarray) -> None:
        """Writes one reconstructed frame, ``(H, W, 3)`` uint8 RGB, and its scaffolds."""
        number = decoded.scaffold.number
        ok, png = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
        if not ok:
            raise OutputError(f"frame {number}: OpenCV could not encode the PNG")
        write_new_file(self._tmp / "frames" / f"{number:06d}.png", png.tobytes())
        self._guard(self._add_scaffolds, decoded)
        if self._overview is not None:
            self._guard(self._overview.add, render_overview(image, decoded))
        self.count += 1

    def mark_incomplete(self, reason: str) -> None:
        """Records in stream.json that the stream ended early, and why."""
        self.incomplete = reason

    @staticmethod
    def _guard(function, *args) -> None:
        try:
            function(*args)
        except OSError as exc:
            raise OutputError(f"cannot write the outputs: {exc.strerror or exc}") from exc
        except av.FFmpegError as exc:
            raise OutputError(f"cannot encode the overview video: {exc}") from exc

    def _add_scaffolds(self, decoded: DecodedFrame) -> None:
        s = decoded.scaffold
        k = f"{s.number:06d}"
        if s.segmentation is not None:
            self._npz.add(f"seg_{k}", s.segmentation.labels)
        if s.flow is not None:
            self._npz.add(f"flow_{k}", s.flow.field)
        if s.poses:
            self._npz.add(f"pose_ids_{k}", np.array([p.track_id for p in s.poses], np.int32))
            self._npz.add(f"pose_keypoints_{k}", np.stack([p.keypoints for p in s.poses]))
            self._npz.add(f"pose_visibility_{k}", np.stack([p.visibility for p in s.poses]))
        if self._sends_boxes:
            self._npz.add(f"boxes_{k}", np.asarray(s.tracks.boxes, np.float32).reshape(-1, 4))
            self._npz.add(f"box_ids_{k}", np.asarray(s.tracks.ids, np.int32))
            self._tracks.add(s.number, s.tracks)
        for track_id, picture in sorted(decoded.appearances.items()):
            self._npz.add(f"appearance_{k}_{track_id}", picture)
        entry = {"frame": s.number, "keyframe": s.keyframe is not None,
                 "people": [int(i) for i in s.tracks.ids]}  # fmt: skip
        self._index.write(json.dumps(entry).encode("utf-8") + b"\n")

    def _stream_info(self) -> dict:
        header = self.header
        info = {"width": header.width, "height": header.height,
                "fps": [header.fps_num, header.fps_den], "level": header.level,
                "settings": dict(header.settings),
                "models": [{"name": m.name, "sha256": m.sha256} for m in header.models],
                "frames_declared": header.num_frames or None,
                "complete": self.incomplete is None}  # fmt: skip
        if self.decoder is not None:
            info["decoder"] = self.decoder
        if self.incomplete is not None:
            info["incomplete"] = self.incomplete
        return info

    def _write_stream_json(self) -> None:
        """stream.json: the header info, then the per-frame index copied line by line from
        the index file (so it is never held in memory whole)."""
        self._index.close()
        self._index = None
        head = json.dumps(self._stream_info(), indent=1)[:-2]
        with open_new_file(self._tmp / "stream.json") as out:
            out.write((head + ',\n "frames": [').encode("utf-8"))
            with open(self._tmp / _INDEX, "rb") as index:
                for n, line in enumerate(index):
                    out.write((b",\n  " if n else b"\n  ") + line.rstrip(b"\n"))
            out.write(b"\n ]\n}\n")
        os.unlink(self._tmp / _INDEX)

    def _finish(self) -> None:
        self._guard(self._npz.close)
        self._npz = None
        if self._tracks is not None:
            self._guard(self._tracks.close)
            self._tracks = None
        if self._overview is not None:
            self._guard(self._overview.close)
            self._overview = None
            if self.count == 0:
                os.unlink(self._tmp / "overview.mp4")
        self._guard(self._write_stream_json)
        commit_output(self._tmp, self.out_dir, self._force)

    def _discard(self) -> None:
        if self._index is not None:
            self._index.close()
        for writer in (self._npz, self._overview):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close() if writer is self._npz else writer.close(flush=False)
        if self._tracks is not None:
            with contextlib.suppress(Exception):
                self._tracks.close(finish=False)
        self._npz = self._overview = self._index = self._tracks = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is not None:
            self._discard()
            return
        try:
            self._finish()
        except BaseException:
            self._discard()
            raise
