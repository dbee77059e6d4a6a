"""``python -m aorta_rusage.wrap <dir> -- <command...>``: run, keep the exit code, record rusage."""

import json
import resource
import subprocess
import sys
from pathlib import Path


def main() -> int:
    artifact_dir, sep, *command = sys.argv[1:]
    assert sep == "--" and command, "usage: python -m aorta_rusage.wrap <dir> -- <command...>"
    code = subprocess.call(command)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {k: getattr(usage, k) for k in ("ru_utime", "ru_stime", "ru_maxrss")}
    (Path(artifact_dir) / "rusage.json").write_text(json.dumps(result))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
