"""Peak memory and time of the plate's upscalers on a 4K frame (issue 38's memory bound).

Usage: ``python docs/diagnostics/sr_4k_memory.py [NAME ...]`` (default: bicubic,
esrgan-slim-plates, esrgan-medium-plates). Each upscaler runs in a fresh process that brings a
1920x1080 plate (a PETS frame, resized) to 3840x2160; one JSON line each: the process's peak
resident memory before the upscaler was made and after the upscale (MiB, ``ru_maxrss``),
seconds, and the network FLOPs the decoder counts."""
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
from semcodec.codec.core.frames import resize_to
from semcodec.codec.reconstruct.superres import create_upscaler
from semcodec.evaluation.data.sequences import load_sequence

frames, _, _ = load_sequence(sys.argv[1], 1)
plate = resize_to(frames[:1], 1920, 1080)[0]
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak()
upscaler = create_upscaler(sys.argv[2])
start = time.perf_counter()
out = upscaler(plate, (3840, 2160))
seconds = time.perf_counter() - start
assert out.shape == (2160, 3840, 3)
print(json.dumps({"upscaler": sys.argv[2], "plate": "1920x1080", "frame": "3840x2160",
                  "peak_mib_before": round(before), "peak_mib_after": round(peak()),
                  "seconds": round(seconds, 1),
                  "network_flops": float(upscaler.flops((1920, 1080)))}))
"""

names = sys.argv[1:] or ["bicubic", "esrgan-slim-plates", "esrgan-medium-plates"]
data = "../shared/data/PETS09-S2L1-full"
for name in names:
    done = subprocess.run([sys.executable, "-c", CHILD, data, name], capture_output=True,
                          text=True, check=False)  # fmt: skip
    print(done.stdout.strip() or json.dumps({"upscaler": name, "error": done.stderr[-400:]}),
          flush=True)
