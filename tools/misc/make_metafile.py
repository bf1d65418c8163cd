#!/usr/bin/env python
"""Write the model zoo in OpenMMLab's format from the configs: a ``metafile.yml`` and a
``README.md`` per config family (``configs/<task>/<family>/``), ``model-index.yml`` importing
every metafile, and the docs' zoo page (``docs/zoo.md``).

Usage: python tools/misc/make_metafile.py [--check | --count [NAME ...]]

Results appear only where weights exist: the RMT configs, with the RMT authors' numbers and
``Converted From`` their code (``docs/checkpoints.md``). No EVT weights exist, so the EVT
configs have no Results; the EVT paper's numbers appear in the family READMEs, labelled as
the paper's. The numbers are read from where the project keeps them (the converter's
``README_TOP1*``, ``tools/analysis/model_table.py``'s ``PAPER``, :data:`EVT_PAPER_CLS`), never
typed twice. RMT configs form a collection of their own, citing the RMT paper.

Each model's ``Metadata`` has ``FLOPs`` and ``Parameters`` from mmevt's complexity counter
(:func:`count_config`, :data:`COUNTED`). Counting every config takes minutes (each config is
parsed, its model built on the ``meta`` device), so a count is recorded in the metafile
itself and kept: a run writes the counts already there and counts only the configs without
one; ``--count`` recounts all (or the named configs). ``--check``
counts nothing. ``mmevt.hub`` registers the classification metafiles with mmpretrain at
import; ``tests/test_packaging.py`` checks that every file written here is up to date and
``tests/test_docs_tables.py`` that every model has its counts, one of them recounted.
"""
import argparse
import ast
import glob
import importlib.util
import os.path as osp
import re
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TASKS = ('cls', 'det', 'seg', 'pose', 'rotated', 'action')
TASK_TITLES = {'cls': 'Image classification', 'det': 'Object detection and instance segmentation',
               'seg': 'Semantic segmentation', 'pose': 'Pose estimation',
               'rotated': 'Rotated object detection', 'action': 'Action recognition'}
EVT_PAPER = ('Advancing Vision Transformer with Enhanced Spatial Priors',
             'https://arxiv.org/abs/2604.18549')
RMT_PAPER = ('RMT: Retentive Networks Meet Vision Transformers',
             'https://arxiv.org/abs/2309.11523')
RMT_CODE = 'https://github.com/qhfan/RMT'
# a Collection's ``Code``: the backbone's source in this repository (mmevt is published
# nowhere else), at the package's version
CODE_PATH = 'mmevt/models/backbones/evt.py'
# what each task's Metadata counts (:func:`count_config`), at the toolkits' default sizes
# (:data:`mmevt.toolkits.TOOLKIT_TABLE`): a classifier whole, at its own size; elsewhere the
# backbone, which is what mmevt adds (the whole model: tools/analysis/get_flops.py CONFIG)
COUNTED = {
    'cls': 'the classifier at its input size (224 x 224, 384 x 384 for `-384px`)',
    'det': 'the backbone at 1280 x 800 (the neck and heads: `tools/analysis/get_flops.py`)',
    'seg': 'the backbone at 2048 x 512 (the whole segmentor: `tools/analysis/get_flops.py`)',
    'pose': 'the backbone at 192 x 256 (the whole model: `tools/analysis/get_flops.py`)',
    'rotated': 'the backbone on one 1024 x 1024 patch (the whole detector: '
               '`tools/analysis/get_flops.py`)',
    'action': 'the backbone on one clip of 3 frames of 224 x 224 (the whole recognizer: '
              '`tools/analysis/get_flops.py`)',
}
GENERATED = ('Written by tools/misc/make_metafile.py from the configs; do not edit '
             '(tests/test_packaging.py checks it).')


class Family(NamedTuple):
    collection: str  # the collection's name in the model index (unique)
    title: str  # the README's title
    task: str  # OpenMMLab's task name
    dataset: str
    metrics: Tuple[str, ...]  # the metric names of a result, in the order of the numbers
    architecture: Tuple[str, ...]
    about: str  # one paragraph for the README


FAMILIES: Dict[str, Family] = {
    'cls/evt': Family('EVT', 'EVT (ImageNet-1k)', 'Image Classification', 'ImageNet-1k',
                      ('Top 1 Accuracy', ), ('EuSA', 'EuSA-g / EuSA-d token grouping'),
                      'EVT-T / S / B / L at 224 on the RMT authors\' recipe, B and L '
                      'fine-tuned at 384, EVT-L tested on ImageNet-A / -R / -V2.'),
    'cls/evt-swin': Family('EVT-Swin', 'EVT-Swin (ImageNet-1k)', 'Image Classification',
                           'ImageNet-1k', ('Top 1 Accuracy', ),
                           ('EuSA in Swin\'s layout', ),
                           'Swin-T / S / B with window attention replaced by EuSA-g / '
                           'EuSA-d and full EuSA, on Swin\'s own recipe.'),
    'cls/rmt': Family('RMT', 'RMT (ImageNet-1k)', 'Image Classification', 'ImageNet-1k',
                      ('Top 1 Accuracy', ), ('MaSA', 'decomposed MaSA'),
                      'RMT-T / S / B / L and the token-labelled RMT-S* / B* / L*, for the '
                      'authors\' converted checkpoints.'),
    'cls/ablation': Family('EVT token-mixer ablations', 'Token-mixer ablations (ImageNet-1k)',
                           'Image Classification', 'ImageNet-1k', ('Top 1 Accuracy', ),
                           ('EVT-S with other token mixers', ),
                           'EVT-S with other decays and token mixers (docs/ablations.md).'),
    'det/mask_rcnn': Family('Mask R-CNN (EVT)', 'Mask R-CNN', 'Instance Segmentation', 'COCO',
                            ('box AP', 'mask AP'), ('FPN', 'RPN', 'RoIAlign'),
                            'Mask R-CNN with EVT, EVT-Swin and RMT backbones, 1x and 3x '
                            'multi-scale schedules, on the RMT authors\' recipes.'),
    'det/cascade_rcnn': Family('Cascade Mask R-CNN (EVT)', 'Cascade Mask R-CNN',
                               'Instance Segmentation', 'COCO', ('box AP', 'mask AP'),
                               ('FPN', 'Cascade RoI heads'),
                               'Cascade Mask R-CNN, 3x multi-scale, on the RMT authors\' '
                               'recipe (4conv1fc GIoU heads).'),
    'det/retinanet': Family('RetinaNet (EVT)', 'RetinaNet', 'Object Detection', 'COCO',
                            ('box AP', ), ('FPN', 'Focal Loss'),
                            'RetinaNet 1x on the RMT authors\' recipe.'),
    'seg/sem_fpn': Family('Semantic FPN (EVT)', 'Semantic FPN', 'Semantic Segmentation',
                          'ADE20K', ('mIoU', ), ('FPN', ),
                          'Semantic FPN, 80k iterations at 512 x 512, on the RMT authors\' '
                          'recipe.'),
    'seg/upernet': Family('UperNet (EVT)', 'UperNet', 'Semantic Segmentation', 'ADE20K',
                          ('mIoU', ), ('UPerHead', ),
                          'UperNet, 160k iterations at 512 x 512, on the RMT authors\' '
                          'recipe.'),
    'seg/ablation': Family('Semantic FPN token-mixer ablations',
                           'Token-mixer ablations (Semantic FPN)', 'Semantic Segmentation',
                           'ADE20K', ('mIoU', ), ('FPN', ),
                           'Semantic FPN with EVT-S\'s token mixer replaced '
                           '(docs/ablations.md).'),
    'pose/topdown_heatmap': Family('Top-down heatmap (EVT)', 'Top-down heatmap pose',
                                   'Body Pose Estimation', 'COCO', ('AP', ), ('Heatmap', ),
                                   'Top-down heatmap pose estimation at 256 x 192 on '
                                   'mmpose\'s Swin-T recipe (upstream stack only).'),
    'rotated/oriented_rcnn': Family('Oriented R-CNN (EVT)', 'Oriented R-CNN',
                                    'Oriented Object Detection', 'DOTA v1.0', ('mAP', ),
                                    ('Oriented RPN', ), 'Oriented R-CNN on mmrotate\'s '
                                    'Swin-T DOTA recipe.'),
    'rotated/roi_trans': Family('RoI Transformer (EVT)', 'RoI Transformer',
                                'Oriented Object Detection', 'DOTA v1.0', ('mAP', ),
                                ('RoI Transformer', ), 'RoI Transformer on mmrotate\'s '
                                'Swin-T DOTA recipe.'),
    'rotated/rotated_retinanet': Family('Rotated RetinaNet (EVT)', 'Rotated RetinaNet',
                                        'Oriented Object Detection', 'DOTA v1.0', ('mAP', ),
                                        ('Focal Loss', ), 'Rotated RetinaNet with the '
                                        'optimizer of mmrotate\'s Swin-T recipes.'),
    'action/tsn': Family('TSN (EVT)', 'TSN', 'Action Recognition', 'Kinetics-400',
                         ('Top 1 Accuracy', ), ('TSN', ),
                         'TSN on mmaction2\'s transformer TSN recipe (upstream stack only).'),
}
# The EVT paper's ImageNet numbers (reference only: no EVT weights exist); its ADE20K numbers
# are in tools/analysis/model_table.py's PAPER.
EVT_PAPER_CLS = {
    'evt-s_8xb128_in1k': 'paper: 84.4',
    'evt-l_8xb128_in1k': 'paper: 85.8',
    'evt-l_in1k-pre_8xb128_in1k-384px': 'paper: 86.6',
    'evt-l_8xb128_in1k_test-imagenet-a': 'paper: 55.5',
    'evt-l_8xb128_in1k_test-imagenet-r': 'paper: 56.9',
}
# the papers' BibTeX: docs/citation.md's blocks (one copy), by their keys
BIBTEX_KEYS = {'evt': 'evt2026', 'rmt': 'fan2024rmt'}


def bibtex() -> Dict[str, str]:
    """``{'evt': entry, 'rmt': entry}`` from docs/citation.md."""
    text = open(osp.join(REPO, 'docs', 'citation.md')).read()
    blocks = re.findall(r'```bibtex\n(.*?)```', text, flags=re.S)
    out = {}
    for short, key in BIBTEX_KEYS.items():
        found = [b.strip() for b in blocks if re.match(rf'@\w+{{{key},', b)]
        if len(found) != 1:
            raise ValueError(f'docs/citation.md needs one BibTeX entry {key!r}')
        out[short] = found[0]
    return out


def _load(rel: str):
    spec = importlib.util.spec_from_file_location(osp.basename(rel)[:-3], osp.join(REPO, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _constants(rel: str) -> dict:
    """The literal module-level constants of a source file, read without importing it (so
    the tool runs without the stack installed)."""
    out = {}
    for node in ast.parse(open(osp.join(REPO, rel)).read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def reported(family: str, name: str) -> Optional[str]:
    """The paper's or the RMT authors' number of a config, as ``'paper: 84.4'`` /
    ``'authors: 47.1 / 42.6'``, or None."""
    if family == 'cls/evt':
        return EVT_PAPER_CLS.get(name)
    if family == 'cls/rmt':
        rmt = _constants('mmevt/converters/rmt.py')
        arch = name.split('_')[0]
        table = rmt['README_TOP1_TOKEN_LABEL' if arch.endswith('-tl') else 'README_TOP1']
        top1 = table.get(arch[:-3] if arch.endswith('-tl') else arch)
        return None if top1 is None else f'authors: {top1}'
    if family.startswith(('det/', 'seg/')) and 'ablation' not in family:
        table = _load('tools/analysis/model_table.py')
        m = table.NAME.match(name)
        return table.PAPER.get((m['family'], m['sched'], m['arch'])) if m else None
    return None


def is_rmt(name: str) -> bool:
    """Whether config ``name`` builds an RMT backbone (its collection cites the RMT paper)."""
    return name.startswith('rmt-') or '_rmt-' in name


def collections(family: str, names: List[str]) -> List[Tuple[str, Tuple[str, str]]]:
    """``[(collection name, paper), ...]`` of a family: the RMT configs of an EVT family are
    a collection of their own, ``'<title> (RMT)'``, citing RMT."""
    fam = FAMILIES[family]
    if family == 'cls/rmt':
        return [(fam.collection, RMT_PAPER)]
    out = [(fam.collection, EVT_PAPER)]
    if any(is_rmt(n) for n in names):
        out.append((fam.collection.replace('(EVT)', '(RMT)'), RMT_PAPER))
    return out


def collection_of(family: str, name: str) -> str:
    """The collection config ``name`` of ``family`` belongs to."""
    found = collections(family, [name])
    return found[-1][0] if is_rmt(name) else found[0][0]


def version(repo: str = REPO) -> str:
    """The package's version (``mmevt/__init__.py``), read without importing mmevt."""
    return _constants(osp.relpath(osp.join(repo, 'mmevt', '__init__.py'), REPO))['__version__']


def recorded_counts(repo: str) -> Dict[str, Dict[str, int]]:
    """``{config name: {'FLOPs': n, 'Parameters': n}}`` as the checkout's metafiles record
    them (nothing where a metafile or a count is missing)."""
    import yaml
    out = {}
    for path in glob.glob(osp.join(repo, 'configs', '*', '*', 'metafile.yml')):
        with open(path) as f:
            for m in yaml.safe_load(f).get('Models', []):
                meta = m.get('Metadata', {})
                if 'FLOPs' in meta and 'Parameters' in meta:
                    out[m['Name']] = dict(FLOPs=meta['FLOPs'], Parameters=meta['Parameters'])
    return out


def count_config(path: str) -> Dict[str, int]:
    """``{'FLOPs': n, 'Parameters': n}`` of one config, as :data:`COUNTED` says: a
    classifier whole, any other model's backbone (EVT with the config's settings), counted
    by :func:`mmevt.analysis.count_macs` / :func:`~mmevt.analysis.count_params` (the
    counter of ``tools/analysis/complexity.py``) on the ``meta`` device: shapes only, no
    weights, no data.

    Args:
        path (str): the config file.
    """
    import torch
    from mmengine.config import Config

    from mmevt.analysis import count_macs, count_params
    from mmevt.analysis.flops import build_from_config
    from mmevt.models import EVT
    from mmevt.toolkits import get_toolkit
    cfg = Config.fromfile(path)
    kit = get_toolkit(cfg.default_scope)
    with torch.device('meta'):
        if kit.zoo_counts_whole_model:
            size = re.search(r'-(\d+)px', osp.basename(path))
            side = int(size[1]) if size else 224
            model, shape = build_from_config(cfg, 'meta')[0], (side, side)
        else:
            kwargs = {k: v for k, v in cfg.model.backbone.items()
                      if k not in ('type', '_scope_', 'init_cfg', 'pretrained')}
            if 'SyncBN' in str(kwargs.get('norm_cfg')):  # the same layers, counted alike
                kwargs['norm_cfg'] = dict(kwargs['norm_cfg'], type='BN')
            model, shape = EVT(**kwargs), kit.flops_shape
        macs = count_macs(model.eval(), (1, 3) + tuple(shape))
    frames = kit.clip_frames(cfg) or 1  # a clip's frames, each counted
    return dict(FLOPs=int(macs * frames), Parameters=int(count_params(model)))


def family_configs(repo: str) -> Dict[str, List[str]]:
    """``{'det/mask_rcnn': [config paths relative to repo], ...}``: every config family."""
    out = {}
    for task in TASKS:
        for path in sorted(glob.glob(osp.join(repo, 'configs', task, '*', '*.py'))):
            rel = osp.relpath(path, repo).replace(osp.sep, '/')
            family = '/'.join(rel.split('/')[1:3])
            if family.endswith('/_base_'):
                continue
            if family not in FAMILIES:
                raise ValueError(f'{rel}: configs/{family} has no entry in FAMILIES of '
                                 f'tools/misc/make_metafile.py (known: {list(FAMILIES)})')
            out.setdefault(family, []).append(rel)
    return out


def _q(text: str) -> str:
    """A YAML scalar: quoted where plain style would misread it."""
    return f'"{text}"' if re.search(r'[:#\'"]|^[-?!&*]', text) else text


def render_metafile(family: str, configs: List[str], counts: Dict[str, Dict[str, int]],
                    code_version: str) -> str:
    """The ``metafile.yml`` text of one family (``counts``: :func:`recorded_counts`'s, by
    config name; a config without one gets no FLOPs / Parameters)."""
    fam = FAMILIES[family]
    names = [osp.splitext(osp.basename(rel))[0] for rel in configs]
    lines = [f'# {GENERATED}', 'Collections:']
    for collection, paper in collections(family, names):
        lines += [f'  - Name: {_q(collection)}', '    Metadata:',
                  f'      Training Data: {fam.dataset}', '      Architecture:']
        lines += [f'        - {_q(a)}' for a in fam.architecture]
        lines += ['    Paper:', f'      Title: {_q(paper[0])}', f'      URL: {paper[1]}',
                  f'    README: configs/{family}/README.md', '    Code:',
                  f'      URL: {CODE_PATH}', f'      Version: v{code_version}']
    lines.append('Models:')
    for rel, name in zip(configs, names):
        lines += [f'  - Name: {name}', f'    In Collection: {_q(collection_of(family, name))}',
                  '    Metadata:', f'      Training Data: {fam.dataset}']
        if name in counts:
            lines += [f"      FLOPs: {counts[name]['FLOPs']}",
                      f"      Parameters: {counts[name]['Parameters']}"]
        number = reported(family, name)
        if number and number.startswith('authors:'):  # weights exist: the authors' release
            values = re.findall(r'\d+(?:\.\d+)?', number)
            lines += ['    Results:', f'      - Task: {fam.task}',
                      f'        Dataset: {fam.dataset}', '        Metrics:']
            lines += [f'          {m}: {v}' for m, v in zip(fam.metrics, values)]
            # the authors publish no file URL we could check here: Weights is left out
            lines += ['    Converted From:', f'      Code: {RMT_CODE}']
        lines.append(f'    Config: {rel}')
    return '\n'.join(lines) + '\n'


def render_readme(family: str, configs: List[str], counts: Dict[str, Dict[str, int]]) -> str:
    """The family's ``README.md``: what it is, its configs with their counts and the reported
    numbers labelled as whose they are, and the BibTeX."""
    fam = FAMILIES[family]
    metric = ' / '.join(fam.metrics)
    names = [osp.splitext(osp.basename(rel))[0] for rel in configs]
    rows, papers = [], 0
    for rel, name in zip(configs, names):
        number = reported(family, name)
        if number is None:
            shown, weights = '-', 'none'
        elif number.startswith('authors:'):
            shown = f"{number.split(': ', 1)[1]} (RMT authors')"
            weights = ('the authors\', to convert: '
                       '[checkpoints](../../../docs/checkpoints.md)')
        else:
            shown, weights = f"{number.split(': ', 1)[1]} (EVT paper's)", 'none'
            papers += 1
        c = counts.get(name)
        size = (f"{c['Parameters'] / 1e6:.1f} | {c['FLOPs'] / 1e9:.1f}" if c else '- | -')
        rows.append(f'| [{name}](./{osp.basename(rel)}) | {size} | {shown} | {weights} |')
    found = collections(family, names)
    cites = [('rmt' if paper == RMT_PAPER else 'evt') for _, paper in found]
    if papers:
        paper_note = ('The EVT paper\'s numbers are in the table where it gives one, labelled '
                      'as the paper\'s.')
    else:
        paper_note = ('The EVT paper gives no number for these configs (its text gives '
                      'ImageNet-1k and ADE20K numbers only).')
    text = [f'# {fam.title}', '', f'<!-- {GENERATED} -->', '']
    text += [' · '.join(f'[{paper[0]}]({paper[1]})' for _, paper in found), '', fam.about, '',
             'No EVT weights exist and nothing was trained on the datasets here. ' + paper_note
             + (' The RMT authors\' numbers are theirs, for their checkpoints, which '
                '`tools/model_converters/rmt_to_mmevt.py` converts.'
                if any(is_rmt(n) for n in names) else ''), '',
             '## Configs', '',
             'Params and FLOPs (1 FLOP = 1 multiply-add, G = 1e9) of '
             f'{COUNTED[family.split("/")[0]]}, counted as `tools/analysis/complexity.py` counts (convolutions, linears and '
             'matrix products, attention\'s included).', '',
             f'| config | params (M) | FLOPs (G) | {metric} (reported) | weights |',
             '|---|---|---|---|---|', *rows, '', '## Citation', '', '```bibtex']
    entries = bibtex()
    for i, key in enumerate(dict.fromkeys(['evt', *cites]) if family != 'cls/rmt' else cites):
        text += ([''] if i else []) + entries[key].splitlines()
    text += ['```', '']
    return '\n'.join(text)


def render_index(families: Dict[str, List[str]]) -> str:
    lines = [f'# {GENERATED}', 'Import:']
    lines += [f'  - configs/{family}/metafile.yml' for family in families]
    return '\n'.join(lines) + '\n'


def render_zoo_page(metafiles: Dict[str, str]) -> str:
    """``docs/zoo.md`` from the metafiles' text (``{path: yaml}``, model-index order): each
    family's configs with their FLOPs and Parameters and, where weights exist, their
    Results."""
    import yaml
    text = ['# Model zoo', '', f'<!-- {GENERATED} -->', '',
            'Every config mmevt ships, by task and family, as the metafiles list it '
            '(`model-index.yml` imports them all; `mim` and mmpretrain\'s model hub read that '
            'format). **No EVT weights exist**, and nothing was trained on ImageNet, COCO, '
            'ADE20K, DOTA or Kinetics here: results are listed only for the RMT configs, the '
            'RMT authors\' numbers for their checkpoints ([checkpoints](checkpoints.md)). '
            'Each family\'s README gives the EVT paper\'s numbers where the paper has them, '
            'labelled as the paper\'s. Params and FLOPs (1 FLOP = 1 multiply-add, G = 1e9): '
            'a classifier\'s whole, any other model\'s backbone at the toolkit\'s usual '
            'input size (each family\'s README says which), counted as '
            '[params and FLOPs](model_zoo.md) counts; a whole detector or segmentor: '
            '`tools/analysis/get_flops.py CONFIG`.', '']
    task = None
    for path, body in metafiles.items():
        meta = yaml.safe_load(body)
        models = meta['Models']
        results = [m for m in models if 'Results' in m]
        family = path.split('/')[1:3]
        if family[0] != task:
            task = family[0]
            text += [f'## {TASK_TITLES[task]}', '']
        first = meta['Collections'][0]
        papers = ', '.join(f"[{'RMT' if c['Paper']['URL'] == RMT_PAPER[1] else 'EVT'}]"
                           f"({c['Paper']['URL']})" for c in meta['Collections'])
        text += [f"### {FAMILIES['/'.join(family)].title}", '',
                 f"{first['Metadata']['Training Data']}; paper: {papers}; "
                 f"`{first['README']}`.", '']
        metrics = list(results[0]['Results'][0]['Metrics']) if results else []
        head = ['config', 'params (M)', 'FLOPs (G)', *[f'{m} (RMT authors\')' for m in metrics]]
        text += ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
        for m in models:
            values = ([str(v) for v in m['Results'][0]['Metrics'].values()] if 'Results' in m
                      else ['-'] * len(metrics))
            meta_m = m['Metadata']
            size = ([f"{meta_m['Parameters'] / 1e6:.1f}", f"{meta_m['FLOPs'] / 1e9:.1f}"]
                    if 'FLOPs' in meta_m else ['-', '-'])
            text.append('| ' + ' | '.join([m['Name'], *size, *values]) + ' |')
        text.append('')
    return '\n'.join(text)


def render_all(repo: str, counts: Optional[Dict[str, Dict[str, int]]] = None
               ) -> Dict[str, str]:
    """``{path relative to repo: text}`` of every file this tool writes.

    Args:
        repo (str): the source checkout.
        counts (dict, optional): FLOPs and Parameters by config name. Defaults to None
            (those the checkout's metafiles record: :func:`recorded_counts`).
    """
    families = family_configs(repo)
    counts = recorded_counts(repo) if counts is None else counts
    code_version = version(repo)
    out = {}
    for family, configs in families.items():
        out[f'configs/{family}/metafile.yml'] = render_metafile(family, configs, counts,
                                                                code_version)
        out[f'configs/{family}/README.md'] = render_readme(family, configs, counts)
    out['model-index.yml'] = render_index(families)
    out['docs/zoo.md'] = render_zoo_page({p: text for p, text in out.items()
                                          if p.endswith('metafile.yml')})
    return out


def uncounted(repo: str) -> List[str]:
    """The configs (paths relative to ``repo``) whose metafile records no count."""
    counts = recorded_counts(repo)
    return [rel for configs in family_configs(repo).values() for rel in configs
            if osp.splitext(osp.basename(rel))[0] not in counts]


def stale(repo: str) -> List[str]:
    """The files of :func:`render_all` whose text differs from the checkout's."""
    bad = []
    for rel, text in render_all(repo).items():
        path = osp.join(repo, rel)
        if not osp.isfile(path) or open(path).read() != text:
            bad.append(rel)
    return bad


def write(files: Dict[str, str]) -> None:
    """Write :func:`render_all`'s files into this checkout."""
    for rel, text in files.items():
        with open(osp.join(REPO, rel), 'w') as f:
            f.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--check', action='store_true',
                      help='exit 1 if a file is not up to date or a model has no count; '
                           'write nothing')
    mode.add_argument('--count', nargs='*', metavar='NAME',
                      help='recount FLOPs and Parameters of these configs (file names '
                           'without .py; none: every config) instead of keeping the recorded')
    args = parser.parse_args()
    if args.check:
        bad = stale(REPO) + [f'{rel} (no count)' for rel in uncounted(REPO)]
        sys.exit(f'out of date: {", ".join(bad)}: run {__file__}' if bad else 0)
    counts = recorded_counts(REPO)
    todo = uncounted(REPO)
    if args.count is not None:
        every = [rel for configs in family_configs(REPO).values() for rel in configs]
        names = {osp.splitext(osp.basename(rel))[0]: rel for rel in every}
        unknown = [n for n in args.count if n not in names]
        if unknown:
            parser.error(f'--count: no config named {unknown}')
        todo = [names[n] for n in args.count] if args.count else every
    import mmevt  # noqa: F401  (the toolkits' registries know EVT)
    for i, rel in enumerate(todo):
        counts[osp.splitext(osp.basename(rel))[0]] = count_config(osp.join(REPO, rel))
        print(f'[{i + 1}/{len(todo)}] counted {rel}', flush=True)
        if (i + 1) % 10 == 0:  # record as it goes: a stopped run keeps what it counted
            write(render_all(REPO, counts))
    files = render_all(REPO, counts)
    write(files)
    print(f'wrote {len(files)} files ({sum(t.count("In Collection:") for t in files.values())} '
          'models)')


if __name__ == '__main__':
    main()
