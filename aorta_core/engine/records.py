"""Trial records on disk: one schema (:class:`TrialRecord`) to write, read and validate them.

A record is written atomically and last, so a crash leaves either no record (the trial re-runs)
or a complete one. Reading validates against the same schema: a record that does not decode, has
the wrong types, or names another cell or trial is a bad record — reported by path and re-run,
never counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from aorta_core.api.bom import without_bom
from aorta_core.api.files import FileRefused, read_regular, write_atomic

#: Bump when a field changes meaning; readers of older records must keep working.
SCHEMA_VERSION = 1
RECORD_NAME = "record.json"
#: Beside a cell's trial folders: its axes, command and collectors, or why it could not run.
CELL_FILE = "cell.json"
#: Records and cell files are small; anything larger is not aorta's.
RECORD_LIMIT = 64 << 20

Verdict = Literal["pass", "fail", "error"]
VERDICTS: tuple[Verdict, ...] = ("pass", "fail", "error")
#: What a metric may hold (the contract in docs/plugins.md).
MetricValue = bool | int | float | str | list[str]


class CollectorRecord(msgspec.Struct):
    version: str
    options: dict[str, Any]
    artifacts: list[str]


class Retention(msgspec.Struct):
    level: str
    deleted: list[str]


class KernelsRecord(msgspec.Struct):
    """The trial's kernel and op table (:mod:`aorta_core.engine.kernel_tables`)."""

    #: Beside the record: ``kernels.parquet``.
    file: str
    rows: int


class AutoRecord(msgspec.Struct):
    profile: str
    machine: str
    chosen: dict[str, Any]


class TrialRecord(msgspec.Struct, kw_only=True):
    """One trial; field meanings in docs/sweeps.md ("The trial record")."""

    schema_version: int = SCHEMA_VERSION
    cell: str
    axes: dict[str, str] = {}
    trial: int
    #: Which attempt of the trial this record is (1: the first); earlier ones are kept under
    #: ``attempts/<n>/`` (:mod:`aorta_core.engine.attempts`).
    attempt: int = 1
    verdict: Verdict
    error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    wall_time_s: float | None = None
    started_at: str | None = None
    started_at_unix: float | None = None
    argv: list[str] = []
    argv_run: list[str] = []
    env_run: dict[str, str | None] = {}
    cell_env: dict[str, str] = {}
    cwd: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    environment: dict[str, Any] = {}
    collectors: dict[str, CollectorRecord] = {}
    warnings: dict[str, list[str]] = {}
    retention: Retention | None = None
    fingerprint: str | None = None
    auto: AutoRecord | None = None
    metrics: dict[str, MetricValue] = {}
    #: ``None``: no collector gave a kernel table.
    kernels: KernelsRecord | None = None
    recorded_at_unix: float | None = None


class TrialOutcome(msgspec.Struct, kw_only=True):
    """How a trial ended, read from its record without its metrics, environment or collectors
    (decoding a record of thousands of metrics to read these costs as much as the matrix's own
    read of it)."""

    cell: str
    trial: int
    verdict: Verdict
    error: str | None = None
    exit_code: int | None = None
    stderr: str | None = None
    fingerprint: str | None = None


class AgreeMarker(msgspec.Struct):
    collector: str | None
    times_comparable: bool
    tolerance_pct: float
    reference: str


class CellFile(msgspec.Struct):
    """What a cell file must hold for the matrix and the reports to use it (other fields are
    kept as written): the shape :func:`aorta_core.engine.cell_state.write_cell_file` writes."""

    cell: str
    axes: dict[str, str] = {}
    command: list[str] = []
    collectors: list[str] = []
    trials: int | None = None
    error: str | None = None
    skipped: str | None = None
    auto: AutoRecord | None = None
    agree: AgreeMarker | None = None


class BadRecord(ValueError):
    """A record that cannot be used; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
_DECODERS = {shape: msgspec.json.Decoder(shape).decode for shape in (TrialRecord, TrialOutcome)}


def dump_json(obj: Any) -> bytes:
    """Pretty JSON (NaN and infinities become null rather than invalid JSON)."""
    return msgspec.json.format(_encoder.encode(obj), indent=2)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Never a half-written file (:func:`aorta_core.api.files.write_atomic`)."""
    write_atomic(path, dump_json(obj))


#: Warnings kept per collector in a record: a parser may warn once per bad event of a trace.
WARNINGS_KEPT = 200


def fitted(record: TrialRecord) -> TrialRecord:
    """``record`` as the matrix can read it back (at most :data:`RECORD_LIMIT` bytes): beyond
    :data:`WARNINGS_KEPT` a collector's warnings are counted, not kept, and the largest metrics
    are left out, each named in its collector's warnings, until it fits."""
    warnings = {name: notes if len(notes) <= WARNINGS_KEPT else [
        *notes[:WARNINGS_KEPT], f"{len(notes) - WARNINGS_KEPT} more warnings not kept"]
        for name, notes in record.warnings.items()}
    record = msgspec.structs.replace(record, warnings=warnings)
    size = len(dump_json(record))
    if size <= RECORD_LIMIT:
        return record
    metrics = dict(record.metrics)
    largest = sorted(metrics, key=lambda m: len(_encoder.encode(metrics[m])), reverse=True)
    for name in largest:
        if size <= RECORD_LIMIT:
            break
        weight = len(_encoder.encode(metrics.pop(name)))
        prefix = name.split("_", 1)[0]
        owner = prefix if prefix in record.collectors else "workload"
        warnings.setdefault(owner, []).append(
            f"metric {name} ({weight / (1 << 20):.1f} MiB) left out of the record: a record "
            f"stays under {RECORD_LIMIT >> 20} MiB, what the matrix reads back; keep such "
            "data in an artifact file")
        record = msgspec.structs.replace(record, metrics=metrics, warnings=warnings)
        size = len(dump_json(record))
    return record


def write_record(path: Path, record: TrialRecord) -> TrialRecord:
    """Write ``record`` atomically, :func:`fitted` to what the matrix reads back; return what
    was written."""
    record = fitted(record)
    write_json_atomic(path, record)
    return record


def decode_json(data: bytes, decode: Callable[[Any], Any] = msgspec.json.decode) -> Any:
    """``decode(data)`` past a leading UTF-8 BOM (an editor's); JSON nested too deeply for
    msgspec (its ``RecursionError``) is a ``msgspec.DecodeError`` like any other malformed JSON,
    so a reader has one error to catch."""
    try:
        with without_bom(data) as text:
            return decode(text)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None


def decode_record(data: bytes, source: Path | str, shape: type = TrialRecord) -> Any:
    """``data`` as a record of ``shape`` (:class:`TrialRecord` or :class:`TrialOutcome`)."""
    try:
        return decode_json(data, _DECODERS[shape])
    except msgspec.DecodeError as exc:
        raise BadRecord(source, str(exc)) from None


def load_record(path: Path | str, cell: str | None = None, trial: int | None = None,
                shape: type = TrialRecord) -> Any:
    """The record at ``path``, as a :class:`TrialRecord` or, with ``shape``, a
    :class:`TrialOutcome`; :class:`BadRecord` when it cannot be used as trial ``trial`` of
    ``cell``, :class:`FileNotFoundError` when there is none."""
    try:
        data = read_regular(path, RECORD_LIMIT)
    except FileRefused as exc:
        raise BadRecord(path, str(exc).removeprefix(f"{path} ")) from None
    record = decode_record(data, path, shape)
    if cell is not None and record.cell != cell:
        raise BadRecord(path, f"names cell {record.cell!r}, not {cell!r}")
    if trial is not None and record.trial != trial:
        raise BadRecord(path, f"names trial {record.trial}, not {trial}")
    return record


def load_cell_file(path: Path) -> dict[str, Any]:
    """The cell file at ``path`` as plain data; :class:`BadRecord` when it is unreadable or not
    of :class:`CellFile`'s shape (an edited ``"collectors": 1.5`` would crash the matrix),
    :class:`FileNotFoundError` when there is none."""
    try:
        value = decode_json(read_regular(path, RECORD_LIMIT))
        msgspec.convert(value, CellFile)
    except FileRefused as exc:
        raise BadRecord(path, str(exc).removeprefix(f"{path} ")) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadRecord(path, str(exc)) from None
    return value


def read_json(path: Path, limit: int = RECORD_LIMIT) -> Any:
    """A small JSON file aorta wrote (cell file, matrix), read within a budget."""
    return decode_json(read_regular(path, limit))
