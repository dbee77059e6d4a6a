"""Usage mistakes on a tool's command line, said in one line.

argparse answers a mistake with the tool's whole usage block and then the error; aorta's
mistakes are one line naming the problem and where the fix is (``--help``), like every other
error it prints.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(ValueError):
    """The command line cannot run; the message is the one line to show (exit status 2)."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes raise :class:`UsageError` (``<prog>: <what>; see
    <prog> --help``); its sub-commands' parsers are of the same kind."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}; see {self.prog} --help")
