"""Issue 51: a level-1 result set's x265 and raw rows (docs/results/NAME.json) with level 1's
rows measured now at 0.002 and 0.004 on the same frames (runs/p51/TAG-NAME); writes
runs/p51/TAG-NAME-merged for `semcodec-bench figures` (`level1_result_sets.sh` runs it).

    python docs/diagnostics/level1_result_sets_merge.py TAG NAME
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from semcodec.evaluation.codecs.base import Setting, create_codec


def main(tag: str, name: str) -> None:
    old = json.loads(Path(f"docs/results/{name}.json").read_text())
    new_dir, out = Path(f"runs/p51/{tag}-{name}"), Path(f"runs/p51/{tag}-{name}-merged")
    rows = []
    for row in old["rows"]:
        if row["codec"] == "scaffold":
            continue
        row = dict(row)
        if row["codec"] != "raw":
            row["curve"] = create_codec(row["codec"]).curve_of(Setting.parse(row["setting"]))
        rows.append(row)
    lines = (new_dir / "results.jsonl").read_text().splitlines()
    new = [json.loads(line) for line in lines if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as fh:
        for row in rows + new:
            fh.write(json.dumps(row) + "\n")
    commands = [c for c in old["commands"] if "x265" in c]
    commands.append(f"(x265 and raw rows from docs/results/{name}.json)")
    commands += [c for c in (new_dir / "commands.txt").read_text().splitlines() if c.strip()]
    (out / "commands.txt").write_text("\n".join(commands) + "\n")
    print(name, len(rows), "x265/raw rows,", len(new), "level-1 rows")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
