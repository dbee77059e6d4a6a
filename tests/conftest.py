"""Fixtures of the core tests; the helpers themselves live in cli_helpers.py."""

import subprocess
from pathlib import Path

import pytest
from cli_helpers import PluginSite


@pytest.fixture
def plugin_site(tmp_path: Path) -> PluginSite:
    return PluginSite(tmp_path / "site")


def _tmpfs(tmp_path: Path, size: str):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}): needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs: a disk to fill (root only; skipped with the reason elsewhere)."""
    yield from _tmpfs(tmp_path, "2m")


@pytest.fixture
def sweep_disk(tmp_path: Path):
    """A 32 MiB tmpfs: room for a small sweep's output, then a disk to fill."""
    yield from _tmpfs(tmp_path, "32m")
