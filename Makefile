# mmevt: `make demo` (the main job) and `make test` (the whole suite).
# Both create the environment on first use (tools/bootstrap.sh) and reuse it afterwards.
VENV ?= $(if $(MMEVT_VENV),$(MMEVT_VENV),$(CURDIR)/.venv)
PY := $(VENV)/bin/python
export MMEVT_VENV := $(VENV)

.PHONY: env demo test complexity gpu-deps

env:
	@bash tools/bootstrap.sh

demo: env
	$(PY) tools/demo.py

test: env
	$(PY) -m pytest -q tests

complexity: env
	$(PY) tools/analysis/complexity.py

# Pure-Python packages mmevt needs beyond torch, copied for a GPU machine that has only
# torch (tools/analysis/gpu_session.sh puts .gpu_deps on PYTHONPATH).
GPU_DEPS := mmengine addict yapf yapf_third_party termcolor platformdirs
gpu-deps: env
	@rm -rf .gpu_deps && mkdir -p .gpu_deps
	@site=$$($(PY) -c 'import mmengine, os; print(os.path.dirname(os.path.dirname(mmengine.__file__)))'); \
	for p in $(GPU_DEPS); do cp -r "$$site/$$p" .gpu_deps/; done; \
	find .gpu_deps -name __pycache__ -prune -exec rm -rf {} +; du -sh .gpu_deps
