"""Build hook: ship the configs, the tools and the model index inside the wheel.

The metadata lives in ``pyproject.toml``; this file only adds the OpenMMLab package-data
layout that ``mmengine`` reads for ``mmevt::`` config paths: ``mmevt/.mim/configs``,
``mmevt/.mim/tools`` and ``mmevt/.mim/model-index.yml``. mmdet, mmseg and mmpretrain do the
same in their ``setup.py`` (``add_mim_extension``: a copy for a wheel, a symlink for
``setup.py develop``, written into the source tree). Here the copy goes straight into the
build directory, so the source tree is never written to; an editable install gets no
``.mim`` at all (its package is the checkout; see docs/own_environment.md).
"""
import os
import os.path as osp
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = osp.dirname(osp.abspath(__file__))
# (source in the project, destination under mmevt/.mim)
MIM_ITEMS = (('configs', 'configs'), ('tools', 'tools'), ('model-index.yml', 'model-index.yml'))
MIM_SKIP = shutil.ignore_patterns('__pycache__', '*.pyc')


class BuildPyWithMim(build_py):
    """``build_py`` that also copies :data:`MIM_ITEMS` into ``<build_lib>/mmevt/.mim``."""

    def run(self) -> None:
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # editable: the package is the source tree itself (no .mim, see above)
        mim = osp.join(self.build_lib, 'mmevt', '.mim')
        if osp.isdir(mim):
            shutil.rmtree(mim)  # a stale copy from an earlier build must not leak in
        os.makedirs(mim)
        for src, dst in MIM_ITEMS:
            src, dst = osp.join(HERE, src), osp.join(mim, dst)
            if not osp.exists(src):
                raise FileNotFoundError(f'{src} is missing: the wheel needs it in mmevt/.mim')
            if osp.isdir(src):
                shutil.copytree(src, dst, ignore=MIM_SKIP)
            else:
                shutil.copyfile(src, dst)


setup(cmdclass={'build_py': BuildPyWithMim})
