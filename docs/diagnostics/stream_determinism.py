"""Is the level-1 encoder deterministic? Codes the embedded sample's first 6 frames at level 1,
0.5 BPP, in memory, and prints the units' sha256 (run it twice: the two lines must agree).

    python docs/diagnostics/stream_determinism.py 1   # appearance_inter and appearance_plate
    python docs/diagnostics/stream_determinism.py 0   # without either (level 1 has both)

``tests/codec/test_inter_refs.py`` runs it under three ``MALLOC_PERTURB_`` values.
"""

import hashlib
import sys

from semcodec.codec.core.sources import open_source, sample_path
from semcodec.codec.scaffold.codec import encode_frames
from semcodec.codec.scaffold.levels import level_config

frames = open_source(sample_path()).read(start=1, count=6)
inter = sys.argv[1] == "1"
config = level_config(1, target_bpp=0.5, appearance_inter=inter, appearance_plate=inter)
_, units, _ = encode_frames(frames, config, 7.0, (384, 288), num_frames=6)
print(sys.argv[1], hashlib.sha256(b"".join(u.to_bytes() for u in units)).hexdigest()[:12])
