"""The short-clip protocol's table (issue 51): per camera and target, the runs tagged BEFORE
and AFTER by docs/diagnostics/short_clips.sh -- the AFTER run's default and its
``priority=people`` rows -- with the saving factors of each run's fig/t.md.

    python3 docs/diagnostics/short_clips_table.py [BEFORE AFTER]   # default: base final3
"""

import json
import re
import sys
from pathlib import Path

BEFORE, AFTER = sys.argv[1:3] if len(sys.argv) > 2 else ("base", "final3")
CAMERAS = [("pets", "PETS 501-560"), ("tud", "TUD 91-179"),
           ("zoom", "PETS 501-560 zoomed 2x"), ("half", "TUD 91-179 half size")]  # fmt: skip
TARGETS = [("0.002", "level=1,target_bpp=0.002"), ("0.004", "level=1")]
HEAD = ("| camera | target | run | bpp/target | ST-LPIPS | person ST-LPIPS | MODA | saving: "
        "whole / person / MODA | plate B | refs B | silhouette frames |")


def load(run: Path) -> tuple[dict, dict]:
    """The run's scaffold rows by setting, and their saving factors (``?`` when missing)."""
    rows, savings = {}, {}
    if (run / "results.jsonl").exists():
        for line in (run / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row["codec"] == "scaffold":
                rows[row["setting"]] = row
    if (run / "fig" / "t.md").exists():
        text = (run / "fig" / "t.md").read_text()
        block = text.split("| codec | setting | bpp | saving:")[1].split("\n\n")[0]
        for line in block.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            savings[cells[1]] = [re.sub(r" \(x265.*\)", "", c) for c in cells[3:6]]
    return rows, savings


def line(camera: str, target: str, label: str, row: dict, saving: list) -> str:
    cells = [camera, target, label, f"{row['bpp'] / row['target_bpp']:.2f}",
             f"{row['st_lpips']:.3f}", f"{row['person_st_lpips']:.3f}", f"{row['moda']:.3f}",
             " / ".join(saving), str(row.get("bytes_keyframe", 0)),
             str(row.get("bytes_appearance", 0)), str(row.get("silhouettes"))]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


print(HEAD)
print("|" + "---|" * 11)
for cam, name in CAMERAS:
    before, after = load(Path(f"runs/p51/{BEFORE}-{cam}")), load(Path(f"runs/p51/{AFTER}-{cam}"))
    for target, setting in TARGETS:
        for (rows, savings), label, key in ((before, "before", setting),
                                            (after, "default", setting),
                                            (after, "people", setting + ",priority=people")):
            if key in rows:
                print(line(name, target, label, rows[key], savings.get(key, ["?"] * 3)))
