"""Check cases for the workshop's functions, and the code that runs one case.

A case names a view (layout, shape, dtype, fill) or a bad input. Running it builds the
view inside a NaN-filled storage, calls the student's function, and compares against a
float64 reference, the storage before and after, and the kernel launches it made. A
failed case says what kind of failure it was; `hints` turns those into clues.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from triton.compiler.errors import CompilationError

from learning.workshops.allocations import GuardAllocations
from learning.workshops.audit import Finding, Trace, audit
from learning.workshops.contracts import interpreter_active
from learning.workshops.launches import count_launches
from learning.workshops.views import Geometry, describe, geometry, sentinel_view

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCES = {  # (rtol, atol) against a float64 reference
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 4e-3),
}
BAD_INPUTS = ("3-d", "int-dtype", "warps-6", "cpu-input")

FAILURES = (
    "exception",  # the call raised
    "memory",  # the call ran out of host or device memory
    "not-a-tensor",
    "shape",
    "dtype",
    "device",
    "layout",  # output is not contiguous
    "input-written",  # the input's storage changed
    "no-launch",  # no Triton kernel ran
    "outside-kernel",  # torch read the input outside the kernel: a copy or torch compute
    "launch-on-empty",  # a kernel was launched for zero rows
    "nonfinite",  # NaN or inf where the reference is finite
    "sum-low",  # every value finite but rows sum to less than one
    "permuted",  # the right values in the wrong places
    "ambiguous",  # nearly all-equal expected values in other places: loads or stores
    "values",  # other wrong values
    "stale",  # a repeated call returned an earlier result
    "not-raised",  # bad input accepted
    "unclear-error",  # bad input rejected with an error that does not name it
    "overrun",  # lanes past a row's end loaded or stored (no mask): audit, or an output guard
    "ownership",  # audit: an output element written by two programs of a launch, or by none
    "out-of-bounds",  # audit: a load outside the view's footprint or any tensor
    "internal-error",  # the checks themselves raised: the checker's fault, not the student's
)

AUDIT_FAILURES = {  # the ownership audit's finding kinds, as failures
    "input-store": "input-written",
    "overrun": "overrun",
    "stray-store": "ownership",
    "duplicate": "ownership",
    "unwritten": "ownership",
    "stray-load": "out-of-bounds",
    "footprint": "out-of-bounds",
}
FAULT_ORDER = ("input-store", "overrun", "stray-store", "stray-load", "duplicate", "footprint")
"""Which fault names the failure when a call shows several: a store into the input first,
then lanes past a row (the cause of the strays and races they make), then the rest.
Unwritten elements come last: they are usually what another fault left behind."""
AUDITED = ("nonfinite", "sum-low", "permuted", "ambiguous", "values")
"""Failures about the values: the audit's findings outrank or explain them."""


@dataclass(frozen=True)
class Case:
    """One check: a view to run on, or (with `bad_input`) an input that must be refused."""

    name: str
    layout: str = "contiguous"
    rows: int = 5
    cols: int = 7
    dtype: str = "float32"
    fill: str = "normal"
    num_warps: int = 4
    repeat: bool = False
    bad_input: str | None = None

    @property
    def geometry(self) -> Geometry:
        return geometry(self.layout, self.rows, self.cols)

    @property
    def features(self) -> frozenset[str]:
        if self.bad_input:
            return frozenset({"bad-input"})
        extra = {self.fill} if self.fill != "normal" else set()
        if self.dtype != "float32":
            extra.add("half")
        if self.repeat:
            extra.add("repeat")
        return self.geometry.features() | extra


@dataclass
class CaseResult:
    """What running one case showed."""

    name: str
    passed: bool
    detail: str = ""
    failure: str | None = None
    features: list[str] = field(default_factory=list)
    launches: int = 0
    cols: int = 0

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "failure": self.failure,
            "features": sorted(self.features),
            "launches": self.launches,
            "cols": self.cols,
        }


class _Returned:
    """Outputs returned so far in this process, kept alive so their addresses stay unique."""

    def __init__(self) -> None:
        self.by_address: dict[int, tuple[torch.Tensor, str]] = {}

    def remember(self, out: torch.Tensor, name: str) -> str | None:
        """Record `out`; return the case that returned the same tensor before, if any."""
        if out.numel() == 0:
            return None
        key = out.data_ptr()
        if key in self.by_address:
            return self.by_address[key][1]
        self.by_address[key] = (out, name)
        return None


_RETURNED = _Returned()


@dataclass(frozen=True)
class Op:
    """A function under test: its name, its reference, and whether it owns the contracts."""

    name: str
    function: str
    reference: Callable[[torch.Tensor], torch.Tensor]
    exact: bool
    contracts: bool


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1)


def _copy_reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().contiguous()


OPS = {
    "strided_softmax": Op(
        "strided_softmax", "strided_softmax", _softmax_reference, exact=False, contracts=True
    ),
    "softmax_kernel": Op(
        "softmax_kernel", "launch_softmax", _softmax_reference, exact=False, contracts=False
    ),
    "copy_rows": Op("copy_rows", "copy_rows", _copy_reference, exact=True, contracts=False),
}

PUBLIC_CASES = (
    Case("contiguous", "contiguous", 5, 7),
    Case("contiguous-pow2", "contiguous", 4, 64),
    Case("transpose", "transpose", 7, 5),
    Case("transpose-wide", "transpose", 3, 1000),
    Case("slice", "slice", 6, 9),
    Case("transposed-slice", "transposed-slice", 5, 6),
    Case("row-broadcast", "row-broadcast", 4, 33),
    Case("col-broadcast", "col-broadcast", 6, 5),
    Case("width-one", "transpose", 5, 1),
    Case("large-magnitude", "transpose", 4, 20, fill="large"),
    Case("some-neg-inf", "contiguous", 6, 12, fill="neg-inf"),
    Case("float16-transpose", "transpose", 7, 5, dtype="float16"),
    Case("bfloat16-slice", "slice", 6, 9, dtype="bfloat16"),
    Case("repeat-same-shape", "transpose", 5, 7, repeat=True),
    Case("eight-warps", "transpose", 7, 5, num_warps=8),
    Case("zero-rows", "transpose", 0, 7),
    Case("reject-3-d", bad_input="3-d"),
    Case("reject-int-dtype", bad_input="int-dtype"),
    Case("reject-warps-6", bad_input="warps-6"),
    Case("reject-cpu-input", bad_input="cpu-input"),
)


def suite(op: str, cases: tuple[Case, ...] = PUBLIC_CASES, device: str = "cpu") -> list[Case]:
    """The cases that apply to `op` on `device` (kernel-level ops skip the contract cases)."""
    chosen = []
    for case in cases:
        contract_case = case.bad_input is not None or case.rows == 0
        if contract_case and not OPS[op].contracts:
            continue
        if case.bad_input == "cpu-input" and device == "cpu":
            continue  # the CPU is a valid device under the interpreter
        chosen.append(case)
    return chosen


def run_case(
    fn: Callable, op: str, case: Case, device: torch.device | str, seed: int
) -> CaseResult:
    """Run `fn` on `case` and say whether, and how, it failed."""
    generator = torch.Generator().manual_seed(seed)
    features = sorted(case.features)
    if case.bad_input:
        failure, detail = _run_bad_input(fn, case, device, generator)
        return CaseResult(case.name, failure is None, detail, failure, features)
    with count_launches() as launches:
        failure, detail = _run_view(fn, OPS[op], case, torch.device(device), generator)
    return CaseResult(
        case.name, failure is None, detail, failure, features, len(launches), case.cols
    )


def _run_view(fn, op: Op, case: Case, device, generator) -> tuple[str | None, str]:
    g = case.geometry
    dtype = DTYPES[case.dtype]
    storage, x = sentinel_view(g, dtype, device, generator, case.fill)
    where = f"{case.name}: {describe(x)}"
    before = storage.clone()
    with count_launches(watch=x) as launches, _audit(x) as trace, GuardAllocations() as mode:
        try:
            out = fn(x, num_warps=case.num_warps)
        except Exception as exc:  # the student's error is the evidence
            out = exc
    if trace is not None and trace.refused is not None:  # caught before it touched memory
        finding = trace.verify(x)[0]
        return AUDIT_FAILURES[finding.kind], f"{where}: {finding.text}"
    if isinstance(out, Exception):
        return _exception_kind(out), f"{where}: {_raised(out)}"
    stray = mode.guards.stray()  # on a GPU, where no audit refused the store
    if stray:
        return stray[0], f"{where}: {stray[1]}"
    problem = _check_output(case.name, out, x, op, before, storage, len(launches), g.rows)
    if trace is not None and g.rows and (problem is None or problem[0] in AUDITED):
        problem = _audited(trace.verify(x, out), problem)
    problem = _read_outside_kernel(launches.torch_reads, problem)
    if problem is None and case.repeat:
        return _run_repeat(fn, op, case, x, out, storage, generator, where)
    return (problem[0] if problem else None), _explain(where, problem)


def _audit(x: torch.Tensor) -> contextlib.AbstractContextManager[Trace | None]:
    """The ownership audit around one call, under the interpreter on CPU tensors only."""
    if interpreter_active() and x.device.type == "cpu":
        return audit([x])
    return contextlib.nullcontext()


def _audited(findings: list[Finding], problem: tuple[str, str] | None):
    """A fault (a store into the input or past a row, a load off the view, an element
    written by two programs, or by none) fails the case whatever the values. With wrong
    values, elements never written are a symptom (a block too small, say) and join them as
    evidence, as do findings that are not faults."""
    faults = sorted(
        (f for f in findings if f.fault and (problem is None or f.kind != "unwritten")),
        key=lambda f: FAULT_ORDER.index(f.kind) if f.kind in FAULT_ORDER else len(FAULT_ORDER),
    )
    if faults:
        return AUDIT_FAILURES[faults[0].kind], faults[0].text
    if problem and findings:
        kind = "overrun" if findings[0].kind == "overrun" else problem[0]
        return kind, f"{problem[1]}; audit: {findings[0].text}"
    return problem


def _read_outside_kernel(reads: list[str], problem: tuple[str, str] | None):
    """Torch reading the input besides the kernel is a second pass over memory: with right
    values, or an output the kernel did not write (torch's result returned instead), that
    is the failure; with other wrong values, the reads join the evidence."""
    if not reads:
        return problem
    what = f"torch read the input outside the kernel: {reads[0]}"
    if problem is None:
        return "outside-kernel", f"{what}; the kernel must be the only reader of x"
    if problem[0] == "ownership":
        return "outside-kernel", f"{what}, and the output returned is not what the kernel wrote"
    return problem[0], f"{problem[1]}; also {what}"


def _check_output(name: str, out, x, op: Op, before, storage, launches: int, rows: int):
    """The first contract the output breaks, as a failure name with its detail, or None."""
    if not isinstance(out, torch.Tensor):
        return "not-a-tensor", f"returned {type(out).__name__}, expected a torch.Tensor"
    earlier = _RETURNED.remember(out, name)
    if earlier:
        return "stale", f"returned the very tensor an earlier call returned ({earlier})"
    if not torch.equal(before.isnan(), storage.isnan()) or not torch.equal(
        before.nan_to_num(), storage.nan_to_num()
    ):
        changed = (before.nan_to_num() != storage.nan_to_num()) | (
            before.isnan() != storage.isnan()
        )
        index = int(changed.nonzero()[0])
        return "input-written", f"the input's storage changed at index {index}"
    if tuple(out.shape) != tuple(x.shape):
        return "shape", f"output shape {tuple(out.shape)}, expected {tuple(x.shape)}"
    if out.dtype != x.dtype:
        return "dtype", f"output dtype {out.dtype}, expected {x.dtype} (the input's)"
    if out.device != x.device:
        return "device", f"output on {out.device}, expected {x.device} (the input's)"
    if not out.is_contiguous():
        return "layout", (
            f"output has strides {tuple(out.stride())}; a new contiguous output has "
            f"strides {(x.shape[1], 1)}"
        )
    if rows == 0:
        if launches:
            return "launch-on-empty", f"{launches} kernel launch(es) for an input with no rows"
        return None
    problem = _compare(out, op.reference(x), x.dtype, op)
    if launches == 0:
        if problem:
            return (
                "stale",
                f"no kernel ran and the values are wrong, as if from an earlier call; {problem[1]}",
            )
        return "no-launch", "no Triton kernel was launched; the values came from elsewhere"
    return problem


def _compare(out, ref, dtype, op: Op):
    got = out.double()
    rtol, atol = (0.0, 0.0) if op.exact else TOLERANCES[dtype]
    close = torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    bad = (~close).nonzero()
    r, c = (int(v) for v in bad[0])
    where = (
        f"{len(bad)} of {close.numel()} values differ; first at row {r}, column {c}: "
        f"got {got[r, c].item():.6g}, expected {ref[r, c].item():.6g}"
    )
    if bool((~torch.isfinite(got) & torch.isfinite(ref)).any()):
        return "nonfinite", f"NaN or inf where the reference is finite; {where}"
    if torch.allclose(got.flatten().sort().values, ref.flatten().sort().values, rtol, atol):
        if torch.unique(ref).numel() < ref.numel() // 2:
            return "ambiguous", (
                "the expected values, nearly all equal (rows of ±1e4 give one-hot rows), in "
                f"other places: wrong loads or wrong stores could do that; {where}"
            )
        return "permuted", f"the right values in the wrong places; {where}"
    if not op.exact:
        sums = got.sum(dim=1)
        low = sums < 1 - 4 * rtol  # beyond the rounding of N outputs
        high = sums > 1 + 4 * rtol  # mass moved between rows, not lost: a layout problem
        if bool(low.any()) and not bool(high.any()):
            row = int(low.nonzero()[0])
            return "sum-low", f"row {row} sums to {sums[row].item():.6g}, not 1; {where}"
    return "values", where


def _explain(where: str, problem: tuple[str, str] | None) -> str:
    if problem is None:
        return f"{where}: ok"
    return f"{where}: {problem[1]}"


def _run_repeat(fn, op: Op, case: Case, x, out, storage, generator, where):
    """Call again on the same storage with new values: both results must stay right."""
    first_ref = op.reference(x)
    fresh = torch.randn(storage.shape, generator=generator, dtype=torch.float64)
    keep_nan = storage.isnan()
    storage.copy_(torch.where(keep_nan.cpu(), storage.double().cpu(), fresh).to(storage))
    before = storage.clone()
    try:
        second = fn(x, num_warps=case.num_warps)
    except Exception as exc:
        return _exception_kind(exc), f"{where}: second call {_raised(exc)}"
    problem = _check_output(
        f"{case.name} (second call)", second, x, op, before, storage, 1, case.rows
    )
    if problem and problem[0] in ("values", "permuted"):
        problem = ("stale", "the second call with new values " + problem[1])
    if problem is None and _compare(out, first_ref, x.dtype, op) is not None:
        problem = ("stale", "the first call's output changed when the function was called again")
    return (problem[0] if problem else None), _explain(where, problem)


def _bad_input(kind: str, device, generator) -> tuple[torch.Tensor, int, tuple[str, ...]]:
    """The input for a bad-input case and the words its error message must contain."""
    if kind == "3-d":
        return torch.randn(2, 3, 4, generator=generator).to(device), 4, ("3-D", "(2, 3, 4)")
    if kind == "int-dtype":
        return (
            torch.randint(0, 9, (4, 5), generator=generator, dtype=torch.int32).to(device),
            4,
            ("int32",),
        )
    if kind == "warps-6":
        return torch.randn(4, 5, generator=generator).to(device), 6, ("6",)
    if kind == "cpu-input":
        return torch.randn(4, 5, generator=generator), 4, ("cpu", "CPU")
    raise ValueError(f"unknown bad input {kind!r}; choose one of {', '.join(BAD_INPUTS)}.")


def _run_bad_input(fn, case: Case, device, generator) -> tuple[str | None, str]:
    x, num_warps, words = _bad_input(case.bad_input, device, generator)
    what = (
        f"{case.name}: {tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} on {x.device}, "
        f"num_warps={num_warps}"
    )
    try:
        fn(x, num_warps=num_warps)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        if any(word in message for word in words):
            return None, f"{what}: refused ({type(exc).__name__})"
        return "unclear-error", (
            f"{what}: raised {type(exc).__name__}({_first_line(exc)!r}), which does not name "
            f"the problem (expected one of {', '.join(map(repr, words))} in the message)"
        )
    except Exception as exc:
        return (
            "unclear-error",
            f"{what}: raised {type(exc).__name__}, expected ValueError or TypeError",
        )
    return "not-raised", f"{what}: accepted; it must raise ValueError or TypeError"


def _exception_kind(exc: BaseException) -> str:
    """ "memory" when the call ran out of host or device memory, else "exception"."""
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        return "memory"
    return "exception"


def _raised(exc: BaseException) -> str:
    """'raised Name: first line of its message', or 'raised Name' when it has none."""
    message = _compile_error(exc) if isinstance(exc, CompilationError) else _first_line(exc)
    return f"raised {type(exc).__name__}" + (f": {message}" if message else "")


def _compile_error(exc: CompilationError) -> str:
    """Where Triton refused the kernel and why; its own first line is only "at 10:34:"."""
    why = exc.error_message or (_first_line(exc.__cause__) if exc.__cause__ else "")
    lineno = getattr(exc.node, "lineno", None)
    lines = (exc.src or "").splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return why[:300]
    return f"kernel line {lineno}, `{lines[lineno - 1].strip()}`: {why}"[:300]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
