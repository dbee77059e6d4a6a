"""Sessions: lint, tests, third_party (a real pip install of an outside collector), install_modes
(the conf/ tree, as aorta_core.conf, from an editable install and a wheel; from the wheels, the
grid and default sweeps), gpu (the tests marked gpu, on a GPU machine's own torch), slurm (the
tests marked slurm, on a one-host Slurm started here), bench, demo.

torch and triton are pinned here (and only here) to the CPU wheels the project tests against;
aorta's own metadata keeps loose lower bounds so that it never replaces a user's torch.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

import nox
from nox.command import CommandFailed

nox.options.sessions = ["lint", "tests", "third_party", "install_modes"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = False

TORCH = "torch==2.13.0"
#: Proton ships inside Triton; its CPU tests run Proton's real code paths (no GPU is needed).
TRITON = "triton==3.6.0"
#: HolisticTraceAnalysis, the reference torchprof's overlap is checked against (0.5.0 breaks on
#: pandas 3).
HTA = ("holistictraceanalysis==0.5.0", "pandas<3")
ROOT = Path(__file__).parent
PLUGINS = sorted(str(p.parent) for p in ROOT.glob("plugins/*/pyproject.toml"))


def _alone_on_disk(session: nox.Session) -> None:
    """Delete the other sessions' venvs, unless venvs are reused (``nox -R``): each holds torch
    (1.3 GB), and a CI machine's disk once ran out with five of them beside the suite's files."""
    if session.virtualenv.reuse_existing:
        return
    here = Path(session.virtualenv.location)
    for other in here.parent.iterdir():
        if other.is_dir() and other != here:
            shutil.rmtree(other)


def _install_everything(session: nox.Session, editable: bool = True) -> None:
    _alone_on_disk(session)
    session.install(TORCH)
    flag = ["-e"] if editable else []
    session.install(*flag, ".[test]")
    for plugin in PLUGINS:
        session.install(*flag, f"{plugin}[test]" if _has_test_extra(plugin) else plugin)


def _has_test_extra(plugin: str) -> bool:
    return "test =" in (Path(plugin) / "pyproject.toml").read_text()


@nox.session
def lint(session: nox.Session) -> None:
    _alone_on_disk(session)
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """Core and plugin tests against real tools (PyTorch profiler, torchrun/gloo, Hydra)."""
    _install_everything(session)
    session.install(TRITON, *HTA, "-e", "tests/third_party_collector")
    session.run("pytest", *session.posargs)


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """The GPU tests (``pytest -m gpu``), on a GPU machine, in the Python that runs nox.

    No venv and no installs: a GPU host has its own CUDA torch (the CPU wheel pinned here would
    replace it) and often no package index. Install aorta-core and the collectors into that
    Python first (``pip install -e . -e plugins/aorta_torchprof ...``), then run
    ``python -m nox -s gpu`` with it; arguments after ``--`` go to pytest. Where torch sees no
    GPU every test skips, naming the reason.
    """
    session.run(sys.executable, "-m", "pytest", "-m", "gpu", *session.posargs, external=True)


#: What scripts/slurm/start.sh runs, from Debian's packages.
SLURM_APT = ("slurm-wlm", "slurmdbd", "munge", "mariadb-server")


def _apt_install(session: nox.Session, *packages: str) -> bool:
    """apt-get install, after an apt-get update if the first try fails (a fresh machine has no
    package lists); False where it still cannot."""
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    for update in (False, True):
        try:
            if update:
                session.run("apt-get", "update", "-qq", external=True, silent=True, env=env)
            session.run("apt-get", "install", "-y", "--no-install-recommends", *packages,
                        external=True, silent=True, env=env)
            return True
        except CommandFailed:
            continue
    return False


@nox.session
def slurm(session: nox.Session) -> None:
    """The tests marked slurm (``pytest -m slurm``) on a real Slurm of this host: munged,
    slurmdbd, slurmctld and two slurmd started by scripts/slurm/start.sh in a fresh state folder
    (apt-installed when missing; root needed), stopped at the end whatever the tests did."""
    _alone_on_disk(session)
    where = os.pathsep.join((os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"))
    missing = [tool for tool in ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd")
               if shutil.which(tool, path=where) is None]  # daemons: sbin, often not on PATH
    if missing:
        if shutil.which("apt-get") is None:
            session.skip(f"no {', '.join(missing)} and no apt-get to install them")
        if not _apt_install(session, *SLURM_APT):
            session.skip(f"apt-get could not install {' '.join(SLURM_APT)} (root needed)")
    _install_everything(session)
    session.install("-e", "tests/third_party_collector")
    state = Path(session.create_tmp()).resolve() / "slurm"
    shutil.rmtree(state, ignore_errors=True)
    try:
        session.run("bash", str(ROOT / "scripts/slurm/start.sh"), str(state), external=True)
        session.run("pytest", "-m", "slurm", *session.posargs,
                    env={"SLURM_CONF": str(state / "slurm.conf")})
    finally:
        session.run("bash", str(ROOT / "scripts/slurm/stop.sh"), str(state), external=True)


@nox.session
def third_party(session: nox.Session) -> None:
    """Collectors from outside the repo, pip-installed for real as their docs say (the rusage
    test collector and docs/plugins.md's example), show up and run in a sweep; the example's own
    tests (aorta_core.testing) pass against its installed wheel, plainly and under torchrun."""
    _alone_on_disk(session)
    tmp = Path(session.create_tmp()).resolve()  # absolute: the example's tests run elsewhere
    session.install(TORCH, "pytest>=8")
    session.install(_clean_sources(tmp / "src")[0])
    session.install("./tests/third_party_collector")
    example = _example_wheel(session, tmp / "example")
    session.run("python", "tests/third_party_collector/check_install.py", str(tmp))
    with session.chdir(example.parent):  # not the checkout: its aorta_core would come first
        session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-c",
                    str(example / "pyproject.toml"), str(example / "tests"))


def _example_wheel(session: nox.Session, into: Path) -> Path:
    """Build examples/plugin's wheel from a clean copy and install it with its dependencies
    (pyinstrument); the copy keeps its tests but loses its module, so that they import the
    wheel. Returns the copy."""
    shutil.rmtree(into, ignore_errors=True)
    copy = shutil.copytree(ROOT / "examples" / "plugin", into / "src",
                           ignore=shutil.ignore_patterns("build", "dist", "*.egg-info",
                                                         "__pycache__"))
    session.run("python", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(into / "wheels"),
                str(copy), silent=True)
    session.install(*map(str, (into / "wheels").glob("aorta_pyinstrument-*.whl")))
    (copy / "aorta_pyinstrument.py").unlink()
    return copy


#: What must work whatever way aorta-core was installed: its Hydra tree (recipes, workloads, the
#: benchmark's config) is found, a sweep composes and runs, the benchmark config composes.
_SMOKE = (
    ["python", "-m", "aorta_core", "--help"],
    ["python", "-m", "aorta_core", "sweep=repeat", "trials=1", "output={out}", "--", "true"],
    ["python", "-c", "from aorta_core.benchmark.config import compose_config; compose_config([])"],
)


#: Sweeps that must run from the wheels exactly as from the checkout: the recipe over the tiny
#: payload under a collector, and the default sweep (the built-in benchmark).
_WHEEL_SWEEPS = (
    ["python", "-m", "aorta_core", "sweep=grid", "collector=torchprof", "trials=1",
     "output={out}"],
    ["python", "-m", "aorta_core", "output={out}"],
)


@nox.session
@nox.parametrize("mode", ["editable", "wheel"])
def install_modes(session: nox.Session, mode: str) -> None:
    """The Hydra tree (conf/, shipped as aorta_core.conf) from an editable install, run from the
    repository root and from another folder, and from a built wheel, run from another folder
    (from the root the checkout's aorta_core/ shadows the wheel's: one line says so). The wheel
    mode installs aorta-core and every collector from wheels built here, then runs the grid and
    default sweeps from outside the checkout."""
    _alone_on_disk(session)
    elsewhere = Path(session.create_tmp())
    if mode == "editable":
        session.install("-e", ".")
    else:
        session.install(TORCH, "setuptools>=77")
        wheels = elsewhere / "wheels"
        session.run("python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(wheels), *_clean_sources(elsewhere / "src"), silent=True)
        session.install(*map(str, sorted(wheels.glob("*.whl"))))
    env = {"AORTA_REPORT_PNG": "0"}
    for cwd in (ROOT, elsewhere) if mode == "editable" else (elsewhere,):
        for argv in _SMOKE:
            out = elsewhere / f"out-{mode}-{len(str(cwd))}"
            with session.chdir(cwd):
                session.run(*(a.format(out=out) for a in argv), silent=True, env=env)
    if mode == "wheel":
        with session.chdir(ROOT):
            said = session.run("python", "-m", "aorta_core", "--help", silent=True,
                               success_codes=[2], env=env)
        if "shadows the installed package" not in (said or ""):
            session.error(f"from the checkout, the wheel's sweep said: {said!r}")
        _sweep_from_the_wheels(session, env)


def _clean_sources(into: Path) -> list[str]:
    """Copies of aorta-core and the collectors without build outputs: setuptools puts whatever
    an earlier build left in build/lib into the wheel, deleted modules included."""
    shutil.rmtree(into, ignore_errors=True)
    skip = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests")
    core = into / "aorta-core"
    for folder in ("aorta_core", "conf"):
        shutil.copytree(ROOT / folder, core / folder, ignore=skip)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, core / name)
    plugins = [shutil.copytree(p, into / Path(p).name, ignore=skip) for p in PLUGINS]
    return [str(core), *map(str, plugins)]


def _sweep_from_the_wheels(session: nox.Session, env: dict[str, str]) -> None:
    """Run the wheel sweeps in a folder outside the checkout (the session's tmp is inside it)."""
    outside = Path(tempfile.mkdtemp(prefix="aorta-wheel-"))
    with session.chdir(outside):
        session.run("python", "-c", "import aorta_core, pathlib, sys; sys.exit("
                    f"pathlib.Path(aorta_core.__file__).parent == pathlib.Path({str(ROOT)!r}) "
                    "/ 'aorta_core')")
        for n, argv in enumerate(_WHEEL_SWEEPS):
            out = outside / f"sweep-{n}"
            session.run(*(a.format(out=out) for a in argv), env=env)
            if not (out / "matrix.json").is_file():
                session.error(f"{' '.join(argv[3:])}: no {out / 'matrix.json'}")
    shutil.rmtree(outside)


@nox.session
def bench(session: nox.Session) -> None:
    """Run every bench/bench_*.py and write their results with machine and date to BENCHMARKS.md."""
    _install_everything(session)
    session.install(*HTA)
    results = []
    for script in sorted(ROOT.glob("bench/bench_*.py")):
        if script.name.endswith("_gpu.py"):
            continue  # GPU benchmarks run on the GPU machine; their results are committed there
        out = session.run("python", str(script), silent=True, success_codes=[0, 2])
        results.append(json.loads(out.strip().splitlines()[-1]))
    stamp = {"date": date.today().isoformat(), "machine": f"{platform.node()} "
             f"({platform.machine()}, {platform.processor() or 'cpu'})", "results": results}
    (ROOT / "bench" / "results_cpu.json").write_text(json.dumps(stamp, indent=2) + "\n")
    session.run("python", "bench/render.py")


@nox.session
def demo(session: nox.Session) -> None:
    """The README's first command: the default sweep, with every collector installed."""
    _install_everything(session)
    session.run("python", "-m", "aorta_core", *session.posargs)
