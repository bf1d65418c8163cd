#!/usr/bin/env bash
# Usage: tools/dist_launch.sh SCRIPT NUM_PROCS [SCRIPT args]  (used by dist_train/dist_test)
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR, PORT as in the OpenMMLab toolkits.
# The launcher is torchrun behind mmevt.apis.torchrun: it forwards the signals of the config's
# PreemptionCheckpointHook to the ranks, ends them when it ends, and exits with their
# preemption code (docs/cluster.md, "Stopping a run with a signal").
SCRIPT=$1
NPROCS=$2
# the ranks' yapf grammar cache, written once before they start (tools/slurm_launch.sh)
"${PYTHON:-python}" -c 'import yapf' || true
PYTHONPATH="$(dirname "$0")/..":${PYTHONPATH:-} exec \
"${PYTHON:-python}" -m mmevt.apis.torchrun \
    --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROCS" "$(dirname "$0")/$SCRIPT" "${@:3}"
