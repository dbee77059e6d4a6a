"""Issue 13 for Kineto traces: real traces mutated (fields swapped to other types, huge,
non-finite or 10,000-deep values; damaged or truncated bytes, gzipped or not), FIFOs, links
out and gzip bombs cost metrics and warnings only; the contract is in tests/fuzz_helpers.py."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

from aorta_torchprof import plugin
from aorta_torchprof.options import TorchprofOptions
from fuzz_helpers import (
    FUZZ,
    check_bom_is_ignored,
    check_hostile_files_skipped,
    damaged_files,
    gz_bomb,
    hostile_fields,
    json_mutations,
    parse_checked,
    parse_over_limit,
)
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures"
#: GPU lanes with ProfilerSteps (H200), a ROCm trace, a CPU-only trace, a gzipped gloo rank.
SEEDS = [
    FIXTURES / "cuda_h200" / "torchprof" / "rank0.step5.pt.trace.json",
    FIXTURES / "rocm_mi350" / "smci350_trimmed.pt.trace.json",
    FIXTURES / "cpu_single" / "rank0.step5.pt.trace.json",
    FIXTURES / "cpu_gloo_2rank" / "rank1.step4.pt.trace.json.gz",
]
#: The numeric fields the parser reads.
READ = {"ts", "dur", "pid", "tid", "correlation", "rank"}


def _json(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def parse(folder: Path, drop: bool = False) -> tuple[dict, list[str]]:
    """Checked metrics and warnings; a bad file costs its own metrics, never the folder's."""
    options = TorchprofOptions(drop_last_profiler_step=drop)
    metrics, warned = parse_checked(
        lambda f: plugin.parse_metrics(artifact_dir=f, options=options), folder, "torchprof_"
    )
    assert not [w for w in warned if "cannot parse" in w], warned
    return metrics, warned


def parse_file(name: str, data: bytes, drop: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, name).write_bytes(data)
        parse(Path(tmp), drop)


def _plain_or_gzipped(data: bytes, gz: bool) -> tuple[str, bytes]:
    name = "rank0.pt.trace.json"
    return (f"{name}.gz", gzip.compress(data, 1)) if gz else (name, data)


@FUZZ
@given(
    file=st.one_of(
        [st.builds(_plain_or_gzipped, json_mutations(json.loads(_json(s))), st.booleans())
         for s in SEEDS]
        + [damaged_files(SEEDS)]
    ),
    drop=st.booleans(),
)
def test_mutated_traces_keep_the_contract(file: tuple[str, bytes], drop: bool) -> None:
    parse_file(*file, drop)


def test_hostile_fields_keep_the_contract() -> None:
    for seed in SEEDS:
        for data in hostile_fields(json.loads(_json(seed)), READ):
            parse_file("rank0.pt.trace.json", data)


def test_fifo_device_and_link_out_are_skipped(tmp_path: Path) -> None:
    folder = shutil.copytree(FIXTURES / "rocm_mi350", tmp_path / "torchprof")
    check_hostile_files_skipped(parse, folder, ".pt.trace.json", SEEDS[0])


def test_gzip_bomb_stops_at_the_read_limit(tmp_path: Path, monkeypatch) -> None:
    folder = shutil.copytree(FIXTURES / "rocm_mi350", tmp_path / "torchprof")
    expected, _ = parse(folder)
    gz_bomb(folder / "bomb.pt.trace.json.gz", gib=1)  # 1 GiB of spaces in a few MB
    warned = parse_over_limit(parse, folder, expected, monkeypatch)
    assert any("bomb.pt.trace.json.gz decompresses to more than the 4 MiB read limit" in w
               for w in warned)


def test_a_leading_bom_changes_no_metric(tmp_path: Path) -> None:
    """Each committed trace (plain JSON, and gzipped) with a UTF-8 BOM before its text."""
    for fixture in ("cpu_single", "cpu_gloo_2rank", "cuda_h200/torchprof", "rocm_mi350"):
        check_bom_is_ignored("torchprof", FIXTURES / fixture, tmp_path)
