# mmevt: `make demo` (the main job) and `make test` (the whole suite, upstream OpenMMLab).
# Each target creates its environment on first use (tools/bootstrap.sh) and reuses it after.
# `make test-fork` runs the whole suite on the onedl fork (its own venv, .venv-fork);
# `make test-fork-ci` the subset CI runs there (docs/stacks.md).
VENV ?= $(if $(MMEVT_VENV),$(MMEVT_VENV),$(CURDIR)/.venv)
FORK_VENV ?= $(CURDIR)/.venv-fork
PY := $(VENV)/bin/python
FORK_PY := $(FORK_VENV)/bin/python
export MMEVT_VENV := $(VENV)
# pytest-xdist processes for the suite: the suite's in-process work is mostly one thread
# (measured: user time ~= wall time), so two workers use a 2-core machine's second core;
# each worker's torch gets its share of the cores (tests/conftest.py). 0 runs in-process.
TEST_WORKERS ?= 2

# What differs between the stacks, in at most 15 minutes on 2 cores: the environment and
# safe-loading tests, what import mmevt changes for other code (checkpoints, writes,
# registries), every config parsed and built, a segmentor and a classifier trained and tested
# (test_seg, test_cls; no test_det), one det / seg / cls config each trained and tested by the
# toolkits' own tools (test_toolkit_tools), the swap on the fork's own zoo, the launchers on
# the tests' real Slurm, a preempted run resumed, mmrotate (the fork's own onedl-mmrotate).
FORK_CI_TESTS := tests/test_environments.py tests/test_stack.py tests/test_configs.py \
	tests/test_seg.py tests/test_cls.py tests/test_swap.py tests/test_checkpoint_safety.py \
	tests/test_atomic_writes.py tests/test_registry.py tests/test_toolkit_tools.py \
	tests/test_cluster.py tests/test_preemption.py tests/test_rotated.py
# the compile switch once on the fork (classification: a paramwise_cfg, so the
# plain-param-groups patch on onedl-mmengine), not for every family
FORK_CI_DESELECT := \
	--deselect 'tests/test_toolkit_tools.py::test_compile_switch_through_the_toolkits_own_tools[mmdet]' \
	--deselect 'tests/test_toolkit_tools.py::test_compile_switch_through_the_toolkits_own_tools[mmseg]' \
	--deselect tests/test_toolkit_tools.py::test_compile_switch_trains_the_other_families

# The cluster tests (tests/test_cluster.py) start a real Slurm: `make slurm` installs Debian's
# slurm-wlm and munge as root (tools/install_slurm.sh; nothing is configured or started). They
# form the pytest-xdist group `slurm`: --dist loadgroup runs them in one worker, one cluster.
PYTEST_DIST := --dist loadgroup

.PHONY: env env-fork slurm browser demo test test-fork test-fork-ci docs complexity gpu-deps gpu-rehearsal

env:
	@bash tools/bootstrap.sh

env-fork:
	@MMEVT_STACK=fork MMEVT_VENV=$(FORK_VENV) bash tools/bootstrap.sh

slurm:
	@bash tools/install_slurm.sh

# Debian's chromium for the docs site's browser check (tests/test_docs_site.py), as root
browser:
	@bash tools/install_browser.sh

demo: env
	$(PY) tools/demo.py

test: env slurm browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) $(PYTEST_DIST) tests

test-fork: env-fork slurm browser
	MMEVT_VENV=$(FORK_VENV) $(FORK_PY) -m pytest -q -n $(TEST_WORKERS) $(PYTEST_DIST) tests

test-fork-ci: env-fork slurm
	MMEVT_VENV=$(FORK_VENV) $(FORK_PY) -m pytest -q -n $(TEST_WORKERS) $(PYTEST_DIST) $(FORK_CI_TESTS) \
		$(FORK_CI_DESELECT)

# The documentation site (Sphinx + myst-parser, docs/conf.py), warnings as errors; the model
# zoo's pages are checked up to date first (tools/misc/make_metafile.py writes them).
docs: env
	$(PY) tools/misc/make_metafile.py --check
	$(PY) -m sphinx -b html -W --keep-going -q -d docs/_build/doctrees docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

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

# The GPU session rehearsed on the CPU, on the GPU machine's stack (Python 3.12, torch 2.11 +
# timm, no mmcv / mmpretrain; requirements/gpu-rehearsal.txt): its own venv, .venv-gpu
# (about 5 GB: PyPI's torch is the CUDA build), and mmengine from .gpu_deps as on the device.
# Not part of `make test` (the download); results in work_dirs/gpu_rehearsal/<time>/.
GPU_VENV ?= $(CURDIR)/.venv-gpu
GPU_PYTHON ?= python3.12
gpu-rehearsal: gpu-deps
	@test -x $(GPU_VENV)/bin/python || { $(GPU_PYTHON) -m venv $(GPU_VENV) && \
		$(GPU_VENV)/bin/pip install -q -r requirements/gpu-rehearsal.txt; }
	REHEARSE=1 PYTHON=$(GPU_VENV)/bin/python \
		OUT=$(CURDIR)/work_dirs/gpu_rehearsal/$$(date +%Y%m%d_%H%M%S) \
		bash tools/analysis/gpu_session.sh
