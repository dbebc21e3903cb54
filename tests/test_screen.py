"""The source screen: every rule flags its submissions, obfuscated ones too, and the honest
set (the solution, every decomposition, the zoo's honest bugs, scratch cells that compare with
torch) gets no flag. Cheap: notebooks are built in memory, nothing runs."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import nbformat
import pytest

from grader import cohort, course
from grader.cohort.gradebook import _student_record
from grader.course import shape_cells
from grader.grading.grading_log import MAX_FLAGS, GradingLog, read_record, record_paths
from grader.grading.screen import WHY, Course, Flag, flags_to_text, screen
from grader.zoo import BUGS, DECOMPOSITIONS, apply, base_source

SOURCE = course.REPO / "source" / course.ASSIGNMENT / course.NOTEBOOK
COURSE = Course.of(nbformat.read(SOURCE, as_version=4))
SOLVED = course.solved_notebook(course.REPO)

FLAGGED_BUGS = {
    "torch-softmax": {"torch-compute", "tensor-copy"},
    "softmax-beside-kernel": {"torch-compute", "tensor-copy"},
    **{b.name: {"tensor-copy"} for b in BUGS if b.name.endswith("copies-first")},
    "segfaults": {"native-code"},
    "segfaults-on-wide-rows": {"native-code"},
}
"""The zoo members the screen flags, by rule: the torch shortcuts and copies the instructions
forbid, and the crash simulated with ctypes (native code). Every other member is honest."""


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def notebook(pass3: str | None = None, *added: str, pass2: str | None = None):
    """The solved notebook with pass 2 and pass 3 replaced, and cells added after pass 3."""
    nb = copy.deepcopy(SOLVED)
    at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "pass3")
    for cell in nb.cells:
        if grade_id(cell) == "pass3" and pass3 is not None:
            cell.source = pass3
        if grade_id(cell) == "pass2" and pass2 is not None:
            cell.source = pass2
    for offset, source in enumerate(added, start=1):
        nb.cells.insert(at + offset, nbformat.v4.new_code_cell(source))
    return nb


def rules(nb) -> set[str]:
    return {flag.rule for flag in screen(nb, COURSE)}


def bug_notebook(bug):
    """A zoo member as a submission, built as tests/test_cell_losses.py and the shapes do."""
    if bug.base == "reference":
        return course.solved_notebook(course.REPO, bug.edits)
    nb = copy.deepcopy(SOLVED)
    cells = shape_cells(apply(base_source(bug.base), bug.edits))
    for cell in nb.cells:
        if grade_id(cell) in cells:
            cell.source = cells[grade_id(cell)]
        elif cell.cell_type == "code" and cell.source.startswith("def launch_softmax("):
            cell.source = cells["launch_softmax"]
    return nb


def test_the_solution_and_the_release_get_no_flag():
    """Are the solved notebook and the untouched release read without a single flag?"""
    assert screen(SOLVED, COURSE) == []
    release = course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK
    assert screen(nbformat.read(release, as_version=4), COURSE) == []


@pytest.mark.parametrize("shape", DECOMPOSITIONS)
def test_every_decomposition_gets_no_flag(shape):
    """Does each correct decomposition (autotune, compiled handle, persistent, ...) pass?"""
    assert screen(course.shape_notebook(course.REPO, shape), COURSE) == []


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_zoo_members_are_flagged_only_for_what_they_break(bug):
    """Is an honest bug (wrong strides, no mask, a cache) left alone, and a torch shortcut,
    a copy or a ctypes crash flagged with its rule?"""
    assert rules(bug_notebook(bug)) == FLAGGED_BUGS.get(bug.name, set())


def test_a_flag_names_its_cell_line_and_reason():
    """Does a torch.softmax in pass 3 say where it is and why, in words a student reads?"""
    bug = next(b for b in BUGS if b.name == "torch-softmax")
    flags = [f for f in screen(bug_notebook(bug), COURSE) if f.rule == "torch-compute"]
    assert flags == [
        Flag(
            "torch-compute",
            "pass3",
            5,
            "calls torch.softmax; the direct path must compute in your Triton kernel, not in torch",
            ("StridedSoftmax", "strided_softmax"),  # the course's autograd op calls it
        )
    ]
    assert str(flags[0]).startswith("cell pass3, line 5: calls torch.softmax;")
    assert not flags[0].tampering


def test_a_cell_the_student_added_is_named_by_its_position():
    """Is an added cell named #N, its place in the notebook, and its line counted in it?"""
    nb = notebook(None, "x = 1\nimport ctypes\n")
    position = next(i for i, c in enumerate(nb.cells) if c.source.startswith("x = 1")) + 1
    (flag,) = screen(nb, COURSE)
    assert (flag.cell, flag.line, flag.rule) == (f"#{position}", 2, "native-code")
    assert flag.tampering


WRAPPER = "def strided_softmax(x, num_warps=4):\n"
TORCH_COMPUTE = {
    "torch.softmax": WRAPPER + "    return torch.softmax(x, 1)\n",
    "F alias": "import torch.nn.functional as F\n" + WRAPPER + "    return F.softmax(x, dim=1)\n",
    "method": WRAPPER + "    return x.softmax(1)\n",
    "literal getattr": WRAPPER + '    return getattr(torch, "softmax")(x, 1)\n',
    "import as": "from torch import log_softmax as ls\n" + WRAPPER + "    return ls(x, 1).exp()\n",
    "lambda": "strided_softmax = lambda x, num_warps=4: torch.softmax(x, 1)\n",
    "helper": "def helper(t):\n    return torch.special.softmax(t, 1)\n\n"
    + WRAPPER
    + "    return helper(x)\n",
    "closure": "def make():\n    def inner(x, num_warps=4):\n        return torch.softmax(x, 1)\n"
    "    return inner\n\nstrided_softmax = make()\n",
    "decorator": "def fallback(fn):\n    def wrapped(x, num_warps=4):\n"
    "        return torch.softmax(x, -1)\n    return wrapped\n\n@fallback\n"
    + WRAPPER
    + "    return None\n",
    "class": "class Impl:\n    def __call__(self, x, num_warps=4):\n"
    "        return torch.nn.functional.softmax(x, 1)\n\nstrided_softmax = Impl()\n",
    "default argument": "def strided_softmax(x, num_warps=4, _f=torch.softmax):\n"
    "    return _f(x, 1)\n",
    "registry": 'IMPLS = {}\nIMPLS["f"] = torch.softmax\n\n'
    + WRAPPER
    + '    return IMPLS["f"](x, 1)\n',
    "by hand": WRAPPER + "    e = (x - x.amax(1, keepdim=True)).exp()\n"
    "    return e / e.sum(1, keepdim=True)\n",
    "try fallback": WRAPPER + "    try:\n        return launch_softmax(x, num_warps)\n"
    "    except Exception:\n        return torch.softmax(x, 1)\n",
    "aten op": WRAPPER + "    return torch.ops.aten._softmax(x, 1, False)\n",
    "arithmetic": WRAPPER + "    return launch_softmax(x * 1, num_warps)\n",
    "type of x": WRAPPER + "    return type(x).softmax(x, 1)\n",
    "getattr on x": WRAPPER + '    return getattr(x, "softmax")(1)\n',
    "nn module": "from torch import nn\n" + WRAPPER + "    return nn.Softmax(dim=1)(x)\n",
    "partial": "import functools\n\nsm = functools.partial(torch.softmax, dim=1)\n\n"
    + WRAPPER
    + "    return sm(x)\n",
    "numpy": "import numpy as np\n\n" + WRAPPER + "    return torch.from_numpy(np.exp(x))\n",
    "global set in a function": "def setup():\n    global impl\n    impl = torch.softmax\n\n"
    "setup()\n\n" + WRAPPER + "    return impl(x, 1)\n",
}


@pytest.mark.parametrize("snippet", TORCH_COMPUTE.values(), ids=TORCH_COMPUTE)
def test_torch_computing_the_softmax_is_flagged_however_it_is_reached(snippet):
    """Is the torch fallback flagged through aliases, lambdas, helpers, closures,
    decorators, classes, defaults, registries and globals?"""
    assert "torch-compute" in rules(notebook(snippet))


def test_torch_inside_a_kernel_is_flagged_for_each_function_that_launches_it():
    """Does a @triton.jit kernel that calls torch (runnable under the interpreter) flag, on
    the path of pass 3's wrapper and of the course's own launch_softmax cell?"""
    kernel = (
        "@triton.jit\ndef softmax_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):\n"
        "    torch.softmax(X, 1)\n"
    )
    (flag,) = screen(notebook(None, pass2=kernel), COURSE)
    assert (flag.rule, flag.cell, flag.line) == ("torch-compute", "pass2", 3)
    assert flag.functions == ("StridedSoftmax", "launch_softmax", "strided_softmax")


TENSOR_COPY = {
    "clone": WRAPPER + "    return launch_softmax(x.clone(), num_warps)\n",
    "to": WRAPPER + "    return launch_softmax(x.to(torch.float32), num_warps)\n",
    "float": WRAPPER + "    return launch_softmax(x.float(), num_warps)\n",
    "torch.clone": WRAPPER + "    return launch_softmax(torch.clone(x), num_warps)\n",
    "Tensor.contiguous": WRAPPER + "    return launch_softmax(torch.Tensor.contiguous(x))\n",
    "slice store": WRAPPER
    + "    y = torch.empty_like(x)\n    y[:] = x\n    return launch_softmax(y)\n",
    "literal getattr": WRAPPER + '    return launch_softmax(getattr(x, "contiguous")())\n',
    "indexing": WRAPPER + "    return launch_softmax(x[:, torch.arange(x.shape[1])])\n",
    "in a helper": "def prepare(t):\n    return t.contiguous()\n\n"
    + WRAPPER
    + "    return launch_softmax(prepare(x), num_warps)\n",
}


@pytest.mark.parametrize("snippet", TENSOR_COPY.values(), ids=TENSOR_COPY)
def test_copying_the_input_is_flagged(snippet):
    """Is every way of copying x before the kernel flagged as a copy?"""
    assert "tensor-copy" in rules(notebook(snippet))


HONEST_SCRATCH = {
    "compare with torch": "x = torch.randn(4, 5, device=DEVICE).t()\n"
    "y = torch.softmax(x, 1)\nassert torch.allclose(strided_softmax(x), y)\n"
    "print((strided_softmax(x) - torch.softmax(x, 1)).abs().max())\n",
    "timeit and matplotlib": "%matplotlib inline\nx = torch.randn(64, 64, device=DEVICE)\n"
    "%timeit -n 3 strided_softmax(x)\n",
    "autoreload": "%load_ext autoreload\n%autoreload 2\n",
    "everyday imports": "import math\nimport time\nimport sys\nimport numpy as np\n"
    "import matplotlib.pyplot as plt\nprint(sys.version, math.pi, time.perf_counter())\n",
    "the expected tests again": 'expect_cases(strided_softmax, "strided_softmax", ["transpose"])\n',
    "a helper with math": "import math\n\ndef block_for(n):\n"
    "    return 2 ** math.ceil(math.log2(n))\n",
}


@pytest.mark.parametrize("snippet", HONEST_SCRATCH.values(), ids=HONEST_SCRATCH)
def test_honest_scratch_cells_get_no_flag(snippet):
    """Can a student compare with torch, time, plot and import everyday modules in cells of
    their own without a flag?"""
    assert screen(notebook(None, snippet), COURSE) == []


TAMPERING = {
    "interpreter-access": [
        'import sys\nsys.modules["learning.workshops.checking.cases"] = None\n',
        'import sys as s\nchecker = s.modules["grader.grading.hidden"]\n',
        "import __main__\n",
        "import builtins\nbuiltins.print = None\n",
        "import gc\nobjects = gc.get_objects()\n",
        'import numpy as np\ndata = np.load("x.npy", allow_pickle=True)\n',
        "import inspect\nframe = inspect.currentframe()\n",
        'checker = torch.sys.modules["learning.workshops.checking.cases"]\n',
        "s = os.sys\nframe = s._getframe(0)\n",
        "frame = sys._getframe(1).f_globals\n",
        "try:\n    1 / 0\nexcept Exception as e:\n    up = e.__traceback__.tb_frame.f_back\n",
        'import importlib\nm = importlib.import_module("os")\n',
        "%timeit import sys; sys.modules.clear()\n",
        "async def sneak():\n    import gc\n\nawait sneak()\n",
    ],
    "checker-module": [
        '__import__("learning.workshops.checking.cases")\n',
        "from learning.workshops.checking import cases\n",
        "import grader.reference\n",
        "from learning.workshops.notebook.testing import run_cases\n",
        "import learning.workshops.notebook.testing as t\n",
        "from learning.workshops.notebook.testing import diagnose\n",
        "import learning.workshops.notebook.testing\n",
    ],
    "native-code": ["import ctypes\n", "%%time\nimport ctypes\n", "%load_ext ctypes\n"],
    "unknown-module": [
        "import my_helpers\n",
        'open("statistics.py", "w").write("import ctypes")\n',
        "from . import sibling\n",
    ],
    "raw-descriptor": [
        'import os\nos.fdopen(3, "w").write("{}")\n',
        'os.write(5, b"{}")\n',
        'open(4, "w")\n',
        "from os import dup2\ndup2(1, 2)\n",
    ],
    "process": [
        "import signal\n",
        "import threading\n",
        "import subprocess\n",
        "pid = os.fork()\n",
        "!ls /\n",
        "%%bash\nls\n",
    ],
    "side-stream": ["side = torch.cuda.Stream()\n", "with torch.cuda.stream(s):\n    pass\n"],
    "dispatch-internals": [
        "from torch.utils._python_dispatch import _pop_mode\n",
        "guard = torch._C._DisableTorchDispatch()\n",
        "from torch.overrides import TorchFunctionMode\n",
        "class Lazy(torch.Tensor):\n    pass\n",
        "class Spy:\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        return func(*args)\n",
        "from triton import knobs\n",
        "triton.knobs.runtime.launch_enter_hook.calls.clear()\n",
    ],
    "monkeypatch": [
        "torch.softmax = lambda x, dim: x\n",
        "triton.jit = lambda fn: fn\n",
        'setattr(torch, "empty", torch.zeros)\n',
        "import learning.workshops.contracts as c\nc.matrix = lambda x: x.shape\n",
        "expect_cases = lambda *args, **kwargs: None\n",
        "def matrix(x):\n    return x.shape\n",
        'os.environ["TRITON_INTERPRET"] = "0"\n',
        'MODE = "gpu"\n',
        'os.environ.pop("NBGRADER_EXECUTION")\n',
        "import sys\nsys.path.insert(0, '.')\n",
    ],
    "dynamic-code": [
        'eval("1 + 1")\n',
        "exec(source)\n",
        'globals()["strided_softmax"] = f\n',
        'table = vars(torch)["softmax"]\n',
        'f = getattr(torch, "soft" + "max")\n',
        "lookup = getattr\n",
        "m = __import__(name)\n",
        'T = type("T", (), {})\n',
        "from operator import attrgetter\n",
        "from math import *\n",
        "x.__class__ = object\n",
    ],
    "ipython": [
        'get_ipython().user_ns["x"] = 1\n',
        "import IPython\nIPython.get_ipython().events.register('pre_run_cell', print)\n",
        "%env TRITON_INTERPRET=0\n",
        "%%writefile strided_softmax.py\nprint(1)\n",
    ],
}
CASES = [(rule, snippet) for rule, snippets in TAMPERING.items() for snippet in snippets]


@pytest.mark.parametrize(
    ("rule", "snippet"), CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CASES)]
)
def test_tampering_is_flagged_in_any_cell(rule, snippet):
    """Is each way of reaching the checker, the interpreter or the process flagged with its
    rule, wherever in the notebook it is written?"""
    assert rule in rules(notebook(None, snippet))


def test_cells_grading_puts_back_are_not_read():
    """Is an edited locked cell (restored before grading) left to the restore, while an
    edited unlabelled course cell (the student's to change) is read?"""
    nb = copy.deepcopy(SOLVED)
    test_cell = next(c for c in nb.cells if grade_id(c) == "test_pass3")
    test_cell.source = "import ctypes\n"
    assert screen(nb, COURSE) == []
    bench = next(c for c in nb.cells if "!python -m learning.workshops.benchmark" in c.source)
    bench.source = bench.source.replace("!python -m", "!rm -rf / ; python -m")
    assert {f.rule for f in screen(nb, COURSE)} == {"process"}


def test_a_cell_that_does_not_parse_is_not_flagged():
    """Is a syntax error (which runs nothing in the kernel either) left unflagged?"""
    assert screen(notebook(None, "def broken(:\n    import ctypes\n"), COURSE) == []


def test_screen_refuses_a_bare_set_of_ids():
    """Does passing the grade ids alone say what to pass instead?"""
    with pytest.raises(TypeError, match=r"Course\.of"):
        screen(SOLVED, {"setup"})


def test_flags_to_text_lists_each_flag_with_its_rule_and_the_next_step():
    """Does the log text count the flags, give each one's line and say what to do?"""
    flags = screen(notebook(None, "import ctypes\nimport gc\n"), COURSE)
    text = flags_to_text(flags)
    assert text.splitlines()[0] == "source screen: 2 flags"
    assert "line 1: imports ctypes; " + WHY["native-code"] + " [native-code]" in text
    assert "submit again" in text
    assert flags_to_text([]) == "source screen: nothing flagged"


def _torch_softmax_flags() -> list[str]:
    bug = next(b for b in BUGS if b.name == "torch-softmax")
    return [str(flag) for flag in screen(bug_notebook(bug), COURSE)]


def test_flags_are_kept_in_the_grading_record_and_said_in_the_log(tmp_path):
    """Does GradingLog.flagged store each flag in the record's "flags" and write it, with
    its reason, as a line of the student's .log?"""
    flags = _torch_softmax_flags()
    log = GradingLog(tmp_path, course.ASSIGNMENT, "ada").begin()
    log.flagged(flags)
    log.finish()
    log_path, record_path = record_paths(tmp_path, course.ASSIGNMENT, "ada")
    assert json.loads(record_path.read_text())["flags"] == flags
    assert read_record(tmp_path, course.ASSIGNMENT, "ada").flags == flags
    text = log_path.read_text()
    assert "source screen: 2 flags" in text
    assert "  flagged: cell pass3, line 5: calls torch.softmax; the direct path must" in text


def test_a_flood_of_flags_is_capped_in_the_record(tmp_path):
    """Does a notebook that breaks a rule on thousands of lines keep the record small?"""
    log = GradingLog(tmp_path, course.ASSIGNMENT, "ada").begin()
    log.flagged([f"cell #3, line {n}: imports ctypes" for n in range(1, 5001)])
    flags = read_record(tmp_path, course.ASSIGNMENT, "ada").flags
    assert len(flags) == MAX_FLAGS + 1 and flags[-1] == f"... and {5000 - MAX_FLAGS} more"


def test_the_cohort_report_names_flagged_students_with_their_reasons(tmp_path):
    """Does the cohort report read the flags from each grading record and list a flagged
    student with every reason, and nothing for a student without flags?"""
    flags = _torch_softmax_flags()
    for student, theirs in (("ada", flags), ("bob", [])):
        log = GradingLog(tmp_path, course.ASSIGNMENT, student).begin()
        log.flagged(theirs)
        log.finish()
    submission = SimpleNamespace(notebooks=[], total_seconds_late=0.0, grades=[])
    gradebook = SimpleNamespace(find_submission=lambda assignment, student: submission)
    late = None  # no notebooks, so no late penalty to work out
    records = [
        _student_record(gradebook, tmp_path, course.ASSIGNMENT, s, late) for s in ("ada", "bob")
    ]
    assert records[0].flags == tuple(flags) and records[1].flags == ()
    cell = cohort.CellInfo("nb", "hidden_pass3", 3.0, "hidden", (), False)
    for record in records:
        record.grades = {("nb", "hidden_pass3"): cohort.CellGrade(0.0, None, None, False)}
    course_ = cohort.Cohort(tmp_path, course.ASSIGNMENT, [cell], records)
    table = cohort.build_table(course_)
    summary = cohort.summarize(course_, table)
    report = cohort.Report(
        course_, table, cohort.timing_table({}), cohort.hint_table(course_), summary
    )
    lines = [line for line in cohort.summary_lines(report) if "source screen" in line]
    assert lines == [f"Flagged by the source screen: ada: {'; '.join(flags)}."]


def test_hostile_metadata_does_not_stop_the_screen():
    """Is a cell whose nbgrader metadata is not what nbgrader writes read as the student's?"""
    nb = notebook(None, "import ctypes\n")
    added = next(c for c in nb.cells if c.source == "import ctypes\n")
    added.metadata["nbgrader"] = {"grade_id": ["setup"]}
    assert rules(nb) == {"native-code"}
    added.metadata["nbgrader"] = "setup"
    assert rules(nb) == {"native-code"}


def test_a_cell_too_deep_to_read_is_flagged_not_skipped():
    """Is code nested deeper than the screen reads flagged (a kernel with other limits could
    still run it), rather than passed as if it were a syntax error?"""
    deep = "x = " + "+".join(["a"] * 20000) + "\nimport ctypes\n"
    assert rules(notebook(None, deep)) == {"dynamic-code"}
