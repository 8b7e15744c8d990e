"""``warp``: the deterministic reference reconstruction.

For each decoded frame:

* **keyframe**: the decoded picture is the output. Its people (from the segmentation of the
  same frame) are inpainted away (OpenCV Telea) to get a *background plate*, and each
  person's mean colour is remembered.
* **other frames**: the previous output is warped by the decoded flow (when the level sends
  flow); where the decoded segmentation says "person" the warped picture is kept, elsewhere
  the background plate is shown, so the static scene never drifts. A person whose warped
  pixels look like the background plate (someone who entered after the keyframe, or whose
  appearance was lost) and every person at levels without flow are drawn as a silhouette in
  their remembered colour (grey for people the keyframe did not show). Without segmentation,
  the warped picture is the output.

Everything is a fixed function of the decoded scaffolds, so two runs give the same frames.
"""

from __future__ import annotations

import cv2
import numpy as np
from semcodec.codec.reconstruct import (
    DecodedFrame,
    ReconstructionError,
    Reconstructor,
    register_reconstructor,
)
from semcodec.codec.scaffold.flow import warp
from semcodec.codec.scaffold.types import Segmentation

UNKNOWN_PERSON_RGB = np.array([128, 128, 128], np.float32)
#: Mean absolute difference (0..255) under which a person's warped pixels count as background.
ABSENT_DIFFERENCE = 12.0


def person_alpha(segmentation: Segmentation, feather: bool = True) -> np.ndarray:
    """``(H, W)`` float32 0..1 person coverage of the frame from a label map.

    The map is enlarged with bilinear filtering of the binary mask, which feathers the
    blocky edges of a coarse map (``feather=False``: nearest neighbour, hard edges).
    """
    width, height = segmentation.frame_size
    mask = (segmentation.labels > 0).astype(np.float32)
    interp = cv2.INTER_LINEAR if feather else cv2.INTER_NEAREST
    return cv2.resize(mask, (width, height), interpolation=interp)


def label_image(segmentation: Segmentation) -> np.ndarray:
    """``(H, W)`` uint16 track ids at frame resolution (nearest neighbour)."""
    width, height = segmentation.frame_size
    return cv2.resize(segmentation.labels, (width, height), interpolation=cv2.INTER_NEAREST)


@register_reconstructor("warp")
class WarpReconstructor(Reconstructor):
    """Keyframe + flow warping + mask compositing over an inpainted background plate."""

    def __init__(self, inpaint_radius: int = 5):
        self.inpaint_radius = inpaint_radius
        self.reset()

    def reset(self) -> None:
        self._background: np.ndarray | None = None
        self._previous: np.ndarray | None = None
        self._colours: dict[int, np.ndarray] = {}

    def reconstruct(self, frame: DecodedFrame) -> np.ndarray:
        scaffold = frame.scaffold
        if frame.keyframe_image is not None:
            return self._start(frame)
        if self._previous is None or self._background is None:
            raise ReconstructionError(
                f"frame {scaffold.number}: the stream must start with a keyframe"
            )
        moved = warp(self._previous, scaffold.flow) if scaffold.flow is not None else None
        if scaffold.segmentation is None:
            out = moved if moved is not None else self._previous.copy()
        else:
            out = self._composite(scaffold.segmentation, moved)
        self._previous = out
        return out

    def _start(self, frame: DecodedFrame) -> np.ndarray:
        image = np.ascontiguousarray(frame.keyframe_image)
        seg = frame.scaffold.segmentation
        self._colours = {}
        if seg is not None and (seg.labels > 0).any():
            labels = label_image(seg)
            for track_id in np.unique(labels[labels > 0]):
                self._colours[int(track_id)] = image[labels == track_id].mean(axis=0)
            holes = cv2.dilate((labels > 0).astype(np.uint8), np.ones((7, 7), np.uint8))
            self._background = cv2.inpaint(image, holes, self.inpaint_radius, cv2.INPAINT_TELEA)
        else:
            self._background = image.copy()
        self._previous = image.copy()
        return image.copy()

    def _composite(self, seg: Segmentation, moved: np.ndarray | None) -> np.ndarray:
        alpha = person_alpha(seg)[..., None]
        background = self._background.astype(np.float32)
        people = self._people(seg, moved, background)
        out = alpha * people + (1.0 - alpha) * background
        return np.clip(out + 0.5, 0, 255).astype(np.uint8)

    def _people(self, seg: Segmentation, moved: np.ndarray | None, background: np.ndarray):
        """The picture to show under the person mask: warped pixels or silhouettes."""
        labels = label_image(seg)
        canvas = moved.astype(np.float32) if moved is not None else background.copy()
        for track_id in np.unique(labels[labels > 0]):
            region = labels == track_id
            if moved is not None:
                difference = np.abs(canvas[region] - background[region]).mean()
                if difference >= ABSENT_DIFFERENCE:
                    continue  # the warped picture shows this person
            canvas[region] = self._colours.get(int(track_id), UNKNOWN_PERSON_RGB)
        return canvas
