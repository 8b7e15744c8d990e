"""MOTChallenge ground truth (MOT15 and MOT16/17 ``gt.txt``) for detection evaluation.

Two layouts are read (both comma or whitespace separated, 1-based frames, pixel boxes with
the top-left corner at ``x, y``):

* **MOT15**, 10 columns ``frame, id, x, y, w, h, conf, wx, wy, wz``: ``conf`` 1 marks an
  object to count, 0 an ignore region; ``wx, wy`` are ground-plane world coordinates in
  metres, ``-1, -1`` where unknown (stored as NaN).
* **MOT16/17**, 9 columns ``frame, id, x, y, w, h, flag, class, visibility`` (7 or 8 columns
  without visibility, or without class and visibility: the class is then taken as 1).
  A row is counted when ``flag != 0`` and ``class == 1`` (pedestrian). Pedestrians with
  ``flag == 0`` and the distractor classes :data:`MOT16_DISTRACTOR_CLASSES` (2 person on
  vehicle, 7 static person, 8 distractor, 12 reflection) become ignore regions, as in the
  MOTChallenge devkit. Rows of the remaining classes (vehicles, occluders, crowd) are not
  people at all: they are dropped, so a detection on them is a false positive.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

GroundTruthFormat = Literal["mot15", "mot16"]

MOT16_PEDESTRIAN_CLASS = 1
MOT16_DISTRACTOR_CLASSES: frozenset[int] = frozenset({2, 7, 8, 12})

_SPLIT = re.compile(r"[,\s]+")
#: Columns of a `gt.txt` row per format (MOT16+ rows may omit the world coordinates).
COLUMNS_BY_FORMAT: dict[str, tuple[int, ...]] = {"mot15": (10,), "mot16": (7, 8, 9)}


class GroundTruthError(ValueError):
    """A ground-truth file or argument is malformed; the message names the file and line."""


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """Per-row ground truth of one sequence.

    Attributes:
        frame_numbers: (N,) int64, 1-based frame of each row.
        ids: (N,) int64 track ids.
        boxes: (N, 4) float64 ``x, y, w, h`` in pixels (top-left corner, w, h > 0).
        counted: (N,) bool, True for objects to detect, False for ignore regions.
        world_xy: (N, 2) float64 ground-plane ``wx, wy`` in metres, NaN where unknown.
        format: the source layout, ``"mot15"`` or ``"mot16"``.
        source: where the rows came from (for messages), ``""`` if built in memory.
    """

    frame_numbers: np.ndarray
    ids: np.ndarray
    boxes: np.ndarray
    counted: np.ndarray
    world_xy: np.ndarray
    format: GroundTruthFormat = "mot15"
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        arrays = {
            "frame_numbers": np.asarray(self.frame_numbers, dtype=np.int64).reshape(-1),
            "ids": np.asarray(self.ids, dtype=np.int64).reshape(-1),
            "boxes": np.asarray(self.boxes, dtype=np.float64).reshape(-1, 4),
            "counted": np.asarray(self.counted, dtype=bool).reshape(-1),
            "world_xy": np.asarray(self.world_xy, dtype=np.float64).reshape(-1, 2),
        }
        n = len(arrays["frame_numbers"])
        bad = [name for name, arr in arrays.items() if len(arr) != n]
        if bad:
            raise GroundTruthError(f"GroundTruth arrays {bad} do not have {n} rows like frames")
        if self.format not in COLUMNS_BY_FORMAT:
            raise GroundTruthError(f"format must be 'mot15' or 'mot16', got {self.format!r}")
        for name, arr in arrays.items():
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __len__(self) -> int:
        """Number of rows (counted objects and ignore regions)."""
        return len(self.frame_numbers)

    @cached_property
    def _rows_by_frame(self) -> dict[int, np.ndarray]:
        if len(self) == 0:
            return {}
        order = np.argsort(self.frame_numbers, kind="stable")
        frames, starts = np.unique(self.frame_numbers[order], return_index=True)
        return dict(zip(frames.tolist(), np.split(order, starts[1:]), strict=True))

    def _rows(self, frame: int, counted: bool) -> np.ndarray:
        rows = self._rows_by_frame.get(int(frame), np.empty(0, dtype=np.int64))
        return rows[self.counted[rows] == counted]

    def frames(self) -> list[int]:
        """Sorted frame numbers that have at least one row (object or ignore region)."""
        return sorted(self._rows_by_frame)

    def boxes_xyxy(self, frame: int) -> np.ndarray:
        """(K, 4) float64 ``x1, y1, x2, y2`` pixels of the counted objects of ``frame``."""
        return xywh_to_xyxy(self.boxes[self._rows(frame, True)])

    def ignore_xyxy(self, frame: int) -> np.ndarray:
        """(M, 4) float64 ``x1, y1, x2, y2`` pixels of the ignore regions of ``frame``."""
        return xywh_to_xyxy(self.boxes[self._rows(frame, False)])

    def world(self, frame: int) -> np.ndarray:
        """(K, 2) float64 ground ``wx, wy`` metres of the counted objects of ``frame``.

        Rows are in the order of :meth:`boxes_xyxy`; NaN rows where the world position is
        unknown.
        """
        return self.world_xy[self._rows(frame, True)].copy()

    def ignore_world(self, frame: int) -> np.ndarray:
        """(M, 2) float64 ground ``wx, wy`` metres of the ignore regions (NaN if unknown)."""
        return self.world_xy[self._rows(frame, False)].copy()

    @property
    def has_world(self) -> bool:
        """True when at least one row has known world coordinates."""
        return bool(np.isfinite(self.world_xy).all(axis=1).any())

    @property
    def num_counted(self) -> int:
        """Number of counted object rows over all frames."""
        return int(self.counted.sum())

    def _replace(self, rows: np.ndarray | slice, boxes: np.ndarray | None = None) -> GroundTruth:
        return GroundTruth(
            frame_numbers=self.frame_numbers[rows],
            ids=self.ids[rows],
            boxes=self.boxes[rows] if boxes is None else boxes,
            counted=self.counted[rows],
            world_xy=self.world_xy[rows],
            format=self.format,
            source=self.source,
        )

    def scaled(self, sx: float, sy: float) -> GroundTruth:
        """Ground truth for frames resized by ``sx`` horizontally and ``sy`` vertically.

        Boxes are scaled (``x, w`` by ``sx``; ``y, h`` by ``sy``); world coordinates are kept.
        """
        if not (sx > 0 and sy > 0 and np.isfinite(sx) and np.isfinite(sy)):
            raise GroundTruthError(f"scale factors must be finite and > 0, got sx={sx}, sy={sy}")
        factors = np.array([sx, sy, sx, sy], dtype=np.float64)
        return self._replace(slice(None), boxes=self.boxes * factors)

    def restrict(self, first: int, last: int) -> GroundTruth:
        """The rows of frames ``first..last`` (inclusive)."""
        if first > last:
            raise GroundTruthError(f"restrict: first frame {first} is after last frame {last}")
        keep = (self.frame_numbers >= first) & (self.frame_numbers <= last)
        return self._replace(np.flatnonzero(keep))

    def renumbered(self, first: int) -> GroundTruth:
        """The rows with frame ``first`` renumbered as frame 1 (a clip cut from a sequence:
        ``restrict(k, m).renumbered(k)`` describes frames k..m as 1..m-k+1)."""
        if first < 1:
            raise GroundTruthError(f"renumbered: first frame must be >= 1, got {first}")
        out = self._replace(slice(None))
        object.__setattr__(out, "frame_numbers", self.frame_numbers - (first - 1))
        return out

    def to_mot15_text(self) -> str:
        """The rows as MOT15 ``gt.txt`` text (10 comma-separated columns, one row a line).

        ``conf`` is 1 for counted rows and 0 for ignore regions; unknown world coordinates are
        written as ``-1, -1, -1``, known ones with ``wz = 0``. Numbers are written in their
        shortest exact form, so :func:`load_mot_groundtruth` reads back the same arrays.
        """
        lines = []
        for i in range(len(self)):
            wx, wy = self.world_xy[i]
            known = bool(np.isfinite(wx) and np.isfinite(wy))
            world = (wx, wy, 0.0) if known else (-1.0, -1.0, -1.0)
            values = (
                int(self.frame_numbers[i]),
                int(self.ids[i]),
                *(_fmt(v) for v in self.boxes[i]),
                int(self.counted[i]),
                *(_fmt(v) for v in world),
            )
            lines.append(",".join(str(v) for v in values))
        return "\n".join(lines) + ("\n" if lines else "")


def _fmt(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """(K, 4) ``x, y, w, h`` → (K, 4) float64 ``x1, y1, x2, y2``."""
    out = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    out[:, 2:] += out[:, :2]
    return out


def _resolve_gt_path(path: Path) -> Path:
    if path.is_dir():
        for candidate in (path / "gt" / "gt.txt", path / "gt.txt"):
            if candidate.is_file():
                return candidate
        raise GroundTruthError(
            f"{path} is a folder without gt/gt.txt; pass a MOT sequence folder or a gt.txt file"
        )
    if not path.is_file():
        raise GroundTruthError(f"ground-truth file {path} does not exist")
    return path


def _parse_rows(text: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Numeric rows of a MOT text: (R, C) float64 values and (R,) 1-based line numbers."""
    rows: list[list[float]] = []
    line_numbers: list[int] = []
    width = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip().strip(",")
        if not stripped:
            continue
        cells = _SPLIT.split(stripped)
        if width is None:
            width = len(cells)
        if len(cells) != width:
            raise GroundTruthError(
                f"{source}:{number}: {len(cells)} columns, but earlier rows have {width}"
            )
        try:
            values = [float(c) for c in cells]
        except ValueError:
            raise GroundTruthError(f"{source}:{number}: not a number in {line.strip()!r}") from None
        if not all(np.isfinite(values[:6])):
            raise GroundTruthError(f"{source}:{number}: non-finite frame, id or box value")
        rows.append(values)
        line_numbers.append(number)
    if width is None:
        return np.zeros((0, 10)), np.zeros(0, dtype=np.int64)
    return np.array(rows, dtype=np.float64), np.array(line_numbers, dtype=np.int64)


def _pick_format(width: int, requested: str, where: str) -> GroundTruthFormat:
    """The format of rows with ``width`` columns; ``where`` is ``file:line`` for messages."""
    if requested == "auto":
        for name, widths in COLUMNS_BY_FORMAT.items():
            if width in widths:
                return name  # type: ignore[return-value]
        raise GroundTruthError(
            f"{where}: {width} columns per row; expected 10 (MOT15) or 7-9 (MOT16/17)"
        )
    if requested not in COLUMNS_BY_FORMAT:
        raise GroundTruthError(f"format must be 'auto', 'mot15' or 'mot16', got {requested!r}")
    if width not in COLUMNS_BY_FORMAT[requested]:
        raise GroundTruthError(
            f"{where}: {width} columns per row, but format {requested!r} needs "
            f"{' or '.join(map(str, COLUMNS_BY_FORMAT[requested]))}"
        )
    return requested  # type: ignore[return-value]


def _check_rows(values: np.ndarray, lines: np.ndarray, source: str) -> None:
    checks = (
        (values[:, 0] != np.round(values[:, 0]), "frame is not an integer"),
        (values[:, 0] < 1, "frame < 1 (MOT frames are 1-based)"),
        (values[:, 1] != np.round(values[:, 1]), "id is not an integer"),
        (values[:, 4] <= 0, "box width <= 0"),
        (values[:, 5] <= 0, "box height <= 0"),
    )
    for bad, what in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise GroundTruthError(f"{source}:{lines[i]}: {what} in row {values[i].tolist()}")


def _mot15_fields(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """keep (N,) bool, counted (N,) bool, world (N, 2) of MOT15 rows."""
    world = values[:, 7:9].copy()
    unknown = (world == -1).all(axis=1) | ~np.isfinite(world).all(axis=1)
    world[unknown] = np.nan
    return np.ones(len(values), dtype=bool), values[:, 6] > 0, world


def _mot16_fields(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """keep (N,) bool, counted (N,) bool, world (N, 2) (all NaN) of MOT16/17 rows."""
    flag = values[:, 6]
    cls = values[:, 7] if values.shape[1] >= 8 else np.full(len(values), MOT16_PEDESTRIAN_CLASS)
    pedestrian = cls == MOT16_PEDESTRIAN_CLASS
    distractor = np.isin(cls, list(MOT16_DISTRACTOR_CLASSES))
    counted = pedestrian & (flag != 0)
    keep = pedestrian | distractor
    return keep, counted, np.full((len(values), 2), np.nan)


def parse_mot_groundtruth(text: str, format: str = "auto", source: str = "<text>") -> GroundTruth:
    """Parses MOT ``gt.txt`` text; see :func:`load_mot_groundtruth`."""
    values, lines = _parse_rows(text, source)
    if len(values) == 0:
        if format not in ("auto", *COLUMNS_BY_FORMAT):
            raise GroundTruthError(f"format must be 'auto', 'mot15' or 'mot16', got {format!r}")
        fmt = "mot15" if format == "auto" else format
        empty = np.zeros(0)
        return GroundTruth(empty, empty, empty, empty, empty, format=fmt, source=source)
    fmt = _pick_format(values.shape[1], format, f"{source}:{lines[0]}")
    _check_rows(values, lines, source)
    keep, counted, world = (_mot15_fields if fmt == "mot15" else _mot16_fields)(values)
    return GroundTruth(
        frame_numbers=values[keep, 0].astype(np.int64),
        ids=values[keep, 1].astype(np.int64),
        boxes=values[keep, 2:6],
        counted=counted[keep],
        world_xy=world[keep],
        format=fmt,
        source=source,
    )


def load_mot_groundtruth(path: str | os.PathLike, format: str = "auto") -> GroundTruth:
    """Reads a MOTChallenge ground-truth file.

    Args:
        path: a ``gt.txt`` file, or a MOT sequence folder (its ``gt/gt.txt`` is read).
        format: ``"auto"`` (by column count: 10 → MOT15, 7-9 → MOT16/17), ``"mot15"`` or
            ``"mot16"``.

    Returns:
        The rows as a :class:`GroundTruth` (see the module docstring for which rows count).

    Raises:
        GroundTruthError: missing file; rows with a wrong column count, non-numbers, a
            non-integer or < 1 frame, or width/height <= 0 (the message gives file:line).
    """
    gt_path = _resolve_gt_path(Path(path))
    try:
        text = gt_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise GroundTruthError(f"{gt_path} is not a UTF-8 text file: {exc}") from None
    return parse_mot_groundtruth(text, format=format, source=str(gt_path))
