"""The edge's encoding speed on a live level-1 stream (issue 51: what the person-free plate
costs): PETS09-S2L1-full 501-700 encoded as a live stream (length unknown, so refinement
tiles run after the first window), frames per second and the plate's stages.

    python docs/diagnostics/encoder_speed.py [DATA_DIR]     # default ../shared/data
"""

import sys
import time
from pathlib import Path

from semcodec.codec.scaffold.codec import encode_frames
from semcodec.codec.scaffold.levels import level_config
from semcodec.evaluation.data.sequences import load_sequence

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
pixels, info, _ = load_sequence(str(DATA / "PETS09-S2L1-full"), 200, (), start=501)
started = time.perf_counter()
_, _, stats = encode_frames(iter(pixels), level_config(1), info.fps,
                            (pixels.shape[2], pixels.shape[1]), 0)  # fmt: skip
seconds = time.perf_counter() - started
print(f"{len(pixels) / seconds:.2f} frames/s; {stats.plate_tiles} tiles; plate tiles "
      f"{stats.stage_seconds.get('plate_tile', 0.0):.1f} s, refreshes "
      f"{stats.stage_seconds.get('plate_refresh', 0.0):.1f} s, keyframe "
      f"{stats.stage_seconds.get('keyframe', 0.0):.1f} s")
