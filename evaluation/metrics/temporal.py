"""Temporal consistency of a decoded video, measured against the original's own motion.

Two figures, both in 8-bit luma levels (BT.601 Y of :func:`evaluation.metrics.luma_bt601`),
lower is better, 0 for a video identical to the original:

* ``flicker``: mean over frame pairs of ``|ΔD - ΔO|``, where ``Δ`` is the change of a frame's
  mean luma from the frame before (D decoded, O original): brightness pumping that the
  original does not have.
* ``twe`` (temporal warping error, excess over the original): each decoded frame t-1 is
  warped to frame t with the optical flow of the *original* (OpenCV DIS), and the mean
  absolute luma error against decoded frame t is taken over the pixels where the same warp
  predicts the original well (error ≤ :data:`CONSISTENT_LEVELS`: not occluded, flow
  trusted); the original's own error on those pixels is subtracted. A decoder that freezes,
  smears or jitters what moves scores high; one that removes the original's sensor noise
  can score below 0 (smoother than the original).

Both are computed at half resolution (area-averaged), which keeps the cost at a few
milliseconds a frame and ignores pixel-level noise.
"""

from __future__ import annotations

import cv2
import numpy as np

#: Pixels whose warped original differs from the original by more than this (luma levels)
#: are occluded or badly tracked and left out of the warping error.
CONSISTENT_LEVELS = 10.0


def _luma_half(frames: np.ndarray) -> np.ndarray:
    """``(T, H/2, W/2)`` float32 BT.601 luma of ``(T, H, W, 3)`` uint8 RGB frames."""
    from semcodec.evaluation.metrics.image import luma_bt601

    h, w = frames.shape[1:3]
    size = (max(1, w // 2), max(1, h // 2))
    return np.stack([cv2.resize(luma_bt601(f).astype(np.float32), size,
                                interpolation=cv2.INTER_AREA) for f in frames])  # one at a time


def _warp_previous(previous: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """``previous`` sampled at ``p + flow(p)`` (backward flow), bilinear, border replicated."""
    h, w = previous.shape
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return cv2.remap(previous, xs + flow[..., 0], ys + flow[..., 1], cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REPLICATE)  # fmt: skip


def temporal_consistency(reference: np.ndarray, decoded: np.ndarray) -> dict[str, float | None]:
    """``flicker`` and ``twe`` of ``decoded`` against ``reference`` (see the module text).

    Args:
        reference, decoded: ``(T, H, W, 3)`` uint8 RGB of the same shape.

    Returns:
        Both values in luma levels (None for fewer than 2 frames).
    """
    if reference.shape != decoded.shape:
        raise ValueError(f"reference {reference.shape} and decoded {decoded.shape} differ")
    if len(reference) < 2:
        return {"flicker": None, "twe": None}
    ref, dec = _luma_half(reference), _luma_half(decoded)
    ref_means, dec_means = ref.mean(axis=(1, 2)), dec.mean(axis=(1, 2))
    flicker = float(np.abs(np.diff(dec_means) - np.diff(ref_means)).mean())
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_FAST)
    excess = []
    for t in range(1, len(ref)):
        gray = [np.clip(f, 0, 255).astype(np.uint8) for f in (ref[t], ref[t - 1])]
        flow = dis.calc(gray[0], gray[1], None)  # ref[t](p) ~ ref[t-1](p + flow(p))
        ref_error = np.abs(_warp_previous(ref[t - 1], flow) - ref[t])
        trusted = ref_error <= CONSISTENT_LEVELS
        if not trusted.any():
            continue
        dec_error = np.abs(_warp_previous(dec[t - 1], flow) - dec[t])
        excess.append(float(dec_error[trusted].mean() - ref_error[trusted].mean()))
    return {"flicker": flicker, "twe": float(np.mean(excess)) if excess else None}
