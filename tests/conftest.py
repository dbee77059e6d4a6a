"""Fixtures of the core tests; the helpers themselves live in cli_helpers.py."""

from pathlib import Path

import pytest
from cli_helpers import PluginSite


@pytest.fixture
def plugin_site(tmp_path: Path) -> PluginSite:
    return PluginSite(tmp_path / "site")
