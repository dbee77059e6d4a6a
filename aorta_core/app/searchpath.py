"""Bridge from aorta's plugin registry to Hydra: every loaded collector becomes a
``collector/<name>`` option.

A collector without a config package gets its option generated here, straight from its options
dataclass (package ``collector.<name>``); one that ships ``collector/<name>.yaml`` (for presets)
has its package put on the search path instead. Either way the option is typed by the dataclass,
so a mistyped or ill-typed option fails while the config is composed, naming the key. The search
path plugin is registered with Hydra by hand (``Plugins.instance().register``) rather than through
the ``hydra_plugins`` namespace package, which Hydra cannot scan in editable installs; the search
path it edits, and the ConfigStore, are where Hydra's sweepers list options from, so
``collector=glob(*)`` sees every collector.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from aorta_core.engine.plugins import load_registry


class CollectorSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for name, collector in load_registry().collectors.items():
            if collector.info.config_package is not None:
                search_path.append(f"aorta-{name}", f"pkg://{collector.info.config_package}")


def install() -> None:
    """Make every loaded collector's ``collector/<name>`` option composable.

    The options dataclass is stored twice over: as the schema ``aorta_schema/collector/<name>``
    that a collector's YAML extends, and, for a collector without YAML, as the option itself.
    """
    store = ConfigStore.instance()
    for name, collector in load_registry().collectors.items():
        options = collector.info.options
        store.store(group="aorta_schema/collector", name=name, node=options)
        if collector.info.config_package is None:
            store.store(group="collector", name=name, node=options, package=f"collector.{name}")
    Plugins.instance().register(CollectorSearchPath)
