"""Skips for tests that need what the README venv lacks, each naming the command that installs it,
and the hardware a test needs, so that one suite passes or skips with the reason on any machine.

The README venv holds aorta-core, the three collectors and pytest; there plain ``pytest`` passes
or skips with these reasons. The full suite needs ``pip install -e '.[test]' 'triton==3.6.0'
'holistictraceanalysis==0.5.0' 'pandas<3' -e tests/third_party_collector``.

Hardware: a test of GPU behaviour is marked ``gpu`` and skipped, with the reason, where torch sees
too few GPUs (:func:`needs_gpu`; ``pytest -m gpu`` or ``nox -s gpu`` runs just those). A test of
the CPU path pins the CPU itself, so that it means the same on a GPU host: ``device=cpu`` for the
benchmark, or :data:`NO_GPU` in a child's environment when the test is about a machine without
a GPU (``auto`` choosing the CPU, a GPU the machine lacks).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.util import find_spec
from typing import TypeVar

import pytest

from aorta_core.engine.machine import visible_gpus

TEST_EXTRA = "pip install -e '.[test]'"
INSTALL = {
    "hypothesis": TEST_EXTRA,
    "hydra_plugins.hydra_joblib_launcher": TEST_EXTRA,
    "hydra_plugins.hydra_submitit_launcher": TEST_EXTRA,
    "triton": "pip install 'triton==3.6.0'",
    "hta": "pip install 'holistictraceanalysis==0.5.0' 'pandas<3'",
    "aorta_rusage": "pip install -e tests/third_party_collector",
    "pyinstrument": "pip install pyinstrument",  # the docs' example collector
    **{f"aorta_{name}": f"pip install -e plugins/aorta_{name}"
       for name in ("proton", "torchprof", "rocprof", "ncu")},
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


#: Environment additions that hide every GPU from a child process (torch reads the variable when
#: it first looks for a GPU): the child takes the no-GPU path on any machine.
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}

F = TypeVar("F", bound=Callable)


def needs_gpu() -> Callable[[F], F]:
    """Mark the test ``gpu``; skip it, saying why, where torch sees no GPU (aorta's own view of
    the machine: ``CUDA_VISIBLE_DEVICES`` applied)."""
    skip = pytest.mark.skipif(not visible_gpus().count,
                              reason="needs a CUDA GPU: this machine has none")

    def mark(test: F) -> F:
        return pytest.mark.gpu(skip(test))

    return mark
