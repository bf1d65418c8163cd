"""Params / FLOPs counting."""
from mmevt.analysis import count_macs, model_complexity
from mmevt.analysis.complexity import _RMTClassifier
from mmevt.models import EVT


def test_macs_count_attention_matmuls_and_match_hand_count():
    # one full-attention block on a 4x4 grid: count q k^T and A v by hand
    model = EVT(dict(embed_dims=[8], depths=[1], num_heads=[2], mixers='full', cpe=False,
                     lepe=False, ffn_dwconv=False, mlp_ratios=1), out_indices=(0, ),
                out_norm_cfg=None)
    n, c = 16 * 16, 8  # 64x64 input -> 16x16 grid after the 4x stem
    stem = (32 * 32 * 4 * 3 * 9 + 32 * 32 * 4 * 4 * 9 + 16 * 16 * 8 * 4 * 9 +
            16 * 16 * 8 * 8 * 9)
    linears = n * c * c * 4 + n * c * c * 2  # q, k, v, proj + fc1, fc2
    attention = 2 * n * n * c  # q k^T and A v over all heads
    assert count_macs(model, (1, 3, 64, 64)) == stem + linears + attention


def test_breakdown_splits_the_total_by_kind_of_layer():
    from mmevt.analysis import macs_breakdown
    model = EVT(dict(embed_dims=[8], depths=[1], num_heads=[2], mixers='full', cpe=False,
                     lepe=False, ffn_dwconv=False, mlp_ratios=1), out_indices=(0, ),
                out_norm_cfg=None)
    n, c = 16 * 16, 8
    parts = macs_breakdown(model, (1, 3, 64, 64))
    assert parts['total'] == count_macs(model, (1, 3, 64, 64))
    assert sum(v for k, v in parts.items() if k != 'total') == parts['total']
    assert parts['attention'] == 2 * n * n * c  # q k^T and A v, by hand
    assert parts['qkv_proj'] == 4 * n * c * c and parts['ffn_linears'] == 2 * n * c * c
    assert parts['cpe'] == parts['lepe'] == parts['ffn_dwconv'] == parts['head'] == 0
    full = macs_breakdown(_RMTClassifier('rmt-test'), (1, 3, 64, 64))
    assert all(full[k] > 0 for k in full)  # every kind is found in a real model


def test_counting_does_not_change_the_attention_path():
    model = EVT('evt-test', attn_impl='sdpa')
    count_macs(model, (1, 3, 64, 64))
    assert all(m.attn_impl == 'sdpa' for m in model.modules() if hasattr(m, 'attn_impl'))


def test_rmt_t_params_match_the_authors_and_grouping_is_cheaper():
    from mmevt.models.backbones.evt import resolve_arch
    c = model_complexity('rmt-t')
    assert abs(c['params'] / 14e6 - 1) < 0.03  # authors: 14M
    # at equal depth, EVT-T's grouped EuSA costs less than RMT-T's decomposed MaSA
    evt_equal_depth = dict(resolve_arch('evt-t'), depths=[2, 2, 8, 2])
    evt_macs = count_macs(_RMTClassifier(evt_equal_depth), (1, 3, 224, 224))
    assert evt_macs < c['macs']
