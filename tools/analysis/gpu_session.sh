#!/usr/bin/env bash
# One prepared GPU run for the performance issue: correctness of the fast paths on CUDA,
# then the benchmark cases of docs/benchmark.md. Results land in ${OUT:-gpu_results}.
# The GPU machine needs torch (+ timm for Swin); mmevt's other import, mmengine, is pure
# Python: `make gpu-deps` copies it (and its small pure-Python needs) to .gpu_deps/,
# which this script puts on PYTHONPATH (carry .gpu_deps to the machine).
# Each step has its own time limit so one slow step cannot eat the others' time; the
# limits add up to 420 s (7 minutes), so that the machine's start-up plus one run leaves
# room for a rerun inside a 15-minute device budget. The limits are estimates: no GPU run
# has measured the steps yet.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu_results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD:$PWD/.gpu_deps${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
B="$PY tools/analysis/benchmark.py"
step() {  # step SECONDS NAME CMD...: run with a limit, log to $OUT/NAME.log
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit}s)"
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log" | grep -v '^USDT\|^ERROR:.*gpuGet'
    echo "== $name: exit ${PIPESTATUS[0]}"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
step 110 checks $PY tools/analysis/gpu_checks.py --json "$OUT/checks.json"
step 50 eager $B --arch evt-s rmt-s swin-t --batch 64 --warmup 5 --iters 20 \
    --json "$OUT/eager.json"
step 120 compiled $B --arch evt-s rmt-s swin-t --batch 64 --compile only --warmup 3 \
    --iters 10 --json "$OUT/compiled.json"
step 40 train $B --arch evt-s rmt-s swin-t --train 800 1344 --dtype fp32 bf16 \
    --warmup 2 --iters 5 --json "$OUT/train.json"
step 30 with_cp $PY tools/analysis/checkpointing.py --arch evt-s rmt-s --train 800 1344 \
    --warmup 1 --iters 3 --rounds 1
step 45 scaling $B --arch evt-s rmt-s --scaling 224 512 1024 1536 --dtype bf16 \
    --warmup 2 --iters 5 --json "$OUT/scaling.json"
step 25 profile $B --arch evt-s rmt-s --batch 64 --dtype bf16 --warmup 3 --iters 3 \
    --profile 12
