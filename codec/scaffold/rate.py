"""Rate control: hold a scaffold stream to a target bit rate.

The level fixes *what* is sent (the structure); the target sets what it may cost. The
controller keeps a byte account: every frame earns ``target_bpp * width * height / 8`` bytes,
every unit's bytes are spent from it (the first keyframe included, so the whole stream's BPP
lands on the target). Two knobs are driven from the account:

* **keyframe (plate) quality**: before a keyframe picture is coded the controller gives it a
  byte cap (:meth:`RateController.keyframe_cap`): the first keyframe may take up to
  ``first_keyframe_share`` of one window's budget, later ones ``keyframe_share``; the encoder
  codes the highest quality that fits (:func:`fit_quality`).
* **plate refreshes**: with more saved up than references take (a quiet scene), the
  plate is sent again at the best quality the savings buy (:meth:`RateController.plate_budget`),
  so a static camera's background improves instead of the rate falling under its target.
* **later keyframes and periodic plates are repaid gradually**: their bytes are spent when
  they are sent, but the account repays them over the keyframe period (or a window) instead
  of at once (:meth:`RateController.spread_plate`). Before, a 4.3-KB periodic plate on PETS
  at 0.004 BPP put the account 4 KB into debt and no reference was refreshed for the 4 s it
  took to repay it. A live stream's first frame (length unknown) is repaid the same way,
  over the rest of its first window: before, TUD-Stadtmitte's 14-KB first frame at 0.004
  BPP left no reference refreshed for its first 6 seconds.
* **appearance references**: each frame may spend on references what the account holds
  beyond the bytes the frame's other streams are expected to take
  (:meth:`RateController.appearance_budget`; a person without any reference may run the
  account into debt, :meth:`RateController.new_reference_budget`); with more than
  ``spare_frames`` frames of budget saved up, any reference may be refreshed, stalest first
  (:meth:`RateController.spare`), so a quiet scene does not leave the rate under its target.

* **the first plate's share of a cold start** is the plate's to choose
  (:mod:`codec.scaffold.plate.share`): it sets :attr:`RateController.first_plate_share`.

A window is ``window_s`` seconds (10 s: what the transport's feedback averages over). The
stream header is paid up front. When the clip's length is known, the first keyframe may take
at most ``clip_keyframe_share`` of the whole clip's budget, and a share ``r`` of the first
frame's cost is spread over the rest of the clip: the rest is forgiven, so that both the
clip (which pays the first frame once) and every later window (which repays it) land near
the target -- with a first frame of ``K`` of the clip's budget, the clip comes to about
``1 + (1 - r) K`` of the target and each later window to ``1 - r K``. A window also wanders
around the account's rate by about ``window_wander`` (people come and go; measured: ±0.05
over 10 s on PETS), while the clip averages it out, so ``r`` is chosen once the first frame
is coded to leave the clip and the *lowest* window equally far from the target:
``(1 - r) K = r K + window_wander``, i.e. ``r = (K - window_wander) / 2K`` (0 for a cheap
first frame). ``first_repay`` fixes ``r`` instead. A clip no longer than one window has no
later window: it repays the whole first frame and lands on the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: Seconds of a rate window (what the transport's feedback averages over).
WINDOW_S = 10.0
def window_frames(fps: float, window_s: float = WINDOW_S) -> int:
    """Frames in a rate window of ``window_s`` seconds at ``fps`` (at least 1)."""
    return max(1, round(window_s * fps))


class RateController:
    """A byte account for one stream.

    Args:
        target_bpp: bits per pixel to hold (> 0).
        frame_size: ``(width, height)`` in pixels.
        fps: frames per second (> 0).
        window_s: the averaging window in seconds.
        first_keyframe_share: most of one window's budget the first keyframe may take.
        keyframe_share: most of one window's budget a later keyframe may take.
        spare_frames: frames of budget in hand above which references are refreshed early.
        debt_share: how far (a share of one window's budget) references of new people may
            run the account into debt.
        expected_frames: the clip's length when known (0: a live stream). A clip shorter
            than a window counts as the window, so its first keyframe cannot take more than
            its share of the whole clip's budget; and the first frame's cost is spread over
            the rest of the clip (every later frame earns an equal part of what is left), so
            the clip lands on the target without a dip while the first keyframe is repaid.
        fixed_bytes: bytes the stream spends outside its frames' units (the stream header,
            the END unit), paid up front.
        margin: the account earns this fraction of the target (a little headroom).
        clip_keyframe_share: with ``expected_frames``, most of the clip's whole budget the
            first keyframe may take.
        first_repay: with ``expected_frames``, the share of the first frame's cost the
            later frames repay (the rest is forgiven: see the module docstring); ``None``:
            chosen from the first frame's cost and ``window_wander``; 1 for a clip no longer
            than a window and its first frame.
        window_wander: how far (a ratio to the target) a 10-s window's rate wanders around
            the account's (what ``first_repay=None`` leaves room for).
        debt_repay_share: with ``expected_frames``, the share of what the rest of the clip
            can repay that references of new people may borrow.
        keyframe_period: frames between periodic keyframes (0: none). A period shorter
            than a window caps a later keyframe at ``keyframe_share`` of the period's budget
            instead of the window's (else keyframes alone would take a period's budget).
    """

    def __init__(self, target_bpp: float, frame_size: tuple[int, int], fps: float,
                 window_s: float = WINDOW_S, first_keyframe_share: float = 0.35,
                 keyframe_share: float = 0.3, spare_frames: float = 2.0,
                 debt_share: float = 0.25, expected_frames: int = 0, fixed_bytes: int = 0,
                 margin: float = 0.99, clip_keyframe_share: float = 0.1,
                 first_repay: float | None = None, debt_repay_share: float = 0.5,
                 window_wander: float = 0.05, keyframe_period: int = 0) -> None:  # fmt: skip
        if not target_bpp > 0 or not fps > 0:
            raise ValueError(f"target_bpp and fps must be > 0, got {target_bpp}, {fps}")
        self._margin, self._fps = margin, fps
        self.frame_bytes = margin * target_bpp * frame_size[0] * frame_size[1] / 8
        self.window_frames = window_frames(fps, window_s)
        self.expected_frames = max(0, int(expected_frames))
        if 0 < self.expected_frames <= self.window_frames + 1:  # no window after the first
            first_repay = 1.0
        if self.expected_frames:  # a clip shorter than a window: the shares are of the clip
            self.window_frames = min(self.window_frames, self.expected_frames)
        self.first_keyframe_share = first_keyframe_share
        self.keyframe_share = keyframe_share
        self.spare_frames = spare_frames
        self.debt_share = debt_share
        self.clip_keyframe_share = clip_keyframe_share
        self.first_repay = first_repay
        self.window_wander = window_wander
        self.debt_repay_share = debt_repay_share
        self.keyframe_period = max(0, int(keyframe_period))
        self.balance = -float(fixed_bytes)  # bytes earned minus bytes spent so far
        self.frames = 0
        self._earn = self.frame_bytes  # what each frame earns (changes after the first)
        self._other = 0.0  # running mean of the bytes a frame spends outside references
        self.plate_debt = 0.0  # bytes of later keyframes or plates still to repay
        self._plate_repay = 0.0  # repaid per frame
        #: the first plate's share of the first window (:func:`cold_start_plate_share`, set
        #: once the camera is known); None: ``first_keyframe_share`` and, for a clip,
        #: ``clip_keyframe_share``
        self.first_plate_share: float | None = None

    @property
    def window_bytes(self) -> float:
        return self.frame_bytes * self.window_frames

    def set_target_bps(self, bits_per_s: float) -> None:
        """Holds the stream to ``bits_per_s`` from the next frame on: a closed-loop controller
        follows the link with it, in the link's unit (each frame earns ``bits_per_s / fps / 8``
        bytes). The account keeps its balance and the first frame's debt still being repaid;
        budgets, caps and shares scale with the new target."""
        if not bits_per_s > 0:
            raise ValueError(f"the target must be > 0 bit/s, got {bits_per_s}")
        frame_bytes = self._margin * bits_per_s / self._fps / 8
        self._earn = max(0.0, self._earn + frame_bytes - self.frame_bytes)
        self.frame_bytes = frame_bytes

    def start_frame(self) -> None:
        """A new frame earns its share (and repays its part of a plate's debt)."""
        self.balance += self._earn
        self.frames += 1
        if self.plate_debt > 0:
            repay = min(self.plate_debt, self._plate_repay)
            self.balance -= repay
            self.plate_debt -= repay

    @property
    def plate_repayment(self) -> float:
        """Bytes each frame repays now of a later keyframe or periodic plate (0 when none is
        being repaid): what the plate already takes of every frame's budget."""
        return self._plate_repay if self.plate_debt > 0 else 0.0

    def spread_plate(self, plate_bytes: int, frames: int) -> None:
        """Repays ``plate_bytes`` of a later keyframe or periodic plate, already booked by
        :meth:`spend`, over the next ``frames`` frames (>= 1) instead of at once: references
        are not starved while it is repaid."""
        if frames < 1 or plate_bytes < 0:
            raise ValueError(f"frames must be >= 1 and plate_bytes >= 0, got {frames}, "
                             f"{plate_bytes}")  # fmt: skip
        self.balance += plate_bytes
        self.plate_debt += plate_bytes
        self._plate_repay = self.plate_debt / frames

    def keyframe_cap(self) -> int:
        """Most bytes the keyframe picture of this frame may take."""
        if self.frames > 1:
            frames = min(self.window_frames, self.keyframe_period or self.window_frames)
            return max(200, int(self.keyframe_share * self.frame_bytes * frames))
        if self.first_plate_share is not None:  # the window is the clip's when shorter
            return max(200, int(self.first_plate_share * self.window_bytes))
        cap = self.first_keyframe_share * self.window_bytes
        if self.expected_frames:
            clip = self.frame_bytes * self.expected_frames
            cap = min(cap, self.clip_keyframe_share * clip)
        return max(200, int(cap))

    def appearance_budget(self) -> int:
        """Bytes this frame may spend on appearance references."""
        return max(0, int(self.balance - self._other))

    def new_reference_budget(self) -> int:
        """Bytes this frame may spend on references of people who have none yet: they may
        run the account up to ``debt_share`` of a window into debt (a person drawn as a grey
        silhouette costs more quality than a refresh saved) -- less as a clip of known
        length nears its end, and never more than ``debt_repay_share`` of what the rest of
        the clip can repay from what its frames earn beyond their other streams (the rest is
        left for people who come later), so that it ends with the debt repaid."""
        debt = self.debt_share * self.window_bytes
        if self.expected_frames:
            left = max(0, self.expected_frames - self.frames)
            debt *= min(1.0, left / self.window_frames)
            debt = min(debt, self.debt_repay_share * max(0.0, self._earn - self._other) * left)
        return max(0, int(self.balance + debt - self._other))

    def plate_budget(self, pending: int = 0) -> int:
        """Bytes a plate refresh may take on this frame, after ``pending`` bytes already
        chosen for it (references): what the account holds beyond the frame's other streams
        and ``spare_frames`` frames of reserve for references; 0 while a clip of known length
        is in its last window (the refresh would be repaid after its end)."""
        if self.expected_frames and self.expected_frames - self.frames < self.window_frames:
            return 0
        reserve = self.spare_frames * self.frame_bytes
        return max(0, int(self.balance - pending - self._other - reserve))

    def spare(self) -> bool:
        """Whether enough budget is saved up to refresh references early."""
        return self.balance - self._other > self.spare_frames * self.frame_bytes

    def spend(self, total_bytes: int, appearance_bytes: int, keyframe_bytes: int) -> None:
        """Books a coded unit: all its bytes, of which references and plate pictures
        (keyframe, plate refresh or tile: not a recurring cost of every frame)."""
        self.balance -= total_bytes
        other = total_bytes - appearance_bytes - keyframe_bytes
        self._other = other if self.frames <= 1 else 0.9 * self._other + 0.1 * other
        if self.frames == 1 and self.expected_frames > 1:  # spread the first frame's debt
            left = self.expected_frames - 1
            debt = min(0.0, self.balance) * self._repay_share(-min(0.0, self.balance))
            self._earn = max(0.0, self.frame_bytes + debt / left)
            self.balance = max(0.0, self.balance)
        elif self.frames == 1 and self.balance < 0 and self.window_frames > 1:
            # a live stream repays its first frame over the rest of the first window
            self.spread_plate(int(-self.balance), self.window_frames - 1)

    def _repay_share(self, debt: float) -> float:
        """The share ``r`` of the first frame's ``debt`` (bytes) the clip repays."""
        if self.first_repay is not None:
            return self.first_repay
        k = debt / (self.frame_bytes * self.expected_frames)  # of the clip's budget
        return 0.0 if k <= self.window_wander else (k - self.window_wander) / (2 * k)


def fit_quality(encode: Callable[[int], bytes], cap: int, low: int = 1,
                high: int = 60) -> tuple[int, bytes]:  # fmt: skip
    """The highest quality in ``low..high`` whose ``encode(quality)`` is at most ``cap`` bytes
    (bisection: sizes grow with quality), else ``low``'s; returns ``(quality, bytes)``."""
    best = None
    lo, hi = low, high
    while lo <= hi:
        mid = (lo + hi) // 2
        data = encode(mid)
        if len(data) <= cap:
            best = (mid, data)
            lo = mid + 1
        else:
            hi = mid - 1
    return best if best is not None else (low, encode(low))


def choose_coding(sizes: Sequence[int], errors: Sequence[float], cap: int) -> int:
    """Which of several codings of one picture to send (e.g. the plate at each size a
    stream may code it at, each fitted to ``cap``): the index of the least ``errors`` (its
    distortion as the cloud will decode it) among those of at most ``cap`` bytes, or, when
    none fits, of the smallest (ties: the first). ``sizes``: bytes of each coding."""
    if len(sizes) != len(errors) or not sizes:
        raise ValueError(f"choose_coding needs one error per size, got {len(sizes)} sizes "
                         f"and {len(errors)} errors")  # fmt: skip
    keys = [(size > cap, error if size <= cap else size)
            for size, error in zip(sizes, errors, strict=True)]
    return min(range(len(keys)), key=keys.__getitem__)


def window_rates(unit_bytes, fps: float, frame_bytes: float,
                 window_s: float = WINDOW_S) -> tuple[float, float] | None:  # fmt: skip
    """The least and largest rate over every ``window_s`` window of frames after the first
    (its keyframe excluded), as ratios to the target (``frame_bytes`` per frame); a clip
    shorter than that is one window.

    Args:
        unit_bytes: bytes of each frame's unit, in order (the first is the first keyframe).
        fps: frames per second.
        frame_bytes: the target's bytes per frame (> 0).

    Returns:
        ``(min, max)``, or ``None`` with fewer than two frames. A clip with no whole window
        after its first frame has no later window: its one window is the whole clip, first
        frame included (``min == max``).
    """
    everything = np.asarray(list(unit_bytes), np.float64)
    sizes = everything[1:]
    if sizes.size == 0 or not frame_bytes > 0:
        return None
    n = window_frames(fps, window_s)
    if sizes.size < n:
        ratio = float(everything.sum() / (everything.size * frame_bytes))
        return ratio, ratio
    sums = np.convolve(sizes, np.ones(n), mode="valid")
    ratios = sums / (n * frame_bytes)
    return float(ratios.min()), float(ratios.max())
