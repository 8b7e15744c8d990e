"""Saving factor: how many times more bits the best baseline needs for the same quality.

For a codec row with quality ``q`` at ``bpp``, every baseline curve of the same sequence
and protocol (cold start or steady state: see :data:`evaluation.bench.options.PROTOCOLS`)
(``x264``/``x265`` at every scale and setting family: CRF sweep, static-camera anchor) is
asked for the lowest BPP at which it reaches ``q``, interpolated linearly in log-BPP between
the two measured points that bracket ``q``. The best baseline is the one that needs the
fewest bits; the saving factor is its BPP over the row's (above 1: the row saves bits).
Where ``q`` lies outside every baseline's measured range the factor is only bounded:
``<= f`` when a baseline already reaches ``q`` at its cheapest point, ``>= f`` when no
baseline reaches it at its dearest point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

#: The codecs whose curves are the baselines.
BASELINE_CODECS = ("x264", "x265")
#: Metrics a saving factor is computed for, with their direction (True: higher is better).
SAVING_METRICS: dict[str, bool] = {"st_lpips": False, "person_st_lpips": False, "moda": True}


@dataclass(frozen=True)
class Saving:
    """The saving factor of one row on one metric.

    Attributes:
        factor: baseline BPP / row BPP (``None`` if no baseline curve has points).
        bound: ``"="`` (interpolated), ``"<="`` or ``">="`` (outside the measured range).
        baseline: the curve that needs the fewest bits (or that sets the bound).
        baseline_bpp: the BPP that curve needs (or the end of its range).
    """

    sequence: str
    codec: str
    setting: str
    bpp: float
    metric: str
    value: float
    factor: float | None
    bound: str
    baseline: str
    baseline_bpp: float | None
    protocol: str = "cold"

    def text(self) -> str:
        """``"2.10x (x265@ipratio=8)"``, ``"<= 0.61x (x265)"`` or ``"n/a"``."""
        if self.factor is None:
            return "n/a"
        prefix = "" if self.bound == "=" else f"{self.bound} "
        return f"{prefix}{self.factor:.2f}x ({self.baseline})"


def bpp_for_quality(points: Sequence[tuple[float, float]], target: float,
                    higher_is_better: bool) -> tuple[float, str]:  # fmt: skip
    """The lowest BPP at which a baseline curve reaches ``target`` quality.

    Args:
        points: ``(bpp, quality)`` pairs of one curve (bpp > 0), any order.

    Returns:
        ``(bpp, "=")`` interpolated in log-BPP; ``(cheapest bpp, "<=")`` when the curve is
        already at least as good at its cheapest point; ``(dearest bpp, ">=")`` when it never
        gets there.
    """
    pts = sorted(points)

    def reaches(quality: float) -> bool:
        return quality >= target if higher_is_better else quality <= target

    if reaches(pts[0][1]):
        return pts[0][0], "=" if pts[0][1] == target else "<="
    for (b0, q0), (b1, q1) in zip(pts, pts[1:], strict=False):
        if not reaches(q0) and reaches(q1):
            share = (target - q0) / (q1 - q0)
            return math.exp(math.log(b0) + share * (math.log(b1) - math.log(b0))), "="
    return pts[-1][0], ">="


def row_number(row: dict, key: str) -> float | None:
    """``row[key]`` as a finite float, or None (missing, empty or not a number)."""
    try:
        value = float(row.get(key))
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def protocol_of(row: dict) -> str:
    """The row's protocol (``cold`` for rows made before the column existed)."""
    return row.get("protocol") or "cold"


def baseline_curves(rows: list[dict], sequence: str, metric: str,
                    protocol: str = "cold") -> dict[str, list]:  # fmt: skip
    """``{curve: [(bpp, quality), ...]}`` of the baseline rows of one sequence and protocol."""
    out: dict[str, list] = {}
    for row in rows:
        bpp, quality = row_number(row, "bpp"), row_number(row, metric)
        if (row["sequence"] == sequence and row["codec"] in BASELINE_CODECS
                and protocol_of(row) == protocol
                and bpp and bpp > 0 and quality is not None):  # fmt: skip
            out.setdefault(row.get("curve") or row["codec"], []).append((bpp, quality))
    return out


def saving_for(row: dict, metric: str, curves: dict[str, list]) -> Saving | None:
    """The saving factor of ``row`` on ``metric`` against ``curves`` (None without values)."""
    bpp, value = row_number(row, "bpp"), row_number(row, metric)
    if not bpp or bpp <= 0 or value is None:
        return None
    higher = SAVING_METRICS[metric]
    answers = {name: bpp_for_quality(points, value, higher) for name, points in curves.items()}
    common = dict(sequence=row["sequence"], codec=row["codec"], setting=row["setting"],
                  bpp=bpp, metric=metric, value=value, protocol=protocol_of(row))  # fmt: skip
    if not answers:
        return Saving(**common, factor=None, bound="=", baseline="", baseline_bpp=None)
    exact = {n: b for n, (b, bound) in answers.items() if bound == "="}
    at_most = {n: b for n, (b, bound) in answers.items() if bound == "<="}
    if at_most:  # some baseline is as good already at its cheapest point: an upper bound
        name = min(at_most, key=at_most.get)
        if not exact or at_most[name] <= min(exact.values()):
            return Saving(**common, factor=at_most[name] / bpp, bound="<=", baseline=name,
                          baseline_bpp=at_most[name])  # fmt: skip
    if exact:
        name = min(exact, key=exact.get)
        return Saving(**common, factor=exact[name] / bpp, bound="=", baseline=name,
                      baseline_bpp=exact[name])  # fmt: skip
    name = max(answers, key=lambda n: answers[n][0])  # none reaches it: the dearest point
    return Saving(**common, factor=answers[name][0] / bpp, bound=">=", baseline=name,
                  baseline_bpp=answers[name][0])  # fmt: skip


def saving_factors(rows: list[dict]) -> list[Saving]:
    """The saving factor of every non-baseline, compressed row on every metric it has."""
    out = []
    for row in rows:
        if row["codec"] in BASELINE_CODECS or row["codec"] == "raw":
            continue
        for metric in SAVING_METRICS:
            curves = baseline_curves(rows, row["sequence"], metric, protocol_of(row))
            saving = saving_for(row, metric, curves)
            if saving is not None:
                out.append(saving)
    return out


def saving_rows(savings: list) -> list[dict]:
    """Plain dicts for CSV/JSON (of :class:`Saving` or :class:`Reach`)."""
    return [asdict(s) for s in savings]


def setting_family(setting: str) -> str:
    """``setting`` without its rate target: the curve (one decoder over its targets) a row is a
    point of (``level=1,target_bpp=0.002,decoder=restore`` -> ``level=1,decoder=restore``)."""
    return ",".join(item for item in setting.split(",") if not item.startswith("target_bpp="))


@dataclass(frozen=True)
class Reach:
    """How many times fewer bits one curve of a codec (a setting over its rate targets) needs
    than a reference row of the same codec to reach that row's quality on one metric (issue
    39: a new level-1 default against today's at its 0.004 target).

    Attributes:
        family: the curve's setting without ``target_bpp`` (:func:`setting_family`).
        needed_bpp: the BPP the curve needs, interpolated in log-BPP between the two targets
            that bracket the reference's quality (or the end of its range, see ``bound``).
        factor: ``reference_bpp / needed_bpp`` (above 1: the curve needs fewer bits).
        bound: ``"="``; ``">="`` when the curve's cheapest point is already as good (it
            would need even fewer bits); ``"<="`` when its dearest point is not.
    """

    sequence: str
    protocol: str
    codec: str
    family: str
    metric: str
    reference: str
    reference_bpp: float
    reference_value: float
    needed_bpp: float
    factor: float
    bound: str

    def text(self) -> str:
        """``"1.61x (0.001358)"``, ``">= 2.63x (0.000599)"`` or ``"<= 0.55x (0.00392)"``."""
        prefix = "" if self.bound == "=" else f"{self.bound} "
        return f"{prefix}{self.factor:.2f}x ({self.needed_bpp:.4g})"


def reach_factors(rows: list[dict], reference: str) -> list[Reach]:
    """For every sequence and protocol with the ``reference`` row (``"CODEC:SETTING"``, e.g.
    ``"scaffold:level=1"``): the :class:`Reach` of each curve of that codec (the rows whose
    settings differ only in ``target_bpp``) on every metric of :data:`SAVING_METRICS` the
    reference has."""
    codec, _, setting = reference.partition(":")
    out = []
    for ref in (r for r in rows if r["codec"] == codec and r["setting"] == setting):
        ref_bpp = row_number(ref, "bpp")
        mine = [r for r in rows if r["codec"] == codec and r["sequence"] == ref["sequence"]
                and protocol_of(r) == protocol_of(ref)]  # fmt: skip
        families = sorted({setting_family(r["setting"]) for r in mine})
        for metric, higher in SAVING_METRICS.items():
            target = row_number(ref, metric)
            if not ref_bpp or target is None:
                continue
            for family in families:
                points = [(row_number(r, "bpp"), row_number(r, metric)) for r in mine
                          if setting_family(r["setting"]) == family]  # fmt: skip
                points = [(b, q) for b, q in points if b and b > 0 and q is not None]
                if not points:
                    continue
                needed, bound = bpp_for_quality(points, target, higher)
                out.append(Reach(ref["sequence"], protocol_of(ref), codec, family, metric,
                                 setting, ref_bpp, target, needed, ref_bpp / needed,
                                 {"=": "=", "<=": ">=", ">=": "<="}[bound]))  # fmt: skip
    return out
