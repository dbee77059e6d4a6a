"""``python -m aorta_core``: the same entry point as the ``aorta`` command."""

from aorta_core.app.cli import main

raise SystemExit(main())
