"""Side-by-side pictures: the original and several codecs' reconstructions of chosen frames.

``semcodec-bench sidebyside --data SEQ --start K --frames N --show CODEC:SETTING ... --at
F1,F2,F3 -o picture.png`` encodes the clip with each ``CODEC:SETTING`` (exactly as
``semcodec-bench run`` does), decodes it, and writes one row per chosen frame: the original,
then each reconstruction, every panel labelled with its codec, setting and the BPP the whole
clip took. Panels are scaled to ``--width`` pixels (PNG, or JPEG for a ``.jpg`` name).
With ``--protocol steady`` every codec codes from the sequence's first frame without a break
(as ``run --protocol steady`` does) and the labels give the BPP of the shown clip's frames
alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

from semcodec.evaluation.bench.grid import encode_measured
from semcodec.evaluation.codecs.base import Setting, bytes_of_frames, create_codec


def _label(panel: np.ndarray, text: str) -> np.ndarray:
    """``panel`` with ``text`` on a dark band along its top (white, antialiased)."""
    out = panel.copy()
    band = max(14, panel.shape[0] // 22)
    out[:band] = (out[:band].astype(np.float32) * 0.35).astype(np.uint8)
    scale = min(band / 26, (panel.shape[1] - 8) / (20 * max(len(text), 1)))  # fits the width
    cv2.putText(out, text, (4, int(band * 0.75)), cv2.FONT_HERSHEY_SIMPLEX, scale,
                (255, 255, 255), 1, cv2.LINE_AA)  # fmt: skip
    return out


def reconstructions(pixels: np.ndarray, fps: float, shows: Sequence[tuple[str, str]],
                    warmup: int = 0,
                    options: Mapping[str, Mapping[str, object]] | None = None,
                    ) -> list[tuple[str, np.ndarray]]:  # fmt: skip
    """``[(label, decoded (T - warmup, H, W, 3) uint8)]`` of ``pixels`` ``(T, H, W, 3)`` for
    each ``(codec, setting)``; the label names the codec, setting and the BPP, from the bytes
    written, of the frames after the first ``warmup`` (coded, not shown, not charged: the
    steady-state protocol). ``options``: each codec's constructor options by name."""
    out = []
    t, h, w, _ = pixels.shape
    for name, text in shows:
        codec = create_codec(name, **dict((options or {}).get(name, {})))
        setting = Setting.parse(text)
        codec.check_setting(setting)
        encoded = encode_measured(codec, pixels, setting, fps, warmup)
        decoded = codec.decode(encoded)[warmup:]
        size = sum(bytes_of_frames(encoded, warmup).values()) if warmup else encoded.num_bytes
        bpp = 8 * size / (w * h * (t - warmup))
        out.append((f"{name} {setting}  {bpp:.4f} bpp", decoded))
    return out


def equal_rate_baseline(rows: Sequence[Mapping], codec: str, setting: str,
                        baseline: str = "x265", tolerance: float = 0.15,
                        metric: str = "st_lpips") -> dict | None:  # fmt: skip
    """The ``baseline`` row to show beside ``codec:setting``'s: among the baseline's rows of
    the same sequence and protocol whose BPP is within ``tolerance`` of that row's, the best
    by ``metric`` (lower is better: the strongest baseline a user would pick at that rate);
    when none is that close, the one nearest in log-BPP. None without such rows."""
    import math

    target = next((r for r in rows if r.get("codec") == codec
                   and str(r.get("setting")) == setting and r.get("bpp")), None)  # fmt: skip
    if target is None:
        return None
    same = [r for r in rows if r.get("codec") == baseline and r.get("bpp")
            and r.get("sequence") == target.get("sequence")
            and r.get("protocol") == target.get("protocol")]  # fmt: skip
    if not same:
        return None
    close = [r for r in same if abs(r["bpp"] / target["bpp"] - 1) <= tolerance
             and r.get(metric) is not None]  # fmt: skip
    if close:
        return min(close, key=lambda r: r[metric])
    return min(same, key=lambda r: abs(math.log(r["bpp"] / target["bpp"])))


def side_by_side(pixels: np.ndarray, fps: float, shows: Sequence[tuple[str, str]],
                 at: Sequence[int], width: int = 480, warmup: int = 0,
                 options: Mapping[str, Mapping[str, object]] | None = None,
                 ) -> np.ndarray:  # fmt: skip
    """The picture: one row per 1-based frame of ``at`` (counted after the ``warmup``
    frames), the original then each codec (:func:`reconstructions`).

    Raises:
        ValueError: a frame of ``at`` is outside the clip.
    """
    t = len(pixels) - warmup
    bad = [k for k in at if not 1 <= k <= t]
    if bad:
        raise ValueError(f"frames {bad} are outside the clip of {t} frames")
    panels = [("original", pixels[warmup:]),
              *reconstructions(pixels, fps, shows, warmup, options)]  # fmt: skip
    height = round(pixels.shape[1] * width / pixels.shape[2])
    rows = []
    for k in at:
        row = [_label(cv2.resize(frames[k - 1], (width, height), interpolation=cv2.INTER_AREA),
                      f"{label}  (frame {k})" if label == "original" else label)
               for label, frames in panels]  # fmt: skip
        rows.append(np.concatenate(row, 1))
    return np.concatenate(rows, 0)


def write_png(picture: np.ndarray, path: str | Path) -> Path:
    """Writes ``(H, W, 3)`` uint8 RGB as a PNG, or a JPEG (quality 85) when ``path`` ends in
    ``.jpg``/``.jpeg`` (through a temporary name, then renamed)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial{path.suffix or '.png'}")
    options = [cv2.IMWRITE_JPEG_QUALITY, 85] if path.suffix.lower() in (".jpg", ".jpeg") else []
    if not cv2.imwrite(str(tmp), cv2.cvtColor(picture, cv2.COLOR_RGB2BGR), options):
        raise OSError(f"cannot write {path}")
    tmp.replace(path)
    return path
