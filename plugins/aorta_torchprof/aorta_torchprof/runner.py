"""``python -m aorta_torchprof.runner (script.py | -m module) [args...]``: profile a script.

Runs the payload as ``__main__`` under a :class:`~aorta_torchprof.session.Session` configured
from the environment the wrap set, with ``sys.argv`` and ``sys.path[0]`` as plain
``python script.py`` would have them. The payload's exit status is kept (``SystemExit``
included; an uncaught exception prints its traceback and exits 1) and the profiler is stopped
and its traces written whatever way the payload ends; when the payload failed (a non-zero
status), the session adds nothing to stderr, so the payload's own error stays its last line.
The process then ends without the interpreter's C++ teardown
(:func:`aorta_core.api.exit_without_teardown`).
"""

from __future__ import annotations

import os
import sys
import traceback

from aorta_core.api import exit_status, exit_without_teardown, rank_from_env, run_main
from aorta_torchprof.session import DIR_ENV, Session, options_from_env

USAGE = "usage: python -m aorta_torchprof.runner (script.py | -m module) [args...]"


def main(argv: list[str]) -> int:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    out_dir = os.environ.get(DIR_ENV)
    if not out_dir:
        print(f"aorta-torchprof runner: {DIR_ENV} is not set; {USAGE}", file=sys.stderr)
        return 2
    session = Session(options_from_env(), out_dir, rank_from_env())
    session.start()
    status = 1  # until the payload is seen to end otherwise
    try:
        run_main(argv)
        status = 0
    except SystemExit as exc:
        status = exit_status(exc)
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        try:
            session.stop(status)
        except Exception:  # a failing export must not hide the payload's own status
            traceback.print_exc()
    return status


if __name__ == "__main__":
    exit_without_teardown(main(sys.argv[1:]))
