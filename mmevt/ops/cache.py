"""The per-grid cache: attention inputs built once per input size and shared by a stage."""
import warnings
from collections import OrderedDict
from typing import Callable, Dict, Hashable, TypeVar

import torch

T = TypeVar('T')


class GridCache:
    """Bounded memo of per-grid attention inputs (additive decay biases, Flex ``score_mod``
    tables and block masks), with a single API: :meth:`get`.

    One instance lives in each stage: all blocks of a stage share the decay rates and the
    grid, so a table is built once per input size instead of once per block. Only
    ``max_entries`` entries are kept (multi-scale training sees many sizes); the least
    recently used goes first.

    Args:
        max_entries (int): entries kept. Defaults to 8.
    """

    _MISSING = object()

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._store: 'OrderedDict[Hashable, object]' = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], T], sizes: tuple = ()) -> T:
        """``build()``'s result, computed once per ``key + sizes`` (None results are kept
        too).

        The key and sizes together must name everything the result depends on (grid,
        sizes, mode, decay, device, dtype, ...). While ``torch.compile`` traces, the cache
        is not used: the table is built in the graph (see :meth:`forward_tables`).
        """
        key = key + sizes
        if torch.compiler.is_compiling():
            # Dynamo guards on what it reads of the dict: a store while tracing (or by a
            # later eager call) failed the guard on the next call, compiling every model
            # twice. The table is built inside the graph instead (cheap, fused).
            return build()
        value = self._store.get(key, self._MISSING)
        if value is self._MISSING:
            value = self._store[key] = build()
            while len(self._store) > self.max_entries:
                self._store.popitem(last=False)
        else:
            self._store.move_to_end(key)
        return value

    def forward_tables(self) -> 'ForwardTables':
        """A memo for one forward pass of the stage (see :class:`ForwardTables`)."""
        return ForwardTables(self)

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._store


class ForwardTables:
    """The tables of one forward pass of a stage, built once and passed to its blocks.

    Same API as :class:`GridCache`. In eager mode it is the stage's :class:`GridCache`
    (kept across calls, one entry per input size). While ``torch.compile`` traces, that
    cache cannot be read (a guard on it would recompile), so this object keeps the tables
    of the one forward pass itself: the graph builds each table once per stage, not once
    per block. Its keys leave out ``sizes`` (symbolic under dynamic shapes, and fixed
    within one forward pass of a stage).

    Args:
        cache (GridCache): the stage's cache.
    """

    def __init__(self, cache: GridCache):
        self.cache = cache
        self.tables: Dict[Hashable, object] = {}

    def get(self, key: Hashable, build: Callable[[], T], sizes: tuple = ()) -> T:
        """``build()``'s result for ``key`` (``sizes``: as :meth:`GridCache.get`)."""
        if not torch.compiler.is_compiling():
            return self.cache.get(key, build, sizes)
        if key not in self.tables:
            self.tables[key] = build()
        return self.tables[key]


class DecayBiasCache(GridCache):
    """Deprecated name of :class:`GridCache` (kept one release)."""

    def __init__(self, max_entries: int = 8):
        warnings.warn('DecayBiasCache is deprecated and will be removed in the next release; '
                      'use GridCache (one API: get(key, build))', FutureWarning, stacklevel=2)
        super().__init__(max_entries)


__all__ = ['DecayBiasCache', 'ForwardTables', 'GridCache']
