"""Attention with a spatial decay bias: one plain reference and two fast paths.

All paths compute, per head h and group,
``softmax(q k^T * scale + log(gamma_h) * dist(p_i, p_j)) v`` and must agree:

- ``reference``: explicit logits, ``softmax``, matmul. Slow, obviously right.
- ``sdpa``: ``F.scaled_dot_product_attention`` with the (cached) additive bias.
- ``flex``: FlexAttention; the decay is computed inside the kernel from token coordinates
  (``score_mod``), so no ``N x N`` bias tensor exists, and padded keys are removed by a
  cached ``BlockMask`` (only groups that contain padding pay for the mask). Fused on GPUs
  under ``torch.compile``; in eager mode it runs PyTorch's unfused fallback (for tests).

What each path supports is one :class:`AttnPath` record in :data:`ATTN_PATHS`;
:func:`impl_unavailable` (can a path run here at all) and :func:`choose_impl` (the rule
``'auto'`` follows among those that can) read it, :func:`resolve_impl` applies both.
"""
import logging
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor

from .cache import GridCache
from .checks import check_choice, renamed_argument
from .decay import (DECAY_KINDS, decay_bias, grouped_coords, grouped_distance)
from .grouping import group_tokens, has_padding, ungroup_pairs, ungroup_tokens

logger = logging.getLogger('mmevt')

try:  # FlexAttention exists from torch 2.5; the model must still import without it.
    from torch.nn.attention.flex_attention import create_block_mask as _create_block_mask
    from torch.nn.attention.flex_attention import flex_attention as _flex_attention
except ImportError:  # pragma: no cover - depends on the installed torch
    _create_block_mask = _flex_attention = None

# The backbone logs its path choice once per model, also while torch.compile traces it:
# dynamo moves this logger's calls after the graph instead of breaking it (torch >= 2.4).
_reorderable = getattr(getattr(torch, '_dynamo', None), 'config', None)
if _reorderable is not None and hasattr(_reorderable, 'reorderable_logging_functions'):
    _reorderable.reorderable_logging_functions.add(logger.info)


def flex_available() -> bool:
    """Whether this torch has FlexAttention."""
    return _flex_attention is not None


def flex_fits(head_dim: Optional[int]) -> bool:
    """Whether Flex kernels tile this head dim (a power of two >= 16; None: unknown, yes)."""
    return head_dim is None or (head_dim >= 16 and head_dim & (head_dim - 1) == 0)


def _flex_missing() -> Optional[str]:
    if flex_available():
        return None
    return f'needs torch >= 2.5 (FlexAttention); this is torch {torch.__version__}'


def _flex_fused(device: torch.device, head_dim: Optional[int], compiling: bool) -> bool:
    # fused only under torch.compile on CUDA; eager Flex materialises the scores
    return device.type == 'cuda' and compiling and flex_fits(head_dim)


class AttnPath(NamedTuple):
    """What one attention path supports.

    Attributes:
        dropout (bool): applies attention dropout (training with ``dropout_p > 0``).
        cpu_backward (bool): has a backward pass on CPU.
        padding (str): how padded keys get zero weight: ``'bias'`` (``-inf`` in the
            additive decay bias) or ``'block_mask'`` (a Flex ``BlockMask``).
        head_dims (str): which head dims it runs; documentation, the rule is in ``auto``.
        missing (callable): ``() -> str | None``, why it cannot run in this torch at all.
        auto (callable): ``(device, head_dim, compiling) -> bool``, whether ``'auto'``
            prefers it (the first preferred path that can run wins, in table order).
    """
    dropout: bool
    cpu_backward: bool
    padding: str
    head_dims: str
    missing: Callable[[], Optional[str]] = lambda: None
    auto: Callable[[torch.device, Optional[int], bool], bool] = lambda *case: False


ATTN_PATHS: Dict[str, AttnPath] = {
    # explicit logits, softmax, matmul: slow, obviously right
    'reference': AttnPath(dropout=True, cpu_backward=True, padding='bias', head_dims='any'),
    # FlexAttention, the decay computed in-kernel (no bias tensor): when it runs fused
    'flex': AttnPath(dropout=False, cpu_backward=False, padding='block_mask',
                     head_dims='any (fused: a power of two >= 16)', missing=_flex_missing,
                     auto=_flex_fused),
    # fused scaled_dot_product_attention with the cached bias: everywhere else (it keeps no
    # probabilities for backward; on CPU the reference path is faster on small groups
    # with head dim 32 and slower on the large stage-1 grids, so neither wins everywhere)
    'sdpa': AttnPath(dropout=True, cpu_backward=True, padding='bias', head_dims='any',
                     auto=lambda *case: True),
}
ATTN_IMPLS = ('auto', 'reference', 'sdpa', 'flex')
assert set(ATTN_IMPLS) == {'auto', *ATTN_PATHS}


def impl_unavailable(impl: str, device: torch.device, *, needs_grad: bool = False,
                     dropout: bool = False) -> Optional[str]:
    """Why attention path ``impl`` cannot run here, or None when it can (:data:`ATTN_PATHS`).

    Args:
        impl (str): a name in :data:`ATTN_PATHS`.
        device (torch.device): where the inputs are.
        needs_grad (bool): whether a backward pass will follow. Defaults to False.
        dropout (bool): whether attention dropout is to be applied. Defaults to False.

    Returns:
        str | None: the reason, phrased to follow ``attn_impl='flex'``.
    """
    path = ATTN_PATHS[impl]
    reason = path.missing()
    if reason is not None:
        return reason
    if device.type == 'cpu' and needs_grad and not path.cpu_backward:
        return "has no backward on CPU in this torch; use attn_impl='sdpa' (or 'auto')"
    if dropout and not path.dropout:
        return ("cannot apply attention dropout (attn_drop_rate > 0 in training); use "
                "attn_impl='sdpa' (or 'auto')")
    return None


def choose_impl(device: torch.device, head_dim: Optional[int] = None, *,
                needs_grad: bool = False, dropout: bool = False,
                compiling: Optional[bool] = None) -> str:
    """The rule of ``attn_impl='auto'``: the first path of :data:`ATTN_PATHS` that prefers
    this case and can run here.

    That is FlexAttention on CUDA while ``torch.compile`` traces the model (the only case
    where Flex runs fused: decay in-kernel, no bias tensor, block-sparse padding) when its
    kernels tile the head dim and no dropout is asked for; fused SDPA with a cached bias
    everywhere else (eager Flex materialises the scores; SDPA keeps no probabilities for
    the backward pass).
    ``compiling``: whether ``torch.compile`` is tracing (None: ask torch), so a report can
    say what the rule picks in a case it is not running in.
    """
    if compiling is None:
        compiling = torch.compiler.is_compiling()
    for name, path in ATTN_PATHS.items():
        if path.auto(device, head_dim, compiling) and impl_unavailable(
                name, device, needs_grad=needs_grad, dropout=dropout) is None:
            return name
    raise AssertionError('no attention path can run')  # sdpa always can


def resolve_impl(impl: str, device: torch.device, head_dim: Optional[int] = None, *,
                 needs_grad: bool = False, dropout: bool = False,
                 compiling: Optional[bool] = None) -> str:
    """The concrete path for ``impl``: ``'auto'`` by :func:`choose_impl`, an explicit path
    after checking it can run (:func:`impl_unavailable`). ``compiling``: as in
    :func:`choose_impl`.

    Raises:
        ValueError: ``impl`` is unknown or cannot run here.
    """
    check_choice('attn_impl', impl, ATTN_IMPLS)
    if impl == 'auto':
        return choose_impl(device, head_dim, needs_grad=needs_grad, dropout=dropout,
                           compiling=compiling)
    reason = impl_unavailable(impl, device, needs_grad=needs_grad, dropout=dropout)
    if reason is not None:
        raise ValueError(f'attn_impl={impl!r} {reason}')
    return impl


def attention_probs(q: Tensor, k: Tensor, bias: Optional[Tensor], scale: float) -> Tensor:
    """The attention probabilities of the reference path, ``softmax(q k^T * scale + bias)``.

    Args:
        q, k (Tensor): shape ``(B, H, L, D)``.
        bias (Tensor, optional): broadcastable to ``(B, H, L, L)``.
        scale (float): logit scale.

    Returns:
        Tensor: shape ``(B, H, L, L)``, each row sums to 1.
    """
    logits = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        logits = logits + bias
    return logits.softmax(dim=-1)


def attention_reference(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor],
                        scale: float, dropout_p: float = 0.) -> Tensor:
    """Plain attention with an additive bias.

    Args:
        q, k, v (Tensor): shape ``(B, H, L, D)``.
        bias (Tensor, optional): broadcastable to ``(B, H, L, L)``.
        scale (float): logit scale.
        dropout_p (float): dropout on the attention weights (inverted: kept weights are
            scaled by ``1 / (1 - p)``). Defaults to 0.

    Returns:
        Tensor: shape ``(B, H, L, D)``.
    """
    probs = attention_probs(q, k, bias, scale).to(v.dtype)
    if dropout_p > 0:
        probs = F.dropout(probs, dropout_p)
    return probs @ v


def attention_sdpa(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor],
                   scale: float, dropout_p: float = 0.) -> Tensor:
    """Fused ``scaled_dot_product_attention``; same contract as :func:`attention_reference`."""
    if bias is not None and bias.dtype != q.dtype:
        bias = bias.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale,
                                          dropout_p=dropout_p)


def _decay_score_mod(hw: Tuple[int, int], group_size: int, mode: str, decay: str,
                     log_gamma: Tensor, batch: int):
    """``score_mod`` adding the decay of the grouped layout ``(B * G, heads, S, D)``.

    Groups go into Flex's batch dim, batch-major (``(b g)``), not into its heads: Flex
    marks the head count static under ``torch.compile``, so groups there (their number
    changes with the input size) would trace again for every size. The coordinate tables
    are repeated per image so that the batch index picks a group's row directly.
    """
    pos, _ = grouped_coords(hw, group_size, mode, log_gamma.device)  # (G, S, 2)
    pos = pos.repeat(batch, 1, 1)  # (B * G, S, 2)
    rows, cols = pos[..., 0].contiguous(), pos[..., 1].contiguous()
    log_gamma = log_gamma.float()

    def score_mod(score, b, h, q_idx, kv_idx):
        dr = rows[b, q_idx] - rows[b, kv_idx]
        dc = cols[b, q_idx] - cols[b, kv_idx]
        if decay == 'euclidean':
            dist = torch.sqrt(dr * dr + dc * dc)
        elif decay == 'manhattan':
            dist = dr.abs() + dc.abs()
        else:
            dist = dr * 0
        return score + (log_gamma[h] * dist).to(score.dtype)

    return score_mod


def padding_block_mask(hw: Tuple[int, int], group_size: int, mode: str, batch: int,
                       device: torch.device):
    """Flex ``BlockMask`` hiding the padded key slots of the grouped layout.

    Returns:
        BlockMask | None: for ``(batch * G, heads, S, S)`` scores (groups batch-major in
        Flex's batch dim, broadcast over heads), or None when the grid fills every group
        (no padding, nothing to mask). Under ``torch.compile`` the mask is always built
        (all blocks full where nothing is padded, so Flex skips the mask there): asking
        whether a size pads would make the compiled graph guard on it and trace again
        for sizes on the other side.
    """
    if not torch.compiler.is_compiling() and not has_padding(hw, group_size, mode):
        return None
    _, valid = grouped_coords(hw, group_size, mode, device)  # (G, S)
    valid = valid.repeat(batch, 1)  # (B * G, S)
    rows, s = valid.shape

    def mask_mod(b, h, q_idx, kv_idx):
        return valid[b, kv_idx]

    return _create_block_mask(mask_mod, rows, None, s, s, device=device)


def _group_batch(x: Tensor, hw: Tuple[int, int], group_size: int, mode: str) -> Tensor:
    """``(B, N, heads, D) -> (B * G, heads, S, D)``: the groups in the batch dim,
    batch-major, heads as they come out of the channels. Every path's layout: a view of
    ``x`` for ``group`` (and for every layout at batch 1) after the padding, so the
    grouping copies nothing where a grid fills its groups; and SDPA's CPU kernel writes
    its output as ``(B * G, S, heads, D)`` in memory, which is the token order again."""
    return rearrange(group_tokens(x, group_size, mode, hw), 'b g s h d -> (b g) h s d')


def _memo(cache: Optional[GridCache], key: tuple, hw: Tuple[int, int], group_size: int,
          mode: str, decay: str, device: torch.device, build: Callable, batch: int = 0):
    """A per-grid table from the stage's cache or forward tables; without a cache it is
    built on every call. Sizes (grid, device, batch) are kept apart from the key: within
    one forward pass of a stage they do not change (:class:`~.cache.ForwardTables`)."""
    if cache is None:
        return build()
    return cache.get(key + (group_size, mode, decay), build, (tuple(hw), device, batch))


def _layout_bias(hw: Tuple[int, int], group_size: int, mode: str, decay: str,
                 log_gamma: Tensor, dtype: torch.dtype, device: torch.device,
                 cache: Optional[GridCache], batch: int) -> Tensor:
    """The additive decay bias of the grouped layout for ``batch`` images,
    ``(batch * G, heads, S, S)``, or ``(1, heads, N, N)`` for one group (memoised). With
    several groups and images the table is repeated per image: SDPA broadcasts a mask
    over dims of size 1 only."""
    def build() -> Tensor:
        bias = decay_bias(log_gamma, grouped_distance(hw, group_size, mode, decay, device))
        bias = bias.to(dtype)
        if bias.shape[0] == 1:  # one group: broadcast over the batch
            return bias
        return bias.expand(batch, *bias.shape).reshape(-1, *bias.shape[1:])
    return _memo(cache, ('bias', str(dtype)), hw, group_size, mode, decay, device, build,
                 batch)


def _check_grid(q: Tensor, hw: Tuple[int, int], log_gamma: Tensor, decay: str) -> None:
    check_choice('decay', decay, DECAY_KINDS)
    assert q.shape[1] == hw[0] * hw[1], f'{q.shape[1]} tokens do not fill a {hw} grid'
    assert log_gamma.numel() == q.shape[2]


def spatial_decay_attention(q: Tensor,
                            k: Tensor,
                            v: Tensor,
                            hw: Tuple[int, int],
                            log_gamma: Tensor,
                            decay: str = 'euclidean',
                            mode: str = 'full',
                            group_size: int = 49,
                            scale: Optional[float] = None,
                            attn_impl: str = 'auto',
                            cache: Optional[GridCache] = None,
                            *,
                            dropout_p: float = 0.,
                            impl: Optional[str] = None,
                            bias_cache: Optional[GridCache] = None) -> Tensor:
    """Spatial-decay attention over a stage grid, full or inside groups (1D or 2D).

    Args:
        q, k, v (Tensor): shape ``(B, N, heads, D)`` with ``N = H * W`` in row-major order.
        hw (tuple[int, int]): the grid ``(H, W)``.
        log_gamma (Tensor): per-head ``log(gamma_h)``, shape ``(heads,)``.
        decay (str): a name in :data:`~mmevt.ops.decay.DECAY_KINDS` (``'euclidean'``: EuSA,
            ``'manhattan'``: MaSA). Defaults to ``'euclidean'``.
        mode (str): a layout of :data:`~mmevt.ops.grouping.LAYOUTS`. Defaults to ``'full'``.
        group_size (int): tokens per group (ignored for ``full``; a square for the 2D
            modes). Defaults to 49.
        scale (float, optional): logit scale. Defaults to ``D ** -0.5``.
        attn_impl (str): ``'auto'`` or a path of :data:`ATTN_PATHS`. Defaults to ``'auto'``.
        cache (GridCache | ForwardTables, optional): memo for the additive bias (``sdpa``,
            ``reference``) or the score_mod and padding block mask (``flex``, per batch
            size: groups go into Flex's batch dim). Defaults to None (built on every
            call).
        dropout_p (float): attention dropout; pass 0 outside training. Flex cannot apply
            it (``'auto'`` then runs SDPA). Defaults to 0.
        impl, bias_cache: deprecated names of ``attn_impl`` and ``cache``.

    Returns:
        Tensor: shape ``(B, N, heads, D)``.
    """
    name = 'spatial_decay_attention'
    attn_impl = renamed_argument(name, 'impl', 'attn_impl', impl,
                                 None if attn_impl == 'auto' else attn_impl) or 'auto'
    cache = renamed_argument(name, 'bias_cache', 'cache', bias_cache, cache)
    _check_grid(q, hw, log_gamma, decay)
    b, n, _, d = q.shape
    scale = d ** -0.5 if scale is None else scale
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    attn_impl = resolve_impl(attn_impl, q.device, d, needs_grad=needs_grad,
                             dropout=dropout_p > 0)
    if attn_impl == 'flex':
        qg, kg, vg = (_group_batch(t, hw, group_size, mode) for t in (q, k, v))
        score_mod = _memo(cache, ('flex_decay', ), hw, group_size, mode, decay, q.device,
                          lambda: _decay_score_mod(hw, group_size, mode, decay, log_gamma, b),
                          b)
        block_mask = _memo(cache, ('flex_pad', ), hw, group_size, mode, decay, q.device,
                           lambda: padding_block_mask(hw, group_size, mode, b, q.device), b)
        out = _flex_attention(qg, kg, vg, score_mod=score_mod, block_mask=block_mask,
                              scale=scale)
    else:
        qg, kg, vg = (_group_batch(t, hw, group_size, mode) for t in (q, k, v))
        bias = _layout_bias(hw, group_size, mode, decay, log_gamma, qg.dtype, q.device, cache,
                            b)
        attn = attention_reference if attn_impl == 'reference' else attention_sdpa
        out = attn(qg, kg, vg, bias, scale, dropout_p)
    return ungroup_tokens(rearrange(out, '(b g) h s d -> b g s h d', b=b), n, mode, hw)


def spatial_decay_probs(q: Tensor,
                        k: Tensor,
                        hw: Tuple[int, int],
                        log_gamma: Tensor,
                        decay: str = 'euclidean',
                        mode: str = 'full',
                        group_size: int = 49,
                        scale: Optional[float] = None,
                        cache: Optional[GridCache] = None) -> Tensor:
    """The attention probabilities that :func:`spatial_decay_attention` applies, as dense
    ``N x N`` matrices: its reference path's, per group, scattered to the token pairs.

    Args:
        q, k (Tensor): shape ``(B, N, heads, D)``, row-major over the grid.
        hw, log_gamma, decay, mode, group_size, scale, cache: as in
            :func:`spatial_decay_attention`.

    Returns:
        Tensor: shape ``(B, heads, N, N)``, each row sums to 1; zero between tokens that
        share no group.
    """
    _check_grid(q, hw, log_gamma, decay)
    b, d = q.shape[0], q.shape[3]
    scale = d ** -0.5 if scale is None else scale
    qg, kg = (_group_batch(t, hw, group_size, mode) for t in (q, k))
    bias = _layout_bias(hw, group_size, mode, decay, log_gamma, qg.dtype, q.device, cache, b)
    probs = attention_probs(qg, kg, bias, scale)
    probs = rearrange(probs, '(b g) h s t -> b h g s t', b=b)
    return ungroup_pairs(probs, hw, group_size, mode)
