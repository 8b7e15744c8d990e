#!/bin/bash
# Issue 51's "every level-1 result set" line: level 1 at 0.002 and 0.004 BPP on each level-1
# result set's frames (cold and steady), merged with that set's x265 and raw rows from
# docs/results/NAME.json (the strongest baselines, the same frames), then the saving factors.
#
#   [SETTINGS='scaffold:...'] docs/diagnostics/level1_result_sets.sh TAG SNAPSHOT [NAME...]
#
# SNAPSHOT: a PYTHONPATH holding the `semcodec` package to measure; NAME: result sets (default
# all seven); SETTINGS: the level-1 settings (default the two targets with the default
# decoder; decoder keys added to a target share its encoding); METRICS: the metrics (default
# person,moda,st_lpips; add pose for PCK@0.1). Writes runs/p51/TAG-NAME (the
# run), TAG-NAME-merged and its fig/t.md (savings).
set -e
tag=$1; snap=$2; shift 2
names=${*:-level1-cold-tud level1-cold-tud-half level1-steady-tud level1-cold-pets level1-cold-pets-zoom2 level1-steady-pets level1-steady-pets-zoom2}
S=${SETTINGS:-'scaffold:level=1,target_bpp=0.002;level=1'}
C="--codecs scaffold --lpips-every 8 --moda-every 2 --data-dir ../shared/data --no-progress --metrics ${METRICS:-person,moda,st_lpips}"
here=$(dirname "$0")
mkdir -p runs/p51
for name in $names; do
  case $name in
    *tud*) D='--data TUD-Stadtmitte --start 91 --frames 89';;
    *) D='--data PETS09-S2L1-full --start 501 --frames 295';;
  esac
  case $name in *half) D="$D --camera-transform scale=0.5";; *zoom2) D="$D --camera-transform zoom=2,x=0.5,y=0.55";; esac
  case $name in *steady*) D="$D --protocol steady";; esac
  out=runs/p51/$tag-$name
  # shellcheck disable=SC2086
  PYTHONPATH=$snap nice .venv/bin/semcodec-bench run $D $C --settings "$S" --out "$out" > "$out.log" 2>&1
  PYTHONPATH=$snap .venv/bin/python "$here/level1_result_sets_merge.py" "$tag" "$name"
  PYTHONPATH=$snap .venv/bin/semcodec-bench figures --name t --against 'scaffold:level=1' \
    "$out-merged" --results "$out-merged/fig" >> "$out.log" 2>&1 || true
done
