"""Preemption that loses nothing: :class:`PreemptionCheckpointHook`.

Shared clusters stop jobs at their time limit or to preempt them: Slurm sends SIGTERM to
every task (and SIGKILL ``KillWait``, 30 s, later); ``--signal=USR1@120`` adds an earlier
SIGUSR1. mmengine handles no signal, so such a job loses everything since its last interval
checkpoint. With this hook, a signal is recorded; at the next training iteration boundary
every rank agrees on it (the flag is all-reduced), rank 0 saves one checkpoint (atomic, as
mmevt makes mmengine's writes) with everything an exact resume needs, ``last_checkpoint``
names it, and every process exits with :data:`PREEMPTED_EXIT_CODE`, which
``tools/slurm_train.sh``'s batch mode reads as "requeue me". A run started with ``--resume``
continues from it exactly:

- epoch, iteration + 1 and the index of the next batch of the epoch are saved explicitly
  (mmengine's own mid-epoch save with ``by_epoch=True`` records ``epoch + 1``), and the
  trained batches of that epoch are skipped by advancing the batch sampler, without loading
  them (mmengine's epoch loop would re-run the whole epoch);
- the sampler's seed (``DefaultSampler(seed=None)`` draws a new one in every run);
- every rank's python / numpy / torch (and CUDA) random states, gathered before rank 0 saves
  and restored at the first iteration after the resume (mmengine re-seeds on resume);
- each sample's augmentation randomness is a function of (seed, epoch, sample index), not of
  which dataloader worker loaded it or what it loaded before (:class:`SeededPipeline`): this
  changes which flips are drawn, not their distribution.

Dataloader workers ignore the signals (set inside ``worker_init_fn``), so the main process
keeps its data while it saves. The training, validation and test loaders get that
``worker_init_fn``; workers a loop started before the hook could set it (an iteration-based
loop starts its iterator, and so its workers, when it is built, before ``before_run``) are
stopped in ``before_run`` and started again, from the beginning of the same sample stream, in
``before_train``. The handler that was installed before is chained (a Python one is called)
and restored when the run ends. A second signal while saving is recorded and changes nothing.
A signal during validation lets the validation finish, then the run saves the state of the
last trained iteration and exits (a resumed run would not validate again). A signal during a
checkpoint write lets the write finish (mmevt makes mmengine's writes atomic, so a process
killed while writing never leaves a half-written file under the checkpoint's name).

The process that receives the signal first does not matter: the launcher
(:mod:`mmevt.apis.torchrun`, behind ``tools/dist_train.sh``) forwards it to every rank's
process group, each rank records it, and every worker ignores it.
"""
import atexit
import multiprocessing
import os
import os.path as osp
import random
import signal
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch
from mmengine.hooks import Hook
from torch.utils.data import DataLoader
from mmengine.logging import print_log

# sysexits.h's EX_TEMPFAIL: "a temporary failure; the user is invited to retry"
PREEMPTED_EXIT_CODE = 75
CHECKPOINT_KEY = 'preemption'


def _signal_number(name: Union[str, int]) -> int:
    if isinstance(name, int):
        return name
    number = getattr(signal, str(name).upper(), None)
    if not isinstance(number, signal.Signals):
        raise ValueError(f'PreemptionCheckpointHook: signals has {name!r}, which is no signal '
                         "of this platform; use names such as 'SIGTERM', 'SIGUSR1'")
    return int(number)


def random_states() -> Dict[str, Any]:
    """This process's python, numpy, torch and CUDA random generator states."""
    states = dict(python=random.getstate(), numpy=np.random.get_state(),
                  torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states['cuda'] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: Dict[str, Any]) -> None:
    """Restore what :func:`random_states` returned."""
    random.setstate(states['python'])
    np.random.set_state(states['numpy'])
    torch.set_rng_state(states['torch'])
    if 'cuda' in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states['cuda'])


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """The augmentation seed of sample ``index`` in ``epoch`` of a run seeded ``seed``."""
    return zlib.crc32(f'{seed}/{epoch}/{index}'.encode())


class SeededPipeline:
    """A dataset's pipeline whose randomness, per sample, is seeded by
    :func:`sample_seed` of the run's seed, the current epoch and the sample's index
    (``data_info['sample_idx']``, which mmengine's datasets set); the process's own random
    states are left as they were. ``epoch`` is shared memory, so persistent dataloader
    workers see the epoch the main process is in."""

    def __init__(self, pipeline: Callable, seed: int, epoch: Any):
        self.pipeline, self.seed, self.epoch = pipeline, seed, epoch

    def __call__(self, data_info: dict) -> Any:
        saved = random_states()
        index = data_info.get('sample_idx', 0)
        # the epoch the sampler drew the index in (SampleIndex), else the runner's epoch
        epoch = getattr(index, 'epoch', self.epoch.value)
        seed = sample_seed(self.seed, epoch, index)
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        try:
            return self.pipeline(data_info)
        finally:
            set_random_states(saved)

    def __getattr__(self, name: str) -> Any:  # transforms, __repr__ helpers: the pipeline's
        return getattr(self.__dict__['pipeline'], name)


class SampleIndex(int):
    """A dataset index that knows the sampler epoch it was drawn in: :class:`SeededPipeline`
    seeds by it. mmengine's datasets pass the index on as ``data_info['sample_idx']``, and
    the index travels to the dataloader workers with the batch, so the epoch is the one of
    the draw even when workers prefetch across an epoch's end. An infinite sampler (one
    ``__iter__`` for the whole run, as iteration-based configs use) counts an epoch per
    ``len(sampler)`` draws, so a sample's augmentations differ from pass to pass."""

    epoch: int

    def __new__(cls, index: int, epoch: int) -> 'SampleIndex':
        self = super().__new__(cls, index)
        self.epoch = epoch
        return self

    def __reduce__(self):
        return SampleIndex, (int(self), self.epoch)


class _PreemptibleBatches:
    """The batch sampler of a run with the hook: its next iteration skips its first ``skip``
    batches (the ones a preempted run trained), and, with ``tag`` set, yields each index as
    a :class:`SampleIndex`; otherwise it iterates as the batch sampler it wraps."""

    def __init__(self, batch_sampler: Any, sampler: Any, tag: bool, skip: int = 0):
        self.batch_sampler, self.sampler, self.tag, self.skip = (batch_sampler, sampler, tag,
                                                                 skip)
        self.skipped_samples = 0  # drawn past by the sampler's own skip() (onedl-mmengine)

    def __iter__(self):
        batches = iter(self.batch_sampler)
        skip, self.skip = self.skip, 0
        drawn, self.skipped_samples = self.skipped_samples, 0
        drawn += sum(len(next(batches, ())) for _ in range(skip))
        if not self.tag:
            yield from batches
            return
        first = getattr(self.sampler, 'epoch', 0)
        size = max(len(self.sampler), 1)
        for batch in batches:
            tagged = []
            for index in batch:
                tagged.append(SampleIndex(index, first + drawn // size))
                drawn += 1
            yield tagged

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __getattr__(self, name: str) -> Any:  # batch_size, ...: the wrapped one's
        return getattr(self.__dict__['batch_sampler'], name)


class _CountSkipped:
    """A sampler's ``skip(num_samples)`` (onedl-mmengine's ``InfiniteSampler``: the stream
    continues after its first ``num_samples`` indices) that tells ``batches`` how many
    indices the stream skipped."""

    def __init__(self, skip: Callable, batches: _PreemptibleBatches):
        self.skip, self.batches = skip, batches

    def __call__(self, num_samples: int) -> None:
        self.skip(num_samples)
        self.batches.skipped_samples = num_samples


class _IgnoreSignalsInWorker:
    """``worker_init_fn`` of a dataloader: the worker ignores ``signals`` while the run goes
    on (the main process decides when to stop and still needs its data), then runs the
    loader's own ``worker_init_fn``. Once the main process is stopping (``stopping`` set:
    after the save, at the end of the run, at exit), a signal ends the worker as before:
    torch and multiprocessing stop workers with SIGTERM."""

    def __init__(self, signals: Sequence[int], stopping: Any, then: Optional[Callable]):
        self.signals, self.stopping, self.then = tuple(signals), stopping, then

    def _handle(self, number: int, frame: Any) -> None:
        if self.stopping.value:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)

    def __call__(self, worker_id: int) -> None:
        for number in self.signals:
            signal.signal(number, self._handle)
        if self.then is not None:
            self.then(worker_id)


def _datasets(dataset: Any) -> List[Any]:
    """``dataset`` and the datasets inside wrappers (Concat, Repeat, ClassBalanced)."""
    found = [dataset]
    for inner in getattr(dataset, 'datasets', []) or []:
        found += _datasets(inner)
    if getattr(dataset, 'dataset', None) is not None:
        found += _datasets(dataset.dataset)
    return found


def _by_epoch(loop: Any) -> bool:
    """Whether ``loop`` iterates its dataloader epoch by epoch (mmengine's
    ``EpochBasedTrainLoop`` and the toolkits' subclasses); otherwise one iterator serves the
    run (``IterBasedTrainLoop``, which also has a ``max_epochs``)."""
    from mmengine.runner import EpochBasedTrainLoop
    return isinstance(loop, EpochBasedTrainLoop)


def _validation_follows(runner: Any) -> bool:
    """Whether the training loop validates after the epoch (epoch-based loop) or the
    iteration (iteration-based loop) being finished: the condition of mmengine's
    ``EpochBasedTrainLoop.run`` / ``IterBasedTrainLoop.run`` (mmengine/runner/loops.py)."""
    loop = runner.train_loop
    interval = getattr(loop, 'val_interval', 0)
    if not _is_loop(runner._val_loop) or not interval:
        return False
    if _by_epoch(loop):
        done, last = runner.epoch + 1, loop.max_epochs
    else:
        done, last = runner.iter + 1, loop.max_iters
    return done >= getattr(loop, 'val_begin', 1) and (done % interval == 0 or done == last)


def _position(state: dict) -> str:
    """Where a saved run stands, as the log says it."""
    if state.get('by_epoch', True):
        return (f'epoch {state["epoch"]}, iteration {state["iter"]}, batch '
                f'{state["batch_idx"]} of the epoch')
    return f'iteration {state["iter"]}'


def _sampler(loader: Any) -> Any:
    sampler = getattr(loader.batch_sampler, 'sampler', None)
    return loader.sampler if sampler is None else sampler


def _is_loop(value: Any) -> bool:
    from mmengine.runner import BaseLoop
    return isinstance(value, BaseLoop)


def _started_iterators(loop: Any, loader: Any) -> List[tuple]:
    """``(owner, attribute)`` of each dataloader iterator over ``loader`` that ``loop``
    holds: one it holds itself, or one inside a wrapper it holds (mmengine's
    ``IterBasedTrainLoop.dataloader_iterator._iterator``)."""
    from torch.utils.data.dataloader import _BaseDataLoaderIter
    found = []
    owners = [loop] + [v for v in vars(loop).values()
                       if hasattr(v, '_iterator') and not isinstance(v, DataLoader)]
    for owner in owners:
        for name, value in vars(owner).items():
            if isinstance(value, _BaseDataLoaderIter) and value._dataset is loader.dataset:
                found.append((owner, name))
    return found


def _stop_workers(iterator: Any, loader: Any) -> None:
    if hasattr(iterator, '_shutdown_workers'):
        iterator._shutdown_workers()
    if getattr(loader, '_iterator', None) is iterator:  # persistent workers: not reused
        loader._iterator = None


def _stop_train_workers(loop: Any) -> None:
    """End the workers of ``loop``'s iterators the way the dataloader ends them. Left to the
    interpreter's exit, multiprocessing would SIGTERM them, and torch would report each as
    a worker killed by a signal."""
    loader = loop.dataloader
    for owner, name in _started_iterators(loop, loader):
        _stop_workers(getattr(owner, name), loader)
    if getattr(loader, '_iterator', None) is not None:  # persistent workers
        _stop_workers(loader._iterator, loader)


class PreemptionCheckpointHook(Hook):
    """On a signal, save at the next iteration boundary and exit; resume exactly (module
    docstring).

    Args:
        signals (Sequence[str | int]): the signals that ask the run to stop. Defaults to
            ``('SIGTERM', 'SIGUSR1')``.
        exit_code (int): what every process exits with after the save. Defaults to
            :data:`PREEMPTED_EXIT_CODE` (75).
        seed_samples (bool): seed each sample's augmentations by (seed, epoch, index).
            Defaults to True.
    """
    priority = 'LOWEST'  # after the scheduler, EMA and checkpoint hooks of the iteration

    def __init__(self, signals: Sequence[Union[str, int]] = ('SIGTERM', 'SIGUSR1'),
                 exit_code: int = PREEMPTED_EXIT_CODE, seed_samples: bool = True):
        if not signals:
            raise ValueError('PreemptionCheckpointHook: signals is empty; give at least one '
                             "signal name, e.g. ('SIGTERM', 'SIGUSR1')")
        self.signals = [_signal_number(s) for s in signals]
        if not isinstance(exit_code, int) or not 0 < exit_code < 256:
            raise ValueError(f'PreemptionCheckpointHook: exit_code must be an int in 1..255, '
                             f'got {exit_code!r}')
        self.exit_code, self.seed_samples = exit_code, seed_samples
        self.received: Optional[int] = None
        self._previous: Dict[int, Any] = {}
        self._resumed: Optional[dict] = None
        self._batch_offset = 0  # batches of the current epoch trained before a resume
        self._epoch = multiprocessing.Value('i', 0, lock=False)
        self._stopping = multiprocessing.Value('b', 0, lock=False)  # read by the workers
        self._training = False  # between before_train and after_train

    # ------------------------------------------------------------------ the signal
    def _handle(self, number: int, frame: Any) -> None:
        if self.received is None:
            self.received = number
        previous = self._previous.get(number)
        if callable(previous):
            previous(number, frame)

    def _install(self) -> None:
        for number in self.signals:
            self._previous[number] = signal.signal(number, self._handle)

    def _stop_workers_on_signals(self) -> None:
        self._stopping.value = 1

    def _restore(self) -> None:
        self._stop_workers_on_signals()
        for number, previous in self._previous.items():
            signal.signal(number, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    # ----------------------------------------------------------------- the run
    def before_run(self, runner) -> None:
        self._install()
        # runs before multiprocessing's own exit function (registered earlier), which
        # terminates the workers with SIGTERM
        atexit.register(self._stop_workers_on_signals)
        # workers started before the handlers (an iteration-based loop starts them when it
        # is built) would die of a signal and take the run down: stopped here, started
        # again in before_train, once they ignore the signals
        loop = getattr(runner, '_train_loop', None)
        if _is_loop(loop):
            _stop_train_workers(loop)

    def after_run(self, runner) -> None:
        self._restore()

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._resumed = checkpoint.get('meta', {}).get(CHECKPOINT_KEY)

    def before_train(self, runner) -> None:
        self._training = True
        loop = runner.train_loop
        loader = loop.dataloader
        for other in (runner._val_loop, runner._test_loop):
            if _is_loop(other) and hasattr(other, 'dataloader'):
                self._protect_workers(other.dataloader)
        self._protect_workers(loader)
        self._epoch.value = runner.epoch
        if self.seed_samples:
            for dataset in _datasets(loader.dataset):
                if hasattr(dataset, 'pipeline') and not isinstance(dataset.pipeline,
                                                                   SeededPipeline):
                    dataset.pipeline = SeededPipeline(dataset.pipeline, runner.seed,
                                                      self._epoch)
        state, sampler = self._resumed, _sampler(loader)
        if state is not None and state.get('sampler_seed') is not None and hasattr(
                sampler, 'seed'):
            sampler.seed = state['sampler_seed']
        if hasattr(sampler, '_indices_of_rank') and hasattr(sampler, 'indices'):
            # mmengine's infinite samplers draw from one generator made when they are built
            # (and already advanced by a loop that started early): the stream starts again,
            # from its beginning and with the seed set above
            sampler.indices = sampler._indices_of_rank()
        # the epoch loop iterates the whole epoch again: skip what was trained; the
        # iteration-based loop advances its iterator itself
        skip = state['batch_idx'] if state is not None and _by_epoch(loop) else 0
        batches = loader.batch_sampler
        if isinstance(batches, _PreemptibleBatches):
            batches = batches.batch_sampler
        batches = _PreemptibleBatches(batches, sampler, self.seed_samples, skip)
        object.__setattr__(loader, 'batch_sampler', batches)
        if callable(getattr(sampler, 'skip', None)):
            # onedl-mmengine's iteration-based loop resumes by the sampler's skip(n), past
            # the batch sampler: the draws it skips still count for the samples' epochs
            sampler.skip = _CountSkipped(getattr(sampler.skip, 'skip', sampler.skip),
                                         batches)
        # iterators a loop made before (with the old worker_init_fn, pipeline, seed and
        # batch sampler) start again, their workers with the signals ignored
        for owner, name in _started_iterators(loop, loader):
            _stop_workers(getattr(owner, name), loader)
            setattr(owner, name, iter(loader))
        if state is None:
            return
        self._batch_offset = state['batch_idx']
        print_log(f'PreemptionCheckpointHook: resuming the run stopped by '
                  f'{signal.Signals(state["signal"]).name} at {_position(state)}',
                  logger='current')

    def _protect_workers(self, loader: Any) -> None:
        if not isinstance(loader.worker_init_fn, _IgnoreSignalsInWorker):
            loader.worker_init_fn = _IgnoreSignalsInWorker(self.signals, self._stopping,
                                                           loader.worker_init_fn)

    def after_train(self, runner) -> None:
        self._training = False
        _stop_train_workers(runner.train_loop)

    def before_train_epoch(self, runner) -> None:
        self._epoch.value = runner.epoch
        if self._resumed is None:
            self._batch_offset = 0

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        if self._resumed is not None:  # the first iteration after a resume
            from mmengine.dist import get_rank
            states = self._resumed['random_states']
            set_random_states(states[min(get_rank(), len(states) - 1)])
            self._resumed = None

    def _signalled(self) -> int:
        """The signal some rank received (0: none), the same on every rank."""
        from mmengine.dist import all_reduce
        flag = torch.tensor([0 if self.received is None else self.received])
        all_reduce(flag, op='max')  # every rank stops at the same point
        return int(flag.item())

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        number = self._signalled()
        if not number:
            return
        next_batch = 0
        if _by_epoch(runner.train_loop):
            next_batch = self._batch_offset + batch_idx + 1
            if next_batch >= len(runner.train_loop.dataloader):
                # the epoch is trained: its end (epoch-based schedulers step, checkpoints)
                # belongs to it; after_train_epoch saves
                return
        elif _validation_follows(runner):
            # the uninterrupted run validates here (and draws random numbers doing it), a
            # resumed one would not: after_val_epoch saves once it is done
            return
        # the iteration is trained; mmengine counts it after this hook
        self._save_and_exit(runner, number, runner.epoch, runner.iter + 1, next_batch)

    def after_train_epoch(self, runner) -> None:
        number = self._signalled()
        if number and not _validation_follows(runner):
            # mmengine counts the epoch after this hook
            self._save_and_exit(runner, number, runner.epoch + 1, runner.iter, 0)

    def after_val_epoch(self, runner, metrics: Optional[dict] = None) -> None:
        # validation inside training finished; a signal during it saves the state of the
        # last trained iteration now, rather than after one more iteration
        if self._training:
            number = self._signalled()
            if number:
                self._save_and_exit(runner, number, runner.epoch, runner.iter, 0)

    # ---------------------------------------------------------------- the save
    def _save_and_exit(self, runner, number: int, epoch: int, iteration: int,
                       batch_idx: int) -> None:
        """Save what resuming at ``iteration`` (``epoch``, its ``batch_idx``, both counted
        as done) needs, then exit every process with ``exit_code``."""
        from mmengine.dist import all_gather_object, barrier, is_main_process

        from ..patches.atomic_writes import atomic_write
        state = dict(signal=number, iter=iteration, epoch=epoch, batch_idx=batch_idx,
                     by_epoch=_by_epoch(runner.train_loop),
                     sampler_seed=getattr(_sampler(runner.train_loop.dataloader), 'seed',
                                          None),
                     random_states=all_gather_object(random_states()))
        filename = f'preempted_iter_{state["iter"]}.pth'
        print_log(f'PreemptionCheckpointHook: {signal.Signals(number).name} received; saving '
                  f'{filename} at {_position(state)}, then exiting with {self.exit_code}',
                  logger='current')
        # mmengine's save_checkpoint takes epoch and iteration from meta when given
        runner.save_checkpoint(runner.work_dir, filename, meta={
            'epoch': state['epoch'], 'iter': state['iter'], CHECKPOINT_KEY: state})
        path = osp.join(runner.work_dir, filename)
        if is_main_process():
            atomic_write(path, osp.join(runner.work_dir, 'last_checkpoint'))
        barrier()  # every rank leaves after the file is complete
        self._restore()
        _stop_train_workers(runner.train_loop)
        # srun --kill-on-bad-exit (our slurm scripts', the toolkits') SIGTERMs the other tasks
        # as soon as one exits: a rank still on its way out would die of that signal and srun
        # return 143, not exit_code, and no requeue follow. The checkpoint is complete and this
        # process is leaving with exit_code anyway: it ignores such signals from here (SIG_IGN,
        # which interpreter finalization keeps; a Python handler it resets to SIG_DFL).
        for number in {signal.SIGTERM, *self.signals}:
            signal.signal(number, signal.SIG_IGN)
        raise SystemExit(self.exit_code)
