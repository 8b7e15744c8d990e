"""Experiment (issue 40): detect mode's rate control with a tie rule that prefers the finer
bottleneck (smaller beta) over more bytes among settings whose start-up agreements tie, at
the start and when the controller changes beta; no baselines.

    python docs/diagnostics/tie_rule_finer_beta.py TUD-Stadtmitte 91 89 OUT 10 20 40 100
"""
import sys
from pathlib import Path

import semcodec.codec.task.ratecontrol as rc
import semcodec.codec.task.stream as st
from semcodec.evaluation.bench.task import TaskBenchConfig, run_task_bench

orig = rc.choose_setting

def choose(points, target, floor=rc.DEFAULT_MIN_AGREEMENT):
    base = orig(points, target, floor)
    if base.status != "ok":
        return base
    fits = [p for p in points if p.agreement >= floor and p.bytes_per_frame <= target]
    best = max(p.agreement for p in fits)
    tied = [p for p in fits if p.agreement >= best - rc.AGREEMENT_TIE]
    chosen = max(tied, key=lambda p: (-p.setting.beta, p.bytes_per_frame, p.agreement))
    return rc.RateChoice(chosen, base.rungs, "ok", base.target_bytes_per_frame, base.min_agreement)

def best(self, indices):
    top = max(self.rungs[i].agreement for i in indices)
    return max((i for i in indices if self.rungs[i].agreement >= top - rc.AGREEMENT_TIE),
               key=lambda i: (-self.rungs[i].setting.beta, self.rungs[i].bytes_per_frame))

st.choose_setting = choose
rc.DetectRateController._best = best
seq, start, frames, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
targets = tuple(float(t) for t in sys.argv[5:])
rows = run_task_bench(TaskBenchConfig(seq, start, frames, (), out, baselines=(), threads=2,
                                      targets_kbps=targets))
for r in rows:
    if r.get("curve") in ("raw", "features-target"):
        print(r["setting"][:14], r.get("rate_ratio"), r.get("beta"), r.get("betas_used"), r["moda"])
