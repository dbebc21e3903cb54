"""What a student reads about hidden and timing cells: what failed and why, and nothing more.

A failed hidden cell says which kinds of view failed (a transposed slice in float16, a
broadcast row, ...), the hint, and one example that fails the same way but is freshly drawn
for this message, so that reading feedback never reproduces the hidden suite. The timing
cell says the points and the ratios, never the shapes. `StudentFeedback`, a preprocessor of
`nbgrader generate_feedback`, cuts every hidden region out of the feedback's sources.
"""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.hidden_regions import split_hidden_tests
from grader.grading.restore import grade_id
from learning.workshops.checking.layouts import FILL, LAYOUT

# learning.workshops.checking's cases, faults and hints import torch and triton (about 1.4 s):
# they are imported where used, so that loading nbgrader_config.py (every nbgrader command,
# which names StudentFeedback) does not import them.
if TYPE_CHECKING:
    from learning.workshops.checking.cases import Case, CaseResult

BAD_INPUT_WORDS = {
    "3-d": "a 3-D tensor",
    "int-dtype": "an integer tensor",
    "warps-6": "num_warps=6",
    "cpu-input": "a CPU tensor on a GPU machine",
    "shape-mismatch": "y and dy of different shapes",
}
EXAMPLES_PER_KIND = 2
MOST_KINDS = 3


def kind_of(case: Case) -> str:
    """The kind of input a case is, in words, without its sizes."""
    what, special = _kind_parts(case)
    return what if case.bad_input else ", ".join([what, case.dtype, *special])


def _kind_parts(case: Case) -> tuple[str, list[str]]:
    """(what the input is, what is special about it), the words of `kind_of`."""
    if case.bad_input:
        return f"an input that must be refused ({BAD_INPUT_WORDS.get(case.bad_input, 'bad')})", []
    special = []
    if case.rows == 0:
        special.append("with zero rows")
    elif case.cols > 256:
        special.append("with wide rows")
    if FILL[case.fill].words:
        special.append(FILL[case.fill].words)
    if case.repeat:
        special.append("called twice with one shape")
    if case.grad_layout is not None:
        special.append(f"dy {LAYOUT[case.grad_layout].kind}")
    return LAYOUT[case.layout].kind, special


def kinds_summary(cases: list[Case]) -> list[str]:
    """One line per view layout among `cases`: its dtypes and what was special."""
    layouts: dict[str, tuple[dict, dict]] = {}
    for case in cases:
        layout, extras = _kind_parts(case)
        dtypes, special = layouts.setdefault(layout, ({}, {}))
        if not case.bad_input:
            dtypes[case.dtype] = None
        special.update(dict.fromkeys(extras))
    return [
        "  - " + ", ".join([layout, *dtypes, *special])
        for layout, (dtypes, special) in layouts.items()
    ]


def view_key(layout: str, rows: int, cols: int) -> tuple:
    """What a message shows of a view: its shape and strides (two layouts may share them)."""
    return rows, cols, LAYOUT[layout].strides(rows, cols)


def fresh_examples(failed: list[Case], taken: set[tuple], rng: random.Random) -> list[Case]:
    """Up to `EXAMPLES_PER_KIND` new cases for each kind in `failed` (at most `MOST_KINDS`
    kinds): the same layout, dtype, fill and width class, views that none in `taken` has (as
    `view_key`)."""
    kinds: dict[str, Case] = {}
    for case in failed:
        kinds.setdefault(kind_of(case), case)
    examples = []
    for case in list(kinds.values())[:MOST_KINDS]:
        if case.bad_input:
            examples.append(replace(case, name="example"))
            continue
        made = 0
        while made < EXAMPLES_PER_KIND:
            rows = 0 if case.rows == 0 else rng.randint(1, 40)
            cols = _width_like(case.cols, rng)
            key = view_key(case.layout, rows, cols)
            if key not in taken:
                taken.add(key)
                name = f"example-{case.layout}" + (f"-{made + 1}" if made else "")
                examples.append(replace(case, name=name, rows=rows, cols=cols))
                made += 1
    return examples


def _width_like(cols: int, rng: random.Random) -> int:
    """A width of the same class as `cols`: wide or not, a power of two or not."""
    low, high = (257, 2048) if cols > 256 else (1, 256)
    power = cols & (cols - 1) == 0
    while True:
        width = rng.randint(low, high)
        if (width & (width - 1) == 0) == power:
            return width


def hidden_failure(
    op: str,
    cases: list[Case],
    results: list[CaseResult],
    run_examples: Callable[[list[Case]], list[CaseResult]],
    others: Iterable[Case] = (),
) -> str:
    """What a failed hidden cell tells the student: how many cases failed, the kinds of view,
    the hints, and one freshly drawn example that fails the same way (run through
    `run_examples`), whose view is none of `cases` nor `others` (the student's hidden cases
    of the other ops). No hidden case's name, size or values."""
    from learning.workshops.checking.faults import INTERNAL_ERROR
    from learning.workshops.checking.hint_rules import diagnose, not_attempted
    from learning.workshops.checking.hints import MESSAGES, HintId

    by_name = {case.name: case for case in cases}
    own = [r for r in results if r.failure != INTERNAL_ERROR]
    failed = [r for r in own if not r.passed]
    if not_attempted(own):  # an optional exercise left as its stub: one line, no examples
        return f"{op}: not attempted. {MESSAGES[HintId.NOT_ATTEMPTED]}"
    lines = [
        f"{op}: {len(failed)} of {len(own)} hidden cases fail. The kinds of input that failed:"
    ]
    lines += kinds_summary([by_name[r.name] for r in failed if r.name in by_name])
    lines += [f"Hint [{hint.id}]: {hint.message}" for hint in diagnose(own)]
    taken = {view_key(c.layout, c.rows, c.cols) for c in (*cases, *others) if not c.bad_input}
    examples = fresh_examples([by_name[r.name] for r in failed if r.name in by_name], taken, _rng())
    example = _same_failure(failed, by_name, run_examples(examples) if examples else [])
    if example is not None:
        lines.append("An example that fails the same way, drawn for this message, not hidden:")
        drawn = next(e for e in examples if e.name == example.name)
        lines.append(f"  FAIL {example_line(drawn, example)}")
    elif examples:
        lines.append(
            "Freshly drawn inputs of the same kinds pass: the failure depends on the hidden "
            "sizes. Try more widths (odd, wide) and row counts."
        )
    return "\n".join(lines)


FAILURE_WORDS = {
    "exception": "your function raised an exception",
    "memory": "your function ran out of memory",
    "crash": "the process running your code died",
    "timeout": "your function did not finish in time",
    "not-a-tensor": "the result is not a tensor",
    "shape": "the output has the wrong shape",
    "dtype": "the output's dtype is not the input's",
    "device": "the output is not on the input's device",
    "layout": "the output is not a new contiguous tensor",
    "input-written": "the input's storage was written",
    "no-kernel": "no Triton kernel ran",
    "not-from-kernel": "the kernel launches, replayed on new values, did not give the output",
    "held": "held for review: the grader could not replay the kernel launches",
    "copy": "torch read the input outside your kernel",
    "empty-rows": "a kernel was launched for zero rows",
    "nonfinite": "NaN or inf where the softmax is finite",
    "sum-low": "rows sum to less than one",
    "permuted": "the right values in the wrong places",
    "ambiguous": "the expected values in other places",
    "values": "wrong values",
    "strides-ignored": "wrong values, loaded where a contiguous tensor has them",
    "stale-output": "a repeated call gave an earlier result",
    "not-raised": "the bad input was accepted",
    "unclear-error": "the bad input was refused without naming the problem",
    "store-mask": "lanes past the row's end loaded or stored",
    "row-mask": "lanes of rows past the last loaded or stored",
    "ownership": "an output element was written twice or not at all",
    "overlap": "two programs wrote the same output elements",
    "out-of-bounds": "a load left the view",
    "aliasing": "a view whose elements share addresses was accepted",
    "write-outside-view": "storage outside the view changed",
    "read-after-write": "a program read what another one writes",
    "not-in-place": "the call did not return x",
    "row-sum": "dx equals y * dy: the row sum is missing",
    "not-attempted": "the optional exercise is still its stub",
}
"""What a failed example shows, by failure: words of the grader's own, never the child's."""


def example_line(case: Case, result: CaseResult) -> str:
    """A failed example as the student reads it, from the case the grader drew and the
    failure's kind alone: no text that the student's process wrote reaches a hidden cell."""
    what = FAILURE_WORDS.get(str(result.failure), "it failed")
    if case.bad_input:
        return f"{case.name}: {BAD_INPUT_WORDS.get(case.bad_input, 'a bad input')}: {what}"
    chosen = LAYOUT[case.layout]
    strides, offset = chosen.strides(case.rows, case.cols), chosen.offset(case.rows, case.cols)
    view = f"{case.rows}x{case.cols} view, strides {strides}, storage offset {offset}"
    return f"{case.name}: {view}, {case.dtype}: {what}"


def _rng() -> random.Random:
    """A generator no grading can reproduce: each message draws its own example."""
    return random.Random(secrets.randbits(64))


def _same_failure(
    failed: list[CaseResult], by_name: dict[str, Case], examples: list[CaseResult]
) -> CaseResult | None:
    """The first failing example whose failure matches a hidden failure of its kind, else
    the first failing example."""
    from learning.workshops.checking.faults import INTERNAL_ERROR

    seen = {(kind_of(by_name[r.name]), r.failure) for r in failed if r.name in by_name}
    failing = [r for r in examples if not r.passed and r.failure != INTERNAL_ERROR]
    for result in failing:
        if any(result.failure == failure for _, failure in seen):
            return result
    return failing[0] if failing else None


def timing_summary(record: dict) -> str:
    """The timing cell's result for the student: points and ratios, no shapes."""
    points, most = record.get("points", 0.0), record.get("max_points", 0.0)
    if record.get("error"):
        return f"timing: {points:g} of {most:g} points: {record['error']}"
    shapes = record.get("shapes", [])
    ratios = ", ".join(f"{s['ratio']:.2f}x" for s in shapes if not s.get("reason"))
    lines = [f"timing: {points:g} of {most:g} points."]
    if ratios:
        lines.append(
            f"Your kernel's median time over the reference's, on {len(shapes)} hidden "
            f"transposed float32 shapes: {ratios}."
        )
    reasons = sorted({s["reason"] for s in shapes if s.get("reason")})
    lines += [f"A shape earned nothing: {reason}" for reason in reasons]
    return "\n".join(lines)


HIDDEN_NOTE = "# Hidden tests ran here when your notebook was graded; the output below says how."
EXTRA_CREDIT_NOTE = (
    "# Extra credit: this optional cell counts 0 points of the maximum; passing it adds "
    "{points} beyond it (its score reads 'x / 0')."
)
_GRADER_LINE = re.compile(r"\bgrader[./]|BEGIN HIDDEN|END HIDDEN|/course/")


class StudentFeedback(NbGraderPreprocessor):
    """For `nbgrader generate_feedback`: every hidden region is cut out of the sources (a
    note says where hidden tests ran), and any output line naming the grader's modules or
    paths is left out."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type == "code":
            visible, region = split_hidden_tests(cell.source)
            if region is not None:
                cell.source = visible.rstrip() + "\n\n" + HIDDEN_NOTE
            extra = self.config.AwardExtraCredit.get("points", {}).get(grade_id(cell))
            if extra:  # nbgrader shows such a cell's score as "1.0 / 0.0"
                cell.source += "\n" + EXTRA_CREDIT_NOTE.format(points=f"{extra:g}")
            for output in cell.get("outputs", []):
                _scrub(output)
        return cell, resources


def _scrub(output: NotebookNode) -> None:
    """Drop the lines of an output that name the grader (a traceback's frames, say)."""

    def keep(text: str) -> str:
        return "\n".join(line for line in text.split("\n") if not _GRADER_LINE.search(line))

    if "text" in output:
        output["text"] = keep("".join(output["text"]))
    if "traceback" in output:
        output["traceback"] = [
            line for line in output["traceback"] if not _GRADER_LINE.search(line)
        ]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") and isinstance(value, str):
            output["data"][kind] = keep(value)
