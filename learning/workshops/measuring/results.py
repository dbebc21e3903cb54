"""The benchmark's results file: typed rows, written and read with validation.

One file holds one run of one op, the forward softmax or its backward: the device, the
versions, and one row per (variant, shape, layout, mode, num_warps). A file that does not match
the schema is refused with its reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

SCHEMA = "i1-benchmark/1"
FORWARD = "strided_softmax"
BACKWARD = "strided_softmax_backward"
VARIANTS = {
    FORWARD: ("direct", "copy", "torch_softmax", "roof"),
    BACKWARD: ("direct", "copy", "torch", "roof"),
}
"""The variants each op's rows may name. direct: the student's kernel on the views; copy: the
same after .contiguous() of each input, the copies timed; torch_softmax: torch.softmax on the
same view; torch: PyTorch's softmax backward (torch._softmax_backward_data) on the same views;
roof: a plain device copy of a contiguous tensor of one input's size, the bandwidth to compare
against."""
LAYOUT_AWARE = "layout-aware"
TORCH_COMPILE = "torch_compile"
OPTIONAL_VARIANTS = {FORWARD: (LAYOUT_AWARE, TORCH_COMPILE), BACKWARD: ()}
"""Variants timed only when asked for, beside those of `VARIANTS`. layout-aware: another file's
strided_softmax on the same view for each num_warps (`benchmark --variants FILE`, e.g.
grader/beyond.py, which tiles by the view's strides); `Results.variant_impls` names the file.
torch_compile: torch.softmax compiled by torch.compile (Inductor's Triton kernel, generated for
the view's strides) on the same view, the peer a user would reach for (`--torch-compile`)."""
LAYOUTS = ("transpose", "contiguous")
H200_SAMPLE = Path(__file__).with_name("data") / "h200_i1.json"
"""A run of the reference on an NVIDIA H200, for students without a GPU (its note says when)."""
H200_BEYOND = H200_SAMPLE.with_name("h200_beyond.json")
"""The same with grader/beyond.py's layout-aware softmax beside it, for the beyond section."""
BEYOND_LOADS = H200_SAMPLE.with_name("beyond_loads.txt")
"""The loads of its launches, compiled for sm_90 (`python -m grader.beyond` writes it)."""
H200_BACKWARD = H200_SAMPLE.with_name("h200_backward.json")
"""A run of the reference's backward on an NVIDIA H200."""


class ResultsError(ValueError):
    """A results file is missing, unreadable or does not match the schema."""


@dataclass(frozen=True)
class Row:
    """One timed configuration: milliseconds and bandwidth."""

    variant: str
    rows: int
    cols: int
    layout: str
    mode: str
    num_warps: int | None
    median_ms: float
    min_ms: float
    max_ms: float
    samples: int
    gbps_logical: float
    gbps_traffic: float
    checked: bool

    @property
    def shape(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass
class Results:
    """One benchmark run."""

    op: str
    impl: str
    device: str
    capability: str
    dtype: str
    created: str
    versions: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    note: str = ""
    variant_impls: dict[str, str] = field(default_factory=dict)
    """The file each optional variant's function came from, by variant name."""
    schema: str = SCHEMA

    def find(self, variant: str, shape: str, layout: str, mode: str, num_warps: int | None) -> Row:
        """The row for one configuration; KeyError naming it when absent."""
        for row in self.rows:
            if (row.variant, row.shape, row.layout, row.mode, row.num_warps) == (
                variant,
                shape,
                layout,
                mode,
                num_warps,
            ):
                return row
        raise KeyError(f"no {variant} row for {shape} {layout} {mode} num_warps={num_warps}")

    def to_json(self) -> dict:
        return asdict(self)

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def load(path: Path | str) -> Results:
    """Read and validate a results file; ResultsError says what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{path} is not text, so not a results file") from None
    return from_json(data, str(path))


def from_json(data: object, where: str = "results") -> Results:
    """Build Results from parsed JSON, checking every field."""
    _check_run(data, where)
    variants = VARIANTS[data["op"]] + OPTIONAL_VARIANTS[data["op"]]
    rows = [_row(raw, f"{where}: row {i}", variants) for i, raw in enumerate(data["rows"])]
    top = {f.name for f in fields(Results)}
    return Results(**{k: v for k, v in data.items() if k in top and k != "rows"}, rows=rows)


def _check_run(data: object, where: str) -> None:
    """ResultsError unless `data` is an object of the schema with every run field, typed."""
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected a JSON object")
    if data.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")
    missing = {f.name for f in fields(Results)} - set(data) - {"note", "variant_impls"}
    if missing:
        raise ResultsError(f"{where}: missing {', '.join(sorted(missing))}")
    for f in fields(Results):
        if f.type == "str" and not isinstance(data.get(f.name, ""), str):
            raise ResultsError(f"{where}: {f.name} is {data[f.name]!r}, not a string")
    if data["op"] not in VARIANTS:
        raise ResultsError(f"{where}: op is {data['op']!r}, expected one of {', '.join(VARIANTS)}")
    versions = data["versions"]
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise ResultsError(f"{where}: versions is {versions!r}, not an object of strings")
    impls = data.get("variant_impls", {})
    optional = OPTIONAL_VARIANTS[data["op"]]
    if not isinstance(impls, dict) or not all(
        name in optional and isinstance(path, str) for name, path in impls.items()
    ):
        raise ResultsError(
            f"{where}: variant_impls is {impls!r}, not an object naming a file for any of "
            f"{', '.join(optional) or 'no variants'}"
        )
    if not isinstance(data["rows"], list):
        raise ResultsError(f"{where}: rows must be a list")


def fits(value: object, annotation: str) -> bool:
    """Whether a JSON value fits a field's annotation, e.g. "int", "float | None" (a bool is
    not a number; an int is a float)."""
    kinds = annotation.replace(" ", "").split("|")
    if value is None:
        return "None" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return "int" in kinds or "float" in kinds
    if isinstance(value, float):
        return "float" in kinds
    return isinstance(value, str) and "str" in kinds


def _row(raw: object, where: str, variants: tuple[str, ...]) -> Row:
    if not isinstance(raw, dict):
        raise ResultsError(f"{where}: expected an object")
    names = {f.name for f in fields(Row)}
    if set(raw) != names:
        raise ResultsError(f"{where}: fields {sorted(set(raw) ^ names)} missing or unexpected")
    row = Row(**raw)
    for f in fields(Row):
        if not fits(getattr(row, f.name), f.type):
            raise ResultsError(f"{where}: {f.name} is {getattr(row, f.name)!r}, not {f.type}")
    if row.variant not in variants:
        raise ResultsError(f"{where}: unknown variant {row.variant!r}")
    if row.layout not in LAYOUTS:
        raise ResultsError(f"{where}: unknown layout {row.layout!r}")
    if row.mode not in ("cold", "warm"):
        raise ResultsError(f"{where}: unknown mode {row.mode!r}")
    if not 0 < row.min_ms <= row.median_ms <= row.max_ms:
        raise ResultsError(f"{where}: times must satisfy 0 < min <= median <= max")
    return row
