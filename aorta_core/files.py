"""Writing files so that a reader never sees half of one, with the modes the user's umask asks for.

Every file aorta writes goes through :func:`write_atomic`: a uniquely named temporary file in the
same folder, created with mode 0666 so the kernel applies the umask (a team sharing a runs folder
can read each other's results), then ``os.replace`` over the target.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_atomic(path: Path, content: bytes | Callable[[Path], object]) -> None:
    """Replace ``path`` by ``content`` (bytes, or a function that writes the file it is given).

    On any failure the temporary file is removed and ``path`` keeps its previous content.
    """
    tmp = _temporary(path)
    try:
        if callable(content):
            content(tmp)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
