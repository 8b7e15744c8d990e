# semcodec: `make test` and `make demo` each set up .venv themselves when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-fast lint demo bench-pets bench-scaffold clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

demo: $(STAMP)
	$(BIN)/semcodec-bench run --out runs/demo

# The issue-2 results table: first 150 frames of ../shared/data/PETS09-S2L1.
bench-pets: $(STAMP)
	$(BIN)/semcodec-bench run --data PETS09-S2L1 --frames 150 --codecs x264,x265,raw \
	  --crf 23,28,33,38 --scales 1,0.5 --out runs/pets150

clean:
	rm -rf runs .pytest_cache .ruff_cache

# The issue-3 table: the scaffold codec at levels 0-3 beside x264 medium, same frames.
bench-scaffold: $(STAMP)
	$(BIN)/semcodec-bench run --data PETS09-S2L1 --frames 150 --codecs scaffold,x264 \
	  --crf 23,28,33,38 --lpips-every 5 --out runs/pets150-scaffold
