"""Modules: projections, LePE, CPE, FFN, stems and token mixers."""
from .attention import ATTN_MODES, SpatialDecayAttention, log_attention_paths
from .block import DropPath, EVTBlock, LayerScale
from .conv import ConvDownsample, ConvNorm, ConvStem, DWConv2d, PatchEmbed, PatchMerging
from .external import ExternalAttention
from .ffn import ConvFFN
from .mixers import MIXERS, build_mixer
from .norm import build_norm
from .routing import BiLevelRoutingAttention

__all__ = [
    'ATTN_MODES', 'BiLevelRoutingAttention', 'ConvDownsample', 'ConvFFN', 'ConvNorm', 'ConvStem',
    'DWConv2d', 'DropPath', 'EVTBlock', 'ExternalAttention', 'LayerScale', 'MIXERS',
    'PatchEmbed', 'PatchMerging', 'SpatialDecayAttention', 'build_mixer', 'build_norm',
    'log_attention_paths'
]
