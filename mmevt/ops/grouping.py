"""1D token grouping (EuSA-g) and 1D dilated grouping (EuSA-d) and their exact inverses.

Both work on the row-major token sequence of a stage, so a group holds a fixed number of
tokens whatever the image size. Layouts are produced with pad + view/transpose only (no
gathers), which keeps them cheap and ``torch.compile`` friendly.
"""
import torch.nn.functional as F
from torch import Tensor

from .decay import GROUP_MODES, check_choice, num_groups


def group_tokens(x: Tensor, group_size: int, mode: str) -> Tensor:
    """Split a token sequence into groups.

    Args:
        x (Tensor): shape ``(B, N, C)``.
        group_size (int): tokens per group ``S``.
        mode (str): ``'group'`` (consecutive tokens), ``'dilate'`` (token t in group
            ``t mod G``) or ``'full'`` (one group of all N tokens).

    Returns:
        Tensor: shape ``(B, G, S, C)``, zero-padded at the sequence end
        (``(B, 1, N, C)`` for ``full``).
    """
    check_choice('mode', mode, GROUP_MODES)
    b, n, c = x.shape
    if mode == 'full':
        return x[:, None]
    g = num_groups(n, group_size)
    if g * group_size != n:
        x = F.pad(x, (0, 0, 0, g * group_size - n))
    if mode == 'group':
        return x.view(b, g, group_size, c)
    return x.view(b, group_size, g, c).transpose(1, 2)


def ungroup_tokens(x: Tensor, num_tokens: int, mode: str) -> Tensor:
    """Inverse of :func:`group_tokens`; padded slots are dropped.

    Args:
        x (Tensor): shape ``(B, G, S, C)``.
        num_tokens (int): the original sequence length N.
        mode (str): the mode used to group.

    Returns:
        Tensor: shape ``(B, N, C)``.
    """
    check_choice('mode', mode, GROUP_MODES)
    b, g, s, c = x.shape
    if mode == 'dilate':
        x = x.transpose(1, 2)
    return x.reshape(b, g * s, c)[:, :num_tokens]
