# mmevt: `make demo` (the main job) and `make test` (the whole suite).
# Both create the environment on first use (tools/bootstrap.sh) and reuse it afterwards.
VENV ?= $(if $(MMEVT_VENV),$(MMEVT_VENV),$(CURDIR)/.venv)
PY := $(VENV)/bin/python
export MMEVT_VENV := $(VENV)

.PHONY: env demo test complexity

env:
	@bash tools/bootstrap.sh

demo: env
	$(PY) tools/demo.py

test: env
	$(PY) -m pytest -q tests

complexity: env
	$(PY) tools/analysis/complexity.py
