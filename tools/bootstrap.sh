#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment with the full OpenMMLab stack.
#
#   tools/bootstrap.sh                     # the upstream stack in .venv
#   MMEVT_STACK=fork tools/bootstrap.sh    # the onedl fork in .venv-fork
#
# Idempotent: a second run only checks and returns. Both stacks use the same torch, so pip
# takes the same torch wheels, and the mmcv wheel cache is keyed by the torch build.
#
# Environment variables:
#   MMEVT_STACK        upstream (default: requirements/upstream.txt) or fork (fork.txt)
#   MMEVT_VENV         venv path (default: <repo>/.venv, <repo>/.venv-fork for the fork)
#   MMEVT_PYTHON       interpreter used to create the venv (default: python3.11, else python3)
#   MMEVT_TORCH        torch version (default: from requirements/torch.txt)
#   MMEVT_TORCHVISION  torchvision version (default: from requirements/torch.txt)
#   MMEVT_TORCH_INDEX  extra pip index for torch wheels (e.g. a CUDA-specific index)
#   MMEVT_WHEEL_CACHE  where built mmcv wheels are kept, keyed by torch build
#                      (default: ~/.cache/mmevt/wheels)
#   MAX_JOBS           parallel compile jobs for mmcv (default: number of cores)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
req=$repo/requirements
log() { printf '[bootstrap %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
stack=${MMEVT_STACK:-upstream}
case $stack in
  upstream) venv=${MMEVT_VENV:-$repo/.venv} prefix= ;;
  fork) venv=${MMEVT_VENV:-$repo/.venv-fork} prefix=onedl- ;;
  *) log "MMEVT_STACK must be 'upstream' or 'fork', got '$stack'"; exit 2 ;;
esac
pin() { sed -n "s/^$1==\([^ ]*\).*/\1/p" "$2"; }
torch_ver=${MMEVT_TORCH:-$(pin torch "$req/torch.txt")}
tv_ver=${MMEVT_TORCHVISION:-$(pin torchvision "$req/torch.txt")}
mmcv_dist=${prefix}mmcv
mmcv_ver=$(pin "$mmcv_dist" "$req/$stack.txt")
mmengine_spec=${prefix}mmengine==$(pin "${prefix}mmengine" "$req/$stack.txt")
py=$venv/bin/python

# Everything that decides the environment's contents; a change re-runs the installs.
want=$(cat "$req"/{torch,runtime,tests,timm-suite,no-deps,pose-upstream,action-upstream,rotate-upstream,$stack,build-$stack}.txt "$repo/pyproject.toml" "$0" "$repo/tools/build_mmaction2_wheel.py" $(find "$repo/tools/patches" -type f -name '*.py' | sort); echo "stack=$stack torch=$torch_ver tv=$tv_ver mmcv=$mmcv_ver")
want_hash=$(printf '%s' "$want" | sha256sum | cut -c1-16)
stamp=$venv/.mmevt-env

if [[ ! -x $py ]]; then
  base=${MMEVT_PYTHON:-$(command -v python3.11 || command -v python3)}
  log "creating virtual environment $venv with $base"
  "$base" -m venv "$venv"
  "$py" -m pip install -q --upgrade pip
fi

pipi() { "$py" -m pip install --disable-pip-version-check "$@"; }

# torch build tag the compiled mmcv must match (version includes the CUDA/CPU suffix).
torch_tag() {
  "$py" - <<'EOF' 2>/dev/null || true
import sys, torch
print(f'torch{torch.__version__}-cuda{torch.version.cuda}-py{sys.version_info[0]}{sys.version_info[1]}')
EOF
}

mmcv_ok() {
  # Ops import fails on an ABI mismatch; the recorded tag catches silent mismatches.
  [[ -f $venv/.mmcv-built-for && $(cat "$venv/.mmcv-built-for") == "$(torch_tag)" ]] &&
    "$py" -c "import mmcv, mmcv.ops; from mmcv.ops import nms, RoIAlign; assert mmcv.__version__ == '$mmcv_ver'" 2>/dev/null
}

if [[ -f $stamp && $(cat "$stamp") == "$want_hash" ]] && mmcv_ok; then
  exit 0
fi

# 1. torch first: everything after is pinned to it through a constraints file.
have_torch=$("$py" -c 'import torch, torchvision; print(torch.__version__.split("+")[0], torchvision.__version__.split("+")[0])' 2>/dev/null || true)
if [[ $have_torch != "$torch_ver $tv_ver" ]]; then
  log "installing torch==$torch_ver torchvision==$tv_ver (a few GB; minutes)"
  extra=()
  [[ -n ${MMEVT_TORCH_INDEX:-} ]] && extra=(--extra-index-url "$MMEVT_TORCH_INDEX")
  pipi "${extra[@]}" "torch==$torch_ver" "torchvision==$tv_ver"
fi
constraints=$venv/.mmevt-constraints.txt
# pinned to the installed distributions' versions: a torch wheel's metadata can lack the local
# label its torch.__version__ carries (2.14.1 vs 2.14.1+cu130), and a pin pip cannot match
# makes every package that depends on torch (timm) unresolvable
"$py" -c 'from importlib.metadata import version as v
print("torch==" + v("torch")); print("torchvision==" + v("torchvision"))' > "$constraints"
echo "$mmcv_dist==$mmcv_ver" >> "$constraints"

# 2. mmengine (mmcv's setup.py imports it).
log "installing $mmengine_spec"
pipi -q -c "$constraints" "$mmengine_spec"

# 3. mmcv with compiled ops, from source against this exact torch. pip's own wheel cache is
#    keyed by the sdist only, so it is bypassed; our cache is keyed by the torch build.
tag=$(torch_tag)
if ! mmcv_ok; then
  cache=${MMEVT_WHEEL_CACHE:-$HOME/.cache/mmevt/wheels}/$tag
  mkdir -p "$cache"
  wheel_name=${mmcv_dist//-/_}-$mmcv_ver
  whl=$(ls "$cache"/"$wheel_name"-*.whl 2>/dev/null | head -n1 || true)
  if [[ -z $whl ]]; then
    log "building $mmcv_dist $mmcv_ver with ops against $tag (about 20 minutes on 2 cores)"
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    # Build-only tools (build-$stack.txt: setuptools < 70 for mmcv 2.1.0) go into their own
    # directory, first on PYTHONPATH / PATH for the build: the venv keeps its setuptools.
    tools_dir=$venv/.mmevt-build-tools
    rm -rf "$tools_dir"
    pipi -q --no-warn-conflicts --target "$tools_dir" -r "$req/build-$stack.txt"
    build_env=(env "PYTHONPATH=$tools_dir" "PATH=$tools_dir/bin:$PATH")
    # the download prepares the sdist's metadata: mmcv 2.1.0's setup.py needs the tools too
    "${build_env[@]}" "$py" -m pip download -q --no-cache-dir --no-deps --no-build-isolation \
      --no-binary :all: -d "$src" "$mmcv_dist==$mmcv_ver"
    tar -xzf "$src/$wheel_name.tar.gz" -C "$src"
    # mmcv 2.1.0 and onedl-mmcv 2.3.6 hard-code -std=c++17; torch >= 2.10 headers refuse
    # anything below C++20.
    aten_h=$("$py" -c 'import torch.utils.cpp_extension as c; print(c.include_paths()[0])' 2>/dev/null)/ATen/ATen.h
    if grep -q 'C++20' "$aten_h"; then
      sed -i 's/-std=c++1[47]/-std=c++20/g; s#/std:c++1[47]#/std:c++20#g' "$src/$wheel_name/setup.py"
    fi
    "${build_env[@]}" MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$py" -m pip wheel \
      --no-cache-dir --no-build-isolation --no-deps -w "$cache" "$src/$wheel_name"
    rm -rf "$tools_dir"
    whl=$(ls "$cache"/"$wheel_name"-*.whl | head -n1)
  else
    log "reusing mmcv wheel built for $tag: $whl"
  fi
  pipi -q --force-reinstall --no-deps "$whl"
  pipi -q -c "$constraints" "$whl"
  echo "$tag" > "$venv/.mmcv-built-for"
  mmcv_ok || { log "mmcv ops do not import after the build"; exit 1; }
fi

# 4. toolkits, test deps and mmevt itself (editable).
log "installing the $stack toolkits, test tools and mmevt"
pipi -q -c "$constraints" -r "$req/$stack.txt" -r "$req/runtime.txt" -r "$req/tests.txt"
pipi -q -c "$constraints" --no-deps -r "$req/no-deps.txt"  # why: see that file
if [[ $stack == upstream ]]; then  # mmpose, mmaction2, mmrotate-dev: why so, see their files
  log "installing mmpose (xtcocotools built from source against this venv's numpy)"
  pose_req=$req/pose-upstream.txt
  pipi -q -c "$constraints" json_tricks munkres
  tools_dir=$venv/.mmevt-build-tools
  rm -rf "$tools_dir"
  pipi -q --no-warn-conflicts --target "$tools_dir" cython
  env "PYTHONPATH=$tools_dir" "PATH=$tools_dir/bin:$PATH" "$py" -m pip wheel -q --no-deps \
    --no-build-isolation --no-binary xtcocotools -w "$tools_dir/wheels" \
    "xtcocotools==$(pin xtcocotools "$pose_req")"
  pipi -q --no-deps "$tools_dir"/wheels/xtcocotools-*.whl "mmpose==$(pin mmpose "$pose_req")"
  rm -rf "$tools_dir"
  # mmaction2: its released sdist built into a wheel with two fixes (see that file)
  action_req=$req/action-upstream.txt
  mmaction_ver=$(pin mmaction2 "$action_req")
  log "installing mmaction2 $mmaction_ver+mmevt1 (its sdist patched into a wheel)"
  mkdir -p "$tools_dir"
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$tools_dir" "mmaction2==$mmaction_ver"
  "$py" "$repo/tools/build_mmaction2_wheel.py" "$tools_dir/mmaction2-$mmaction_ver.tar.gz" \
    "$tools_dir/wheels" >/dev/null
  pipi -q -c "$constraints" "decord==$(pin decord "$action_req")"
  # forced: a changed stand-in keeps the version label
  pipi -q --no-deps --force-reinstall "$tools_dir"/wheels/mmaction2-"$mmaction_ver"+mmevt1-*.whl
  rm -rf "$tools_dir"
  # mmrotate: upstream's dev-1.x as republished, pinned by its hash (see that file); the
  # fork's onedl-mmrotate is in fork.txt
  log "installing mmrotate-dev (open-mmlab/mmrotate's dev-1.x, republished)"
  pipi -q --no-deps --require-hashes -r "$req/rotate-upstream.txt"
fi
pipi -q -c "$constraints" --no-deps --no-build-isolation -e "$repo"
# wheels the tests install into temporary directories, never into this venv: an upstream
# mmengine (pip must leave the installed stack alone, even on the fork) and a setuptools
# that still has pkg_resources (what the toolkits' own tools need on upstream mmengine)
"$py" -m pip download -q --no-deps -d "$venv/.mmevt-test-wheels" mmengine==0.10.7 \
  'setuptools>=77.0.3,<82'
# timm's sdist (its tests/test_models.py, which the wheel lacks) for tests/test_timm_suite.py
"$py" -m pip download -q --no-deps --no-binary :all: --require-hashes \
  -d "$venv/.mmevt-test-wheels" -r "$req/timm-suite.txt"
mmcv_ok || { log "mmcv was replaced by a dependency install"; exit 1; }
echo "$want_hash" > "$stamp"
log "environment ready: $venv ($tag)"
