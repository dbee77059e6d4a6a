"""Bridge from aorta's plugin registry to Hydra: installed collectors' configs join the search path.

Registered with Hydra by hand (``Plugins.instance().register``) rather than through the
``hydra_plugins`` namespace package, which Hydra cannot scan in editable installs; the search
path it edits is the one Hydra's sweepers list options from, so ``collector=glob(*)`` sees
every collector.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from aorta_core.plugins import load_registry


class CollectorSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for name, collector in load_registry().collectors.items():
            search_path.append(f"aorta-{name}", f"pkg://{collector.info.config_package}")


def install() -> None:
    """Make every loaded collector's ``collector/<name>`` option composable.

    Each collector's options dataclass becomes the schema of its option, so that a mistyped or
    ill-typed option fails while the config is composed, naming the key.
    """
    store = ConfigStore.instance()
    for name, collector in load_registry().collectors.items():
        store.store(group="aorta_schema/collector", name=name, node=collector.info.options)
    Plugins.instance().register(CollectorSearchPath)
