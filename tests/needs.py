"""Skips for tests that need what the README venv lacks, each naming the command that installs it.

The README venv holds aorta-core, the three collectors and pytest; there plain ``pytest`` passes
or skips with these reasons. The full suite needs ``pip install -e '.[test]' 'triton==3.6.0'
'holistictraceanalysis==0.5.0' 'pandas<3' -e tests/third_party_collector``.
"""

from __future__ import annotations

from importlib.util import find_spec

import pytest

TEST_EXTRA = "pip install -e '.[test]'"
INSTALL = {
    "hypothesis": TEST_EXTRA,
    "hydra_plugins.hydra_joblib_launcher": TEST_EXTRA,
    "hydra_plugins.hydra_submitit_launcher": TEST_EXTRA,
    "triton": "pip install 'triton==3.6.0'",
    "hta": "pip install 'holistictraceanalysis==0.5.0' 'pandas<3'",
    "aorta_rusage": "pip install -e tests/third_party_collector",
    "aorta_proton": "pip install -e plugins/aorta_proton",
}


def _reason(module: str) -> str:
    return f"needs {module}: {INSTALL.get(module) or INSTALL[module.split('.')[0]]}"


def _found(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def needs(*modules: str) -> pytest.MarkDecorator:
    """Skip the test unless every module can be found (without importing it)."""
    missing = [m for m in modules if not _found(m)]
    return pytest.mark.skipif(bool(missing), reason="; ".join(map(_reason, missing)))


def need(module: str):
    """Import ``module``, or skip the whole test module naming what installs it."""
    return pytest.importorskip(module, reason=_reason(module))
