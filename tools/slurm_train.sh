#!/usr/bin/env bash
# Usage: [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#        tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]
# As the toolkits' tools/slurm_train.sh (mmdet 3.3.0, mmpretrain 1.2.0; mmsegmentation 1.2.2's
# takes no WORK_DIR: a fourth argument that starts with '-' is an option here, as there).
# GPUS_PER_NODE=0 runs on a CPU cluster; the variables: tools/slurm_launch.sh, docs/cluster.md.
# TRAIN_PY: another train.py, e.g. the toolkit's own (mmevt.apis.toolkit_tool_path).
# SBATCH=1: submit a requeueable batch job that resumes (train.py --resume) where a
# PreemptionCheckpointHook stopped it (tools/slurm_train.sbatch, docs/cluster.md).
RESUME=()
[ "${SBATCH:-0}" = 1 ] && RESUME=(--resume)
if [ $# -lt 3 ]; then
    sed -n '2,3p' "$0" >&2
    exit 2
fi
if [ $# -ge 4 ] && [ "${4#-}" = "$4" ]; then
    exec "$(dirname "$0")/slurm_launch.sh" "${TRAIN_PY:-train.py}" "$1" "$2" 1 "$3" \
        --work-dir="$4" "${RESUME[@]}" "${@:5}"
fi
exec "$(dirname "$0")/slurm_launch.sh" "${TRAIN_PY:-train.py}" "$1" "$2" 1 "$3" "${RESUME[@]}" \
    "${@:4}"
