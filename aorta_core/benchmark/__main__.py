"""``python -m aorta_core.benchmark [--config FILE] [--override key=value ...] [overrides]``.

``--config`` and ``--override`` are upstream aorta's trainer flags, so its launch lines run here;
plain Hydra overrides work alongside them (also under ``torchrun -m``).
"""

from __future__ import annotations

import logging
import os
import sys

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from aorta_core.api.launch import exit_without_teardown
from aorta_core.api.ranks import rank_from_env
from aorta_core.benchmark.config import ConfigError, check_inject, compose_config
from aorta_core.engine.config_tree import config_tree_missing


def _one_line(exc: BaseException) -> str:
    """Hydra's message plus its cause (which names the full key path), on one line."""
    parts = [str(exc)]
    if exc.__cause__ is not None:
        parts.append(str(exc.__cause__))
    return " ".join(" ".join(p.split()) for p in parts if p)


def split_argv(argv: list[str]) -> tuple[list[str], str | None, list[tuple[str, str]]]:
    """(Hydra overrides, ``--config`` file, ``--override`` pairs) of the command line.

    ``--override`` takes the ``key=value`` words up to the next ``--`` flag, as upstream's
    argparse ``nargs="*"`` did; unlike upstream, where a repeated ``--override`` kept only the
    last group, every group counts.
    """
    overrides: list[str] = []
    pairs: list[tuple[str, str]] = []
    config_file = None
    in_override = False
    words = iter(argv)
    for word in words:
        if word == "--config" or word.startswith("--config="):
            if config_file is not None:
                raise ConfigError("--config given twice; give one settings file")
            config_file = word.partition("=")[2] if "=" in word else next(words, "")
            if not config_file:
                raise ConfigError("--config needs a file, e.g. --config config/default.yaml")
            in_override = False
        elif word == "--override":
            in_override = True
        elif word.startswith("--"):
            raise ConfigError(f"unknown option {word}; the benchmark takes --config FILE, "
                              "--override key=value ... and Hydra overrides key=value")
        elif in_override:
            key, equals, value = word.partition("=")
            if not equals or not key:
                raise ConfigError(f"--override {word}: expected key=value, e.g. "
                                  "--override training.max_steps=50")
            pairs.append((key, value))
        else:
            overrides.append(word)
    return overrides, config_file, pairs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    missing = config_tree_missing()
    if missing is not None:
        print(f"aorta benchmark: {missing}", file=sys.stderr)
        return 2
    try:
        overrides, config_file, pairs = split_argv(argv)
        cfg = compose_config(overrides, config_file, pairs)
        check_inject(cfg, int(os.environ.get("WORLD_SIZE", "1")))
    except (HydraException, OmegaConfBaseException, ConfigError) as exc:
        print(f"aorta benchmark: bad config: {_one_line(exc)}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format=f"[rank{rank_from_env()}] %(message)s")
    from aorta_core.benchmark.distributed import DeviceError
    from aorta_core.benchmark.train import run

    try:
        run(cfg, dict(os.environ))
    except DeviceError as exc:
        print(f"aorta benchmark: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_without_teardown(main())  # its files are closed and its process group left by now
