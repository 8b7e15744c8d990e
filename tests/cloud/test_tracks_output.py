"""Tracks from level 1 (issue 40): ``cloud-decoder decode`` writes the decoded tracked boxes
as ``tracks.txt`` (MOT challenge format) and ``tracks.json``, equal to the boxes the stream
carries; streams without a box stream write none; a failed decode leaves none."""

from __future__ import annotations

import json

import numpy as np
from semc_streams import _boxes, stream_bytes, synthetic_config, synthetic_stream

from semcodec.cloud.cli import main as cloud_main
from semcodec.cloud.outputs import track_entry, track_rows
from semcodec.codec.core.types import Tracks
from semcodec.codec.entropy.boxes import BoxCoder

SIZE, COUNT = (96, 64), 4


def test_track_rows_known_answer():
    tracks = Tracks(np.array([[10, 20, 30, 60], [1.5, 2.25, 4, 8]], np.float32),
                    np.ones(2, np.float32), np.array([7, 9], np.int32))  # fmt: skip
    assert track_rows(3, tracks) == ["3,7,10.00,20.00,20.00,40.00,1,-1,-1,-1",
                                     "3,9,1.50,2.25,2.50,5.75,1,-1,-1,-1"]  # fmt: skip
    assert track_entry(3, tracks) == {"frame": 3, "ids": [7, 9],
                                      "boxes": [[10.0, 20.0, 30.0, 60.0], [1.5, 2.25, 4.0, 8.0]]}
    assert track_rows(1, Tracks.empty()) == []


def _expected_lines() -> list[str]:
    """The synthetic stream's boxes as its box coder quantizes them, formatted here (not
    with track_rows): ``frame,id,x,y,w,h,1,-1,-1,-1``."""
    coder = BoxCoder(synthetic_config(1).box_step_px, SIZE)
    lines = []
    for t in range(COUNT):
        rects = np.array([(x, y, x + w, y + h) for tt, (x, y, w, h) in _boxes(COUNT, SIZE)
                          if tt == t], np.float32)  # fmt: skip
        sent = coder.quantize(Tracks(rects, np.ones(2, np.float32), np.array([1, 2])))
        for (x1, y1, x2, y2), i in zip(sent.boxes.tolist(), sent.ids.tolist(), strict=True):
            lines.append(f"{t + 1},{i},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},1,-1,-1,-1")
    return lines


def test_decode_writes_the_streams_boxes_as_mot_tracks(tmp_path):
    semc = tmp_path / "l1.semc"
    semc.write_bytes(stream_bytes(*synthetic_stream(level=1, count=COUNT, size=SIZE)))
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "-q"]) == 0
    lines = (out / "tracks.txt").read_text().splitlines()
    assert lines == _expected_lines() and len(lines) == 2 * COUNT
    doc = json.loads((out / "tracks.json").read_text())
    assert (doc["width"], doc["height"], doc["fps"], doc["format"]) == (96, 64, 7.0, "x1,y1,x2,y2")
    assert [f["frame"] for f in doc["frames"]] == [1, 2, 3, 4]
    scaffolds = np.load(out / "scaffolds.npz")
    for entry in doc["frames"]:  # the same boxes as the scaffolds, id by id
        k = f"{entry['frame']:06d}"
        assert entry["ids"] == scaffolds[f"box_ids_{k}"].tolist()
        np.testing.assert_allclose(entry["boxes"], scaffolds[f"boxes_{k}"], atol=0.005)


def test_streams_without_boxes_write_no_tracks_and_failures_leave_none(tmp_path):
    semc = tmp_path / "l2.semc"
    semc.write_bytes(stream_bytes(*synthetic_stream(level=2, count=3)))
    out = tmp_path / "out"
    assert cloud_main(["decode", str(semc), "-o", str(out), "--no-overview", "-q"]) == 0
    assert not (out / "tracks.txt").exists() and not (out / "tracks.json").exists()
    data = stream_bytes(*synthetic_stream(level=1, count=COUNT, size=SIZE))
    cut = tmp_path / "cut.semc"
    cut.write_bytes(data[:-3])  # inside the END unit
    assert cloud_main(["decode", str(cut), "-o", str(tmp_path / "o2"), "-q"]) == 2
    assert not (tmp_path / "o2").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
