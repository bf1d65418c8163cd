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
(:mod:`mmevt.apis.torchrun`, behind ``tools/dist_train.sh``) reads the hook's signals from the
config and forwards them to every rank's process group, each rank records it, and every
worker ignores it. The sample stream's side (seeds, tagged batches, workers):
:mod:`mmevt.engine.sample_stream`; which signals may stop a run: :mod:`mmevt.engine.stop_signals`.
"""
import atexit
import multiprocessing
import os.path as osp
import signal
from typing import Any, Dict, Optional, Sequence, Union

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log

from .sample_stream import (CountSkipped, IgnoreSignalsInWorker, PreemptibleBatches,
                            SeededPipeline, datasets_of, random_states, sampler_of,
                            set_random_states, started_iterators, stop_train_workers,
                            stop_workers)
from .stop_signals import DEFAULT_STOP_SIGNALS, signal_name, stop_signal_numbers

# sysexits.h's EX_TEMPFAIL: "a temporary failure; the user is invited to retry"
PREEMPTED_EXIT_CODE = 75
CHECKPOINT_KEY = 'preemption'


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


def _is_loop(value: Any) -> bool:
    from mmengine.runner import BaseLoop
    return isinstance(value, BaseLoop)


class PreemptionCheckpointHook(Hook):
    """On a signal, save at the next iteration boundary and exit; resume exactly (module
    docstring).

    Args:
        signals (Sequence[str | int]): the signals that ask the run to stop, from
            :data:`~mmevt.engine.stop_signals.STOP_SIGNALS_ALLOWED`; the launchers forward
            exactly these. Defaults to :data:`~mmevt.engine.stop_signals.DEFAULT_STOP_SIGNALS`
            (``('SIGTERM', 'SIGUSR1')``).
        exit_code (int): what every process exits with after the save. Defaults to
            :data:`PREEMPTED_EXIT_CODE` (75).
        seed_samples (bool): seed each sample's augmentations by (seed, epoch, index).
            Defaults to True.
    """
    priority = 'LOWEST'  # after the scheduler, EMA and checkpoint hooks of the iteration

    def __init__(self, signals: Sequence[Union[str, int]] = DEFAULT_STOP_SIGNALS,
                 exit_code: int = PREEMPTED_EXIT_CODE, seed_samples: bool = True):
        self.signals = list(stop_signal_numbers(signals))
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
            stop_train_workers(loop)

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
            for dataset in datasets_of(loader.dataset):
                if hasattr(dataset, 'pipeline') and not isinstance(dataset.pipeline,
                                                                   SeededPipeline):
                    dataset.pipeline = SeededPipeline(dataset.pipeline, runner.seed,
                                                      self._epoch)
        state, sampler = self._resumed, sampler_of(loader)
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
        if isinstance(batches, PreemptibleBatches):
            batches = batches.batch_sampler
        batches = PreemptibleBatches(batches, sampler, self.seed_samples, skip)
        object.__setattr__(loader, 'batch_sampler', batches)
        if callable(getattr(sampler, 'skip', None)):
            # onedl-mmengine's iteration-based loop resumes by the sampler's skip(n), past
            # the batch sampler: the draws it skips still count for the samples' epochs
            sampler.skip = CountSkipped(getattr(sampler.skip, 'skip', sampler.skip),
                                         batches)
        # iterators a loop made before (with the old worker_init_fn, pipeline, seed and
        # batch sampler) start again, their workers with the signals ignored
        for owner, name in started_iterators(loop, loader):
            stop_workers(getattr(owner, name), loader)
            setattr(owner, name, iter(loader))
        if state is None:
            return
        self._batch_offset = state['batch_idx']
        print_log(f'PreemptionCheckpointHook: resuming the run stopped by '
                  f'{signal_name(state["signal"])} at {_position(state)}',
                  logger='current')

    def _protect_workers(self, loader: Any) -> None:
        if not isinstance(loader.worker_init_fn, IgnoreSignalsInWorker):
            loader.worker_init_fn = IgnoreSignalsInWorker(self.signals, self._stopping,
                                                           loader.worker_init_fn)

    def after_train(self, runner) -> None:
        self._training = False
        stop_train_workers(runner.train_loop)

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
                     sampler_seed=getattr(sampler_of(runner.train_loop.dataloader), 'seed',
                                          None),
                     random_states=all_gather_object(random_states()))
        filename = f'preempted_iter_{state["iter"]}.pth'
        print_log(f'PreemptionCheckpointHook: {signal_name(number)} received; saving '
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
        stop_train_workers(runner.train_loop)
        # srun --kill-on-bad-exit (our slurm scripts', the toolkits') SIGTERMs the other tasks
        # as soon as one exits: a rank still on its way out would die of that signal and srun
        # return 143, not exit_code, and no requeue follow. The checkpoint is complete and this
        # process is leaving with exit_code anyway: it ignores such signals from here (SIG_IGN,
        # which interpreter finalization keeps; a Python handler it resets to SIG_DFL).
        for number in {signal.SIGTERM, *self.signals}:
            signal.signal(number, signal.SIG_IGN)
        raise SystemExit(self.exit_code)
