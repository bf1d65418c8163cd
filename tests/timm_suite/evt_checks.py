"""timm's module-filtered tests (``FEAT_INTER_FILTERS``: the models with
``forward_intermediates`` whose file timm lists by name) run on mmevt's timm models.

timm's ``test_models.py`` parametrizes these with the models of its own modules, so ours
are never among them; here its test functions are called on ours, unchanged. Collected
only in the run ``tests/test_timm_suite.py`` starts (with ``plugin.py``).
"""
import pytest
import test_models as timm_tests  # timm's file, extracted from its sdist
from plugin import NAMES


@pytest.mark.parametrize('model_name', NAMES)
def test_model_forward_intermediates_features(model_name: str) -> None:
    timm_tests.test_model_forward_intermediates_features(model_name, 1)


@pytest.mark.parametrize('model_name', NAMES)
def test_model_forward_intermediates(model_name: str) -> None:
    timm_tests.test_model_forward_intermediates(model_name, 1)


@pytest.mark.parametrize('model_name', NAMES)
def test_prune_intermediate_layers_contract(model_name: str) -> None:
    timm_tests.test_prune_intermediate_layers_contract(model_name)
