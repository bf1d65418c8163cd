"""Spatial-decay self-attention token mixers: EuSA (EVT) and MaSA (RMT), and the log of
the attention paths a model runs."""
import logging
from typing import Iterable, Optional, Sequence, Tuple

import torch
from einops import rearrange
from torch import Tensor, nn

from ...ops import (ATTN_IMPLS, ATTN_PATHS, DECAY_KINDS, LAYOUTS, ForwardTables, GridCache,
                    apply_rotary,
                    decay_log_rates, decomposed_decay_attention, decomposed_decay_probs,
                    resolve_impl, rotary_sin_cos, spatial_decay_attention, spatial_decay_probs,
                    window_side)
from ...ops.checks import check_choice, check_heads, check_positive_int, renamed_argument
from ...ops.recompute import norm_linears, training_op_active
from .conv import DWConv2d

# the grouped layouts of the ops, plus RMT's row-then-column decomposition
ATTN_MODES = (*LAYOUTS, 'decomposed')
_LOG = logging.getLogger('mmevt')  # the ops' logger: dynamo reorders its calls
_SPLIT_HEADS = 'b h w (n d) -> b (h w) n d'  # heads out of the channels, tokens row-major


class SpatialDecayAttention(nn.Module):
    """Multi-head self-attention with an explicit spatial decay prior.

    ``decay='euclidean'`` is EVT's EuSA, ``'manhattan'`` RMT's MaSA, ``'none'`` plain
    attention. ``mode`` chooses which tokens meet: a name in :data:`ATTN_MODES`, i.e. a
    layout of :data:`mmevt.ops.grouping.LAYOUTS` (described there) or ``'decomposed'``
    (RMT's row-then-column attention).

    Separate q/k/v linears, LePE (5x5 depth-wise conv on v added to the output), output
    linear, and optionally RMT's rotary shift on q and k. The decay rates are a
    non-persistent buffer: they never enter checkpoints.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads; must divide C.
        mode (str): a name in :data:`ATTN_MODES`. Defaults to ``'full'``.
        decay (str): a name in :data:`~mmevt.ops.decay.DECAY_KINDS`. Defaults to
            ``'euclidean'``.
        group_size (int): tokens per group of the grouped layouts (a square, ``s * s``, for
            the 2D ones); ``full`` and ``decomposed`` ignore it. Defaults to 49.
        init_value (float): decay ``init_value``. Defaults to 2.
        heads_range (float): decay ``heads_range``. Defaults to 4.
        use_rope (bool): apply RMT's rotary shift to q, k. Defaults to False.
        lepe (bool): add LePE. Defaults to True.
        attn_impl (str): a name in :data:`~mmevt.ops.attention.ATTN_IMPLS`. Defaults to
            ``'auto'``.
        cache (GridCache, optional): per-grid cache shared by the blocks of a stage.
            Defaults to None (a private cache).
        attn_drop_rate (float): dropout on the attention weights, in training only (as
            Swin's ``attn_drop_rate``); Flex cannot apply it, so ``'auto'`` runs SDPA while
            it is active and ``attn_impl='flex'`` with a rate is an error. Defaults to 0.
        bias_cache (GridCache, optional): deprecated name of ``cache``.

    Shapes: ``(B, H, W, C) -> (B, H, W, C)``.
    """
    deprecated_arguments = ('bias_cache', )

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 mode: str = 'full',
                 decay: str = 'euclidean',
                 group_size: int = 49,
                 init_value: float = 2.,
                 heads_range: float = 4.,
                 use_rope: bool = False,
                 lepe: bool = True,
                 attn_impl: str = 'auto',
                 cache: Optional[GridCache] = None,
                 attn_drop_rate: float = 0.,
                 bias_cache: Optional[GridCache] = None):
        super().__init__()
        cache = renamed_argument(type(self).__name__, 'bias_cache', 'cache', bias_cache, cache)
        self.head_dims = check_heads(embed_dims, num_heads)
        check_positive_int('group_size', group_size)
        self.mode = check_choice('mode', mode, ATTN_MODES)
        if mode in LAYOUTS and LAYOUTS[mode].grid:
            window_side(group_size, mode)
        self.decay = check_choice('decay', decay, DECAY_KINDS)
        self.attn_impl = check_choice('attn_impl', attn_impl, ATTN_IMPLS)
        if not 0 <= attn_drop_rate < 1:
            raise ValueError(f'attn_drop_rate must be in [0, 1), got {attn_drop_rate!r}')
        if attn_drop_rate and attn_impl != 'auto' and not ATTN_PATHS[attn_impl].dropout:
            raise ValueError(f'attn_impl={attn_impl!r} cannot apply attention dropout '
                             f'(attn_drop_rate={attn_drop_rate}); use attn_impl=\'auto\' '
                             "(it runs SDPA while dropout is active) or 'sdpa'")
        self.attn_drop_rate = attn_drop_rate
        self.embed_dims, self.num_heads = embed_dims, num_heads
        if use_rope and self.head_dims % 2:
            raise ValueError(f'use_rope needs an even head dim, got {self.head_dims}')
        self.group_size, self.use_rope = group_size, use_rope
        self.scale = self.head_dims ** -0.5
        self.register_buffer('log_gamma', decay_log_rates(num_heads, init_value, heads_range),
                             persistent=False)
        self.cache = cache if cache is not None else GridCache()
        self.q = nn.Linear(embed_dims, embed_dims)
        self.k = nn.Linear(embed_dims, embed_dims)
        self.v = nn.Linear(embed_dims, embed_dims)
        self.lepe = DWConv2d(embed_dims, 5) if lepe else None
        self.proj = nn.Linear(embed_dims, embed_dims)

    def extra_repr(self) -> str:
        return (f'mode={self.mode}, decay={self.decay}, heads={self.num_heads}, '
                f'group_size={self.group_size}, use_rope={self.use_rope}'
                + (f', attn_drop_rate={self.attn_drop_rate}' if self.attn_drop_rate else ''))

    @property
    def dropout_p(self) -> float:
        """The attention dropout of this call: the rate in training, 0 in eval."""
        return self.attn_drop_rate if self.training else 0.

    def resolved_impl(self, device: torch.device, *, needs_grad: bool = False,
                      compiling: Optional[bool] = None) -> str:
        """The attention path this module runs on ``device`` (``attn_impl`` resolved);
        ``compiling``: under ``torch.compile`` or not (None: as now)."""
        if self.mode == 'decomposed':  # row / column passes: reference or SDPA only
            return 'reference' if self.attn_impl == 'reference' else 'sdpa'
        return resolve_impl(self.attn_impl, device, self.head_dims, needs_grad=needs_grad,
                            dropout=self.dropout_p > 0, compiling=compiling)

    def projections(self, x: Tensor, norm: Optional[nn.LayerNorm] = None,
                    cpe: Optional[DWConv2d] = None) -> Tuple[Tensor, ...]:
        """q, k, v of ``x`` (after ``x + cpe(x)`` and ``norm`` when given), channels last,
        ``(B, H, W, C)``; with ``cpe`` the residual ``x + cpe(x)`` comes first.

        With ``norm`` in training these run as one op that saves ``x`` only, neither the
        residual nor the normalised tensor (:func:`~mmevt.ops.recompute.norm_linears`).
        """
        mods = [m for m in (norm, cpe) if m is not None]
        if norm is not None and training_op_active(x, *self.parameters(),
                                                 *(p for m in mods for p in m.parameters())):
            return norm_linears(x, norm.weight, norm.bias, norm.eps, self.q.weight,
                                self.q.bias, self.k.weight, self.k.bias, self.v.weight,
                                self.v.bias, cpe=(cpe.conv.weight, cpe.conv.bias)
                                if cpe is not None else (None, None))
        residual = () if cpe is None else (x + cpe(x), )
        x = residual[0] if residual else x
        if norm is not None:
            x = norm(x)
        return residual + (self.q(x), self.k(x), self.v(x))

    def head_queries_keys(self, q: Tensor, k: Tensor, hw: Tuple[int, int]
                          ) -> Tuple[Tensor, Tensor]:
        """The one place of the q / k steps after the projections, shared by
        :meth:`forward` (through :meth:`mix`) and :meth:`attention_probs`: q and k split
        into heads and rotary-shifted. An option that changes what attention compares
        (e.g. a q / k norm) goes here.

        Args:
            q, k (Tensor): projected, ``(B, H, W, C)``.
            hw (tuple[int, int]): the grid ``(H, W)``.

        Returns:
            tuple[Tensor, Tensor]: q, k of shape ``(B, H * W, heads, D)``, tokens row-major.
        """
        q = rearrange(q, _SPLIT_HEADS, n=self.num_heads)
        k = rearrange(k, _SPLIT_HEADS, n=self.num_heads)
        if self.use_rope:
            sin, cos = rotary_sin_cos(hw, self.head_dims, q.device)
            q, k = apply_rotary(q, sin, cos), apply_rotary(k, sin, cos)
        return q, k

    def queries_keys(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """The queries and keys the attention compares: the projections of ``x`` through
        :meth:`head_queries_keys`, as :meth:`forward` computes them.

        Args:
            x (Tensor): shape ``(B, H, W, C)``.

        Returns:
            tuple[Tensor, Tensor]: q, k of shape ``(B, H * W, heads, D)``, tokens row-major.
        """
        return self.head_queries_keys(self.q(x), self.k(x), x.shape[1:3])

    def attention_probs(self, x: Tensor) -> Tensor:
        """The attention probabilities this module applies to its values, as dense
        ``N x N`` matrices (for pictures and rollout; the forward never builds them).

        The reference path's own probabilities: per group, scattered to the token pairs
        (zero between tokens that share no group), or for ``decomposed`` the row and column
        passes composed. Attention dropout is not applied.

        Args:
            x (Tensor): shape ``(B, H, W, C)``.

        Returns:
            Tensor: shape ``(B, heads, N, N)`` with ``N = H * W`` row-major, each row sums
            to 1.
        """
        h, w = x.shape[1:3]
        q, k = self.queries_keys(x)
        if self.mode == 'decomposed':
            q, k = (rearrange(t, 'b (h w) n d -> b h w n d', h=h) for t in (q, k))
            return decomposed_decay_probs(q, k, self.log_gamma, self.scale)
        return spatial_decay_probs(q, k, (h, w), self.log_gamma, self.decay, self.mode,
                                   self.group_size, self.scale, self.cache)

    def forward(self, x: Tensor, norm: Optional[nn.LayerNorm] = None,
                tables: Optional[ForwardTables] = None) -> Tensor:
        """Args:
            x (Tensor): ``(B, H, W, C)``.
            norm (nn.LayerNorm, optional): the pre-norm, applied to ``x`` first (see
                :meth:`projections`). Defaults to None.
            tables (ForwardTables, optional): see :meth:`mix`. Defaults to None.
        """
        return self.mix(*self.projections(x, norm), tables)

    def mix(self, q: Tensor, k: Tensor, v: Tensor,
            tables: Optional[ForwardTables] = None) -> Tensor:
        """The attention of projected ``q, k, v`` (:meth:`projections`), LePE and the
        output projection.

        Args:
            q, k, v (Tensor): ``(B, H, W, C)``.
            tables (ForwardTables, optional): the decay tables of this forward pass of
                the stage (built once, shared by its blocks). Defaults to None (the
                module's ``cache``).

        Returns:
            Tensor: ``(B, H, W, C)``.
        """
        h, w = q.shape[1:3]
        q, k = self.head_queries_keys(q, k, (h, w))
        lepe = self.lepe(v) if self.lepe is not None else None
        v = rearrange(v, _SPLIT_HEADS, n=self.num_heads)
        if self.mode == 'decomposed':
            q, k, v = (rearrange(t, 'b (h w) n d -> b h w n d', h=h) for t in (q, k, v))
            out = decomposed_decay_attention(q, k, v, self.log_gamma, self.scale,
                                             self.attn_impl, dropout_p=self.dropout_p)
            out = rearrange(out, 'b h w n d -> b h w (n d)')
        else:
            out = spatial_decay_attention(q, k, v, (h, w), self.log_gamma, self.decay,
                                          self.mode, self.group_size, self.scale,
                                          self.attn_impl,
                                          self.cache if tables is None else tables,
                                          dropout_p=self.dropout_p)
            out = rearrange(out, 'b (h w) n d -> b h w (n d)', h=h)
        if lepe is not None:
            out = out + lepe
        return self.proj(out)


def log_attention_paths(owner: str, stages: Sequence[Iterable[nn.Module]], x: Tensor,
                        attn_impl: str, seen: set) -> None:
    """Log (INFO, ``mmevt`` logger) which attention path each stage runs, and which it
    would run under ``torch.compile`` where that differs, once per situation (device,
    training with attention dropout) recorded in ``seen``. Eager calls only: while
    ``torch.compile`` traces, reading or updating ``seen`` would become a guard that fails
    on the next call, compiling every model twice.

    The choice is the ops' :func:`~mmevt.ops.resolve_impl`; errors are left to them.

    Args:
        owner (str): the model's name in the message, e.g. ``'EVT'``.
        stages (Sequence[Iterable[nn.Module]]): each stage's token mixers.
        x (Tensor): the model's input (its device).
        attn_impl (str): the ``attn_impl`` the model was built with.
        seen (set): situations already logged; updated.
    """
    if torch.compiler.is_compiling():
        return
    mixers = [list(stage) for stage in stages]
    dropout = any(m.dropout_p > 0 for stage in mixers for m in stage
                  if isinstance(m, SpatialDecayAttention))
    situation = (x.device.type, dropout)
    if situation in seen:
        return
    seen.add(situation)

    def per_stage(compiling: bool) -> str:
        paths = []
        for i, stage in enumerate(mixers):
            impls = dict.fromkeys(m.resolved_impl(x.device, compiling=compiling)
                                  for m in stage if isinstance(m, SpatialDecayAttention))
            paths.append(f"{i}: {'/'.join(impls) or 'other mixer'}")
        return '; '.join(paths)

    eager, compiled = per_stage(False), per_stage(True)
    _LOG.info(f'{owner} attention paths on {x.device.type}'
              f"{', attention dropout' if dropout else ''} (attn_impl={attn_impl!r}), "
              f'per stage: {eager}'
              + (f'; under torch.compile: {compiled}' if compiled != eager else ''))
