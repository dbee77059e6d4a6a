"""Issue 13 for Proton profiles: real ``.hatchet`` trees and a ``.chrome_trace`` mutated
(fields swapped to other types, huge, non-finite or 10,000-deep values; damaged or truncated
bytes), FIFOs, ``/dev/zero``, links out and oversized files cost metrics and warnings only; the
contract is in tests/fuzz_helpers.py."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from aorta_proton import plugin
from aorta_proton.options import ProtonOptions
from fuzz_helpers import (
    FUZZ,
    check_bom_is_ignored,
    check_hostile_files_skipped,
    damaged_files,
    hostile_fields,
    json_mutations,
    parse_checked,
    parse_over_limit,
    sparse,
)
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures"
#: Kernel times and counts (cupti, roctracer), PC samples, intra-kernel scope cycles, a trace.
SEEDS = [
    FIXTURES / "h200" / "cupti_vecadd.hatchet",
    FIXTURES / "roctracer_add_mi300.hatchet",
    FIXTURES / "h200" / "pcsampling_vecadd.hatchet",
    FIXTURES / "instrumentation_mi355x_excerpt.hatchet",
    FIXTURES / "h200" / "trace_vecadd.chrome_trace",
]


def parse(folder: Path) -> tuple[dict, list[str]]:
    return parse_checked(
        lambda f: plugin.parse_metrics(artifact_dir=f, options=ProtonOptions()), folder, "proton_"
    )


def parse_file(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, name).write_bytes(data)
        parse(Path(tmp))


@FUZZ
@given(
    file=st.one_of(
        [json_mutations(json.loads(p.read_bytes())).map(lambda d, n=p.name: (n, d))
         for p in SEEDS]
        + [damaged_files(SEEDS)]
    )
)
def test_mutated_profiles_keep_the_contract(file: tuple[str, bytes]) -> None:
    parse_file(*file)


def test_hostile_fields_keep_the_contract() -> None:
    for seed in SEEDS:
        for data in hostile_fields(json.loads(seed.read_bytes())):
            parse_file(seed.name, data)


def test_fifo_device_and_link_out_are_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "proton"
    (folder / "phase").mkdir(parents=True)
    shutil.copy(SEEDS[1], folder)
    check_hostile_files_skipped(parse, folder, ".hatchet", SEEDS[0])
    check_hostile_files_skipped(parse, folder, ".chrome_trace", SEEDS[-1], folder / "phase")


def test_oversized_profile_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "proton"
    folder.mkdir()
    shutil.copy(SEEDS[1], folder)
    expected, _ = parse(folder)
    sparse(folder / "big.hatchet", b'[{"frame": {"name": "ROOT"}, "children": [', gib=1)
    warned = parse_over_limit(parse, folder, expected, monkeypatch)
    assert any("big.hatchet is 1024.0 MiB, over the 4 MiB read limit" in w for w in warned)


def test_a_leading_bom_changes_no_metric(tmp_path: Path) -> None:
    """Committed .hatchet profiles and a .chrome_trace with a UTF-8 BOM before their text."""
    folder = tmp_path / "proton"
    folder.mkdir()
    for name in ("tritonbench_softmax_h100.hatchet", "h200/cupti_vecadd.hatchet",
                 "h200/trace_vecadd.chrome_trace"):
        shutil.copy(FIXTURES / name, folder)
    check_bom_is_ignored("proton", folder, tmp_path)
