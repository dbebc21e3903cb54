"""The source screen (learning/workshops/screen/): it reads what the checks' children load,
finds by use what can change what grading reads, leaves ordinary notebook lines alone, and
stays bounded however the code is built. Cheap: notebooks are built in memory, nothing of
them runs (one test starts the screen's own child)."""

from __future__ import annotations

import ast
import copy
import json
import re
import time
import tracemalloc

import nbformat
import pytest
from docs_commands import doc

from grader import course
from grader.course import shape_cells
from grader.edits import apply
from grader.zoo import BUGS
from grader.zoo.bug import DECOMPOSITIONS, base_source
from learning.workshops.checking.loader import notebook_definitions
from learning.workshops.screen import Finding, Screened, report_lines, screen_file
from learning.workshops.screen.reading import MEANINGS, findings, notebook_cells, read_file
from learning.workshops.screen.rules import RULES

SOLVED = course.solved_notebook(course.REPO)

HELD_BUGS = {"segfaults": {"native-code"}, "segfaults-on-wide-rows": {"native-code"}}
"""The zoo members the screen holds, by rule: the crash simulated with ctypes (native code in
the wrapper). Every other member, the torch shortcuts and copies included, is left to the
values: the checks fail them."""


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


def found(nb) -> list[Finding]:
    return findings(notebook_cells(nb))


def rules(nb) -> set[str]:
    return {finding.rule for finding in found(nb)}


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


def test_the_solution_the_source_and_the_release_get_nothing():
    """Are the solved notebook, the course's source and the untouched release read without
    a single finding?"""
    assert found(SOLVED) == []
    for folder in ("source", "release"):
        assert read_file(course.REPO / folder / course.ASSIGNMENT / course.NOTEBOOK) == []


@pytest.mark.parametrize("shape", DECOMPOSITIONS)
def test_every_decomposition_gets_nothing(shape):
    """Does each correct decomposition (autotune, compiled handle, persistent, ...) pass?"""
    assert found(course.shape_notebook(course.REPO, shape)) == []


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_zoo_members_are_held_only_for_native_code(bug):
    """Is an honest bug (wrong strides, no mask, a cache, a torch shortcut, a copy) left to
    the values, and the ctypes crash held as native code?"""
    assert rules(bug_notebook(bug)) == HELD_BUGS.get(bug.name, set())


def test_a_finding_names_its_cell_line_code_and_reason():
    """Does a helper that starts a process say where it is, the line and why, in words a
    student reads?"""
    helper = "import subprocess\n\ndef gpu_name():\n    return subprocess.run(['nvidia-smi'])\n"
    nb = notebook(None, helper)
    position = next(i for i, c in enumerate(nb.cells) if c.source == helper) + 1
    assert found(nb) == [
        Finding(
            "process",
            f"#{position}",
            4,
            "calls subprocess.run",
            "return subprocess.run(['nvidia-smi'])",
            "5. Pass 3: the wrapper",
        )
    ]
    assert str(found(nb)[0]).startswith(f"cell #{position}, line 4: calls subprocess.run: a ")


ORDINARY = {
    "a shell line": "!nvidia-smi\n",
    "pip in a shell line": "!pip install tqdm\n",
    "timeit": "x = torch.randn(64, 64, device=DEVICE)\n%timeit -n 3 strided_softmax(x)\n",
    "time a cell": "%%time\ny = strided_softmax(torch.randn(64, 64, device=DEVICE))\n",
    "matplotlib inline": "%matplotlib inline\n",
    "autoreload": "%load_ext autoreload\n%autoreload 2\n",
    "gc.collect": "import gc\ngc.collect()\n",
    "empty the cache": "torch.cuda.empty_cache()\n",
    "inspect.signature": "import inspect\nprint(inspect.signature(strided_softmax))\n",
    "unused imports": "import gc\nimport inspect\nimport threading\nimport ctypes\n",
    "a timer named t": "import time\nt = time.perf_counter()\n"
    "y = strided_softmax(torch.randn(8, 8))\nprint(f'{time.perf_counter() - t:.3f} s')\n",
    "t as a constant": "t = 0.5\n",
    "warnings": "import warnings\nwarnings.filterwarnings('ignore', category=UserWarning)\n",
    "tqdm": "from tqdm.auto import tqdm\n\nfor n in tqdm([8, 16, 32]):\n"
    "    strided_softmax(torch.randn(n, n))\n",
    "os.environ.get": "import os\nprint(os.environ.get('TRITON_INTERPRET', 'unset'))\n",
    "compare with torch": "x = torch.randn(4, 5, device=DEVICE).t()\n"
    "assert torch.allclose(strided_softmax(x), torch.softmax(x, 1), atol=1e-6)\n"
    "print((strided_softmax(x) - torch.softmax(x, 1)).abs().max())\n",
    "a ctypes debug print": "import ctypes\nprint(ctypes.sizeof(ctypes.c_void_p))\n",
    "plots": "import matplotlib.pyplot as plt\n\nplt.plot([1, 2, 3])\nplt.title('times')\n"
    "plt.show()\n",
    "a plotting helper": "import matplotlib.pyplot as plt\n\ndef plot_times(times):\n"
    "    plt.rcParams['figure.figsize'] = (6, 3)\n    plt.plot(times)\n    plt.show()\n",
    "assert cells": "y = strided_softmax(torch.randn(3, 5).t())\nassert y.shape == (5, 3)\n"
    "assert torch.all(y >= 0)\n",
    "a timing helper": "import gc\nimport time\n\ndef best_of(fn, runs=5):\n"
    "    gc.collect()\n    torch.cuda.empty_cache()\n    times = []\n    for _ in range(runs):\n"
    "        t = time.perf_counter()\n        fn()\n        times.append(time.perf_counter() - t)\n"
    "    return min(times)\n",
    "a helper with math": "import math\n\ndef block_for(n):\n"
    "    return 2 ** math.ceil(math.log2(n))\n",
    "the expected tests again": 'expect_cases(strided_softmax, "strided_softmax", ["transpose"])\n',
    "threads and locks in a helper": "import threading\n\nLOCK = threading.Lock()\n\n"
    "def guarded(fn):\n    with threading.Lock():\n        return fn()\n",
    "numpy in a helper": "import numpy as np\n\ndef padded(a):\n    return np.append(a, [0.0])\n",
    "sys.version": "import sys\n\ndef where():\n    return sys.version, sys.platform\n",
    "do_bench": "def bench(x):\n    return triton.testing.do_bench(lambda: strided_softmax(x))\n",
    "a stream of its own": "def on_a_stream(x):\n    with torch.cuda.stream(torch.cuda.Stream()):\n"
    "        return strided_softmax(x)\n",
}
"""Lines students write, each in a cell of its own after pass 3."""


@pytest.mark.parametrize("snippet", ORDINARY.values(), ids=ORDINARY)
def test_ordinary_lines_are_nothing(snippet):
    """Is each ordinary notebook line (shell lines, magics, gc, inspect, timers, plots,
    unused imports, torch comparing results, helpers of one's own) left alone?"""
    assert found(notebook(None, snippet)) == []


WRAPPER = SOLVED.cells[next(i for i, c in enumerate(SOLVED.cells) if grade_id(c) == "pass3")].source


def test_debug_lines_in_the_wrapper_are_nothing():
    """Are a debug print of the strides, an environment read and a helper of the student's
    own inside pass 3's wrapper left alone?"""
    edited = WRAPPER.replace(
        "    M, N = matrix(x)\n",
        "    print(x.stride(), x.storage_offset())\n"
        "    if os.environ.get('DEBUG'):\n        print(inspect.signature(strided_softmax))\n"
        "    M, N = matrix(x)\n",
    )
    assert edited != WRAPPER
    assert found(notebook("import inspect\nimport os\n\n" + edited)) == []


HELD = {
    "monkeypatch": [
        "def f():\n    torch.softmax = None\n",
        "def f():\n    setattr(torch, 'empty', torch.zeros)\n",
        "import learning.workshops.checking.cases as c\n\ndef f():\n    c.run_case = None\n",
        "class Patch:\n    torch.allclose = lambda *args, **kwargs: True\n",
        "def f():\n    os.environ['TRITON_INTERPRET'] = '0'\n",
        "import sys\n\ndef f():\n    sys.path.insert(0, '.')\n",
        "def f(x):\n    x.__class__ = object\n",
        "import time\n\ndef f():\n    time.perf_counter = lambda: 0.0\n",
        "from learning.workshops.measuring import timed_calls as t\n\ndef f():\n    del t.serve\n",
        "def f():\n    triton.jit = lambda fn: fn\n",
        "torch.allclose = torch.isclose\n",  # a "constant" to the loader: it runs in the checks
        "import os\n\nos.environ['TRITON_INTERPRET'] = '0'\n",  # a literal: it runs there too
    ],
    "interpreter-access": [
        "import sys\n\ndef f():\n    return sys._getframe(1).f_locals\n",
        "import inspect\n\ndef f():\n    return inspect.currentframe()\n",
        "import gc\n\ndef f(x):\n    return gc.get_referrers(x)\n",
        "def f():\n    try:\n        1 / 0\n    except Exception as e:\n"
        "        return e.__traceback__.tb_frame\n",
        "import sys\n\ndef f():\n    return sys.modules['learning.workshops.checking.cases']\n",
        "def f(g):\n    return g.__globals__\n",
        "import builtins\n\ndef f():\n    return builtins.print\n",
        "def f():\n    return torch.sys._getframe(0)\n",
        "import os\n\ndef f():\n    return os.sys.modules\n",
    ],
    "native-code": [
        "def f():\n    __import__('ctypes').string_at(0)\n",
        "import ctypes\n\ndef f():\n    return ctypes.CDLL(None)\n",
        "import ctypes\n\ndef f():\n    return ctypes.c_int.from_address(0)\n",
        "def f():\n    return open('/proc/self/mem', 'wb')\n",
        "import torch.utils.cpp_extension as ext\n\ndef f():\n    ext.load_inline('m', '')\n",
    ],
    "process": [
        "import threading\n\ndef f():\n    threading.Thread(target=print).start()\n",
        "import os\n\ndef f():\n    return getattr(os, 'fork')()\n",
        "def f():\n    return __import__('os').fork()\n",
        "from os import fork as spawn\n\ndef f():\n    return spawn()\n",
        "import os\n\ndef setup():\n    global spawn\n    spawn = os.fork\n\n"
        "def f():\n    return spawn()\n",
        "import importlib\n\ndef f():\n    return importlib.import_module('os').fork()\n",
        "import subprocess as sp\n\nrun = sp.run\n\ndef f():\n    run(['ls'])\n",
        "import os\n\ndef f():\n    return os.fork()\n",
        "import signal\n\ndef f():\n    signal.alarm(1)\n",
        "from concurrent.futures import ThreadPoolExecutor\n\ndef f():\n"
        "    return ThreadPoolExecutor(2)\n",
        "import multiprocessing\n\ndef f():\n    multiprocessing.Process(target=print).start()\n",
        "import atexit\n\nclass Later:\n    atexit.register(print)\n",
    ],
    "raw-descriptor": [
        "import os\n\ndef f():\n    os.write(3, b'{}')\n",
        "from os import dup2\n\ndef f():\n    dup2(1, 2)\n",
        "import socket\n\ndef f():\n    return socket.socket()\n",
        "def f():\n    return open(4, 'w')\n",
    ],
    "dispatch-internals": [
        "def f():\n    from torch.utils._python_dispatch import _disable_current_modes\n\n"
        "    with _disable_current_modes():\n        pass\n",
        "def f():\n    return torch._C._DisableTorchDispatch()\n",
        "class Lazy(torch.Tensor):\n    pass\n",
        "class Spy:\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        return func(*args)\n",
        "def f():\n    triton.knobs.runtime.launch_enter_hook.calls.clear()\n",
        "from torch.overrides import TorchFunctionMode\n\nclass M(TorchFunctionMode):\n    pass\n",
    ],
    "dynamic-code": [
        "def f():\n    eval('1 + 1')\n",
        "def f(source):\n    exec(source)\n",
        "def f(name):\n    return __import__(name)\n",
        "def f():\n    return getattr(torch, 'soft' + 'max')\n",
        "import importlib\n\ndef f(name):\n    return importlib.import_module(name)\n",
        "def f():\n    return type('T', (), {})\n",
        "import pickle\n\ndef f(data):\n    return pickle.loads(data)\n",
        "import numpy as np\n\ndef f():\n    return np.load('x.npy', allow_pickle=True)\n",
        "from ctypes import *\n",
        "from torch.utils._python_dispatch import *\n",
        "def f():\n    return globals()['strided_softmax']\n",
    ],
    "module-file": [
        "def f():\n    open('statistics.py', 'w').write('import ctypes')\n",
        "from pathlib import Path\n\ndef f():\n    Path('torch.py').write_text('')\n",
    ],
}
CASES = [(rule, snippet) for rule, snippets in HELD.items() for snippet in snippets]


@pytest.mark.parametrize(
    ("rule", "snippet"), CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CASES)]
)
def test_what_can_change_the_checks_is_held_where_they_load_it(rule, snippet):
    """Is each way of tampering with the process the checks run in (patching, frames,
    native code, threads, raw descriptors, dispatch internals, dynamic code, module files)
    found with its rule, in a function, a class body or an import?"""
    assert rule in rules(notebook(None, snippet))


TOP_LEVEL = {
    "a process": "import subprocess\nsubprocess.run(['ls'])\n",
    "a patch": "torch.allclose = lambda *args, **kwargs: True\n",
    "frames": "import sys\nframe = sys._getframe(0)\n",
    "native code": "import ctypes\nctypes.CDLL(None)\n",
    "the shell's hooks": "get_ipython().showtraceback = lambda *args, **kwargs: None\n",
    "a shell magic": "%%bash\nrm -rf results\n",
    "writing a module": "%%writefile strided_softmax.py\nprint(1)\n",
}


@pytest.mark.parametrize("snippet", TOP_LEVEL.values(), ids=TOP_LEVEL)
def test_top_level_statements_are_not_read(snippet):
    """Is a statement that runs only in the notebook's own sandboxed kernel (whose outputs
    never score) left alone, since the checks' children never run it?"""
    assert found(notebook(None, snippet)) == []


READ_AT_LOAD = {
    "a class body": ("import subprocess\n\nclass Setup:\n    subprocess.run(['ls'])\n", "process"),
    "a decorator": ("import subprocess\n\n@subprocess.run\ndef f():\n    pass\n", "process"),
    "a default": ("import os\n\ndef f(pid=os.fork()):\n    pass\n", "process"),
    "an alias as a default": (
        "import sys\n\ndef f(s=sys):\n    return s._getframe(0)\n",
        "interpreter-access",
    ),
}


@pytest.mark.parametrize(("snippet", "rule"), READ_AT_LOAD.values(), ids=READ_AT_LOAD)
def test_what_runs_when_the_definitions_load_is_read(snippet, rule):
    """Are a class body, a decorator and a default argument, which run when the checks'
    children load the definitions, read, and an alias made by a default followed?"""
    assert rules(notebook(None, snippet)) == {rule}


def test_the_screen_reads_what_the_loader_loads(tmp_path):
    """Are the statements the screen reads exactly the definitions the checks' children load
    (`loader.notebook_definitions`), test cells and top-level statements left out by both?"""
    nb = notebook(
        None,
        "import subprocess\nsubprocess.run(['ls'])\n\ndef f():\n    return len\n",
        "!ls\nX = 3\nY = torch.float32\nZ = torch.zeros(3)\n",
    )
    test = next(c for c in nb.cells if grade_id(c) == "test_pass3")
    test.source = "import ctypes\n\ndef g():\n    ctypes.CDLL(None)\n"
    path = tmp_path / course.NOTEBOOK
    nbformat.write(nb, path)
    read = [ast.dump(s) for cell in notebook_cells(nb) for s in cell.statements]
    loaded = [ast.dump(s) for s in ast.parse(notebook_definitions(path)).body]
    assert read == loaded
    assert found(nb) == []  # the test cell's ctypes never loads: grading restores that cell


def test_hostile_metadata_does_not_hide_a_cell():
    """Is a cell whose nbgrader metadata is not what nbgrader writes read as the student's?"""
    nb = notebook(None, "import os\n\ndef f():\n    os.fork()\n")
    added = next(c for c in nb.cells if c.source.startswith("import os\n\ndef f"))
    added.metadata["nbgrader"] = {"grade_id": ["setup"]}
    assert rules(nb) == {"process"}
    added.metadata["nbgrader"] = "setup"
    assert rules(nb) == {"process"}


def test_a_cell_that_does_not_parse_is_not_read():
    """Is a syntax error (which loads nothing in the checks either) left alone?"""
    assert found(notebook(None, "def broken(:\n    import ctypes\n")) == []


USES = 15_000
"""One cell of 15,000 uses of two aliases of each other: 75 s in the old screen."""


def test_many_uses_of_aliases_are_read_in_linear_time():
    """Does a cell of 15,000 uses of two aliases that stand for each other read in a few
    seconds of CPU (about 2 s here; the old screen's alias products took 75 s), finding the
    frames it reaches?"""
    body = "".join(f"    a.f{i % 7}(b._getframe)\n" for i in range(USES))
    cell = "import torch as a\nimport sys as b\n\ndef f():\n    a = b\n    b = a\n" + body
    started = time.process_time()
    held = found(notebook(None, cell))
    assert time.process_time() - started < 10
    assert "interpreter-access" in {f.rule for f in held}


def test_aliases_that_feed_each_other_stay_small():
    """Do four aliases built from each other in 20 lines (2.4 GiB and a MemoryError in the
    old screen) read in a few MiB, each held as binding more names than the screen follows?"""
    names = [f"a{i}" for i in range(4)]
    cell = "import torch\n\ndef f():\n" + "".join(f"    {n} = torch\n" for n in names)
    cell += "".join(f"    {n} = {m}.{n}\n" for n in names for m in names)
    tracemalloc.start()
    try:
        held = found(notebook(None, cell))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB"
    assert [f.what for f in held] == [f"binds {n} to more than {MEANINGS} names" for n in names]


def test_code_nested_too_deep_to_read_holds_the_notebook(tmp_path):
    """Is a function nested deeper than Python's parser goes (which the checks' loader
    cannot load either) a reading that could not finish, not a notebook passed unread?"""
    path = tmp_path / course.NOTEBOOK
    deep = "def f(a):\n    return " + "+".join(["a"] * 20_000) + "\n"
    nbformat.write(notebook(None, deep), path)
    assert screen_file(path).unfinished == "its code is nested too deep to read"


def test_the_reading_child_keeps_its_bounds(tmp_path):
    """Does the screen's child report what it found, and stop at its time and memory bounds
    with the reason, so that grading holds the notebook instead of stalling on it?"""
    path = tmp_path / course.NOTEBOOK
    nbformat.write(notebook(None, "import os\n\ndef f():\n    os.fork()\n"), path)
    read = screen_file(path)
    assert [f.rule for f in read.findings] == ["process"] and not read.unfinished
    assert screen_file(path, seconds=0.05).unfinished == "it took more than 0.05 s"
    assert screen_file(path, memory_mib=8).unfinished == "it needed more than 8 MiB"


def test_the_command_prints_what_a_student_reads(tmp_path):
    """Does `python -m learning.workshops.screen` say each finding's line, why it matters
    and what to write instead, and with --json the findings as data?"""
    import subprocess
    import sys

    path = tmp_path / course.NOTEBOOK
    nbformat.write(notebook(None, "import os\n\ndef f():\n    os.fork()\n"), path)
    command = [sys.executable, "-m", "learning.workshops.screen", str(path)]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "line 4: `os.fork()`" in text and "instead: run it in a terminal" in text
    data = json.loads(subprocess.run([*command, "--json"], capture_output=True, check=True).stdout)
    assert [Finding.from_json(f).rule for f in data["findings"]] == ["process"]


def test_nothing_to_hold_says_nothing():
    """Does a file with nothing to hold add no line to what a student reads?"""
    assert report_lines(Screened()) == []
    text = " ".join(report_lines(Screened(unfinished="it took more than 10 s")))
    assert "The screen could not finish reading the file (it took more than 10 s)" in text


def test_a_finding_that_is_not_one_is_refused():
    """Is a report entry with a rule the screen does not have, or fields of the wrong types,
    refused rather than held under a name no reviewer can look up?"""
    with pytest.raises(ValueError, match="no rule"):
        Finding.from_json({"rule": "made-up", "cell": "#1", "line": 1, "what": "x"})
    with pytest.raises(ValueError, match="wrong types"):
        Finding.from_json({"rule": "process", "cell": 1, "line": 1, "what": "x"})


def test_the_threat_model_names_every_rule():
    """Does docs/grading.md's table of the rules the screen keeps give a row to each of its
    rules and to nothing else, and its table of dropped rules name none it still has?"""
    text = "\n".join(doc("grading.md").section("What the source screen reads").lines)
    kept, dropped = text.split("The rules dropped", 1)
    ids = re.compile(r"^\| `([a-z-]+)`", flags=re.M)
    assert sorted(ids.findall(kept)) == sorted(RULES)
    assert ids.findall(dropped) and not set(ids.findall(dropped)) & set(RULES)


def test_the_check_shows_what_grading_would_hold():
    """Does `check` list each line grading would hold, with why and what to write instead,
    after its cases (however they went), and give the same findings in --json?"""
    from learning.workshops.check import Report, format_report
    from learning.workshops.checking.records import CaseResult, Verdict

    passed = [CaseResult("contiguous", Verdict(None, "(5, 7) view: ok"))]
    report = Report("strided_softmax", "strided_softmax.ipynb", "interpreter", "cpu", 1, passed, [])
    finding = Finding("process", "#27", 4, "calls subprocess.run", "subprocess.run(['ls'])", "Mine")
    report.screened = Screened((finding,))
    text = format_report(report, show_hints=True)
    assert text.index("All cases pass.") < text.index("Before you submit")
    assert "  cell #27 (under 'Mine'), line 4: `subprocess.run(['ls'])`" in text
    assert "    instead: run it in a terminal" in text
    assert report.to_json()["screen"]["findings"] == [finding.to_json()]
    report.screened = Screened()
    assert "Before you submit" not in format_report(report, show_hints=True)
