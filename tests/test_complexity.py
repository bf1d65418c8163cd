"""Params / FLOPs counting, and the FLOPs statements of docs/model_zoo.md."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mmevt.analysis import count_macs, macs_breakdown, model_complexity
from mmevt.analysis.complexity import RMTHeadClassifier, reference_attention
from mmevt.models import EVT
from mmevt.models.layers import SpatialDecayAttention
from mmevt.models.backbones.archs import resolve_arch
from rmt_reference import rmt_reference_logits

GI = 2**30
AUTHORS_GFLOPS = {'rmt-t': 2.5, 'rmt-s': 4.5, 'rmt-b': 9.7, 'rmt-l': 18.2}  # theirs


def _one_block(mixers='full'):
    return EVT(dict(embed_dims=[8], depths=[1], num_heads=[2], mixers=mixers, cpe=False,
                    lepe=False, ffn_dwconv=False, mlp_ratios=1), out_indices=(0, ),
               out_norm_cfg=None)


def test_macs_count_attention_matmuls_and_match_hand_count():
    # one full-attention block on a 4x4 grid: count q k^T and A v by hand
    n, c = 16 * 16, 8  # 64x64 input -> 16x16 grid after the 4x stem
    stem = (32 * 32 * 4 * 3 * 9 + 32 * 32 * 4 * 4 * 9 + 16 * 16 * 8 * 4 * 9 +
            16 * 16 * 8 * 8 * 9)
    linears = n * c * c * 4 + n * c * c * 2  # q, k, v, proj + fc1, fc2
    attention = 2 * n * n * c  # q k^T and A v over all heads
    assert count_macs(_one_block(), (1, 3, 64, 64)) == stem + linears + attention


def test_breakdown_splits_the_total_by_kind_of_layer():
    model = _one_block()
    n, c = 16 * 16, 8
    parts = macs_breakdown(model, (1, 3, 64, 64))
    assert parts['total'] == count_macs(model, (1, 3, 64, 64))
    assert sum(v for k, v in parts.items() if k != 'total') == parts['total']
    assert parts['attention'] == 2 * n * n * c  # q k^T and A v, by hand
    assert parts['qkv_proj'] == 4 * n * c * c and parts['ffn_linears'] == 2 * n * c * c
    assert parts['cpe'] == parts['lepe'] == parts['ffn_dwconv'] == parts['head'] == 0
    full = macs_breakdown(RMTHeadClassifier('rmt-test'), (1, 3, 64, 64))
    assert all(full[k] > 0 for k in full)  # every kind is found in a real model


def test_reference_attention_routes_every_attention_and_restores_it():
    model = EVT('evt-test', attn_impl='sdpa')
    attns = [m for m in model.modules() if isinstance(m, SpatialDecayAttention)]
    assert attns
    with pytest.raises(RuntimeError, match='inside'):
        with reference_attention(model):
            assert all(m.attn_impl == 'reference' for m in attns)
            raise RuntimeError('inside')
    assert all(m.attn_impl == 'sdpa' for m in attns)  # restored, even after an error
    before = {k: v.clone() for k, v in model.state_dict().items()}
    count_macs(model, (1, 3, 64, 64))  # counts a meta copy: the model stays as it was
    assert all(p.device.type == 'cpu' for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_our_counter_on_the_independent_restatement_agrees():
    """The same counter on our RMT-T classifier and on the suite's functional restatement
    of the authors' model (tests/rmt_reference.py, no mmevt code) within 0.5%."""
    from rmt_reference import authors_state_dict
    arch = resolve_arch('rmt-t')
    authors = authors_state_dict(
        arch['embed_dims'], arch['depths'], arch['num_heads'], arch['mlp_ratios'],
        [False] * 4, arch['init_values'], arch['heads_ranges'], num_classes=1000)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        rmt_reference_logits(authors, torch.zeros(1, 3, 224, 224), chunk_stages=(0, 1))
    theirs = fc.get_total_flops() // 2
    ours = count_macs(RMTHeadClassifier('rmt-t'), (1, 3, 224, 224))
    assert abs(ours / theirs - 1) < 0.005


def test_fvcore_is_our_count_plus_norms_and_gives_the_authors_rmt_t_figure():
    """docs/model_zoo.md: fvcore counts what we count plus the norms, and fvcore / 2**30 is
    the authors' published 2.5G for RMT-T."""
    import logging

    from fvcore.nn import FlopCountAnalysis
    logging.getLogger('fvcore').setLevel(logging.ERROR)
    clf = RMTHeadClassifier('rmt-t').eval()
    with torch.no_grad(), reference_attention(clf):
        fv = FlopCountAnalysis(clf, torch.zeros(1, 3, 224, 224))
        fv.unsupported_ops_warnings(False)
        by_op = fv.by_operator()
    total = sum(by_op.values())
    norms = sum(v for k, v in by_op.items() if 'norm' in k)
    assert 0 < norms < 0.01 * total
    assert abs((total - norms) / count_macs(clf, (1, 3, 224, 224)) - 1) < 1e-3
    assert round(total / GI, 1) == AUTHORS_GFLOPS['rmt-t']


def test_rmt_params_match_the_authors():
    assert abs(model_complexity('rmt-t')['params'] / 14e6 - 1) < 0.03  # authors: 14M


@pytest.mark.parametrize('size', ['s', 'b', 'l'])
def test_evt_is_cheaper_than_rmt_of_the_same_size(size, zoo_counts):
    """The paper's efficiency statement, counted at 224 with group size 49 (the classifiers'
    MACs of tools/analysis/complexity.py; test_docs_tables checks them against
    model_complexity)."""
    assert zoo_counts[f'evt-{size}']['macs'] < zoo_counts[f'rmt-{size}']['macs']


def test_evt_t_layout_saves_about_0p2_gflops_over_rmt_t_at_equal_depth(zoo_counts):
    evt = resolve_arch('evt-t')
    assert evt['depths'] == [2, 2, 10, 2] and evt['group_sizes'] == [49] * 4
    assert evt['mixers'] == ['group_dilate'] * 3 + ['full']
    # the tool's 'rmt-t@2-2-10-2': RMT-T at EVT-T's depths
    saved = zoo_counts['rmt-t@2-2-10-2']['macs'] - zoo_counts['evt-t']['macs']
    assert 0.15e9 < saved < 0.25e9
