#!/usr/bin/env python
"""Write the model zoo in OpenMMLab's format from the configs: a ``metafile.yml`` and a
``README.md`` per config family (``configs/<task>/<family>/``), ``model-index.yml`` importing
every metafile, and the docs' zoo page (``docs/zoo.md``).

Usage: python tools/misc/make_metafile.py [--check]

Results appear only where weights exist: the RMT configs, with the RMT authors' numbers and
``Converted From`` their release (``docs/checkpoints.md``). No EVT weights exist, so the EVT
configs have no Results; the EVT paper's numbers appear in the family READMEs, labelled as
the paper's. The numbers are read from where the project keeps them (the converter's
``README_TOP1*``, ``tools/analysis/model_table.py``'s ``PAPER``, :data:`EVT_PAPER_CLS`), never
typed twice. ``mmevt.hub`` registers the classification metafiles with mmpretrain at
import; ``tests/test_packaging.py`` checks that every file written here is up to date.
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


def render_metafile(family: str, configs: List[str]) -> str:
    """The ``metafile.yml`` text of one family."""
    fam = FAMILIES[family]
    paper = RMT_PAPER if family == 'cls/rmt' else EVT_PAPER
    lines = [f'# {GENERATED}', 'Collections:', f'  - Name: {_q(fam.collection)}',
             '    Metadata:', f'      Training Data: {fam.dataset}', '      Architecture:']
    lines += [f'        - {_q(a)}' for a in fam.architecture]
    lines += ['    Paper:', f'      Title: {_q(paper[0])}', f'      URL: {paper[1]}',
              f'    README: configs/{family}/README.md', 'Models:']
    for rel in configs:
        name = osp.splitext(osp.basename(rel))[0]
        lines += [f'  - Name: {name}', f'    In Collection: {_q(fam.collection)}',
                  '    Metadata:', f'      Training Data: {fam.dataset}']
        number = reported(family, name)
        if number and number.startswith('authors:'):  # weights exist: the authors' release
            values = re.findall(r'\d+(?:\.\d+)?', number)
            lines += ['    Results:', f'      - Task: {fam.task}',
                      f'        Dataset: {fam.dataset}', '        Metrics:']
            lines += [f'          {m}: {v}' for m, v in zip(fam.metrics, values)]
            lines += ['    Converted From:', f'      Code: {RMT_CODE}',
                      f'      Weights: {RMT_CODE}']
        lines.append(f'    Config: {rel}')
    return '\n'.join(lines) + '\n'


def render_readme(family: str, configs: List[str]) -> str:
    """The family's ``README.md``: what it is, its configs with the reported numbers labelled
    as whose they are, and the BibTeX."""
    fam = FAMILIES[family]
    metric = ' / '.join(fam.metrics)
    rows = []
    for rel in configs:
        name = osp.splitext(osp.basename(rel))[0]
        number = reported(family, name)
        if number is None:
            shown, weights = '-', 'none'
        elif number.startswith('authors:'):
            shown = f"{number.split(': ', 1)[1]} (RMT authors')"
            weights = ('the authors\', converted: '
                       '[checkpoints](../../../docs/checkpoints.md)')
        else:
            shown, weights = f"{number.split(': ', 1)[1]} (EVT paper's)", 'none'
        rows.append(f'| [{name}](./{osp.basename(rel)}) | {fam.dataset} | {shown} | {weights} |')
    paper = RMT_PAPER if family == 'cls/rmt' else EVT_PAPER
    cites = ['rmt'] if family == 'cls/rmt' else ['evt', 'rmt']
    text = [f'# {fam.title}', '', f'<!-- {GENERATED} -->', '',
            f'> [{paper[0]}]({paper[1]})', '', fam.about, '',
            'No EVT weights exist and nothing was trained on the datasets here: the numbers '
            'below are the EVT paper\'s or the RMT authors\', labelled as theirs. Only the RMT '
            'authors\' checkpoints exist; they convert with '
            '`tools/model_converters/rmt_to_mmevt.py`. Params and FLOPs we measured: '
            '[params and FLOPs](../../../docs/model_zoo.md).', '',
            '## Configs', '',
            f'| config | dataset | {metric} (reported) | weights |', '|---|---|---|---|',
            *rows, '', '## Citation', '', '```bibtex']
    entries = bibtex()
    for i, key in enumerate(cites):
        text += ([''] if i else []) + entries[key].splitlines()
    text += ['```', '']
    return '\n'.join(text)


def render_index(families: Dict[str, List[str]]) -> str:
    lines = [f'# {GENERATED}', 'Import:']
    lines += [f'  - configs/{family}/metafile.yml' for family in families]
    return '\n'.join(lines) + '\n'


def render_zoo_page(metafiles: Dict[str, str]) -> str:
    """``docs/zoo.md`` from the metafiles' text (``{path: yaml}``, model-index order): each
    collection's configs and, where weights exist, their Results."""
    import yaml
    text = ['# Model zoo', '', f'<!-- {GENERATED} -->', '',
            'Every config mmevt ships, by task and family, as the metafiles list it '
            '(`model-index.yml` imports them all; `mim` and mmpretrain\'s model hub read that '
            'format). **No EVT weights exist**, and nothing was trained on ImageNet, COCO, '
            'ADE20K, DOTA or Kinetics here: results are listed only where weights exist, the '
            'RMT authors\' (their numbers, `Converted From` their release: '
            '[checkpoints](checkpoints.md)). The EVT paper\'s numbers are in each family\'s '
            'README, labelled as the paper\'s. Params and FLOPs we measured: '
            '[params and FLOPs](model_zoo.md), and the task pages.', '']
    task = None
    for path, body in metafiles.items():
        meta = yaml.safe_load(body)
        collection = meta['Collections'][0]
        models = meta['Models']
        results = [m for m in models if 'Results' in m]
        if path.split('/')[1] != task:
            task = path.split('/')[1]
            text += [f'## {TASK_TITLES[task]}', '']
        text += [f"### {collection['Name']}", '',
                 f"{collection['Metadata']['Training Data']}; paper: "
                 f"[{collection['Paper']['Title']}]({collection['Paper']['URL']}); family page: "
                 f"`{collection['README']}`.", '']
        metrics = list(results[0]['Results'][0]['Metrics']) if results else []
        head = ['config', *[f'{m} (RMT authors\')' for m in metrics], 'weights']
        text += ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
        for m in models:
            values = ([str(v) for v in m['Results'][0]['Metrics'].values()] if 'Results' in m
                      else ['-'] * len(metrics))
            weights = 'converted from the authors\'' if 'Converted From' in m else 'none'
            text.append('| ' + ' | '.join([f"`{m['Config']}`", *values, weights]) + ' |')
        text.append('')
    return '\n'.join(text)


def render_all(repo: str) -> Dict[str, str]:
    """``{path relative to repo: text}`` of every file this tool writes."""
    families = family_configs(repo)
    out = {}
    for family, configs in families.items():
        out[f'configs/{family}/metafile.yml'] = render_metafile(family, configs)
        out[f'configs/{family}/README.md'] = render_readme(family, configs)
    out['model-index.yml'] = render_index(families)
    out['docs/zoo.md'] = render_zoo_page({p: text for p, text in out.items()
                                          if p.endswith('metafile.yml')})
    return out


def stale(repo: str) -> List[str]:
    """The files of :func:`render_all` whose text differs from the checkout's."""
    bad = []
    for rel, text in render_all(repo).items():
        path = osp.join(repo, rel)
        if not osp.isfile(path) or open(path).read() != text:
            bad.append(rel)
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--check', action='store_true',
                        help='exit 1 if a file is not up to date; write nothing')
    args = parser.parse_args()
    if args.check:
        bad = stale(REPO)
        sys.exit(f'out of date: {", ".join(bad)}: run {__file__}' if bad else 0)
    files = render_all(REPO)
    for rel, text in files.items():
        with open(osp.join(REPO, rel), 'w') as f:
            f.write(text)
    print(f'wrote {len(files)} files ({sum(t.count("In Collection:") for t in files.values())} '
          'models)')


if __name__ == '__main__':
    main()
