"""Live outputs of a session, for viewers: the latest reconstructed frame and its tracked
boxes, as the decoder makes them (transport-free; :mod:`cloud.service.http` serves them).

A :class:`LiveFeed` holds the *latest* frame only: the decoder hands it over and goes on
(``publish`` keeps a reference and wakes the viewers; it never encodes nor waits), so a slow
or stuck viewer can never slow decoding, and memory does not grow with viewers or with how
far behind they are: a viewer that misses frames gets the newest one next. The JPEG of a
frame is made once, on first request (:meth:`LiveFeed.jpeg`, in the caller's thread), and
shared by every viewer.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

import numpy as np

#: The JPEG quality of live frames: enough to show the reconstruction, not the link's rate.
JPEG_QUALITY = 85


@dataclass(frozen=True)
class LiveFrame:
    """One published frame.

    Attributes:
        version: how many frames the feed has published (1 for the first).
        number: the frame's number in its stream, from 1.
        picture: ``(H, W, 3)`` uint8 RGB, the reconstruction (never modified).
        boxes: tracked boxes as :func:`~cloud.outputs.track_entry` writes them: ``{"frame",
            "ids", "boxes"}`` (``x1, y1, x2, y2`` frame pixels); empty lists without boxes.
        at: wall-clock time it was published (seconds since the epoch).
        edge_us: the edge's timestamp of the frame's unit (microseconds since the epoch,
            when the edge made it; 0: unknown), for the glass-to-glass latency.
    """

    version: int
    number: int
    picture: np.ndarray
    boxes: dict
    at: float
    edge_us: int = 0
    _jpeg: list = field(default_factory=list, repr=False, compare=False)


class LiveFeed:
    """The latest frame of one session and who waits for the next (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: LiveFrame | None = None
        self._listeners: set = set()

    @property
    def latest(self) -> LiveFrame | None:
        return self._latest

    def publish(self, number: int, picture: np.ndarray, boxes: dict, edge_us: int = 0) -> None:
        """Makes a frame the latest and wakes the listeners (the decoder's thread; cheap)."""
        with self._lock:
            version = 1 if self._latest is None else self._latest.version + 1
            self._latest = LiveFrame(version, int(number), picture, boxes, time.time(),
                                     int(edge_us))  # fmt: skip
            listeners = list(self._listeners)
        for callback in listeners:
            callback()

    def listen(self, callback) -> None:
        """Calls ``callback()`` (from the decoder's thread) after each published frame."""
        with self._lock:
            self._listeners.add(callback)

    def unlisten(self, callback) -> None:
        with self._lock:
            self._listeners.discard(callback)

    @property
    def listeners(self) -> int:
        with self._lock:
            return len(self._listeners)


class InFlight:
    """The frames a viewer was sent and its machine has not taken yet (acknowledged): a
    bounded queue per viewer, counted in frames, whatever the kernel's buffers could hold.

    Below ``most`` frames a new frame is sent; at ``most`` the viewer's frames are skipped
    (it gets the newest once it has taken some), and a viewer that takes none of them for
    ``stall_s`` is dropped. Transport-free: the caller says how many bytes written are not
    taken yet (:func:`~cloud.service.front.unsent_bytes`).

    Args:
        most: frames in flight at most.
        stall_s: how long a viewer may sit at ``most`` without taking a frame, seconds.
    """

    def __init__(self, most: int, stall_s: float) -> None:
        self.most, self.stall_s = max(1, most), stall_s
        self._frames: collections.deque[tuple[int, float]] = collections.deque()
        self._written = 0
        self._full_since: float | None = None

    @property
    def behind(self) -> int:
        """Frames sent and not taken."""
        return len(self._frames)

    def sent(self, nbytes: int, published_at: float) -> None:
        """A frame of ``nbytes`` published at ``published_at`` (wall clock) was written."""
        self._written += nbytes
        self._frames.append((self._written, published_at))

    def taken(self, unsent: int) -> list[float]:
        """The publication times of the frames taken since the last call, given the bytes
        written and not taken yet (``unsent``; what was written before the first frame,
        the response's head, only ever counts as not taken)."""
        taken_to = self._written - unsent
        done = []
        while self._frames and self._frames[0][0] <= taken_to:
            done.append(self._frames.popleft()[1])
        if done:
            self._full_since = None
        return done

    def verdict(self, now: float) -> str:
        """``send`` a new frame, ``skip`` it, or ``drop`` the viewer (``now``: monotonic)."""
        if len(self._frames) < self.most:
            self._full_since = None
            return "send"
        if self._full_since is None:
            self._full_since = now
        return "drop" if now - self._full_since >= self.stall_s else "skip"


def jpeg_of(frame: LiveFrame, quality: int = JPEG_QUALITY) -> bytes:
    """The frame as a JPEG, made once per frame and kept with it (any thread)."""
    if not frame._jpeg:
        import cv2

        ok, data = cv2.imencode(".jpg", np.ascontiguousarray(frame.picture[..., ::-1]),
                                [cv2.IMWRITE_JPEG_QUALITY, quality])  # fmt: skip
        if not ok:
            raise ValueError(f"frame {frame.number}: OpenCV could not encode the JPEG")
        frame._jpeg[:] = [data.tobytes()]
    return frame._jpeg[0]


def boxes_of(decoded) -> dict:
    """The tracked boxes of a :class:`~codec.core.types.DecodedFrame` as
    :func:`~cloud.outputs.track_entry` writes them (issue 40's public function; a stream
    without a box stream: empty lists)."""
    from semcodec.cloud.outputs import track_entry

    tracks = decoded.scaffold.tracks
    number = decoded.scaffold.number
    if tracks is None:
        return {"frame": int(number), "ids": [], "boxes": []}
    return track_entry(number, tracks)
