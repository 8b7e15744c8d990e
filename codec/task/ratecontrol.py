"""Rate control and the edge's self-check of detect mode (issue 40).

A user gives a link budget (``--target-kbps``), not a rate weight. The edge holds both halves
of the split detector, so it measures, on its own start-up frames and without ground truth,
what each setting costs and how well it keeps the detections:

* **The rate table** (:func:`measure_rate_table`). For every candidate bottleneck (β) and
  skip threshold of :data:`SKIP_LADDER`, the start-up frames are coded as a stream would
  code them (real rANS bytes, temporal units after an intra one); the bytes per frame at each
  intra period of :data:`INTRA_PERIODS` follow from the mean intra and temporal unit sizes.
  The **agreement** of a setting is the F1 (IoU >= :data:`AGREEMENT_IOU`) of the detections of
  its *decoded* features at the cloud's threshold (calibrated per β,
  :func:`codec.task.calibrate.match_threshold`) against those of the uncompressed split
  detector at the camera's reference operating point
  (:func:`codec.task.calibrate.reference_threshold_of`, chosen by persistence on all the
  start-up frames), pooled over the profile's start-up frames. Its **quality** is the same
  matching weighted by how well the boxes sit:
  ``2 sum(IoU of matched pairs) / (reference boxes + decoded boxes)`` (the IoU-weighted F1,
  i.e. panoptic quality: F1 times the mean IoU of the matches). A coarse bottleneck keeps
  the people but moves their boxes: on TUD-Stadtmitte's start-up frames β 0.1 and β 0.01
  both agree 1.00 at IoU 0.5, and their boxes sit at mean IoU 0.80 and 0.84.
* **The choice** (:func:`choose_setting`). Among the settings whose agreement reaches the
  floor (``--min-agreement``) and whose bytes fit the budget, the best agreement, then among
  those within :data:`AGREEMENT_TIE` of it the best quality, then among those within
  :data:`AGREEMENT_TIE` of that the one that uses more of the budget; the stream then
  moves along that β's rungs (its skip thresholds and intra periods at or above the floor,
  by bytes). When no setting within the budget reaches the floor, the cheapest one that
  does is chosen and the stream says so (``rate_status=over_budget`` in the header, a log
  line, and bits of every unit's flags: :data:`codec.task.coder.RATE_STATUSES`) instead of
  sending detections below the floor.
* **Holding the target** (:class:`DetectRateController`). A byte account over the whole
  stream (header included): every :data:`STEP_SECONDS` the controller takes the rung that
  repays what the account is over (or spends what it is under) within
  :data:`HORIZON_SECONDS`, corrected by how much the scene costs against the start-up
  table. Skip threshold and intra period are the encoder's alone (the cloud needs
  neither), so a move among a bottleneck's rungs costs nothing. The rungs are every
  bottleneck's points at or above the floor: when none of the current bottleneck's fits, or
  another agrees better or spends what it leaves unspent, the stream changes β at an intra
  unit (the header lists the bottlenecks it may use, with the cloud's threshold of each).
* **The periodic self-check.** Every :data:`CHECK_SECONDS` the edge runs both cloud halves
  on the frame it just coded and pools the agreement over the last :data:`CHECK_WINDOW`
  checks; below the floor, the current bottleneck's rungs up to the current one are barred
  and the stream moves to the next richer rung (a finer β's when the current has none),
  whatever the account says. When the floor keeps the stream over its target, the stream
  says the budget cannot reach the floor (a log line, the units' status bits).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from semcodec.codec.scaffold.detector import box_iou
from semcodec.codec.scaffold.profile import CameraProfile, profile_frame_indices
from semcodec.codec.task import DEFAULT_MIN_AGREEMENT
from semcodec.codec.task.bottleneck import TaskBottleneck
from semcodec.codec.task.calibrate import (
    REFERENCE_THRESHOLD,
    DetectProfile,
    match_threshold,
    reference_threshold_of,
)
from semcodec.codec.task.coder import TaskEncoder, unstack_latents
from semcodec.codec.task.split import SplitDetector

#: Skip thresholds the rate table measures (L1 change of a position's latents kept back).
SKIP_LADDER = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24)
#: Intra periods (frames) the rate table prices.
INTRA_PERIODS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: IoU at which a decoded detection agrees with an uncompressed one.
AGREEMENT_IOU = 0.5
#: Agreements (and qualities) this close count as equal (the start-up frames are few): the
#: better quality, then more bytes win.
AGREEMENT_TIE = 0.02
#: Seconds between the controller's looks at the account.
STEP_SECONDS = 1.0
#: Seconds over which the account's debt or savings are spread.
HORIZON_SECONDS = 10.0
#: Seconds the scene's cost against the table is remembered over.
MEMORY_SECONDS = 5.0
#: A target moved by more than this share starts a new account (``--auto``).
NEW_ACCOUNT = 0.1
#: Seconds between the periodic self-checks, and how many checks are pooled.
CHECK_SECONDS = 2.0
CHECK_WINDOW = 8
#: A change of bottleneck (an intra unit at once) comes after the controller asked for it at
#: this many looks in a row, and at most once in this many seconds.
BETA_PATIENCE = 3
BETA_HOLD_SECONDS = 8.0
#: A bottleneck that leaves this share of the wanted rate unspent at its richest rung gives
#: way to one that spends it (at no worse agreement).
UNSPENT = 0.2
#: The account over the target by more than this share, with no rung the floor allows
#: within the budget: the stream says the budget cannot reach the floor.
OVER_SHARE = 0.1


@dataclass(frozen=True)
class DetectSetting:
    """What detect mode's rate control chooses: the bottleneck's rate weight, the skip
    threshold (L1 over the latent channels) and the intra period (frames)."""

    beta: float
    skip_threshold: int
    intra_period: int

    def describe(self) -> str:
        return f"beta {self.beta:g}, skip {self.skip_threshold}, intra every {self.intra_period}"


@dataclass(frozen=True)
class RatePoint:
    """One setting as measured on the start-up frames.

    Attributes:
        setting: the setting.
        bytes_per_frame: mean unit bytes per frame (payload and unit framing).
        agreement: F1 (0..1) of its decoded detections against the uncompressed ones.
        quality: the IoU-weighted F1 (0..1) of the same matching (:func:`quality`); NaN:
            not measured, ranked by ``agreement``.
    """

    setting: DetectSetting
    bytes_per_frame: float
    agreement: float
    quality: float = float("nan")

    @property
    def rank_quality(self) -> float:
        """``quality``, or ``agreement`` where it was not measured."""
        return self.quality if np.isfinite(self.quality) else self.agreement


def best_point(points: Sequence[RatePoint]) -> RatePoint:
    """The rule that ranks settings (module docstring): the best agreement; within
    :data:`AGREEMENT_TIE` of it, the best quality; within :data:`AGREEMENT_TIE` of that, the
    most bytes (then the better agreement)."""
    top = max(p.agreement for p in points)
    near = [p for p in points if p.agreement >= top - AGREEMENT_TIE]
    sharp = max(p.rank_quality for p in near)
    return max((p for p in near if p.rank_quality >= sharp - AGREEMENT_TIE),
               key=lambda p: (p.bytes_per_frame, p.agreement))  # fmt: skip


@dataclass(frozen=True)
class RateChoice:
    """The rate controller's start: the chosen point, the rungs it may move along (every
    β's points at or above the floor, cheapest first) and the status: ``ok``,
    ``over_budget`` (no point within the budget reaches the floor: the cheapest that does)
    or ``below_floor`` (no point reaches it: the best agreement)."""

    point: RatePoint
    rungs: tuple[RatePoint, ...]
    status: str
    target_bytes_per_frame: float
    min_agreement: float

    def describe(self) -> str:
        text = (f"{self.point.setting.describe()}: {self.point.bytes_per_frame:.0f} B/frame "
                f"for a target of {self.target_bytes_per_frame:.0f}, agreement "
                f"{self.point.agreement:.2f} (floor {self.min_agreement:.2f}), quality "
                f"{self.point.rank_quality:.2f}")  # fmt: skip
        if self.status == "over_budget":
            text += ("; the budget cannot reach the agreement floor: sending the cheapest "
                     "setting that does")  # fmt: skip
        elif self.status == "below_floor":
            text += "; no setting reaches the floor on these frames: sending the best one"
        return text


def choose_setting(points: Sequence[RatePoint], target_bytes_per_frame: float,
                   min_agreement: float = DEFAULT_MIN_AGREEMENT) -> RateChoice:  # fmt: skip
    """The setting for a budget (module docstring).

    Args:
        points: the rate table (:func:`measure_rate_table`, or any list of points).
        target_bytes_per_frame: the budget, bytes per frame (> 0).
        min_agreement: the floor, 0..1.

    Raises:
        ValueError: no points, or a budget or floor out of range.
    """
    if not points:
        raise ValueError("an empty rate table")
    if not target_bytes_per_frame > 0 or not 0.0 <= min_agreement <= 1.0:
        raise ValueError(f"target {target_bytes_per_frame} B/frame must be > 0 and the floor "
                         f"{min_agreement} in [0, 1]")  # fmt: skip
    good = [p for p in points if p.agreement >= min_agreement]
    fits = [p for p in good if p.bytes_per_frame <= target_bytes_per_frame]
    if fits:
        chosen, status = best_point(fits), "ok"
    elif good:
        chosen, status = min(good, key=lambda p: (p.bytes_per_frame, -p.agreement)), "over_budget"
    else:
        chosen = max(points, key=lambda p: (p.agreement, -p.bytes_per_frame))
        status = "below_floor"
    floor = min(min_agreement, chosen.agreement)
    rungs = sorted((p for p in points if p.agreement >= floor),
                   key=lambda p: (p.bytes_per_frame, -p.agreement))  # fmt: skip
    return RateChoice(chosen, tuple(rungs), status, float(target_bytes_per_frame),
                      float(min_agreement))  # fmt: skip


def _better(a: RatePoint, b: RatePoint) -> bool:
    """Whether ``a`` ranks above ``b`` by more than a tie (:func:`best_point`'s order, bytes
    aside): a better agreement, or an equal one and a better quality."""
    if a.agreement > b.agreement + AGREEMENT_TIE:
        return True
    return a.agreement >= b.agreement - AGREEMENT_TIE and a.rank_quality > (
        b.rank_quality + AGREEMENT_TIE)


# ----------------------------------------------------------------------------- agreement


def agreement_counts(reference: np.ndarray, decoded: np.ndarray,
                     iou: float = AGREEMENT_IOU) -> tuple[int, int, int]:  # fmt: skip
    """``(matched, reference boxes, decoded boxes)`` of one frame: one-to-one matching of
    ``(n, 4)`` and ``(m, 4)`` ``x1, y1, x2, y2`` boxes at IoU >= ``iou`` (most matches)."""
    reference = np.asarray(reference, np.float64).reshape(-1, 4)
    decoded = np.asarray(decoded, np.float64).reshape(-1, 4)
    if not len(reference) or not len(decoded):
        return 0, len(reference), len(decoded)
    overlap = box_iou(reference, decoded)
    rows, cols = linear_sum_assignment(-(overlap >= iou).astype(np.float64) - 1e-3 * overlap)
    return int((overlap[rows, cols] >= iou).sum()), len(reference), len(decoded)


def matched_iou(reference: np.ndarray, decoded: np.ndarray, iou: float = AGREEMENT_IOU) -> float:
    """The sum of the IoUs of the pairs :func:`agreement_counts` matches (same matching)."""
    reference = np.asarray(reference, np.float64).reshape(-1, 4)
    decoded = np.asarray(decoded, np.float64).reshape(-1, 4)
    if not len(reference) or not len(decoded):
        return 0.0
    overlap = box_iou(reference, decoded)
    rows, cols = linear_sum_assignment(-(overlap >= iou).astype(np.float64) - 1e-3 * overlap)
    hit = overlap[rows, cols]
    return float(hit[hit >= iou].sum())


def quality(counts: Sequence[tuple[int, int, int]], ious: Sequence[float]) -> float:
    """Pooled IoU-weighted F1 over frames: ``2 sum(ious) / (reference + decoded boxes)`` of
    :func:`agreement_counts` and :func:`matched_iou` of the same frames (1 when neither side
    has a box)."""
    total = sum(c[1] + c[2] for c in counts)
    return 1.0 if total == 0 else 2.0 * float(sum(ious)) / total


def f1(counts: Sequence[tuple[int, int, int]]) -> float:
    """Pooled F1 of :func:`agreement_counts` over frames: 1 when neither side has a box."""
    matched = sum(c[0] for c in counts)
    total = sum(c[1] + c[2] for c in counts)
    return 1.0 if total == 0 else 2.0 * matched / total


def _kept(detections, threshold: float) -> np.ndarray:
    return np.asarray(detections.boxes)[np.asarray(detections.scores) >= threshold]


# ----------------------------------------------------------------------------- the table


@dataclass
class RateTable:
    """What :func:`measure_rate_table` measured: the points and, per β, the profile (the
    camera's windows and the cloud's threshold calibrated for that bottleneck)."""

    points: list[RatePoint]
    profiles: dict[float, DetectProfile]
    frames: int


def measure_rate_table(frames: Sequence[np.ndarray], bottlenecks: Mapping[float, TaskBottleneck],
                       model, camera: CameraProfile, unit_overhead: int = 0,
                       skip_ladder: Sequence[int] = SKIP_LADDER,
                       periods: Sequence[int] = INTRA_PERIODS) -> RateTable:  # fmt: skip
    """The rate table of the start-up ``frames`` (module docstring).

    Args:
        frames: ``(H, W, 3)`` uint8 RGB start-up frames, in order (at least 2).
        bottlenecks: β -> bottleneck (all cut at the same layer).
        model: the split detector's network (:func:`codec.task.split.load_split_model`).
        camera: the camera's window layout (:func:`codec.scaffold.profile.choose_profile`).
        unit_overhead: framing bytes of a unit beyond its payload (added to every unit).
        skip_ladder, periods: the skip thresholds and intra periods to price.
    """
    if len(frames) < 2 or not bottlenecks:
        raise ValueError("the rate table needs at least 2 frames and a bottleneck")
    base = next(iter(bottlenecks.values())).split
    split = dataclasses.replace(DetectProfile(camera, 0.0).split(base), score_threshold=0.0)
    detector = SplitDetector(model, split)
    height, width = frames[0].shape[:2]
    features = [detector.edge_features(f) for f in frames]
    checks = profile_frame_indices(len(frames))
    found = [detector.cloud_detect(f, height, width) for f in features]
    operating = reference_threshold_of([d.boxes for d in found], [d.scores for d in found])
    reference = {i: found[i] for i in checks}
    table = RateTable([], {}, len(frames))
    for beta, bottleneck in bottlenecks.items():
        q = [bottleneck.model.quantize(f) for f in features]
        decoded = {i: _detect_latents(bottleneck, detector, q[i], height, width) for i in checks}
        threshold, target, matched = match_threshold([reference[i].scores for i in checks],
                                                     [decoded[i].scores for i in checks],
                                                     operating)  # fmt: skip
        table.profiles[beta] = DetectProfile(camera, threshold, target, matched, operating)
        intra = _intra_bytes(bottleneck, detector, [q[i] for i in checks]) + unit_overhead
        for skip in skip_ladder:
            temporal, counts, ious = _temporal_run(bottleneck, detector, q, skip, checks,
                                                   reference, threshold, (height, width),
                                                   operating)  # fmt: skip
            agreement, sharp = f1(counts), quality(counts, ious)
            for period in periods:
                rate = (intra + (period - 1) * (temporal + unit_overhead)) / period
                table.points.append(RatePoint(DetectSetting(float(beta), int(skip), int(period)),
                                              float(rate), agreement, sharp))  # fmt: skip
    return table


@torch.inference_mode()
def _detect_latents(bottleneck: TaskBottleneck, detector: SplitDetector, q: np.ndarray,
                    height: int, width: int):  # fmt: skip
    """The cloud half's detections of ``(W, N, S, S)`` latents (every score)."""
    return detector.cloud_detect(bottleneck.model.reconstruct(q), height, width)


def _intra_bytes(bottleneck: TaskBottleneck, detector: SplitDetector,
                 latents: Sequence[np.ndarray]) -> float:  # fmt: skip
    """Mean payload bytes of an intra unit of each of ``latents``."""
    from semcodec.codec.task.coder import stack_latents

    encoder = TaskEncoder(bottleneck, detector, intra_period=1)
    return float(np.mean([len(encoder.encode_latents(stack_latents(q))) for q in latents]))


def _temporal_run(bottleneck: TaskBottleneck, detector: SplitDetector, q: Sequence[np.ndarray],
                  skip: int, checks: Sequence[int], reference: Mapping[int, object],
                  threshold: float, size: tuple[int, int],
                  operating: float = REFERENCE_THRESHOLD) -> tuple[float, list, list]:  # fmt: skip
    """One intra unit then temporal ones at ``skip``: mean temporal payload bytes, and the
    agreement counts and matched IoUs at the ``checks`` frames (decoded latents, as the cloud
    has them, at ``threshold``, against ``reference`` at ``operating``)."""
    from semcodec.codec.task.coder import stack_latents

    height, width = size
    encoder = TaskEncoder(bottleneck, detector, intra_period=0, skip_threshold=skip)
    sizes, counts, ious = [], [], []
    shape = encoder.shape(height, width)
    for i, latents in enumerate(q):
        n = len(encoder.encode_latents(stack_latents(latents)))
        if i:
            sizes.append(n)
        if i in checks:
            got = _detect_latents(bottleneck, detector, unstack_latents(encoder.decoded, shape),
                                  height, width)  # fmt: skip
            pair = _kept(reference[i], operating), _kept(got, threshold)
            counts.append(agreement_counts(*pair))
            ious.append(matched_iou(*pair))
    return float(np.mean(sizes)), counts, ious


# ----------------------------------------------------------------------------- holding it


@dataclass(frozen=True)
class RateSwitch:
    """A move of the controller: from ``frame`` (0-based) on, ``setting``, and why
    (``start``, ``over``, ``under``, ``floor``)."""

    frame: int
    setting: DetectSetting
    reason: str


class DetectRateController:
    """Holds a detect-mode stream to its target along the rungs of the rate table (module
    docstring).

    Every :data:`STEP_SECONDS` it asks for the rate that repays the account's debt (or
    spends its savings) over the next :data:`HORIZON_SECONDS` (or the frames left, when
    known), divides it by how much the scene costs against the start-up table (actual over
    predicted bytes, forgotten over :data:`MEMORY_SECONDS`), and takes the richest rung of
    the current bottleneck whose table rate fits (never a rung the self-check barred). It
    changes bottleneck (β, at an intra unit: :meth:`TaskEncoder.switch`) when another one's
    rung fits where none of the current one's does, or agrees better within the budget, or
    spends a budget the current one leaves a fifth unspent -- after asking for it at
    :data:`BETA_PATIENCE` looks in a row and at most once every :data:`BETA_HOLD_SECONDS`.

    Args:
        choice: :func:`choose_setting`'s result.
        fps: the stream's frame rate (frames per second).
        header_bytes: bytes already spent before the first unit (the stream header).
        expected_frames: the stream's length when known (0: live).
    """

    def __init__(self, choice: RateChoice, fps: float, header_bytes: int = 0,
                 expected_frames: int = 0) -> None:  # fmt: skip
        self.choice = choice
        self.target = choice.target_bytes_per_frame
        self.rungs = list(choice.rungs)
        self.rung = self.rungs.index(choice.point)
        self.barred: set[int] = set()  # rungs the self-check barred
        self.step = max(1, round(STEP_SECONDS * fps))
        self.horizon = max(self.step, round(HORIZON_SECONDS * fps))
        self.forget = 1.0 - 1.0 / max(2.0, MEMORY_SECONDS * fps)
        self.check_every = max(1, round(CHECK_SECONDS * fps))
        self.beta_hold = max(self.step, round(BETA_HOLD_SECONDS * fps))
        self.expected_frames = int(expected_frames)
        self.fps = float(fps)
        self.spent, self.frames, self.account_frames = float(header_bytes), 0, 0
        self._actual = self._predicted = 0.0
        self._beta_at, self._asked = -self.beta_hold, 0
        self.switches = [RateSwitch(0, choice.point.setting, "start")]
        self.checks: deque[tuple[int, int, int]] = deque(maxlen=CHECK_WINDOW)
        self.warnings: list[str] = []
        #: the rate status now (:data:`RATE_STATUSES`): the start's, then ``over_budget``
        #: while the floor keeps the stream over its target, ``ok`` when it fits again
        self.status = choice.status
        self._floor_warned = False

    @property
    def setting(self) -> DetectSetting:
        """The setting of the next frame."""
        return self.rungs[self.rung].setting

    @property
    def betas(self) -> tuple[float, ...]:
        """The bottlenecks the stream may use: the chosen one first, then the others of the
        rungs (finest first)."""
        start = self.choice.point.setting.beta
        return (start, *sorted({r.setting.beta for r in self.rungs} - {start}))

    def wants_check(self) -> bool:
        """Whether the frame just coded is one to self-check."""
        return self.frames > 0 and (self.frames - 1) % self.check_every == 0

    @property
    def cost_ratio(self) -> float:
        """Recent actual bytes over what the table predicted for the rungs used (1 at first)."""
        return self._actual / self._predicted if self._predicted > 0 else 1.0

    def set_target_bps(self, bps: float) -> None:
        """A new target, bits per second (``--auto``: the link's). A move of more than
        :data:`NEW_ACCOUNT` of the target starts a new account: what the stream spent or
        saved at the old target is not repaid at the new one."""
        target = float(bps) / 8 / self.fps
        if not target > 0:
            raise ValueError(f"target {bps} bit/s must be > 0")
        if abs(target - self.target) > NEW_ACCOUNT * self.target:
            self.spent, self.account_frames = 0.0, 0
        self.target = target

    def _allowed(self, beta: float | None = None) -> list[int]:
        """Rungs not barred (of ``beta`` only when given), cheapest first."""
        return [i for i, r in enumerate(self.rungs) if i not in self.barred
                and (beta is None or r.setting.beta == beta)]  # fmt: skip

    def _best(self, indices: Sequence[int]) -> int:
        """:func:`choose_setting`'s rule (:func:`best_point`) among ``indices``."""
        best = best_point([self.rungs[i] for i in indices])
        return next(i for i in indices if self.rungs[i] is best)

    def add_frame(self, unit_bytes: int) -> None:
        """Accounts one coded frame's unit (payload and framing, bytes); moves when due."""
        self.spent += unit_bytes
        self.frames += 1
        self.account_frames += 1
        self._actual = self.forget * self._actual + unit_bytes
        self._predicted = self.forget * self._predicted + self.rungs[self.rung].bytes_per_frame
        if self.frames % self.step:
            return
        left = self.expected_frames - self.frames if self.expected_frames else self.horizon
        horizon = max(self.step, min(self.horizon, left))
        debt = self.target * self.account_frames - self.spent  # > 0: bytes not yet spent
        wanted = max(0.05 * self.target, self.target + debt / horizon) / self.cost_ratio
        beta = self.setting.beta
        here = self._allowed(beta)
        fitting = [i for i in here if self.rungs[i].bytes_per_frame <= wanted]
        rung = fitting[-1] if fitting else (here[0] if here else self.rung)
        anywhere = [i for i in self._allowed() if self.rungs[i].bytes_per_frame <= wanted]
        other = self._other_beta(anywhere, rung if fitting else None, wanted)
        wants_other = other is not None
        self._asked = self._asked + 1 if wants_other else 0
        if (wants_other and self._asked >= BETA_PATIENCE
                and self.frames - self._beta_at >= self.beta_hold):  # fmt: skip
            rung, self._beta_at, self._asked = other, self.frames, 0
        self._move(rung, "under" if self.rungs[rung].bytes_per_frame
                   > self.rungs[self.rung].bytes_per_frame else "over")  # fmt: skip
        self._update_status(bool(anywhere))

    def _other_beta(self, fitting: Sequence[int], rung: int | None,
                    wanted: float) -> int | None:  # fmt: skip
        """The rung of another bottleneck the stream should change to, if any, among the
        rungs that fit the budget (``fitting``), ``rung`` being the current bottleneck's
        richest that fits (None: none does)."""
        if not fitting:
            return None
        beta, best = self.setting.beta, self._best(fitting)
        if self.rungs[best].setting.beta != beta and (
                rung is None or _better(self.rungs[best], self.rungs[rung])):
            return best  # none of the current one's fits, or another agrees better
        if rung is None or self.rungs[rung].bytes_per_frame >= (1 - UNSPENT) * wanted:
            return None
        here = self.rungs[rung]
        richer = [i for i in fitting if self.rungs[i].setting.beta != beta
                  and self.rungs[i].bytes_per_frame > here.bytes_per_frame
                  and self.rungs[i].agreement >= here.agreement - AGREEMENT_TIE
                  and self.rungs[i].rank_quality >= here.rank_quality - AGREEMENT_TIE]  # fmt: skip
        return self._best(richer) if richer else None  # spends what the current leaves

    def _update_status(self, fits: bool) -> None:
        """``over_budget`` while no rung the floor allows fits and the account is over the
        target by more than :data:`OVER_SHARE` (a log line when it starts); ``ok`` again when
        one fits and the account is back within it."""
        over = self.spent > (1 + OVER_SHARE) * self.target * max(self.account_frames, 1)
        if self.status == "ok" and not fits and over:
            self.status = "over_budget"
            cheapest = min(self.rungs[i].bytes_per_frame for i in self._allowed())
            self.warnings.append(
                f"frame {self.frames}: the budget cannot reach the agreement floor "
                f"{self.choice.min_agreement:.2f}: the cheapest setting the self-check allows "
                f"costs {cheapest * 8 * self.fps / 1000 * self.cost_ratio:.1f} kbit/s on this "
                f"scene against a target of {self.target * 8 * self.fps / 1000:.1f}")
        elif self.status == "over_budget" and fits and not over:
            self.status = "ok"

    def add_check(self, counts: tuple[int, int, int]) -> float:
        """Pools one self-check (:func:`agreement_counts` of the frame just coded); below the
        floor, bars the current bottleneck's rungs up to the current one and moves to its next
        richer rung, or to a finer bottleneck's rung when it has none. Returns the pooled F1."""
        self.checks.append(counts)
        agreement = f1(self.checks)
        if agreement < self.choice.min_agreement and len(self.checks) >= 2:
            current = self.rungs[self.rung]
            beta, cost = current.setting.beta, current.bytes_per_frame
            up = [i for i in self._allowed(beta) if self.rungs[i].bytes_per_frame > cost]
            finer = [i for i in self._allowed() if self.rungs[i].setting.beta < beta]
            if not up and finer:
                finest = max(self.rungs[i].setting.beta for i in finer)  # the next finer
                finer = [i for i in finer if self.rungs[i].setting.beta == finest]
                up = [next((i for i in finer if self.rungs[i].bytes_per_frame >= cost),
                           finer[-1])]  # fmt: skip
                self._beta_at = self.frames
            if up:
                self.barred.update(i for i in self._allowed(beta)
                                   if self.rungs[i].bytes_per_frame <= cost)  # fmt: skip
                self._move(up[0], "floor")
                self.checks.clear()
            elif not self._floor_warned:
                self._floor_warned = True
                self.warnings.append(f"frame {self.frames}: agreement {agreement:.2f} is under "
                                     f"the floor {self.choice.min_agreement:.2f} at the finest "
                                     f"setting of beta {self.setting.beta:g}")  # fmt: skip
        return agreement

    def _move(self, rung: int, reason: str) -> None:
        if rung != self.rung:
            self.rung = rung
            self.switches.append(RateSwitch(self.frames, self.setting, reason))

    @property
    def rate(self) -> float:
        """Bytes per frame so far (header included)."""
        return self.spent / max(self.frames, 1)
