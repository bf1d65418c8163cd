#!/usr/bin/env bash
# Usage: [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#        tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]
# As the toolkits' tools/slurm_test.sh (mmdet 3.3.0, mmsegmentation 1.2.2, mmpretrain 1.2.0).
# GPUS_PER_NODE=0 runs on a CPU cluster; the variables: tools/slurm_launch.sh, docs/cluster.md.
# TEST_PY: another test.py, e.g. the toolkit's own (mmevt.apis.toolkit_tool_path).
if [ $# -lt 4 ]; then
    sed -n '2,3p' "$0" >&2
    exit 2
fi
exec "$(dirname "$0")/slurm_launch.sh" "${TEST_PY:-test.py}" "$1" "$2" 2 "$3" "$4" "${@:5}"
