"""What aorta, Hydra and kaleido write stays in the output, and what a payload leaves behind (a
read-only folder, a log without end, a binary stderr) costs at most its own trial: each attacked
through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from cli_helpers import good_collector, records, run_aorta

from aorta_core.reports.figures import find_browser

ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": "rocprof,proton,torchprof,rusage,ncu"}


def _victims(elsewhere: Path) -> dict[str, bytes]:
    return {str(p.relative_to(elsewhere)): p.read_bytes()
            for p in sorted(elsewhere.rglob("*")) if p.is_file()}


# -- links ----------------------------------------------------------------------------------------

def test_a_rerun_writes_no_hydra_file_through_a_link(tmp_path: Path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    args = ["sweep=repeat", "trials=2", f"output={out}", "--", "sh", "-c", "echo hello"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    cell = out / "cells" / "default"
    (elsewhere / "hydra").mkdir(parents=True)
    for name, path in (("multirun.yaml", out / "multirun.yaml"),
                       ("aorta.log", cell / "aorta.log")):
        (elsewhere / name).write_text("keep me\n")
        path.unlink()
        path.symlink_to(elsewhere / name)
    (cell / ".hydra").symlink_to(elsewhere / "hydra", target_is_directory=True)
    (cell / "trial_001" / "record.json").unlink()
    before = _victims(elsewhere)
    done = run_aorta(args, cwd=tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert done.returncode == 0, done.stderr
    assert _victims(elsewhere) == before and not any((elsewhere / "hydra").iterdir())
    assert not (out / "multirun.yaml").is_symlink()
    assert "output" in (out / "multirun.yaml").read_text()
    assert (cell / "aorta.log").is_file() and not (cell / "aorta.log").is_symlink()


def test_a_cell_folder_a_payload_turns_into_a_link_is_never_written_through(tmp_path: Path):
    """The first cell's payload makes the second cell's folder a link out of the output: Hydra's
    job log goes nowhere, the cell is refused and its refusal recorded in a real folder."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant = f'[ "$X" = 1 ] && ln -s {elsewhere} {out}/cells/env.X=2; true'
    done = run_aorta(["sweep=repeat", "trials=1", "+env.X=1,2", f"output={out}", "--",
                      "sh", "-c", plant], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "cell env.X=2: the cell folder" in done.stderr and "is outside output" in done.stderr
    assert list(elsewhere.iterdir()) == []
    second = out / "cells" / "env.X=2"
    assert not second.is_symlink()
    assert "is outside output" in json.loads((second / "cell.json").read_text())["error"]


@pytest.mark.parametrize("link", ["cells", "cells/default"])
def test_a_cells_folder_that_is_a_link_is_refused_before_anything_runs(tmp_path: Path, link):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / link).parent.mkdir(parents=True)
    (out / link).symlink_to(elsewhere, target_is_directory=True)
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"aorta: error: {out / link} is a link; aorta writes only inside output: remove the "
        "link or choose another output=<dir>"]
    assert list(elsewhere.iterdir()) == []


def _kaleido_and_chromium() -> str | None:
    if find_spec("kaleido") is None:
        return "needs kaleido: pip install 'aorta-core[report]'"
    if find_browser() is None:
        return "needs Chrome/Chromium for PNG export: apt-get install -y chromium"
    return None


@pytest.mark.skipif(_kaleido_and_chromium() is not None, reason=str(_kaleido_and_chromium()))
def test_png_export_writes_through_no_link_in_report_png(tmp_path: Path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pngs_on = {"AORTA_REPORT_PNG": "1"}
    assert run_aorta(["sweep=repeat", "trials=2", f"output={out}", "--", "true"],
                     cwd=tmp_path).returncode == 0
    report = ["report", "sweep", str(out)]
    done = run_aorta(report, cwd=tmp_path, env=pngs_on, timeout=300)
    folder = out / "report_png"
    names = sorted(p.name for p in folder.glob("*.png"))
    assert names, done.stdout + done.stderr
    # a link at one PNG's name
    (elsewhere / "victim.png").write_bytes(b"keep me")
    (folder / names[0]).unlink()
    (folder / names[0]).symlink_to(elsewhere / "victim.png")
    done = run_aorta(report, cwd=tmp_path, env=pngs_on, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (elsewhere / "victim.png").read_bytes() == b"keep me"
    assert not (folder / names[0]).is_symlink()
    assert (folder / names[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the folder itself a link
    shutil.rmtree(folder)
    folder.symlink_to(elsewhere, target_is_directory=True)
    done = run_aorta(report, cwd=tmp_path, env=pngs_on, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in elsewhere.iterdir()] == ["victim.png"]
    assert not folder.is_symlink() and sorted(p.name for p in folder.glob("*.png")) == names


# -- a read-only folder left by the payload -------------------------------------------------------

#: A payload that leaves, in the collector's artifact folder, a read-only folder holding a
#: read-only folder with a read-only file and a bulky one, and a folder nobody may even list.
READ_ONLY = ('a="$AORTA_TRIAL_DIR/good"; mkdir -p "$a/x/y" "$a/z/w"; echo data > "$a/x/y/f"; '
             'head -c 2000000 /dev/zero > "$a/x/y/big"; chmod 444 "$a/x/y/f" "$a/x/y/big"; '
             'chmod 555 "$a/x/y" "$a/x"; chmod 000 "$a/z"')


def _unprivileged() -> list[str]:
    """A prefix that runs a command subject to file permissions like any owner: none when the
    tests run as a normal user; as root, ``setpriv`` to ``nobody`` when that user can run this
    Python, else root without the capabilities that bypass permissions (DAC override). Skips
    when neither is possible, or when the prefix still writes into a read-only folder."""
    if os.geteuid() != 0:
        prefix: list[str] = []
    elif shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot run a sweep subject to permissions")
    else:
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        can = subprocess.run([*nobody, sys.executable, "-c", "import aorta_core"],
                             capture_output=True).returncode == 0
        prefix = nobody if can else [
            "setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"aorta-ro-probe-{os.getpid()}"
    try:
        (probe / "ro").mkdir(parents=True)
        os.chmod(probe, 0o777)
        os.chmod(probe / "ro", 0o555)
        denied = subprocess.run([*prefix, "touch", str(probe / "ro" / "f")],
                                capture_output=True).returncode != 0
    finally:
        os.chmod(probe / "ro", 0o755)
        shutil.rmtree(probe)
    if not denied:
        pytest.skip("this user writes into read-only folders: the fault cannot be reproduced")
    return prefix


def _sweep_as(prefix: list[str], args: list[str], cwd: Path, env: dict[str, str]):
    return subprocess.run([*prefix, sys.executable, "-m", "aorta_core", *args], cwd=cwd,
                          env={**os.environ, "AORTA_REPORT_PNG": "0", "HOME": str(cwd), **env},
                          capture_output=True, text=True, timeout=180)


def _workspace(tmp_path: Path, prefix: list[str]) -> Path:
    """A folder the unprivileged user owns, reachable by it (pytest's tmp_path is private)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"aorta-ro-{tmp_path.name}-{os.getpid()}"
    base.mkdir()
    shutil.copytree(tmp_path / "site", base / "site")
    if prefix and prefix[1].startswith("--reuid"):
        for path in (base, *base.rglob("*")):
            os.chown(path, 65534, 65534)
    return base


def _make_removable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


@pytest.fixture
def read_only_setup(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    prefix = _unprivileged()
    base = _workspace(tmp_path, prefix)
    path = os.pathsep.join(filter(None, (str(base / "site"), os.environ.get("PYTHONPATH"))))
    env = {"PYTHONPATH": path, **ONLY_TEST_PLUGINS}
    yield prefix, base, env
    for folder in base.glob("out/cells/*/trial_*/good/z"):
        folder.chmod(0o755)
    _make_removable(base)
    shutil.rmtree(base)


@pytest.mark.parametrize("level", ["log", "summary", "none"])
def test_a_read_only_folder_left_by_the_payload_is_pruned_and_the_sweep_goes_on(
        read_only_setup, level):
    prefix, base, env = read_only_setup
    args = ["sweep=repeat", "trials=2", "collector=good", "output=out", f"retain.on_pass={level}",
            "--", "sh", "-c", READ_ONLY]
    done = _sweep_as(prefix, args, base, env)
    assert done.returncode == 0, done.stderr
    assert "free space" not in done.stderr and "warning" not in done.stderr
    got = records(base / "out")
    assert [r["verdict"] for r in got] == ["pass", "pass"]
    deleted = {"log": ["good/"], "none": ["good/", "stdout.log", "stderr.log"],
               "summary": ["good/x/y/big"]}[level]
    assert all(r["retention"]["deleted"] == deleted for r in got)
    left = {p.name for p in (base / "out").glob("cells/*/trial_*/good/**/*")}
    assert left == ({"x", "y", "f", "z", "w", "wrapped.txt"} if level == "summary" else set())


def test_the_rerun_of_a_trial_that_left_a_read_only_folder_starts_afresh(read_only_setup):
    prefix, base, env = read_only_setup
    args = ["sweep=repeat", "trials=2", "collector=good", "output=out", "--", "sh", "-c",
            READ_ONLY]
    assert _sweep_as(prefix, args, base, env).returncode == 0
    [trial] = (base / "out").glob("cells/*/trial_001")
    (trial / "record.json").unlink()  # as after kill -9: the trial runs again
    done = _sweep_as(prefix, args, base, env)
    assert done.returncode == 0, done.stderr
    assert "(1/2 trials already recorded)" in done.stderr
    assert [r["verdict"] for r in records(base / "out")] == ["pass", "pass"]
    assert (trial / "good" / "x" / "y" / "f").read_text() == "data\n"


def _immutable_supported(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_text("")
    ok = shutil.which("chattr") is not None and subprocess.run(
        ["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    probe.unlink()
    return ok


def test_a_file_no_one_may_delete_is_kept_with_a_warning_not_the_disk_full_abort(tmp_path):
    """Root meets a permission fault only with an immutable file (``chattr +i``): it is kept
    with one warning, the record is written, the sweep goes on."""
    if not _immutable_supported(tmp_path):
        pytest.skip("needs chattr +i (root on ext4/xfs/btrfs) to make a file no one may delete")
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=2", f"output={out}", "retain.on_pass=none", "--",
            "sh", "-c", 'echo hi; [ "$AORTA_TRIAL" = 0 ] && '
                        'chattr +i "$AORTA_TRIAL_DIR/stdout.log"; true']
    try:
        done = run_aorta(args, cwd=tmp_path)
        log = out / "cells" / "default" / "trial_000" / "stdout.log"
        assert done.returncode == 0, done.stderr
        assert "free space" not in done.stderr
        warnings = [ln for ln in done.stderr.splitlines() if "warning" in ln]
        assert warnings == [f"aorta: warning: could not delete {log} (Operation not permitted); "
                            "it is kept"]
        got = records(out)
        assert [r["verdict"] for r in got] == ["pass", "pass"]
        assert got[0]["retention"]["deleted"] == ["stderr.log"]
        assert got[1]["retention"]["deleted"] == ["stdout.log", "stderr.log"]
        assert log.read_text() == "hi\n"
    finally:
        for log in out.glob("cells/*/trial_*/stdout.log"):
            subprocess.run(["chattr", "-i", str(log)], check=False)


# -- logs -----------------------------------------------------------------------------------------

def _max_rss_mib(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """Run the CLI from a small Python that reports its child's peak memory."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(p.returncode)")
    done = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "aorta_core", *args],
                          cwd=cwd, env={**os.environ, "AORTA_REPORT_PNG": "0"},
                          capture_output=True, text=True, timeout=300)
    return done, int(done.stderr.strip().splitlines()[-1]) / 1024


def test_a_huge_log_keeps_its_head_and_tail_with_a_note(tmp_path: Path):
    out = tmp_path / "out"
    size = 400 << 20
    payload = (f"import sys; out = sys.stdout.buffer; out.write(b'FIRST\\n');"
               f" [out.write(b'.' * (1 << 20)) for _ in range({size >> 20})];"
               " out.write(b'\\nLAST\\n'); out.flush();"
               " sys.stderr.write('x' * 3000000 + '\\nRuntimeError: the end\\n'); sys.exit(3)")
    args = ["sweep=repeat", "trials=1", f"output={out}", "log_limit_mb=2", "--",
            sys.executable, "-c", payload]
    done, rss_mib = _max_rss_mib(args, tmp_path)
    assert done.returncode == 1, done.stderr
    trial = out / "cells" / "default" / "trial_000"
    log = (trial / "stdout.log").read_bytes()
    cut = size + len(b"FIRST\n\nLAST\n") - (2 << 20)
    note = f"\n... [aorta: {cut} bytes cut; log_limit_mb=2 keeps head and tail] ...\n".encode()
    assert log.startswith(b"FIRST\n" + b"." * 100) and log.endswith(b"." * 100 + b"\nLAST\n")
    assert len(log) == (2 << 20) + len(note) and log[1 << 20:(1 << 20) + len(note)] == note
    assert (trial / "stderr.log").stat().st_size < (2 << 20) + 200
    [record] = records(out)
    assert record["error"] == "exit code 3: RuntimeError: the end"
    assert rss_mib < 300, f"aorta peaked at {rss_mib:.0f} MiB for a 400 MiB log"


def test_log_limit_null_keeps_logs_whole_and_bad_values_are_refused(tmp_path: Path):
    out = tmp_path / "out"
    three_mib = f"import sys; sys.stdout.write('y' * {3 << 20})"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "log_limit_mb=null", "--",
                      sys.executable, "-c", three_mib], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / "cells/default/trial_000/stdout.log").stat().st_size == 3 << 20
    for bad in ("0", "-1", "inf", "nan"):
        refused = run_aorta(["sweep=repeat", "trials=1", f"output={tmp_path / bad}",
                             f"log_limit_mb={bad}", "--", "true"], cwd=tmp_path)
        assert refused.returncode == 2
        assert refused.stderr.startswith(f"aorta: error: log_limit_mb={bad}")
        assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("stderr", "error"), [
    (b"\0" * 1000, "exit code 3"),
    (b"\xff\xfe\x01\x02binary" * 200 + b"\n\x1b[31mRuntimeError: boom\x1b[0m\n" + b"\0" * 64,
     "exit code 3: RuntimeError: boom"),
])
def test_a_binary_stderr_never_becomes_the_failure_reason(tmp_path: Path, stderr, error):
    out = tmp_path / "out"
    payload = f"import sys; sys.stderr.buffer.write({stderr!r}); sys.exit(3)"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", sys.executable, "-c",
                      payload], cwd=tmp_path)
    assert done.returncode == 1
    [record] = records(out)
    assert record["error"] == error
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["trials"]["fail"] == 1
    assert all(ch.isprintable() for ch in record["error"])



def test_a_trial_folder_the_payload_made_read_only_is_its_cells_error_not_a_full_disk(
        read_only_setup):
    prefix, base, env = read_only_setup
    args = ["sweep=repeat", "trials=1", "collector=good", "output=out", "--", "sh", "-c",
            'chmod 555 "$AORTA_TRIAL_DIR"']
    done = _sweep_as(prefix, args, base, env)
    assert done.returncode == 1
    [error] = [ln for ln in done.stderr.splitlines() if ln.startswith("aorta: error")]
    assert error.startswith("aorta: error: cell collector=good: cannot write or remove /")
    assert "/trial_000/record.json (Permission denied)" in error and "free space" not in error
    assert (base / "out" / "matrix.json").is_file()
    for trial in (base / "out").glob("cells/*/trial_*"):
        trial.chmod(0o755)
    rerun = _sweep_as(prefix, ["sweep=repeat", "trials=1", "collector=good", "output=out", "--",
                               "true"], base, env)
    assert rerun.returncode == 0, rerun.stderr
