"""``python -m aorta_proton.cli_runner``: Proton's command line, made safe for measurement.

Takes the flags of ``python -m triton.profiler.proton`` (``-n -b -c -d -m -k``) and the same
``script.py args`` / ``pytest args`` target, and differs where Proton's own CLI loses data:

* the ``-n`` folder is created (Proton writes nothing and exits 0 when it is missing);
* Proton is finalized however the payload ends (``sys.exit()``, an exception, Ctrl-C), so a
  script that ends in ``raise SystemExit(0)`` still leaves its profile (Triton <= 3.6 skips it);
* the payload's real exit status is the runner's: ``SystemExit.code``, 1 on an exception,
  ``pytest.main()``'s return value (Proton's CLI returns 0 for a failing pytest before 3.7);
* ``-m`` reaches ``proton.start(mode=...)`` (Proton's CLI drops it before 3.8).
"""

from __future__ import annotations

import argparse
import os
import sys

from aorta_core.api import run_main
from aorta_proton import session


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aorta_proton.cli_runner",
        usage="%(prog)s [proton options] (script.py | pytest) [args ...]",
        description="Run a Python script or pytest under Triton Proton (aorta's runner).",
    )
    parser.add_argument("-n", "--name", required=True, help="profile path without extension")
    parser.add_argument("-b", "--backend", default=None)
    parser.add_argument("-c", "--context", default="shadow")
    parser.add_argument("-d", "--data", default="tree")
    parser.add_argument("-m", "--mode", default=None)
    parser.add_argument("-k", "--hook", default=None)
    parser.add_argument("target", nargs=argparse.REMAINDER, help="script.py or pytest, then args")
    return parser


def _run_target(target: list[str]) -> int:
    """Run ``target`` in this process the way ``python script.py`` / ``pytest`` would."""
    if os.path.basename(target[0]) == "pytest":
        import pytest

        sys.argv = list(target)
        return int(pytest.main(target[1:]))
    run_main(target)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Profile the target; return (or raise ``SystemExit`` with) the target's own status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.target:
        parser.error("missing the script (or pytest) to profile")
    os.makedirs(os.path.dirname(os.path.abspath(args.name)), exist_ok=True)
    session.start(
        args.name,
        context=args.context,
        data=args.data,
        backend=args.backend,
        mode=args.mode,
        hook=args.hook,
        exclusive=True,
    )
    try:
        return _run_target(args.target)
    finally:
        session.finalize()


if __name__ == "__main__":
    sys.exit(main())
