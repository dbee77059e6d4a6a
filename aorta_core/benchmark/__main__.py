"""``python -m aorta_core.benchmark [--config FILE] [overrides]`` (or under ``torchrun -m``)."""

from __future__ import annotations

import logging
import os
import sys

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from aorta_core.benchmark.config import ConfigError, compose_config, file_overrides


def _one_line(exc: BaseException) -> str:
    """Hydra's message plus its cause (which names the full key path), on one line."""
    parts = [str(exc)]
    if exc.__cause__ is not None:
        parts.append(str(exc.__cause__))
    return " ".join(" ".join(p.split()) for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["--config"] and len(argv) > 1:
            argv = [*file_overrides(argv[1]), *argv[2:]]
        cfg = compose_config(argv)
    except (HydraException, OmegaConfBaseException, ConfigError) as exc:
        print(f"aorta benchmark: bad config: {_one_line(exc)}", file=sys.stderr)
        return 2
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO, format=f"[rank{rank}] %(message)s")
    from aorta_core.benchmark.train import run

    run(cfg, dict(os.environ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
