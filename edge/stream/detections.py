"""The detections a cloud sends back to ``edge-agent stream --mode detect``.

The cloud's feedback carries each decoded frame's detections (``Feedback.detections``; the
rest come with CloseSession). :class:`DetectionRecorder` keeps them in frame order, writes
them as MOTChallenge lines (``frame,-1,x,y,w,h,score,-1,-1,-1``, the lines of the cloud's
``detections.txt``) to a hidden partial file renamed to its final name by :meth:`finish`,
and tells the client from which frame on it still needs them (after a reconnect the cloud
sends from there: nothing twice).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path


class DetectionRecorder:
    """Detections received, in frame order, optionally written to ``path``.

    Attributes:
        frames: frames whose detections were received.
        boxes: detections received.
        skipped: frames the cloud no longer held when they were asked for (never received).
        next_frame: the first frame (from 1) not received yet.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.frames = self.boxes = self.skipped = 0
        self.next_frame = 1
        self._partial: Path | None = None
        self._fh = None
        if self.path is not None:
            self._partial = self.path.with_name(f".{self.path.name}.partial")
            self._fh = open(self._partial, "w", encoding="utf-8")  # noqa: SIM115 - see finish

    def add(self, frames: Iterable) -> None:
        """Takes ``FrameDetections`` messages (frames already received are ignored)."""
        import numpy as np

        from semcodec.codec.scaffold.detector import Detections
        from semcodec.codec.task.stream import detection_rows

        for message in frames:
            if message.frame < self.next_frame:
                continue
            self.skipped += message.frame - self.next_frame
            boxes = np.array([[b.x1, b.y1, b.x2, b.y2] for b in message.boxes], np.float32)
            scores = np.array([b.score for b in message.boxes], np.float32)
            if self._fh is not None:
                for line in detection_rows(message.frame, Detections(boxes, scores)):
                    self._fh.write(line + "\n")
            self.frames += 1
            self.boxes += len(scores)
            self.next_frame = message.frame + 1

    def finish(self) -> None:
        """Moves the file to its final name (fsynced first)."""
        if self._fh is None:
            return
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        os.replace(self._partial, self.path)

    def discard(self) -> None:
        """Removes the partial file (nothing is left under the final name)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._partial is not None:
            with contextlib.suppress(FileNotFoundError):
                self._partial.unlink()

    def summary(self, frames_decoded: int | None = None) -> str:
        """``detections of N frames received`` (and how many never came)."""
        missing = self.skipped
        if frames_decoded is not None:
            missing += max(0, frames_decoded - (self.next_frame - 1))
        text = f"detections of {self.frames} frames received ({self.boxes} boxes)"
        return text + (f", {missing} frame(s) missing" if missing else "")
