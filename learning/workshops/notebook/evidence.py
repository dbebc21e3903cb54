"""Generated-code evidence without a GPU: what loads the compiler emits for a kernel.

`compile_ptx` compiles a kernel with the course signature `(X, Y, SR, SC, N, BLOCK)`
ahead of time for an sm_90 GPU, which needs LLVM and Triton's bundled ptxas but no
device. `load_summary` counts the global loads and stores in the PTX by width, and
`compare_specializations` + `describe` put the two cases side by side: `SC == 1`, which
Triton turns into the constant 1 at launch, and `SC` passed at run time (a strided view).
`load_summaries` compiles a kernel of any signature for jobs built elsewhere:
`launch_evidence` builds them from the launches a student's softmax really makes.

Compilation runs in a child process. Once `triton.language` has been imported with
`TRITON_INTERPRET=1` (what `select_mode()` does without a GPU), its own `@jit` helpers
(`tl.max`, `tl.sum`, ...) are interpreter objects and the code generator cannot use them,
so no in-process switch can compile there. The child starts Triton without the
interpreter, rebuilds the kernel from its source as a real `JITFunction`, and leaves this
process's mode, environment and knobs untouched.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

COURSE_SIGNATURE = "(X, Y, SR, SC, N, BLOCK: tl.constexpr)"
ELEMENT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16}
"""Bits per element of each dtype the kernel reads, by Triton's name for it."""
SPECIALIZATIONS = {
    "unit_stride": (True, "SC == 1 (unit column stride)"),
    "strided": (False, "SC at run time (strided)"),
}
"""Each specialization: whether SC is the constant 1, and the label a student reads."""
COMPILE_TIMEOUT_S = 300
"""Longest a child compile may take before it is reported as failed."""
ROOT = Path(__file__).resolve().parents[3]
"""The folder that holds the `learning` package, put on the child's path."""

_MEMORY_OP = re.compile(r"(?<![\w.])(ld|st)\.global((?:\.[\w:]+)*)")
_TYPE = re.compile(r"[bfsu](8|16|32|64|128)")
_VECTOR = re.compile(r"v(2|4|8)")
_DIVISIBILITY = [["tt.divisibility", 16]]


NOT_WRITTEN = "not written yet"
"""What every stub says (nbgrader_config.py's code stub raises NotImplementedError with it)."""


class EvidenceError(RuntimeError):
    """The kernel could not be compiled here; the message says why, on one line."""


def not_written(exc: BaseException | None) -> bool:
    """Whether `exc` is a stub's NotImplementedError, raised by the function itself or by its
    kernel (which Triton's interpreter wraps in an InterpreterError, the error as its cause)."""
    while exc is not None:
        if isinstance(exc, NotImplementedError):
            return True
        exc = exc.__cause__
    return False


def raised_line(exc: BaseException) -> str:
    """`Type: first line of the message`, at most 200 characters of it: an error on one line."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


@dataclass(frozen=True)
class LoadSummary:
    """Global loads and stores in one kernel's PTX, counted by width in bits.

    Counts are instructions in the PTX, which every thread runs (once each in a kernel
    without loops): e.g. `{128: 2}` is two 128-bit loads per thread.
    """

    loads_by_width: dict[int, int]
    stores_by_width: dict[int, int]
    dtype: str | None = None

    @property
    def widest_load_bits(self) -> int:
        """Width of the widest global load, 0 if there is none."""
        return max(self.loads_by_width, default=0)

    @property
    def load_count(self) -> int:
        """Number of global load instructions."""
        return sum(self.loads_by_width.values())

    @property
    def load_bits(self) -> int:
        """Bits one thread loads in all: the sum of width times count."""
        return sum(width * count for width, count in self.loads_by_width.items())


# --- reading PTX ------------------------------------------------------------------------


def load_summary(ptx: str, dtype: str | None = None) -> LoadSummary:
    """Count `ld.global` and `st.global` instructions in `ptx` by vector width in bits.

    `ld.global.v4.b32` is 128 bits, `ld.global.b32` 32, `ld.global.v2.b32` 64; predicates
    (`@%p1`), cache modifiers (`.nc`, `.L1::evict_last`) and comments are ignored.
    """
    loads: dict[int, int] = {}
    stores: dict[int, int] = {}
    code = re.sub(r"//[^\n]*", "", ptx)
    for match in _MEMORY_OP.finditer(code):
        width = _width_bits(match.group(2).split(".")[1:])
        if width:
            counts = loads if match.group(1) == "ld" else stores
            counts[width] = counts.get(width, 0) + 1
    return LoadSummary(_by_width(loads), _by_width(stores), dtype)


def _width_bits(modifiers: list[str]) -> int:
    """Bits one instruction moves: vector length times element type width."""
    vector, bits = 1, 0
    for modifier in modifiers:
        if _VECTOR.fullmatch(modifier):
            vector = int(modifier[1:])
        elif _TYPE.fullmatch(modifier):
            bits = int(modifier[1:])
    return vector * bits


def _by_width(counts: dict[int, int]) -> dict[int, int]:
    return dict(sorted(counts.items(), reverse=True))


# --- compiling ---------------------------------------------------------------------------


def compile_ptx(
    kernel: object,
    *,
    block: int,
    col_stride_one: bool,
    dtype: str = "fp32",
    num_warps: int = 4,
    arch: int = 90,
) -> str:
    """PTX for `kernel` as Triton would compile it for `GPUTarget("cuda", arch, 32)`.

    `kernel` is a `@triton.jit` function, in GPU or interpreter mode. The launch
    reproduced: 16-byte aligned tensors of `dtype`, `SR` and `N` multiples of 16 when
    `block` is, and `SC` the constant 1 (`col_stride_one`) or a run-time int.
    """
    return _compile(kernel, [_job(block, col_stride_one, dtype, num_warps, arch)])[0]


def compare_specializations(
    kernel: object, block: int = 1024, dtype: str = "fp32", num_warps: int = 4
) -> dict[str, LoadSummary]:
    """Load summaries of `kernel` for each entry of SPECIALIZATIONS, in one compile run."""
    jobs = [_job(block, one, dtype, num_warps, 90) for one, _ in SPECIALIZATIONS.values()]
    ptxs = _compile(kernel, jobs)
    return {key: load_summary(ptx, dtype) for key, ptx in zip(SPECIALIZATIONS, ptxs, strict=True)}


def load_summaries(kernel: object, jobs: list[dict], dtype: str) -> list[LoadSummary]:
    """Load summaries of `kernel`, of any signature, for each job (`launch_job`): for kernels
    beyond the course's signature."""
    return [load_summary(ptx, dtype) for ptx in _compile(kernel, jobs, course=False)]


def launch_job(
    dtype: str,
    pointers: int,
    ints: list[int],
    constexprs: list[int],
    num_warps: int,
    arch: int,
    words: int = 0,
) -> dict:
    """A launch with `pointers` tensors (the last `words` of them int64), then `ints`, then
    `constexprs`, as Triton's launcher specializes it: ints that fit 32 bits are i32, an int
    equal to 1 becomes the constant 1, and pointers (torch allocations) and ints that are
    multiples of 16 get `tt.divisibility` 16; the job the child compiles."""
    types = [f"*{dtype}"] * (pointers - words) + ["*i64"] * words
    fixed, divisible = [], list(range(pointers))
    for index, value in enumerate(ints, start=pointers):
        types.append("constexpr" if value == 1 else "i32")
        if value == 1:
            fixed.append([index, 1])
        elif value % 16 == 0:
            divisible.append(index)
    for index, value in enumerate(constexprs, start=pointers + len(ints)):
        types.append("constexpr")
        fixed.append([index, value])
    return {
        "types": types,
        "constexprs": fixed,
        "divisible": divisible,
        "num_warps": num_warps,
        "arch": arch,
    }


def _job(block: int, col_stride_one: bool, dtype: str, num_warps: int, arch: int) -> dict:
    """One specialization, as the child compiles it; arguments by position."""
    from learning.workshops.contracts import (
        warps,  # here, so the child need not import torch
    )

    if dtype not in ELEMENT_BITS:
        raise ValueError(f"dtype must be one of {', '.join(ELEMENT_BITS)}, got {dtype!r}.")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or block & (block - 1):
        raise ValueError(
            f"block must be a power of two, got {block!r}; use triton.next_power_of_2(N)."
        )
    # The launch (x, y, SR, SC, N, BLOCK) of a (rows, block) input: SR and N are multiples of
    # 16 when block is (3 stands for any other size), SC is 1 or a run-time stride.
    size = block if block % 16 == 0 else 3
    ints = [size, 1 if col_stride_one else 3, size]
    return launch_job(dtype, 2, ints, [block], warps(num_warps), arch)


def _compile(kernel: object, jobs: list[dict], course: bool = True) -> list[str]:
    """Compile `kernel` once per job in a child process; return the PTX texts. `course`: the
    kernel must take the course's arguments (a student's kernel)."""
    fn = _python_function(kernel)
    if course:
        _check_signature(fn)
    request = {"kernel": _kernel_spec(fn, set()), "jobs": jobs}
    result = _run_child(request)
    if "error" in result:
        raise EvidenceError(
            f"Triton could not compile {fn.__name__} for sm_{jobs[0]['arch']}: "
            f"{result['error']}. Fix what it names (a function the kernel calls must be "
            "@triton.jit too), then run this cell again."
        )
    return result["ptx"]


def _python_function(kernel: object) -> object:
    """The plain Python function under a JITFunction, interpreter object or autotuner."""
    fn = kernel
    while not inspect.isfunction(fn):
        if not hasattr(fn, "fn"):
            raise EvidenceError(
                f"{kernel!r} is not a Triton kernel; pass the @triton.jit function itself."
            )
        fn = fn.fn
    return fn


def _check_signature(fn: object) -> None:
    params = list(inspect.signature(fn).parameters)
    if len(params) != 6:
        raise EvidenceError(
            f"{fn.__name__}({', '.join(params)}) does not take the course arguments "
            f"{COURSE_SIGNATURE}; fix its def line and run the cell again."
        )


def _kernel_spec(fn: object, seen: set[int]) -> dict:
    """What the child needs to rebuild `fn`: its def source and the globals it reads. `seen`
    holds the helpers being built above it: a helper two others call is shipped to both."""
    seen = seen | {id(fn)}
    closure = inspect.getclosurevars(fn)
    names = {**closure.globals, **closure.nonlocals}
    shipped = {name: _global_spec(value, seen) for name, value in names.items()}
    return {
        "name": fn.__name__,
        "params": list(inspect.signature(fn).parameters),
        "source": _def_source(fn),
        "globals": {name: spec for name, spec in shipped.items() if spec is not None},
    }


def _def_source(fn: object) -> str:
    """The source of `fn` from its `def` line, decorators left out."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise EvidenceError(
            f"cannot read the source of {fn.__name__} ({exc}); define it in a file or cell."
        ) from exc
    tree = ast.parse(source)
    if any(isinstance(node, ast.Raise) for node in ast.walk(tree)):
        raise EvidenceError(
            f"{fn.__name__} is {NOT_WRITTEN}: its body still raises NotImplementedError. "
            "Finish it and run its tests first, then run this cell again."
        )
    start = tree.body[0].lineno
    return "".join(source.splitlines(keepends=True)[start - 1 :])


def _global_spec(value: object, seen: set[int]) -> dict | None:
    """A global as JSON the child can rebuild, or None for one it cannot (left out)."""
    import triton.language as tl

    kind = "value"
    if inspect.ismodule(value):
        return {"module": value.__name__}
    if isinstance(value, tl.constexpr):
        kind, value = "constexpr", value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return {kind: value}
    if not inspect.isfunction(value) and hasattr(value, "fn"):
        helper = _python_function(value)
        if id(helper) not in seen:
            return {"jit": _kernel_spec(helper, seen)}
    return None


def _run_child(request: dict) -> dict:
    """Run this module as a child on `request`; return its JSON result."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("TRITON_INTERPRET", None)
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "result.json"
        payload = json.dumps({**request, "result_path": str(result_path)})
        try:
            child = subprocess.run(
                [sys.executable, "-m", "learning.workshops.notebook.evidence"],
                input=payload,
                capture_output=True,
                text=True,
                env=env,
                timeout=COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise EvidenceError(
                f"compiling took over {COMPILE_TIMEOUT_S} s; try a smaller block."
            ) from exc
        if not result_path.exists():
            raise EvidenceError(
                f"the compiler process exited with code {child.returncode} "
                f"({_last_line(child.stderr)}); check that Triton imports in a fresh Python."
            )
        return json.loads(result_path.read_text())


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _one_line(exc: BaseException) -> str:
    """`Type: last line of the message`, the line of a CompilationError that says why."""
    text = _last_line(str(exc))
    return type(exc).__name__ if text == "no message" else f"{type(exc).__name__}: {text}"


# --- the child ----------------------------------------------------------------------------


def _child_main() -> None:
    """Compile the request on stdin; write `{"ptx": [...]}` or `{"error": line}`."""
    request = json.load(sys.stdin)
    try:
        result: dict = {"ptx": _compile_jobs(request)}
    except Exception as exc:  # any failure is the student's evidence, reported on one line
        result = {"error": _one_line(exc)}
    Path(request["result_path"]).write_text(json.dumps(result))


def _compile_jobs(request: dict) -> list[str]:
    """Rebuild the kernel as a JITFunction and compile it once per job; the PTX texts."""
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _rebuild(request["kernel"], Path(tmp))
        names = request["kernel"]["params"]
        return [_compile_job(kernel, names, job) for job in request["jobs"]]


def _compile_job(kernel: object, names: list[str], job: dict) -> str:
    """`triton.compile` on one specialization, for a GPUTarget that need not be present."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(
        kernel,
        dict(zip(names, job["types"], strict=True)),
        {(index,): value for index, value in job["constexprs"]},
        {(index,): _DIVISIBILITY for index in job["divisible"]},
    )
    target = GPUTarget("cuda", job["arch"], 32)
    options = {"num_warps": job["num_warps"], **job.get("options", {})}
    compiled = triton.compile(source, target=target, options=options)
    return compiled.asm["ptx"]


def _rebuild(spec: dict, folder: Path) -> object:
    """A fresh JITFunction from a kernel spec; its source lives in `folder` for inspect."""
    import importlib

    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    namespace: dict = {"__name__": f"evidence_{spec['name']}", "triton": triton, "tl": tl}
    for name, item in spec["globals"].items():
        if "module" in item:
            namespace[name] = importlib.import_module(item["module"])
        elif "constexpr" in item:
            namespace[name] = tl.constexpr(item["constexpr"])
        elif "jit" in item:
            namespace[name] = _rebuild(item["jit"], folder)
        else:
            namespace[name] = item["value"]
    path = folder / f"{spec['name']}_{len(list(folder.iterdir()))}.py"
    path.write_text(spec["source"])
    exec(compile(spec["source"], str(path), "exec"), namespace)
    return JITFunction(namespace[spec["name"]])


# --- for the student ----------------------------------------------------------------------

MEANING = (
    "Counts are instructions in one thread's PTX. Wide (vector) loads need columns the "
    "compiler can prove adjacent and 16-byte aligned, which SC == 1 gives it; a strided "
    "view gets one scalar load per element. This is what the compiler asked for, not DRAM "
    "transactions: a profiler (Nsight Compute) measures those."
)


def describe(summaries: dict[str, LoadSummary]) -> str:
    """A few lines a student reads: each specialization's loads and stores, then why."""
    lines = []
    for key, summary in summaries.items():
        label = SPECIALIZATIONS[key][1] if key in SPECIALIZATIONS else key
        loads = phrase(summary.loads_by_width, "load", summary.dtype)
        stores = phrase(summary.stores_by_width, "store", summary.dtype)
        lines.append(f"{label}: {loads}; {stores}.")
    return "\n".join([*lines, MEANING])


def phrase(by_width: dict[int, int], noun: str, dtype: str | None) -> str:
    """E.g. '2 loads of 128 bits (4 fp32 each)'; parts joined with ' + '."""
    if not by_width:
        return f"no global {noun}s"
    parts = []
    for width, count in by_width.items():
        text = f"{count} {noun}{'s' if count != 1 else ''} of {width} bits"
        bits = ELEMENT_BITS.get(dtype or "")
        if bits and width % bits == 0:
            text += f" ({width // bits} {dtype} each)"
        parts.append(text)
    return " + ".join(parts)


if __name__ == "__main__":
    _child_main()
