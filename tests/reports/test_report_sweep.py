"""The sweep's report.html over real sweeps, and its robustness to odd output folders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from urllib.parse import unquote

from reports.report_helpers import aorta

from aorta_core.reports.cell_tables import kinds
from aorta_core.reports.figures import find_browser
from aorta_core.reports.sweep import write_sweep_report


def _links(page: str) -> list[str]:
    return [unquote(h) for h in re.findall(r'href="([^"]+)"', page)]


def test_report_of_a_real_proton_sweep(proton_sweep):
    out = proton_sweep
    path = write_sweep_report(out, pngs=False)
    page = path.read_text()
    matrix = json.loads((out / "matrix.json").read_text())
    cell = matrix["cells"][0]
    top = cell["metrics_text"]["proton_top_kernels"]
    assert top[0] in page  # the generic list section and the per-collector GPU time table
    assert "<h3>proton top kernels (proton_top_kernels)</h3>" in page
    found = kinds(matrix)
    for metric in found.varying:  # a figure each; a constant one is in the folded line
        assert f'id="spread_{metric}"' in page
    assert found.varying and set(found.constant) | set(found.varying) >= set(
        cell["metrics_summary"])
    assert 'id="spread_wall_time_s"' in page and 'id="kernels_proton"' in page
    links = _links(page)
    for trial in range(2):
        base = f"{cell['dir']}/trial_{trial:03d}"
        for name in ("record.json", "stdout.log", "stderr.log", "proton/"):
            assert f"{base}/{name}" in links
            assert (out / base / name).exists()
    median = cell["metrics_summary"]["proton_gpu_time_ms"]["median"]
    assert f"{median:.4g}" in page


def test_cli_rebuilds_the_report(sweeps, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(sweeps["broken"], out)
    done = aorta("report", "sweep", str(out), "--no-png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text()
    assert "exit code 3" in page and "<span class=bad>fail</span>" in page
    assert aorta("report", "sweep", str(tmp_path), cwd=tmp_path, check=False).returncode == 2
    (out / "matrix.json").write_text("[]")  # a matrix.json of another shape: no page, one line
    (out / "report.html").unlink()
    done = aorta("report", "sweep", str(out), "--no-png", cwd=tmp_path, check=False)
    assert done.returncode == 2 and not (out / "report.html").exists()
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(f"aorta: error: {out}/matrix.json is not a matrix.json")


def test_odd_folders_never_raise(sweeps, tmp_path):
    assert write_sweep_report(tmp_path / "missing", pngs=False) is None
    assert not (tmp_path / "missing").exists()
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage/matrix.json").write_text("{truncated")
    page = write_sweep_report(tmp_path / "garbage", pngs=False).read_text()
    assert "No usable matrix.json" in page
    odd = tmp_path / "odd"
    shutil.copytree(sweeps["fast"], odd)
    (odd / "matrix.parquet").write_bytes(b"not parquet")
    record = next(odd.glob("cells/*/trial_001/record.json"))
    record.write_text(record.read_text()[:50])
    matrix = json.loads((odd / "matrix.json").read_text())
    matrix["cells"].append({"cell": "ghost", "metrics_summary": {"m": "nonsense"}, "axes": 3})
    (odd / "matrix.json").write_text(json.dumps(matrix))
    page = write_sweep_report(odd, pngs=False).read_text()
    assert "The trial spread section could not be built" in page
    assert "trial_000/record.json" in page and "trial_001/record.json" not in page


def test_pngs_or_one_line_saying_why(sweeps, tmp_path):
    out = tmp_path / "png"
    shutil.copytree(sweeps["fast"], out)
    code = ("import sys; sys.modules['kaleido'] = None\n"
            "from pathlib import Path\nfrom aorta_core.reports.sweep import write_sweep_report\n"
            f"write_sweep_report(Path({str(out)!r}), pngs=True)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "PNGs skipped: kaleido is not installed" in lines[0]
    # Chromium is named only where it is missing too (tests/reports/test_png_warning.py).
    assert ("apt-get install -y chromium" in lines[0]) is (find_browser() is None)


def test_pngs_written_when_chromium_is_there(browser, proton_sweep, tmp_path):
    out = tmp_path / "png"
    shutil.copytree(proton_sweep, out)
    write_sweep_report(out, pngs=True)
    pngs = sorted(p.name for p in (out / "report_png").glob("*.png"))
    assert "kernels_proton.png" in pngs and "spread_wall_time_s.png" in pngs
    assert all((out / "report_png" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)

