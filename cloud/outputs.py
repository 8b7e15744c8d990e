"""What the cloud writes for a decoded stream: frames, scaffolds, an overview video.

* ``DIR/frames/000001.png ...``: the reconstructed frames (RGB PNG, 1-based numbers).
* ``DIR/scaffolds.npz``: the decoded scaffolds, exactly as the edge quantized them, per
  frame ``k``: ``seg_k`` ``(h, w)`` uint16 label map, ``flow_k`` ``(h, w, 2)`` float32
  (frame pixels), ``pose_ids_k`` ``(n,)`` int32, ``pose_keypoints_k`` ``(n, 33, 2)``
  float32 (frame pixels), ``pose_visibility_k`` ``(n, 33)`` float32; absent when the level
  does not send that scaffold.
* ``DIR/stream.json``: the stream header (size, rate, level, settings, models) and, per
  frame, whether it was a keyframe and the ids of the people in it.
* ``DIR/overview.mp4``: the scaffolds drawn over the dimmed reconstruction (H.264).
"""

from __future__ import annotations

import io
import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
from semcodec.codec.reconstruct import DecodedFrame

#: BlazePose limbs (pairs of keypoint indices) drawn in the overview.
SKELETON = ((11, 12), (11, 13), (13, 15), (12, 14), (14, 16), (11, 23), (12, 24), (23, 24),
            (23, 25), (25, 27), (24, 26), (26, 28), (0, 11), (0, 12))  # fmt: skip


def id_colour(track_id: int) -> tuple[int, int, int]:
    """A stable, distinct RGB colour for a track id (golden-ratio hue steps)."""
    hue = int((track_id * 0.61803398875 % 1.0) * 180)
    hsv = np.uint8([[[hue, 200, 255]]])
    return tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0])


def render_overview(frame: np.ndarray, decoded: DecodedFrame) -> np.ndarray:
    """The scaffolds of ``decoded`` drawn over a dimmed ``frame``: ``(H, W, 3)`` uint8 RGB.

    Person masks are tinted by id, skeletons drawn as lines, flow as arrows on a sparse grid.
    """
    scaffold = decoded.scaffold
    width, height = decoded.frame_size
    canvas = (frame.astype(np.float32) * 0.55).astype(np.uint8)
    if scaffold.segmentation is not None:
        labels = cv2.resize(scaffold.segmentation.labels, (width, height),
                            interpolation=cv2.INTER_NEAREST)  # fmt: skip
        for track_id in np.unique(labels[labels > 0]):
            region = labels == track_id
            tint = np.array(id_colour(int(track_id)), np.float32)
            canvas[region] = (0.5 * canvas[region] + 0.5 * tint).astype(np.uint8)
    if scaffold.flow is not None:
        field = scaffold.flow.field
        gh, gw = field.shape[:2]
        step = max(1, gw // 24)
        for gy in range(step // 2, gh, step):
            for gx in range(step // 2, gw, step):
                x, y = (gx + 0.5) * width / gw, (gy + 0.5) * height / gh
                dx, dy = field[gy, gx]
                if abs(dx) + abs(dy) < 0.5:
                    continue
                cv2.arrowedLine(canvas, (int(x), int(y)), (int(x - 3 * dx), int(y - 3 * dy)),
                                (255, 255, 255), 1, tipLength=0.3)  # fmt: skip
    for pose in scaffold.poses:
        colour = id_colour(pose.track_id)
        points = pose.keypoints
        for a, b in SKELETON:
            if min(pose.visibility[a], pose.visibility[b]) < 0.3:
                continue
            pa = (int(round(points[a, 0])), int(round(points[a, 1])))
            pb = (int(round(points[b, 0])), int(round(points[b, 1])))
            cv2.line(canvas, pa, pb, colour, 2, cv2.LINE_AA)
    if scaffold.keyframe is not None:
        cv2.putText(canvas, "KEYFRAME", (8, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6,
                    (255, 255, 0), 2)  # fmt: skip
    return canvas


class DecodeOutputs:
    """Writes frames, scaffolds and the overview of a decoded stream into ``out_dir``.

    Use as a context manager; everything is written under ``out_dir`` (created if needed).
    """

    def __init__(self, out_dir: str | Path, header, overview: bool = True):
        self.out_dir = Path(out_dir)
        (self.out_dir / "frames").mkdir(parents=True, exist_ok=True)
        self.header = header
        self.arrays: dict[str, np.ndarray] = {}
        self.frames_info: list[dict] = []
        self._overview = io.BytesIO() if overview else None
        self._container = self._stream = None
        self.count = 0

    def __enter__(self) -> DecodeOutputs:
        return self

    def add(self, decoded: DecodedFrame, image: np.ndarray) -> None:
        number = decoded.scaffold.number
        cv2.imwrite(str(self.out_dir / "frames" / f"{number:06d}.png"), image[..., ::-1])
        self._add_scaffolds(decoded)
        if self._overview is not None:
            self._add_overview(render_overview(image, decoded))
        self.count += 1

    def _add_scaffolds(self, decoded: DecodedFrame) -> None:
        s = decoded.scaffold
        k = f"{s.number:06d}"
        if s.segmentation is not None:
            self.arrays[f"seg_{k}"] = s.segmentation.labels
        if s.flow is not None:
            self.arrays[f"flow_{k}"] = s.flow.field
        if s.poses:
            self.arrays[f"pose_ids_{k}"] = np.array([p.track_id for p in s.poses], np.int32)
            self.arrays[f"pose_keypoints_{k}"] = np.stack([p.keypoints for p in s.poses])
            self.arrays[f"pose_visibility_{k}"] = np.stack([p.visibility for p in s.poses])
        self.frames_info.append({"frame": s.number, "keyframe": s.keyframe is not None,
                                 "people": [int(i) for i in s.tracks.ids]})  # fmt: skip

    def _add_overview(self, picture: np.ndarray) -> None:
        if self._container is None:
            rate = Fraction(self.header.fps_num, self.header.fps_den)
            self._container = av.open(self._overview, mode="w", format="mp4")
            self._stream = self._container.add_stream("libx264", rate=rate)
            self._stream.width, self._stream.height = picture.shape[1], picture.shape[0]
            self._stream.pix_fmt = "yuv420p"
            self._stream.options = {"crf": "23", "preset": "veryfast"}
        frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def __exit__(self, exc_type, *rest) -> None:
        if self._container is not None:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
        if exc_type is not None:
            return
        if self._overview is not None and self.count:
            (self.out_dir / "overview.mp4").write_bytes(self._overview.getvalue())
        np.savez_compressed(self.out_dir / "scaffolds.npz", **self.arrays)
        header = self.header
        info = {"width": header.width, "height": header.height,
                "fps": [header.fps_num, header.fps_den], "level": header.level,
                "settings": dict(header.settings),
                "models": [{"name": m.name, "sha256": m.sha256} for m in header.models],
                "frames": self.frames_info}  # fmt: skip
        (self.out_dir / "stream.json").write_text(json.dumps(info, indent=1))
