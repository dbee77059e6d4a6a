"""Hydra callback of the driving process: lock the output, merge the matrix at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from aorta_core.lock import SweepLock, SweepLockedError
from aorta_core.progress import error_line

#: Exit status for ``__main__``: set when cells could not run or the output is unusable.
exit_status = 0


def _fail(message: str) -> None:
    error_line(message)
    raise SystemExit(2)


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.lock: SweepLock | None = None

    def _start(self, config: DictConfig) -> None:
        output = Path(str(config.output))
        try:
            output.mkdir(parents=True, exist_ok=True)
            probe = output / ".aorta.write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            _fail(f"cannot write to output={output} ({exc.strerror}); "
                  "choose a writable output=<dir>")
        self.lock = SweepLock(output)
        try:
            self.lock.acquire()
        except SweepLockedError as exc:
            self.lock = None
            _fail(str(exc))

    def _end(self, config: DictConfig) -> None:
        global exit_status
        output = Path(str(config.output))
        try:
            from aorta_core.summary import finish

            result = finish(output)
            exit_status = 1 if any(c.get("error") for c in result.cells) else 0
        except Exception as exc:  # Hydra would demote this to a warning; the records are safe
            error_line(f"could not write the matrix of {output} ({type(exc).__name__}: {exc}); "
                       f"the trial records are kept: fix the cause, then run aorta matrix {output}")
            exit_status = 1
        finally:
            if self.lock is not None:
                self.lock.release()

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._start(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._start(config)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end(config)
