#!/usr/bin/env bash
# Usage: tools/slurm_launch.sh SCRIPT PARTITION JOB_NAME NPOS [SCRIPT args]  (used by
# slurm_train.sh and slurm_test.sh; the first NPOS SCRIPT args are its positional ones).
# One srun of GPUS tasks, each running `python -u SCRIPT POSITIONALS --launcher=slurm
# OPTIONS`: mmengine's slurm launcher reads the rank, world size and master address from
# the task's SLURM_* variables. Environment, as in the OpenMMLab toolkits' slurm scripts
# (mmdet 3.3.0 / mmsegmentation 1.2.2 / mmpretrain 1.2.0 tools/slurm_{train,test}.sh):
#   GPUS           tasks in all (default 8)
#   GPUS_PER_NODE  GPUs (= tasks) per node (default 8); 0: a CPU cluster (below)
#   CPUS_PER_TASK  CPUs per task (default 5; on a CPU cluster 1)
#   SRUN_ARGS      more srun options, e.g. "--nodes=2 --ntasks-per-node=1" or "--time=1-0"
#   PYTHON         the interpreter (default python)
#   SBATCH=1       submit the srun as a requeueable batch job (tools/slurm_train.sbatch,
#                  sbatch --parsable --requeue --open-mode=append --signal=SIG@120, SIG the
#                  early signal of the config's PreemptionCheckpointHook, none without it:
#                  python -m mmevt.apis.run_signals; prints the job id and returns) instead of
#                  running it here
#   SBATCH_ARGS    more sbatch options, e.g. "--output=work_dirs/x/slurm-%j.out --time=1-0"
# SCRIPT is relative to this folder unless absolute (the toolkits' own tools/train.py too).
set -euo pipefail
SCRIPT=$1
PARTITION=$2
JOB_NAME=$3
NPOS=$4
TOOLS=$(cd "$(dirname "$0")" && pwd)
case "$SCRIPT" in /*) ;; *) SCRIPT="$TOOLS/$SCRIPT" ;; esac
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
read -r -a EXTRA_SRUN <<< "${SRUN_ARGS:-}"

if [ "$GPUS_PER_NODE" = 0 ]; then
    # A CPU cluster. --gres=gpu:N is left out: a node without GPUs has no gres to give, and
    # the job would never start. Nothing bounds the tasks per node but the CPUs, so GPUS is
    # just the number of tasks (SRUN_ARGS places them), one CPU each by default (the
    # toolkits' 5 are a GPU's data loaders), and each task's torch gets that many threads
    # (mmengine would set OMP_NUM_THREADS=1 where it is unset). Our configs say nccl and give
    # DDP the task's GPU: on CPUs the backend is gloo and DDP takes no device ids.
    CPUS_PER_TASK=${CPUS_PER_TASK:-1}
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$CPUS_PER_TASK}
    RESOURCES=(--ntasks="$GPUS" --cpus-per-task="$CPUS_PER_TASK")
    OVERRIDES=(--cfg-options env_cfg.dist_cfg.backend=gloo model_wrapper_cfg.device_ids=None)
else
    CPUS_PER_TASK=${CPUS_PER_TASK:-5}
    RESOURCES=(--gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE"
               --cpus-per-task="$CPUS_PER_TASK")
    OVERRIDES=()
fi

# our options come before the caller's: a later --cfg-options KEY=VALUE wins (mmengine's
# DictAction merges them)
SRUN=(srun -p "$PARTITION" --job-name="$JOB_NAME" "${RESOURCES[@]}" --kill-on-bad-exit=1
      "${EXTRA_SRUN[@]}"
      "${PYTHON:-python}" -u "$SCRIPT" "${@:5:$NPOS}" --launcher=slurm "${OVERRIDES[@]}"
      "${@:$((5 + NPOS))}")
export PYTHONPATH="$TOOLS/..":${PYTHONPATH:-}
# Every rank's mmengine formats the config with yapf, whose first import writes a grammar
# cache that other processes can read half-written (google/yapf#1204: EOFError at start on an
# empty cache); one import here writes it before the ranks start (a home shared by the nodes)
"${PYTHON:-python}" -c 'import yapf' || true
set -x
if [ "${SBATCH:-0}" = 1 ]; then
    # the allocation is the step's resources; the batch script runs the srun above and
    # requeues on the preemption exit code. The early signal is one the config's hook stops
    # on (a hook signal no launcher can forward is refused here, named); SIG, not B:SIG:
    # Slurm signals the tasks.
    read -r -a EXTRA_SBATCH <<< "${SBATCH_ARGS:-}"
    early=$("${PYTHON:-python}" -m mmevt.apis.run_signals --sbatch "${@:5}")
    SIGNAL=()
    [ -n "$early" ] && SIGNAL=(--signal="$early@120")
    exec sbatch --parsable -p "$PARTITION" --job-name="$JOB_NAME" "${RESOURCES[@]}" \
        --requeue --open-mode=append "${SIGNAL[@]}" "${EXTRA_SBATCH[@]}" \
        "$TOOLS/slurm_train.sbatch" "${SRUN[@]}"
fi
"${SRUN[@]}"
