"""Parallel cells (joblib), submitit local executor, device slots: nothing lost or shared."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from cli_helpers import records, run_aorta
from needs import needs

JOBLIB = "hydra_plugins.hydra_joblib_launcher"
SUBMITIT = "hydra_plugins.hydra_submitit_launcher"

STAMP = (
    "import json, os, sys, time; t0 = time.time(); time.sleep(float(sys.argv[1])); "
    "open(os.path.join(os.environ['AORTA_TRIAL_DIR'], 'slot.json'), 'w').write(json.dumps("
    "{'dev': os.environ.get('CUDA_VISIBLE_DEVICES'), 't0': t0, 't1': time.time()}))"
)


@needs(JOBLIB)
def test_200_trials_on_two_joblib_workers_lose_and_duplicate_nothing(tmp_path: Path):
    out = tmp_path / "out"
    cells = ",".join(str(i) for i in range(10))
    done = run_aorta(["-m", "sweep=repeat", "trials=20", "hydra/launcher=joblib",
                      "hydra.launcher.n_jobs=2", f"+cell={cells}", f"output={out}", "--", "true"],
                     cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    recs = records(out)
    keys = Counter((r["cell"], r["trial"]) for r in recs)
    assert len(keys) == 200 and set(keys.values()) == {1}
    assert all(r["verdict"] == "pass" for r in recs)
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["trials"]["total"] == 200 and len(matrix["cells"]) == 10
    assert sorted(c["cell"] for c in matrix["cells"]) == sorted(f"cell={i}" for i in range(10))
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


@needs(JOBLIB)
def test_parallel_cells_never_share_a_device_slot(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=2", "hydra/launcher=joblib",
                      "hydra.launcher.n_jobs=2", "+cell=a,b,c,d", "devices=[7,9]",
                      f"output={out}", "--", sys.executable, "-c", STAMP, "0.3"],
                     cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    stamps = [json.loads(p.read_text()) for p in out.glob("cells/*/trial_*/slot.json")]
    assert len(stamps) == 8 and {s["dev"] for s in stamps} <= {"7", "9"}
    for i, a in enumerate(stamps):
        for b in stamps[i + 1:]:
            if a["dev"] == b["dev"]:
                assert a["t1"] <= b["t0"] or b["t1"] <= a["t0"], "two cells shared a device"
    assert {r["cell_env"]["CUDA_VISIBLE_DEVICES"] for r in records(out)} <= {"7", "9"}


def test_devices_per_cell_larger_than_the_list_is_refused(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "devices=[0]", "devices_per_cell=2",
                      f"output={tmp_path / 'o'}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 2  # refused while the config is composed: nothing runs
    assert "devices_per_cell=2 is more than the 1 listed devices" in done.stderr
    assert not (tmp_path / "o").exists()


@needs(SUBMITIT, "aorta_rusage")
def test_submitit_local_executor_runs_cells_to_a_matrix(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=2", "hydra/launcher=submitit_local",
                      "+cell=1,2", "collector=rusage", f"output={out}", "--", sys.executable,
                      "-c", "pass"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert [c["trials"]["pass"] for c in matrix["cells"]] == [2, 2]
    assert all("rusage_user_cpu_s" in c["metrics_summary"] for c in matrix["cells"])
    assert list(out.glob(".submitit/*")), "submitit wrote no job folders"


@needs(SUBMITIT)
def test_slurm_launcher_config_composes(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "hydra/launcher=aorta_slurm",
                      "hydra.launcher.partition=gpu", "hydra.launcher.setup=[module load rocm]",
                      "--cfg", "hydra", "-p", "hydra.launcher", "--", "true"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "SlurmLauncher" in done.stdout and "partition: gpu" in done.stdout
    assert "- module load rocm" in done.stdout and "array_parallelism: 16" in done.stdout
