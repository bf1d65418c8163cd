"""The sample stream of a preemptible run: what :class:`PreemptionCheckpointHook` changes in
the dataloaders so that a resumed run draws exactly the batches and augmentations the
uninterrupted run would have (per-sample seeds, batches tagged with their epoch, trained
batches skipped), and so that dataloader workers outlive a stop signal until the save."""
import os
import random
import signal
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader


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


class PreemptibleBatches:
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


class CountSkipped:
    """A sampler's ``skip(num_samples)`` (onedl-mmengine's ``InfiniteSampler``: the stream
    continues after its first ``num_samples`` indices) that tells ``batches`` how many
    indices the stream skipped."""

    def __init__(self, skip: Callable, batches: PreemptibleBatches):
        self.skip, self.batches = skip, batches

    def __call__(self, num_samples: int) -> None:
        self.skip(num_samples)
        self.batches.skipped_samples = num_samples


class IgnoreSignalsInWorker:
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


def datasets_of(dataset: Any) -> List[Any]:
    """``dataset`` and the datasets inside wrappers (Concat, Repeat, ClassBalanced)."""
    found = [dataset]
    for inner in getattr(dataset, 'datasets', []) or []:
        found += datasets_of(inner)
    if getattr(dataset, 'dataset', None) is not None:
        found += datasets_of(dataset.dataset)
    return found


def sampler_of(loader: Any) -> Any:
    sampler = getattr(loader.batch_sampler, 'sampler', None)
    return loader.sampler if sampler is None else sampler


def started_iterators(loop: Any, loader: Any) -> List[tuple]:
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


def stop_workers(iterator: Any, loader: Any) -> None:
    if hasattr(iterator, '_shutdown_workers'):
        iterator._shutdown_workers()
    if getattr(loader, '_iterator', None) is iterator:  # persistent workers: not reused
        loader._iterator = None


def stop_train_workers(loop: Any) -> None:
    """End the workers of ``loop``'s iterators the way the dataloader ends them. Left to the
    interpreter's exit, multiprocessing would SIGTERM them, and torch would report each as
    a worker killed by a signal."""
    loader = loop.dataloader
    for owner, name in started_iterators(loop, loader):
        stop_workers(getattr(owner, name), loader)
    if getattr(loader, '_iterator', None) is not None:  # persistent workers
        stop_workers(loader._iterator, loader)
