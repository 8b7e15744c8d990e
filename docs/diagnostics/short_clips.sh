#!/bin/bash
# Issue 51's short-clip protocol: cold, the first 60 frames of PETS09-S2L1-full 501-795 and
# of the same zoomed 2x, TUD-Stadtmitte 91-179 and TUD at half size; level 1 (the default
# decoder) at 0.002 and 0.004 against the level-1 result sets' x265 grid, in the same run.
#
#   docs/diagnostics/short_clips.sh x265 SNAPSHOT [cams]    # the x265 and raw cells, once
#   SETTINGS='scaffold:...' docs/diagnostics/short_clips.sh TAG SNAPSHOT [cams]
#
# SNAPSHOT: a PYTHONPATH holding the `semcodec` package of the commit to measure (e.g.
# `mkdir -p S/semcodec && git archive COMMIT | tar -x -C S/semcodec`); cams: pets tud zoom
# half (default all). Writes runs/p51/TAG-CAM/ (a `semcodec-bench run` and, for a scaffold
# tag, its saving factors in fig/t.md); the x265 rows are copied from runs/p51/x265-CAM.
# The table: python3 docs/diagnostics/short_clips_table.py.
set -e
tag=$1; snap=$2; shift 2
cams=${*:-pets tud zoom half}
S=${SETTINGS:-'scaffold:level=1,target_bpp=0.002;level=1'}
X='x265:crf=40;crf=45;crf=51;qp=45,ipratio=8;qp=48,ipratio=8;qp=51,ipratio=8;qp=48,ipratio=16;qp=51,ipratio=16;qp=48,ipratio=8,scale=0.75;qp=51,ipratio=8,scale=0.75;qp=51,ipratio=16,scale=0.5;crf=45,scale=0.5'
C='--lpips-every 4 --moda-every 2 --metrics person,moda,st_lpips --data-dir ../shared/data --no-progress'
mkdir -p runs/p51
for cam in $cams; do
  case $cam in
    pets) D='--data PETS09-S2L1-full --start 501 --frames 60';;
    zoom) D='--data PETS09-S2L1-full --start 501 --frames 60 --camera-transform zoom=2,x=0.5,y=0.55';;
    tud) D='--data TUD-Stadtmitte --start 91 --frames 89';;
    half) D='--data TUD-Stadtmitte --start 91 --frames 89 --camera-transform scale=0.5';;
    *) echo "unknown camera $cam (pets tud zoom half)" >&2; exit 2;;
  esac
  out=runs/p51/$tag-$cam
  if [ "$tag" = x265 ]; then
    # shellcheck disable=SC2086
    PYTHONPATH=$snap nice .venv/bin/semcodec-bench run $D $C --codecs x265,raw --settings "$X" \
      --out "$out" > "$out.log" 2>&1
  else
    mkdir -p "$out"
    grep -h '"codec": "\(x265\|raw\)"' "runs/p51/x265-$cam/results.jsonl" > "$out/results.jsonl"
    # shellcheck disable=SC2086
    PYTHONPATH=$snap nice .venv/bin/semcodec-bench run $D $C --codecs scaffold,x265,raw \
      --settings "$X" --settings "$S" --out "$out" > "$out.log" 2>&1
    PYTHONPATH=$snap .venv/bin/semcodec-bench figures --name t --against 'scaffold:level=1' \
      "$out" --results "$out/fig" >> "$out.log" 2>&1 || true
  fi
done
