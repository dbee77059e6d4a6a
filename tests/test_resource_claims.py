"""Collectors that cannot measure together are refused before anything runs, from what each
claims (``resource_claims``): the built-in collectors' real claims through the core's rule, and
collectors installed as real distributions through the CLI, with resources the core has never
heard of. Any machine: nothing is profiled."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import records, run_aorta
from needs import need
from test_hook_isolation import ONLY_TEST_PLUGINS

from aorta_core.engine.claims import claims_of, conflict
from aorta_core.engine.plugins import load_registry


def _claims(name: str, **options) -> list:
    need(f"aorta_{name}")
    collector = load_registry().collectors[name]
    return claims_of(load_registry().call(name, "resource_claims",
                                          options=collector.info.options(**options)))


@pytest.mark.parametrize("other", ["proton", "torchprof", "rocprof"])
def test_ncu_shares_no_trial_with_a_collector_that_times_kernels(other):
    refusal = conflict({"ncu": _claims("ncu"), other: _claims(other)})
    assert refusal.startswith(f"collector ncu cannot share a trial with {other}: ncu: it "
                              "serialises and replays every kernel, so a tracer beside it would "
                              f"time the replays; {other}: ")
    assert refusal.endswith(f"(both claim gpu-kernels); put them in separate cells, e.g. "
                            f"-m collector=ncu,{other}")


@pytest.mark.parametrize("backend", ["auto", "rocprofiler", "roctracer"])
def test_rocprof_and_a_proton_queue_tracer_are_refused_with_both_ways_out(backend):
    refusal = conflict({"rocprof": _claims("rocprof"),
                        "proton": _claims("proton", backend=backend)})
    assert refusal.startswith("collector rocprof cannot share a trial with proton: rocprof: "
                              "rocprofv3 intercepts the HSA queues")
    assert f"proton: backend '{backend}' intercepts them" in refusal
    assert "set collector.proton.backend=instrumentation" in refusal
    assert refusal.endswith("-m collector=rocprof,proton")


@pytest.mark.parametrize(("a", "b"), [("torchprof", "proton"), ("rocprof", "torchprof")])
def test_tracers_share_the_kernels(a, b):
    assert conflict({a: _claims(a), b: _claims(b)}) is None


@pytest.mark.parametrize("backend", ["instrumentation", "cupti"])
def test_rocprof_keeps_proton_backends_that_leave_the_queues_alone(backend):
    assert conflict({"rocprof": _claims("rocprof"),
                     "proton": _claims("proton", backend=backend)}) is None


def test_a_collector_may_claim_one_resource_twice_without_colliding_with_itself():
    from aorta_core import Claim

    twice = [Claim("tape", exclusive=True), Claim("tape")]
    assert conflict({"solo": twice}) is None
    assert conflict({"solo": twice, "other": [Claim("tape")]}) == (
        "collector solo cannot share a trial with other: solo claims tape exclusively; other "
        "claims tape too (both claim tape); put them in separate cells, e.g. "
        "-m collector=solo,other")


CLAIMING = '''
import dataclasses
from dataclasses import dataclass
from aorta_core import Claim, CollectorInfo, hookimpl

@dataclass
class Options:
    exclusive: bool = {exclusive}

@hookimpl
def aorta_collector():
    return CollectorInfo(description="claims the tape drive", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def resource_claims(options):
    return {claims}

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch
'''


def _sweep(plugin_site, tmp_path: Path, *args: str):
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    done = run_aorta([*args, "sweep=repeat", "trials=1", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    return done, records(out)


def test_collectors_claiming_a_new_resource_are_refused_together_and_run_apart(plugin_site,
                                                                               tmp_path):
    claim = ('[Claim("tape-drive", exclusive=options.exclusive, why="it rewinds the tape" '
             'if options.exclusive else "")]')
    plugin_site.add("alpha", CLAIMING.format(claims=claim, exclusive=True))
    plugin_site.add("beta", CLAIMING.format(claims=claim, exclusive=False))
    together, trials = _sweep(plugin_site, tmp_path, "collector=[alpha,beta]")
    assert together.returncode == 1 and not trials, together.stderr
    assert (
        "collector alpha cannot share a trial with beta: alpha: it rewinds the tape; beta claims "
        "tape-drive too (both claim tape-drive); put them in separate cells, e.g. "
        "-m collector=alpha,beta") in together.stderr
    shared, trials = _sweep(plugin_site, tmp_path, "collector=[alpha,beta]",
                            "collector.alpha.exclusive=false")
    assert shared.returncode == 0, shared.stderr
    assert [t["verdict"] for t in trials] == ["pass"]
    apart, trials = _sweep(plugin_site, tmp_path, "-m", "collector=alpha,beta")
    assert apart.returncode == 0, apart.stderr
    assert sorted(t["verdict"] for t in trials) == ["pass", "pass"]


@pytest.mark.parametrize(("claims", "said"), [
    ('"tape-drive"', "returned str, not a list of Claim"),
    ('[Claim("")]', "returned Claim"),
    ("1 / 0", "ZeroDivisionError"),
])
def test_claims_that_cannot_be_read_stop_the_sweep_in_one_line_naming_the_collector(
        plugin_site, tmp_path, claims, said):
    plugin_site.add("alpha", CLAIMING.format(claims=claims, exclusive=False))
    done, trials = _sweep(plugin_site, tmp_path, "collector=alpha")
    assert done.returncode == 1 and not trials, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "resource_claims" in line]
    assert "collector.alpha: resource_claims failed: " in line and said in line
