#!/usr/bin/env bash
# The prepared GPU run of the performance issue: correctness of the fast paths on CUDA,
# then the benchmark cases of docs/benchmark.md, then the report.
#
#   bash tools/analysis/gpu_session.sh                  # every step, in STEPS' order
#   bash tools/analysis/gpu_session.sh compiled=150 backbone   # a rerun: these steps only,
#                                                              # compiled with 150 s
#   REHEARSE=1 bash tools/analysis/gpu_session.sh       # on the CPU, tiny sizes (make
#                                                       # gpu-rehearsal: the device's stack)
#
# The GPU machine has torch (+ timm for Swin) but not our stack; mmevt's other import,
# mmengine, is pure Python: `make gpu-deps` copies it to .gpu_deps/ (carry it).
# Results in ${OUT:-gpu_results}, at most 8 files (the device returns no more): env.json
# (Python / torch / GPU), rows.jsonl (every row, appended as it is measured, so a step cut
# off at its limit keeps what it measured), steps.tsv (step, exit code, seconds, limit),
# logs.tar.gz (each step's output, repacked after every step) and report.md
# (tools/analysis/gpu_report.py). Each step has its own limit; the default limits add up to
# 300 s so that the machine's start, one run and a rerun of what failed fit in 15 minutes
# of device time. They are estimates: no GPU has run these steps yet.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu_results}
export PYTHONPATH="$PWD:$PWD/.gpu_deps${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
ROWS="$OUT/rows.jsonl"

# The steps in the order they run (name:limit in seconds): correctness first, then eager
# timing, then the compiled steps, which cost their traces: the rehearsal took 25-48 s per
# EVT-S compile (no code generation, a 2-core CPU) and 59 s for the backbone check, so they
# may stop at their limits with part of their rows; a rerun names them with more
# (compiled=300).
STEPS=(checks:20 throughput:20 train:20 with_cp:15 scaling:10 checks-compiled:40
       backbone:90 compiled:50 compiled-train:35)
if [ "${REHEARSE:-0}" = 1 ]; then
    # the same commands, CPU-sized (Swin's last stage needs a 7 x 7 window: 224); compiled
    # without code generation (aot_eager); training on SDPA only: Flex has no CPU backward
    DEV=cpu BACKEND=aot_eager TP="--batch 1 --size 224" TRAIN="224 224" SIZES="224 256"
    WARM="--warmup 0 --iters 1" SCALE=20 TRAIN_IMPLS=sdpa
else
    DEV=cuda BACKEND=inductor TP="--batch 64 --size 224" TRAIN="800 1344"
    SIZES="224 512 1024 1536" WARM="" SCALE=1 TRAIN_IMPLS="flex sdpa"
fi
B="$PY tools/analysis/benchmark.py --device $DEV --compile-backend $BACKEND --jsonl $ROWS"
C="$PY tools/analysis/gpu_checks.py --device $DEV --compile-backend $BACKEND --jsonl $ROWS"

each() {  # run each command (a string), all of them; return the first non-zero exit code
    local rc=0 c r
    for c in "$@"; do
        eval "$c"
        r=$?
        [ "$rc" -ne 0 ] || rc=$r
    done
    return "$rc"
}

run_step() {  # the commands of one step; $1 is also the row label
    # warm-up / iterations per kind of case (a rehearsal: WARM for all); each a variable, so
    # that it splits into words where it is used
    local w=${WARM:-"--warmup 3 --iters 10"} wt=${WARM:-"--warmup 2 --iters 5"}
    local wc=${WARM:-"--warmup 1 --iters 3"} t="--tag $1"
    case $1 in
    checks) $C --part paths ;;
    throughput)  # eager: EVT-S on both paths, RMT-S and Swin-T, each run whatever the others do
        each "$B $t --arch evt-s --attn-impl sdpa flex $TP $w" \
             "$B $t --arch rmt-s swin-t $TP $w" ;;
    train)
        each "$B $t --arch evt-s --attn-impl $TRAIN_IMPLS --train $TRAIN $wt" \
             "$B $t --arch rmt-s swin-t --train $TRAIN $wt" ;;
    with_cp) $PY tools/analysis/checkpointing.py --device $DEV --arch evt-s rmt-s \
        --train $TRAIN --rounds 1 $wc --jsonl "$ROWS" $t ;;
    scaling) $B $t --arch evt-s rmt-s swin-t --scaling $SIZES --dtype bf16 $wt ;;
    checks-compiled) $C --part compiled ;;
    backbone) $C --part backbone ;;
    compiled)  # one compile per model and dtype, in the order the report needs them most
        # (kept if the limit cuts the step): bf16 (EVT-S on Flex, what 'auto' runs compiled,
        # then SDPA; Swin-T, RMT-S), then the same in fp32
        each "$B $t --arch evt-s --attn-impl flex sdpa $TP --dtype bf16 --compile only $w" \
             "$B $t --arch swin-t rmt-s $TP --dtype bf16 --compile only $w" \
             "$B $t --arch evt-s --attn-impl flex sdpa $TP --dtype fp32 --compile only $w" \
             "$B $t --arch swin-t rmt-s $TP --dtype fp32 --compile only $w" ;;
    compiled-train)  # the auto rule's training case: EVT-S only, bf16 only (time)
        $B $t --arch evt-s --attn-impl $TRAIN_IMPLS --train $TRAIN --dtype bf16 \
            --compile only $wt ;;
    *) echo "unknown step $1; the steps: ${STEPS[*]%%:*}" >&2; return 2 ;;
    esac
}

export -f run_step each
export PY B C ROWS DEV TP TRAIN SIZES WARM TRAIN_IMPLS

# which steps: every one, or those named (NAME or NAME=SECONDS)
declare -A LIMIT
ORDER=()
for s in "${STEPS[@]}"; do LIMIT[${s%%:*}]=${s##*:}; done
if [ $# -eq 0 ]; then
    for s in "${STEPS[@]}"; do ORDER+=("${s%%:*}"); done
else
    for a in "$@"; do
        name=${a%%=*}
        if [ -z "${LIMIT[$name]:-}" ]; then
            echo "unknown step $name; the steps: ${STEPS[*]%%:*}" >&2
            exit 2
        fi
        if [ "$a" != "$name" ]; then
            if ! [[ ${a#*=} =~ ^[1-9][0-9]*$ ]]; then
                echo "$a: the limit must be whole seconds (NAME=SECONDS), got '${a#*=}'" >&2
                exit 2
            fi
            LIMIT[$name]=${a#*=}
        fi
        ORDER+=("$name")
    done
fi

if [ -e "$ROWS" ]; then  # never mix two runs' rows, nor overwrite one
    echo "OUT=$OUT already holds results (rows.jsonl): name another OUT" >&2
    exit 2
fi
mkdir -p "$OUT"
LOGS=$(mktemp -d)

# the environment first: every run records what it ran on
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true; } \
    >"$LOGS/nvidia-smi.log"
if ! $PY - "$DEV" "$LOGS/nvidia-smi.log" >"$OUT/env.json" <<'EOF'
import json, sys
import torch
from mmevt.analysis.records import run_environment
env = run_environment(torch.device(sys.argv[1]))
smi = open(sys.argv[2]).read().strip()
env['nvidia_smi'] = smi
if sys.argv[1] == 'cuda' and smi.count(',') == 2:
    env['driver'] = smi.split(',')[-1].strip()
print(json.dumps(env, indent=1))
EOF
then
    echo "no environment record: can $PY import torch and mmevt (PYTHONPATH=$PYTHONPATH)?" >&2
    exit 1
fi
cat "$OUT/env.json"
touch "$ROWS"
printf 'step\texit\tseconds\tlimit\n' >"$OUT/steps.tsv"

for name in "${ORDER[@]}"; do
    limit=$((LIMIT[$name] * SCALE))
    echo "== $name (limit ${limit}s)"
    start=$SECONDS
    # run_step in a child bash so that `timeout` stops all of a step's commands
    timeout -k 10 "$limit" bash -c "run_step $name" 2>&1 | tee "$LOGS/$name.log"
    code=${PIPESTATUS[0]}
    printf '%s\t%s\t%s\t%s\n' "$name" "$code" $((SECONDS - start)) "$limit" >>"$OUT/steps.tsv"
    echo "== $name: exit $code in $((SECONDS - start))s"
    tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
done
$PY tools/analysis/gpu_report.py "$OUT/env.json" "$ROWS" -o "$OUT/report.md" \
    && cat "$OUT/report.md"
cat "$OUT/steps.tsv"
