"""Stream digests of the encoder on the embedded sample: a refactor must keep them (issue 51:
equal before and after the plate's package).

    python docs/diagnostics/encoder_digests.py [FRAMES]     # default 60; with PYTHONPATH at
                                                            # a snapshot to compare commits
"""

import hashlib
import sys

from semcodec.codec.scaffold.codec import encode_frames
from semcodec.codec.scaffold.levels import level_config

try:
    from semcodec.codec.core.sources import open_source, sample_path
except ImportError:  # a commit before the frame readers moved (issue 52)
    from semcodec.edge.sources import open_source, sample_path

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 60
FRAMES = list(open_source(sample_path()).read(1, COUNT))
SIZE = (FRAMES[0].shape[1], FRAMES[0].shape[0])
#: (name, config, frames the clip declares: 0 a live stream)
SETTINGS = [
    ("l1-0.004", level_config(1), COUNT),
    ("l1-0.002", level_config(1, target_bpp=0.002), COUNT),
    ("l1-live", level_config(1), 0),
    ("l1-refine", level_config(1, plate_refine=0.3, keyframe_interval=20), 0),
    ("l2", level_config(2), COUNT),
]
for name, config, declared in SETTINGS:
    header, units, stats = encode_frames(FRAMES, config, 7.0, SIZE, num_frames=declared)
    digest = hashlib.sha256(header.to_bytes())
    for unit in units:
        digest.update(unit.to_bytes())
    print(name, sum(len(u.to_bytes()) for u in units), digest.hexdigest()[:16])
