"""What a measurement ran on, and rows written as they are measured.

A GPU session is short and may be cut off at any step, so every tool it runs appends each
result to a JSON-lines file at once (:func:`append_row`) instead of writing one document at
the end; :func:`run_environment` is the header that says where the rows come from.
"""
import json
import platform
import sys
from importlib import metadata
from typing import Callable, Dict, List, Optional, Sequence

import torch

# the packages whose versions decide what a measurement means (compile, kernels, Swin)
VERSIONED = ('torch', 'triton', 'timm', 'mmengine', 'mmpretrain', 'numpy')


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), else the machine's architecture."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model with the threads torch uses."""
    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"CPU ({cpu_model()}, {threads} thread{'s' if threads != 1 else ''})"


def machine(device: torch.device) -> Dict[str, str]:
    """The ``device`` and ``torch`` fields of a record: where it was measured."""
    return dict(device=device_name(device), torch=torch.__version__)


def package_versions(names=VERSIONED) -> Dict[str, Optional[str]]:
    """Installed version of each package (None: not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions['torch'] = torch.__version__  # the imported one (a PYTHONPATH copy may differ)
    return versions


def run_environment(device: torch.device) -> Dict:
    """Python, packages, CUDA and the device: the header of a set of measurements."""
    env = dict(python=platform.python_version(), executable=sys.executable,
               device=device_name(device), packages=package_versions(),
               cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    if device.type == 'cuda':
        props = torch.cuda.get_device_properties(device)
        env.update(capability='.'.join(map(str, torch.cuda.get_device_capability(device))),
                   memory_gib=round(props.total_memory / 2**30, 1),
                   multiprocessors=props.multi_processor_count)
    return env


def append_row(path: Optional[str], row: Dict, **labels) -> None:
    """Append ``row`` (with ``labels`` first) as one JSON line to ``path`` (None: nothing)."""
    if path:
        with open(path, 'a') as f:
            f.write(json.dumps({**labels, **row}) + '\n')


def read_rows(path: str) -> List[Dict]:
    """The rows of a JSON-lines file; a torn last line (a step killed mid-write) is dropped."""
    with open(path) as f:
        lines = [line for line in f.read().split('\n') if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise ValueError(f'{path}: line {i + 1} is not JSON: {line[:80]!r}')
    return rows


def machine_lines(rows: Sequence[Dict], versions: Sequence[str] = (),
                  note: Optional[Callable[[Dict], str]] = None) -> List[str]:
    """One markdown line per machine of ``rows``, in the order the rows came.

    Args:
        rows (Sequence[dict]): records with ``device`` and ``torch``.
        versions (Sequence[str]): more version fields to name where rows hold them.
            Defaults to none.
        note (Callable[[dict], str], optional): what a row adds to its machine's line
            (e.g. the matmul rate its run measured; '' for nothing). Defaults to None.

    Returns:
        list[str]: markdown list items.
    """
    machines: Dict[str, None] = {}
    for r in rows:
        parts = [r.get('device', 'device not recorded'), f"torch {r.get('torch', '?')}"]
        parts += [f'{name} {r[name]}' for name in versions if r.get(name)]
        extra = note(r) if note else ''
        machines['- ' + ', '.join(parts) + (f': {extra}' if extra else '')] = None
    return list(machines)
