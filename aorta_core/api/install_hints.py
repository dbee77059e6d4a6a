"""Install hints that are commands that work.

aorta's distributions (the core and its collectors) are installed from the repository or from
wheels built from it, not from a package index, so a hint that names one to pip fails for
everyone. A hint names the source the distribution was installed from in this process (PEP 610's
``direct_url.json``: the checkout folder, editable or not, or the wheel file), else the folder
of the aorta repository that holds it.
"""

from __future__ import annotations

import json
import shlex
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import unquote, urlparse


def _installed_from(name: str) -> tuple[Path, bool] | None:
    """The local folder or wheel ``name`` was installed from, and whether it is editable."""
    try:
        text = distribution(name).read_text("direct_url.json")
        origin = json.loads(text) if text else None
    except (PackageNotFoundError, ValueError):
        return None
    if not isinstance(origin, dict) or not str(origin.get("url", "")).startswith("file://"):
        return None
    path = Path(unquote(urlparse(origin["url"]).path))
    editable = bool((origin.get("dir_info") or {}).get("editable"))
    return (path, editable) if path.exists() else None


def _source(name: str) -> tuple[str, bool]:
    """pip's argument that installs ``name``, and whether it is the repository-relative guess."""
    found = _installed_from(name)
    if found is None:
        return f"-e {'.' if name == 'aorta-core' else 'plugins/' + name.replace('-', '_')}", True
    path, editable = found
    return f"-e {shlex.quote(str(path))}" if editable else shlex.quote(str(path)), False


def pip_install(python: str, *names: str) -> str:
    """``<python> -m pip install <sources>``: a command that installs the named distributions
    (e.g. aorta-core and a collector into the workload's interpreter that lacks its runner)."""
    sources = [_source(name) for name in names]
    command = f"{shlex.quote(python)} -m pip install {' '.join(s for s, _ in sources)}"
    return command + (" (in the aorta repository)" if any(g for _, g in sources) else "")
