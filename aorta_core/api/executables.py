"""Find a profiler's executable the same way in every collector, with one-line fixes on failure.

Collectors that wrap an external tool (rocprofv3, ncu, ...) let the user pick the binary by an
option, by an environment variable of the trial, or by ``PATH``; this keeps the lookup order and
the wording of the setup errors identical across them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from aorta_core.api.contracts import SetupError


def find_executable(
    program: str,
    env: Mapping[str, str],
    *,
    env_var: str,
    install_hint: str,
    example: str,
    option_key: str | None = None,
    option_value: str | None = None,
) -> str:
    """The absolute path of ``program`` to run in a trial whose environment is ``env``.

    Looked up in this order: ``option_value`` (the collector option ``option_key``), then
    ``env[env_var]``, then ``program`` on ``env["PATH"]``. A value holding a path separator must
    be an executable file; a bare name is looked up on ``PATH``; ``~`` and ``$VARS`` are
    expanded. Raises ``SetupError`` naming every way to fix it.
    """
    path = env.get("PATH", os.defpath)
    for label, raw, fallback in (
        (option_key, option_value, f"{env_var} or {program} from PATH"),
        (env_var, env.get(env_var), f"{program} from PATH"),
    ):
        if label is None or raw is None or not raw.strip():
            continue
        value = os.path.expanduser(os.path.expandvars(raw.strip()))
        if os.sep in value:
            if os.path.isfile(value) and os.access(value, os.X_OK):
                return os.path.abspath(value)
            raise SetupError(
                f"{label}={raw} is not an executable file; point {label} at {program} "
                f"or unset it to use {fallback}"
            )
        found = shutil.which(value, path=path)
        if found is None:
            raise SetupError(
                f"{label}={raw} is not found on PATH; give {label} as a full path to {program} "
                "or add its folder to PATH"
            )
        return found
    found = shutil.which(program, path=path)
    if found is None:
        setters = f"{option_key} or {env_var}" if option_key else env_var
        raise SetupError(
            f"{program} is not on PATH; {install_hint} or set {setters} to the {program} "
            f"executable (e.g. {example})"
        )
    return found
