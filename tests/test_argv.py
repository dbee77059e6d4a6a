"""Splitting aorta's own arguments from the workload argv (the fuzzing: test_argv_fuzz.py)."""

from aorta_core.engine.argv import split_command


def test_split_at_the_first_double_dash_only():
    assert split_command(["a=1", "--", "x", "--", "y"]) == (["a=1"], ["x", "--", "y"])
    assert split_command(["a=1"]) == (["a=1"], None)
    assert split_command(["--"]) == ([], [])


def test_undecodable_bytes_survive_the_config_and_its_yaml(tmp_path):
    import os

    from omegaconf import OmegaConf

    from aorta_core.engine.argv import from_config, to_config

    args = [os.fsdecode(b"caf\xff"), "plain ${x}", os.fsdecode(b"\x80\xfe/path")]
    cfg = OmegaConf.create({"command": [to_config(a) for a in args]})
    saved = tmp_path / "config.yaml"
    saved.write_text(OmegaConf.to_yaml(cfg), encoding="utf-8")
    back = OmegaConf.to_container(OmegaConf.load(saved), resolve=True)["command"]
    assert [os.fsencode(from_config(a)) for a in back] == [os.fsencode(a) for a in args]
