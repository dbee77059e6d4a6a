"""``python -m aorta_core``: the same entry point as the ``aorta`` command."""

from aorta_core.cli import main

raise SystemExit(main())
