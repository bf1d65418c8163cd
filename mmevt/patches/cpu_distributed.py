"""CPU multi-process training with mmengine's pytorch and slurm launchers.

mmengine 0.10.7's ``_init_dist_pytorch`` and ``_init_dist_slurm`` (the same code in
onedl-mmengine 0.10.12) always call ``torch.cuda.set_device``, so ``tools/dist_train.sh``
(``--launcher pytorch``) and ``tools/slurm_train.sh`` (``--launcher slurm``) fail on a machine
without GPUs even with the gloo backend. :func:`enable_cpu_distributed` keeps mmengine's code
for every accelerator and only takes over when the backend is gloo, the init backend torch's,
and the machine has none of the devices mmengine's launchers set (CUDA, MLU, NPU, MUSA).
Such a run also needs ``model_wrapper_cfg = dict(type='MMDistributedDataParallel',
device_ids=None)`` (a CPU module takes no device ids) and
``env_cfg = dict(dist_cfg=dict(backend='gloo'))``.

A group the patch starts is also destroyed at interpreter exit (:func:`end_group_at_exit`):
mmengine's runner never destroys it, and a gloo rank that leaves its group to interpreter
finalization can abort there (``terminate called without an active exception``) after its
work is done, failing the job (pytorch/pytorch#190489; here 3 of 20 two-rank gloo jobs on
torch 2.14.1, none of 40 with the group destroyed at exit).
"""
import atexit
import os
import subprocess
from typing import Optional


def _cpu_only(backend: str, init_backend: str) -> bool:
    """Whether mmengine's launcher would fail in ``torch.cuda.set_device`` for this gloo
    run: no device that any of its branches sets is present."""
    import torch
    if backend != 'gloo' or init_backend != 'torch' or torch.cuda.is_available():
        return False
    from mmengine import device
    others = ('is_mlu_available', 'is_npu_available', 'is_musa_available')
    return not any(getattr(device, name, lambda: False)() for name in others)


def first_host(node_list: str) -> str:
    """The first host of a Slurm node list (``node[1-4]`` -> ``node1``), as mmengine takes
    it: ``scontrol show hostname NODE_LIST | head -n1``.

    Raises:
        RuntimeError: ``scontrol`` is missing or fails (e.g. it finds no ``slurm.conf``).
    """
    try:
        proc = subprocess.run(['scontrol', 'show', 'hostname', node_list], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, code = proc.stdout, proc.returncode
    except OSError as err:  # no scontrol on PATH
        out, code = str(err), None
    hosts = out.split()
    if code != 0 or not hosts:
        raise RuntimeError(
            f'`scontrol show hostname {node_list}` failed ({code}): {out.strip()!r}; '
            "mmengine's slurm launcher takes the master address from it. Set SLURM_CONF to "
            "the cluster's slurm.conf, or MASTER_ADDR to the first node's address")
    return hosts[0]


def slurm_environment(port: Optional[int] = None) -> None:
    """Set ``MASTER_PORT``, ``MASTER_ADDR``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``RANK`` from
    an ``srun`` task's ``SLURM_*`` variables, as mmengine's ``_init_dist_slurm`` does.

    The order of precedence is mmengine's: ``port``, else ``MASTER_PORT``, else 29500; an
    existing ``MASTER_ADDR``, else :func:`first_host` of ``SLURM_NODELIST``. Unlike
    mmengine, a failing ``scontrol`` is an error here (mmengine would make its error text
    the master address).

    Raises:
        RuntimeError: ``SLURM_LOCALID`` is missing (not an ``srun`` task), or ``scontrol``
            failed where ``MASTER_ADDR`` is not set.
    """
    proc_id = int(os.environ['SLURM_PROCID'])
    ntasks = int(os.environ['SLURM_NTASKS'])
    node_list = os.environ['SLURM_NODELIST']
    if 'SLURM_LOCALID' not in os.environ:  # mmengine falls back to rank % GPUs: none here
        raise RuntimeError('SLURM_LOCALID is not set: --launcher slurm runs as a task of '
                           'srun (tools/slurm_train.sh)')
    local_rank = int(os.environ['SLURM_LOCALID'])
    if port is not None:
        os.environ['MASTER_PORT'] = str(port)
    elif 'MASTER_PORT' not in os.environ:
        os.environ['MASTER_PORT'] = '29500'  # torch.distributed's default, as mmengine
    if 'MASTER_ADDR' not in os.environ:
        os.environ['MASTER_ADDR'] = first_host(node_list)
    os.environ['WORLD_SIZE'] = str(ntasks)
    os.environ['LOCAL_RANK'] = str(local_rank)
    os.environ['RANK'] = str(proc_id)


def _destroy_group() -> None:
    import gc
    import signal

    import torch.distributed as torch_dist
    if torch_dist.is_initialized():  # not when the program destroyed it itself
        # first what still holds the group in reference cycles (a runner and its DDP model):
        # freed at finalization after the group's shutdown, they abort there instead. The
        # dataloader iterators among them join their workers: torch's SIGCHLD handler would
        # report a worker a preemption signal ended as a failure, so it is off meanwhile
        previous = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            gc.collect()
        finally:
            if previous is not None:  # None: a handler set outside Python, not restorable
                signal.signal(signal.SIGCHLD, previous)
        torch_dist.destroy_process_group()


def end_group_at_exit() -> None:
    """At interpreter exit, while the interpreter is still whole, free unreachable objects
    and destroy the default process group (an ``atexit`` handler; registered once)."""
    atexit.unregister(_destroy_group)
    atexit.register(_destroy_group)


def enable_cpu_distributed() -> None:
    """Patch mmengine's pytorch- and slurm-launcher initialisation for CPU + gloo.
    Idempotent."""
    import mmengine.dist.utils as dist_utils
    import torch.distributed as torch_dist

    pytorch = dist_utils._init_dist_pytorch
    if not getattr(pytorch, '_mmevt_cpu', False):

        def _init_dist_pytorch(backend, init_backend='torch', **kwargs) -> None:
            if _cpu_only(backend, init_backend):
                torch_dist.init_process_group(backend='gloo', **kwargs)
                end_group_at_exit()
                return
            pytorch(backend, init_backend=init_backend, **kwargs)

        _init_dist_pytorch._mmevt_cpu = True
        _init_dist_pytorch._mmevt_original = pytorch
        dist_utils._init_dist_pytorch = _init_dist_pytorch

    slurm = dist_utils._init_dist_slurm
    if not getattr(slurm, '_mmevt_cpu', False):

        def _init_dist_slurm(backend, port=None, init_backend='torch', **kwargs) -> None:
            if _cpu_only(backend, init_backend):
                slurm_environment(port)
                torch_dist.init_process_group(backend='gloo', **kwargs)
                end_group_at_exit()
                return
            slurm(backend, port=port, init_backend=init_backend, **kwargs)

        _init_dist_slurm._mmevt_cpu = True
        _init_dist_slurm._mmevt_original = slurm
        dist_utils._init_dist_slurm = _init_dist_slurm
