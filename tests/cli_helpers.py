"""Helpers of the core tests: drive the real ``aorta`` CLI in a subprocess, and install throwaway
collector plugins as real distributions (dist-info + entry point) on a private PYTHONPATH."""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path


def run_aorta(args, cwd: Path, env: dict | None = None, timeout: float = 120,
              memory: int | None = None):
    """``python -m aorta_core <args>``; ``memory``: the child's address space in bytes, so that
    a command that builds what it should not (a list of 1e11 ints, ``/dev/zero`` read whole)
    fails with ``MemoryError`` instead of taking the machine's memory."""
    # PNG export starts a browser (~3 s a sweep); the report tests turn it on where they test it.
    full_env = {**os.environ, "AORTA_REPORT_PNG": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "aorta_core", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
        preexec_fn=None if memory is None else memory_limit(memory),
    )


def memory_limit(size: int):
    """A child's ``preexec_fn`` that limits its address space to ``size`` bytes."""
    return functools.partial(resource.setrlimit, resource.RLIMIT_AS, (size, size))


def records(output: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(output.glob("cells/*/trial_*/record.json"))]


class PluginSite:
    """A folder on PYTHONPATH where tests install collector plugins as real distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, name: str, source: str, *, version: str = "0.3.1", yaml: str | None = None,
            payload: str | None = None, package: str | None = None):
        """Install collector ``name`` (hooks in ``plugin.py``); ``payload``: more source for
        ``plugin.py``, after the hooks (its ``payload_session`` hook, say)."""
        package = package or f"aorta_test_{name}"
        pkg = self.root / package
        (pkg / "conf" / "collector").mkdir(parents=True)
        for init in (pkg, pkg / "conf", pkg / "conf" / "collector"):
            (init / "__init__.py").write_text("")
        (pkg / "plugin.py").write_text(textwrap.dedent(source) + textwrap.dedent(payload or ""))
        (pkg / "conf" / "collector" / f"{name}.yaml").write_text(
            yaml if yaml is not None else
            f"# @package collector.{name}\ndefaults:\n  - /aorta_schema/collector/{name}@_here_\n"
            "  - _self_\n"
        )
        dist = self.root / f"aorta_test_{name}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: aorta-test-{name}\nVersion: {version}\n"
        )
        (dist / "entry_points.txt").write_text(f"[aorta.collectors]\n{name} = {package}.plugin\n")

    @property
    def env(self) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": f"{self.root}{os.pathsep}{path}" if path else str(self.root)}


#: A minimal well-behaved collector: wraps with `env <NAME>_WRAPPED=1`, writes one artifact.
GOOD_COLLECTOR = '''
import dataclasses
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="test collector", options=Options,
                         config_package=__package__ + ".conf", wrap_order={order})

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    (artifact_dir / "wrapped.txt").write_text("{name}")
    return dataclasses.replace(launch, argv=("env", "{name}_WRAPPED=1", *launch.argv))

@hookimpl
def parse_metrics(artifact_dir, options):
    return {{"{name}_level": options.level, "{name}_files": len(list(artifact_dir.iterdir()))}}
'''


def good_collector(name: str, order: int = 50) -> str:
    return GOOD_COLLECTOR.format(name=name, order=order)


def main_in_process(*args: str) -> tuple[int, str, str]:
    """Status, stdout and stderr of ``aorta <args>`` run in this process through the public
    entry ``aorta_core.app.cli.main`` (the fuzz tests' loops: a subprocess each would take minutes).
    The tool writes its output to a copy of fd 1 and then points fd 1 at stderr, so fd 1 is a
    temporary file for the call and restored after it."""
    import contextlib
    import io
    import tempfile

    from aorta_core.app.cli import main

    err = io.StringIO()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        os.dup2(out.fileno(), 1)
        try:
            with contextlib.redirect_stderr(err):
                status = main(list(args))
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return status, out.read().decode(), err.getvalue()
