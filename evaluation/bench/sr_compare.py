"""Super-resolution against bicubic on held-out frames: plates and person crops (issue 54).

The edge may send a plate or a person's reference at half or quarter size; the cloud brings it
back with an upscaler of :mod:`codec.reconstruct.superres`. This measures each upscaler on
what that path sees: a picture of a held-out frame area-downscaled by the factor (as the edge
does, optionally coded by an intra coder at a quality, as the plate is), brought back to its
size, and compared with the picture by ST-LPIPS (:mod:`evaluation.metrics.perceptual`).

* **plates**: whole frames (every ``every``-th of the range);
* **person crops**: each ground-truth person at least ``min_height`` pixels tall and wholly in
  the frame, cut with a margin of a tenth of the box on each side.

Run ``python -m semcodec.evaluation.bench.sr_compare --help``; it prints a Markdown table
(mean ST-LPIPS per set, factor and upscaler; the difference from bicubic; how often the
upscaler beats bicubic; FLOPs) and writes it with every item's score to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcodec.codec.core.frames import resize_to

#: The sets of issue 54's Done-when: held-out ranges (PETS 501-795, TUD 91-179).
DEFAULT_SETS = ("../shared/data/PETS09-S2L1-full:501:795:30",
                "../shared/data/TUD-Stadtmitte:91:179:10")  # fmt: skip
DEFAULT_UPSCALERS = ("bicubic", "span-x2", "span-x4", "esrgan-slim", "esrgan-medium",
                     "esrgan-slim-plates", "esrgan-medium-plates")  # fmt: skip


@dataclass(frozen=True)
class HeldOutSet:
    """Frames ``start..stop`` of a sequence, every ``every``-th."""

    path: str
    start: int
    stop: int
    every: int

    @classmethod
    def parse(cls, text: str) -> HeldOutSet:
        """``PATH:START:STOP:EVERY`` (``../shared/data/TUD-Stadtmitte:91:179:10``)."""
        path, *numbers = text.rsplit(":", 3)
        if len(numbers) != 3:
            raise ValueError(f"{text!r}: expected PATH:START:STOP:EVERY")
        start, stop, every = (int(n) for n in numbers)
        if not 1 <= start <= stop or every < 1:
            raise ValueError(f"{text!r}: expected 1 <= START <= STOP and EVERY >= 1")
        return cls(path, start, stop, every)

    @property
    def name(self) -> str:
        return f"{Path(self.path).name} {self.start}-{self.stop}"


@dataclass
class Items:
    """The pictures of one set and kind (plates or person crops), with where each came from."""

    pictures: list[np.ndarray] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


def read_items(held_out: HeldOutSet, min_height: int = 48,
               max_people: int = 8) -> tuple[Items, Items]:  # fmt: skip
    """``(plates, person crops)`` of a held-out set; each picture's sides are cut to multiples
    of 4 (so x2 and x4 downscales are exact)."""
    from semcodec.codec.core.sources import open_source
    from semcodec.evaluation.data.groundtruth import load_mot_groundtruth

    source = open_source(held_out.path)
    gt = None
    if source.info.groundtruth is not None:
        gt = load_mot_groundtruth(source.info.groundtruth)
    plates, people = Items(), Items()
    count = held_out.stop - held_out.start + 1
    for offset, frame in enumerate(source.frames(held_out.start, count)):
        number = held_out.start + offset
        if offset % held_out.every:
            continue
        plates.pictures.append(_cut4(frame.rgb))
        plates.labels.append(f"frame {number}")
        if gt is None:
            continue
        rows = np.flatnonzero((gt.frame_numbers == number) & gt.counted)
        for row in rows[np.argsort(-gt.boxes[rows, 3])][:max_people]:
            crop = person_crop(frame.rgb, gt.boxes[row], min_height)
            if crop is not None:
                people.pictures.append(crop)
                people.labels.append(f"frame {number} id {gt.ids[row]}")
    return plates, people


def _cut4(picture: np.ndarray) -> np.ndarray:
    h, w = picture.shape[:2]
    return picture[: h - h % 4, : w - w % 4]


def person_crop(frame: np.ndarray, box: np.ndarray, min_height: int = 48,
                margin: float = 0.1) -> np.ndarray | None:  # fmt: skip
    """The person of ``box`` (``x, y, w, h``) with ``margin`` of the box each side, or None when
    the person is shorter than ``min_height`` or the crop leaves the frame."""
    x, y, w, h = box
    if h < min_height:
        return None
    x0, y0 = int(round(x - margin * w)), int(round(y - margin * h))
    x1, y1 = int(round(x + w * (1 + margin))), int(round(y + h * (1 + margin)))
    if x0 < 0 or y0 < 0 or x1 > frame.shape[1] or y1 > frame.shape[0]:
        return None
    crop = _cut4(frame[y0:y1, x0:x1])
    return crop if min(crop.shape[:2]) >= 24 else None


def degrade(picture: np.ndarray, factor: int, quality: int | None = None,
            coder: str = "webp") -> Callable[[Callable], np.ndarray]:  # fmt: skip
    """A function of an upscaler giving ``picture`` as the cloud rebuilds it: area-downscaled by
    ``factor`` (and coded by the intra ``coder`` at ``quality`` when it is given), then
    brought back to its size by the upscaler."""
    h, w = picture.shape[:2]
    if quality is None:
        small = resize_to(picture[None], w // factor, h // factor)[0]
        return lambda upscale: upscale(small, (w, h))
    from semcodec.codec.keyframes import create_intra_coder

    intra = create_intra_coder(coder, downscale=1 / factor)
    data = intra.encode(picture, quality)
    return lambda upscale: intra.decode(data, (w, h), upscale)


def _scores(pictures: Sequence[np.ndarray], rebuilt: Sequence[np.ndarray],
            models_dir) -> np.ndarray:  # fmt: skip
    from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame

    same = len({p.shape for p in pictures}) == 1
    if same:
        return st_lpips_per_frame(np.stack(pictures), np.stack(rebuilt), models_dir)
    pairs = zip(pictures, rebuilt, strict=True)
    return np.array([st_lpips_per_frame(p, r, models_dir)[0] for p, r in pairs])


def measure(held_out: Iterable[HeldOutSet], factors: Sequence[int], names: Sequence[str],
            quality: int | None = None, models_dir=None, min_height: int = 48,
            log: Callable[[str], None] = print) -> list[dict]:  # fmt: skip
    """One row per set, kind, factor and upscaler: ``mean`` ST-LPIPS, ``scores`` per item,
    ``flops`` per item (mean), seconds."""
    from semcodec.codec.reconstruct.superres import create_upscaler

    upscalers = {name: create_upscaler(name, models_dir) for name in names}
    rows = []
    for one in held_out:
        plates, people = read_items(one, min_height)
        log(f"{one.name}: {len(plates.pictures)} plates, {len(people.pictures)} person crops")
        for kind, items in (("plate", plates), ("person", people)):
            if not items.pictures:
                continue
            for factor in factors:
                rebuild = [degrade(p, factor, quality) for p in items.pictures]
                for name, upscaler in upscalers.items():
                    started = time.perf_counter()
                    flops, rebuilt = [], []
                    for picture, again in zip(items.pictures, rebuild, strict=True):
                        h, w = picture.shape[:2]
                        flops.append(upscaler.flops((w // factor, h // factor)))
                        rebuilt.append(again(upscaler))
                    seconds = time.perf_counter() - started
                    scores = _scores(items.pictures, rebuilt, models_dir)
                    rows.append({"set": one.name, "kind": kind, "factor": factor,
                                 "upscaler": name, "quality": quality,
                                 "mean": float(scores.mean()), "scores": scores.tolist(),
                                 "labels": items.labels, "flops": float(np.mean(flops)),
                                 "seconds": seconds})  # fmt: skip
                    log(f"  {kind} x{factor} {name}: ST-LPIPS {scores.mean():.4f} "
                        f"({seconds:.1f} s)")  # fmt: skip
    return rows


def table(rows: list[dict]) -> str:
    """The rows as Markdown: each against bicubic of the same set, kind and factor."""
    bicubic = {(r["set"], r["kind"], r["factor"]): np.array(r["scores"]) for r in rows
               if r["upscaler"] == "bicubic"}  # fmt: skip
    lines = ["| set | kind | factor | upscaler | items | ST-LPIPS | minus bicubic | "
             "beats bicubic | MFLOP per item |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        base = bicubic.get((r["set"], r["kind"], r["factor"]))
        scores = np.array(r["scores"])
        diff = wins = "—"
        if base is not None and r["upscaler"] != "bicubic":
            diff = f"{scores.mean() - base.mean():+.4f}"
            wins = f"{int((scores < base).sum())}/{len(scores)}"
        lines.append(f"| {r['set']} | {r['kind']} | x{r['factor']} | {r['upscaler']} | "
                     f"{len(scores)} | {scores.mean():.4f} | {diff} | {wins} | "
                     f"{r['flops'] / 1e6:,.0f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m semcodec.evaluation.bench.sr_compare",
        description="super-resolution against bicubic on held-out plates and person crops "
                    "(ST-LPIPS)")  # fmt: skip
    parser.add_argument("--set", action="append", dest="sets", metavar="PATH:START:STOP:EVERY",
                        help=f"a held-out range (default: {' and '.join(DEFAULT_SETS)})")
    parser.add_argument("--factors", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--upscalers", nargs="+", default=list(DEFAULT_UPSCALERS))
    parser.add_argument("--quality", type=int, default=None,
                        help="code the downscaled picture with WebP at this quality first "
                             "(default: not coded)")  # fmt: skip
    parser.add_argument("--min-height", type=int, default=48,
                        help="shortest person cropped, pixels (default 48)")
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's own)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for table.md and rows.json (default: print only)")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    sets = [HeldOutSet.parse(s) for s in (args.sets or DEFAULT_SETS)]
    rows = measure(sets, args.factors, args.upscalers, args.quality, args.models_dir,
                   args.min_height)  # fmt: skip
    text = table(rows)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.md").write_text(text + "\n")
        (args.out / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
