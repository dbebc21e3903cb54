"""What students read about hidden and timing cells: kinds, hints, a fresh example, no suite."""

from __future__ import annotations

import random
import re

import nbformat

from grader.grading.feedback import (
    EXTRA_CREDIT_NOTE,
    HIDDEN_NOTE,
    StudentFeedback,
    fresh_examples,
    hidden_failure,
    kind_of,
    timing_summary,
    view_key,
)
from learning.workshops.checking.cases import Case, CaseResult, Failure, Verdict

CASES = [
    Case("hidden-contiguous-0", "contiguous", 9, 64),
    Case("hidden-transposed-slice-1", "transposed-slice", 33, 17, dtype="float16"),
    Case("hidden-wide", "transpose", 3, 1234),
    Case("hidden-reject-3-d", bad_input="3-d"),
]


def _result(case: Case, passed: bool, failure: str | None = None) -> CaseResult:
    verdict = Verdict(None if passed else Failure(failure), f"{case.rows}x{case.cols}")
    return CaseResult(case.name, verdict)


def test_kinds_are_words_without_sizes():
    """Does a case's kind name its view, dtype and width class, and never its sizes?"""
    assert kind_of(CASES[1]) == "a transposed slice, float16"
    assert kind_of(CASES[2]) == "a transpose, float32, with wide rows"
    assert kind_of(Case("x", "row-broadcast", 0, 5, fill="large")) == (
        "a broadcast row (stride 0 between rows), float32, with zero rows, values near ±1e4"
    )
    assert "3-D" in kind_of(CASES[3])


def test_fresh_examples_keep_the_kind_and_avoid_every_hidden_size():
    """Is each example of a failing kind new: same layout, dtype and width class, a size no
    hidden case has?"""
    taken = {view_key(c.layout, c.rows, c.cols) for c in CASES if not c.bad_input}
    for seed in range(20):
        examples = fresh_examples(CASES[1:3], set(taken), random.Random(seed))
        assert len(examples) == 4
        for example in examples:
            assert view_key(example.layout, example.rows, example.cols) not in taken
            like = CASES[1] if example.layout == "transposed-slice" else CASES[2]
            assert example.dtype == like.dtype and (example.cols > 256) == (like.cols > 256)
            assert (example.cols & (example.cols - 1) == 0) == (like.cols & (like.cols - 1) == 0)


def test_a_failed_hidden_cell_says_kinds_hint_and_a_fresh_failing_example():
    """Does the message give the count, the kinds, the hint and a freshly drawn example that
    fails the same way, and no hidden case's name or size?"""
    results = [_result(CASES[0], True)] + [_result(c, False, "dtype") for c in CASES[1:3]]
    results.append(_result(CASES[3], True))
    ran = []

    def run_examples(examples):
        ran.extend(examples)
        return [_result(e, False, "dtype") for e in examples]

    text = hidden_failure("copy_rows", CASES, results, run_examples)
    assert text.startswith("copy_rows: 2 of 4 hidden cases fail.")
    assert "\n  - a transposed slice, float16\n  - a transpose, float32, with wide rows\n" in text
    assert "Hint [dtype]" in text
    assert f"FAIL {ran[0].name}: {ran[0].rows}x{ran[0].cols}" in text
    for case in CASES:  # a size as a whole word: a fresh 5x71 is not the hidden 5x7
        assert case.name not in text and not re.search(rf"\b{case.rows}x{case.cols}\b", text)


def test_when_fresh_examples_pass_the_message_says_so():
    """When no freshly drawn input fails, does the message say the failure depends on the
    hidden sizes rather than show a passing example?"""
    results = [_result(CASES[1], False, "nonfinite")]

    def run_examples(examples):
        return [_result(e, True) for e in examples]

    text = hidden_failure("softmax_kernel", CASES, results, run_examples)
    assert "FAIL" not in text and "depends on the hidden sizes" in text


def test_timing_summary_gives_points_and_ratios_never_shapes():
    """Does the timing line say the points and ratios, and no hidden shape?"""
    record = {
        "points": 1.5,
        "max_points": 2,
        "shapes": [
            {"rows": 4096, "cols": 3072, "ratio": 1.24, "reason": ""},
            {"rows": 8192, "cols": 1536, "ratio": 9.0, "reason": "wrong output after timing"},
        ],
    }
    text = timing_summary(record)
    assert "1.5 of 2 points" in text and "1.24x" in text and "wrong output after timing" in text
    assert "4096" not in text and "8192" not in text and "3072" not in text
    assert "no GPU" in timing_summary({"points": 0.0, "max_points": 2, "error": "no GPU"})


def test_feedback_cuts_hidden_regions_and_grader_lines():
    """Does the feedback preprocessor cut each hidden region, markers included, and every
    output line that names the grader?"""
    source = (
        "smoke()\n### BEGIN HIDDEN TESTS\nfrom grader.grading.hidden import x\nx()\n"
        "### END HIDDEN TESTS"
    )
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [
        nbformat.v4.new_output(
            "stream", name="stdout", text="ok\n  File grader/grading/hidden.py\nend"
        ),
        nbformat.v4.new_output(
            "error", ename="E", evalue="v", traceback=["top", "/course/grader/x.py line 3"]
        ),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb, _ = StudentFeedback().preprocess(nb, {})
    out = nb.cells[0]
    assert out.source == "smoke()\n\n" + HIDDEN_NOTE
    assert out.outputs[0]["text"] == "ok\nend"
    assert out.outputs[1]["traceback"] == ["top"]


def test_an_extra_credit_cell_says_what_its_score_means():
    """Does a configured extra-credit cell's feedback say it counts 0 of the maximum and adds
    its points beyond it (nbgrader shows its score as '1.0 / 0.0'), and no other cell?"""
    from traitlets.config import Config

    cells = []
    for grade_id in ("hidden_inplace", "hidden_pass3"):
        cell = nbformat.v4.new_code_cell("check()")
        cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "points": 0}
        cells.append(cell)
    config = Config()
    config.AwardExtraCredit.points = {"hidden_inplace": 1.0}
    nb, _ = StudentFeedback(config=config).preprocess(nbformat.v4.new_notebook(cells=cells), {})
    assert nb.cells[0].source.endswith(EXTRA_CREDIT_NOTE.format(points="1"))
    assert "adds 1 beyond it" in nb.cells[0].source
    assert nb.cells[1].source == "check()"


def test_every_hidden_case_of_every_op_has_words():
    """Can every hidden case of every op be told in words (an overlapping view, a dy layout,
    a mismatched pair), so a failed cell's feedback never stops at a kind it cannot name?"""
    from grader.grading.hidden import Draw, hidden_cases
    from learning.workshops.checking.cases import OPS

    for op in OPS:
        for case in hidden_cases(op, Draw("a secret", "a student")):
            assert kind_of(case)
    backward = Case("y", "transpose", 4, 5, grad_layout="slice")
    assert kind_of(backward) == (
        "a transpose, float32, dy a slice with a shifted pointer and column stride 2"
    )


def test_the_example_is_no_hidden_view_of_any_op():
    """With every view of its kind but one taken by the student's hidden cases of other ops
    (the in-place and backward cases come from the same draw), is the example that one?"""
    failing = Case("hidden-contiguous-0", "contiguous", 9, 64)
    widths = [2**k for k in range(9)]  # the width class of 64: powers of two up to 256
    others = [Case("other", "contiguous", r, w) for r in range(1, 41) for w in widths if w != 8]
    ran = []

    def run_examples(examples):
        ran.extend(examples)
        return [_result(e, False, "dtype") for e in examples]

    results = [_result(failing, False, "dtype")]
    hidden_failure("softmax_kernel", [failing], results, run_examples, others)
    assert ran and {e.cols for e in ran} == {8}
