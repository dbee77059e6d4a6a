"""``aorta_core.payload``: collectors' in-process sessions, from their ``payload_session`` hook.

Every collector here is installed for real (dist-info with an ``aorta.collectors`` entry point)
and loaded in this process; each session writes what happens to it into one log.
"""

from __future__ import annotations

import warnings

import pytest
from cli_helpers import good_collector

from aorta_core import payload

#: A payload session that logs its calls and breaks where ``TEST_PAYLOAD_FAIL`` says.
RECORDER = '''
NAME = "{name}"


class Recorder:
    def __init__(self, env, rank, context):
        self.log, self.fail = env["TEST_PAYLOAD_LOG"], env.get("TEST_PAYLOAD_FAIL", "")
        self.note(f"made rank={{rank}} context={{sorted(context.items())}}")

    def note(self, what):
        with open(self.log, "a") as handle:
            handle.write(f"{{NAME}} {{what}}\\n")
        if f"{{NAME}}:{{what}}" == self.fail:
            raise RuntimeError(f"{{NAME}} broke at {{what}}")

    def start(self):
        self.note("start")

    def step(self):
        self.note("step")

    def stop(self):
        self.note("stop")


@hookimpl
def payload_session(rank, env, context):
    if "TEST_PAYLOAD_LOG" not in env:
        return None
    if env.get("TEST_PAYLOAD_FAIL") == f"{{NAME}}:payload_session":
        raise ValueError("no session today")
    return Recorder(env, rank, context)
'''


@pytest.fixture
def install(plugin_site, monkeypatch, tmp_path):
    """Install recording collectors by name; their sessions log to the returned file."""
    log = tmp_path / "payload.log"
    monkeypatch.syspath_prepend(str(plugin_site.root))
    for variable in ("AORTA_DISABLE_PLUGINS", "AORTA_LOAD_PLUGINS", "TEST_PAYLOAD_FAIL"):
        monkeypatch.delenv(variable, raising=False)

    def add(*names: str, payload_source: str = RECORDER):
        for name in names:
            plugin_site.add(name, good_collector(name), payload=payload_source.format(name=name))
        monkeypatch.setenv("TEST_PAYLOAD_LOG", str(log))
        return log

    return add


def lines(log) -> list[str]:
    return log.read_text().splitlines()


def test_outside_a_trial_the_session_is_a_no_op(install, monkeypatch):
    """No collector selected this process (its factory returns None): nothing runs inside the
    block either, and nothing is warned or written."""
    log = install("pl_quiet")
    monkeypatch.delenv("TEST_PAYLOAD_LOG")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with payload.session() as session:
            assert session.names == ()
            session.step()
            assert session.names == ()
    assert not log.exists()


def test_sessions_start_in_name_order_step_and_stop_in_reverse(install, monkeypatch):
    log = install("pl_b", "pl_a")
    monkeypatch.setenv("RANK", "3")
    with payload.session(output_dir="/run") as session:
        assert session.names == ("pl_a", "pl_b")
        session.step()
    assert session.names == ()
    assert lines(log) == [
        "pl_a made rank=3 context=[('output_dir', '/run')]", "pl_a start",
        "pl_b made rank=3 context=[('output_dir', '/run')]", "pl_b start",
        "pl_a step", "pl_b step", "pl_b stop", "pl_a stop",
    ]


@pytest.mark.parametrize("where", ["payload_session", "start", "step", "stop"])
def test_a_failing_session_costs_only_itself(install, monkeypatch, where):
    log = install(f"pl_{where}_a", f"pl_{where}_b")
    monkeypatch.setenv("TEST_PAYLOAD_FAIL", f"pl_{where}_a:{where}")
    with pytest.warns(UserWarning) as caught, payload.session(rank=0) as session:
        session.step()
        session.step()
    assert [str(w.message) for w in caught] == [
        f"aorta payload: collector 'pl_{where}_a' session failed at {where} (RuntimeError: "
        f"pl_{where}_a broke at {where}); the workload goes on without it"
        if where != "payload_session" else
        f"aorta payload: collector 'pl_{where}_a' session failed at payload_session (ValueError: "
        "no session today); the workload goes on without it"]
    assert caught[0].filename == __file__  # the warning names the workload's line
    other = [x for x in lines(log) if x.startswith(f"pl_{where}_b")]
    assert other[-4:] == [f"pl_{where}_b start", f"pl_{where}_b step", f"pl_{where}_b step",
                          f"pl_{where}_b stop"]
    if where == "step":  # dropped after its failure, and stopped right away
        assert [x for x in lines(log) if x.startswith(f"pl_{where}_a")][-2:] == [
            f"pl_{where}_a step", f"pl_{where}_a stop"]


def test_a_collector_that_cannot_load_is_one_warning(install):
    log = install("pl_load_ok")
    install("pl_load_bad", payload_source="raise ImportError('needs libfoo')\n")
    failed = r"'pl_load_bad' session failed at load \(ImportError: needs libfoo"
    with pytest.warns(UserWarning, match=failed), payload.session(rank=0) as session:
        assert session.names == ("pl_load_ok",)
    assert lines(log)[-1] == "pl_load_ok stop"


def test_the_workload_s_error_propagates_after_every_session_stopped(install):
    log = install("pl_err")
    with pytest.raises(KeyError), payload.session(rank=0):
        raise KeyError("the workload's own bug")
    assert lines(log)[-1] == "pl_err stop"


def test_disabled_collectors_stay_out_of_the_payload(install, monkeypatch):
    install("pl_on", "pl_off")
    monkeypatch.setenv("AORTA_DISABLE_PLUGINS", "pl_off")
    with payload.session(rank=0) as session:
        assert session.names == ("pl_on",)
    monkeypatch.setenv("AORTA_LOAD_PLUGINS", "pl_off")
    monkeypatch.delenv("AORTA_DISABLE_PLUGINS")
    with payload.session(rank=0) as session:
        assert session.names == ("pl_off",)


@pytest.mark.parametrize(("env", "rank", "local"), [
    ({"RANK": "5", "LOCAL_RANK": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}, 5, 1),
    ({"SLURM_PROCID": "3", "SLURM_LOCALID": "1"}, 3, 1),  # srun without torchrun
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, 2, 0),
    ({"PMI_RANK": "7", "MPI_LOCALRANKID": "3"}, 7, 3),
    ({"RANK": "x", "SLURM_PROCID": "4"}, 4, 0),  # not a number: the next launcher's
    ({}, 0, 0),
])
def test_a_session_reads_its_rank_from_whichever_launcher_started_it(install, monkeypatch, env,
                                                                     rank, local):
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "MPI_LOCALRANKID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    log = install("pl_a")
    with payload.session():
        pass
    assert lines(log)[0] == f"pl_a made rank={rank} context=[]"
    assert payload.rank_from_env(variable="LOCAL_RANK") == local
