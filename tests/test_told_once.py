"""One error raised by every case is told once, with the line of the student's code it came
from: in `check`'s report, in a test cell's message, and as the exception hint."""

from __future__ import annotations

from pathlib import Path

from grader.zoo import BUGS, write_bug
from learning.workshops.check import Report, format_report, run_check
from learning.workshops.checking.hint_rules import diagnose
from learning.workshops.checking.hints import HintId
from learning.workshops.checking.records import CaseResult, Failure, Verdict
from learning.workshops.notebook.testing import failure_message

TYPO = (
    "raised AttributeError: module 'triton.language' has no attribute 'maxx' "
    "(impl.py line 12: `x = x - tl.maxx(x, axis=0)`)"
)


def raised(name: str, view: str, text: str = TYPO) -> CaseResult:
    return CaseResult(name, Verdict(Failure.EXCEPTION, f"{view}: {text}"))


RESULTS = [
    raised("contiguous", "(5, 7) view"),
    CaseResult("zero-rows", Verdict(None, "(0, 7) view: ok")),
    raised("transpose", "(7, 5) view"),
    raised("slice", "(6, 9) view"),
    raised("reject-3-d", "(2, 3, 4)", "raised KeyError: 'BLOCK'"),
]


def test_the_report_tells_one_error_once():
    """Does `check` print an error that several cases raised once, in full, and the other
    cases that raised it on one line, while another error keeps its own line?"""
    report = Report("strided_softmax", "impl.py", "interpreter", "cpu", 1, RESULTS, [])
    text = format_report(report, show_hints=False)
    assert text.count("has no attribute 'maxx'") == 1
    assert "  FAIL  2 more cases raised the same error: transpose, slice" in text
    assert "raised KeyError: 'BLOCK'" in text and "zero-rows" in text


def test_a_test_cell_tells_one_error_once():
    """Does a failed test cell's message tell the error once too?"""
    text = failure_message(RESULTS, "strided_softmax, public cases")
    assert text.count("has no attribute 'maxx'") == 1
    assert "  FAIL 2 more raised the same error: transpose, slice" in text


def test_one_error_everywhere_is_the_exception_hint_told_once():
    """Is one error raised by every failing case the exception hint, its evidence the
    first case and the names of the others?"""
    [hint] = diagnose(RESULTS[:4])
    assert hint.id == HintId.EXCEPTION
    assert hint.evidence == (RESULTS[0].detail, "the same error in 2 more cases: transpose, slice")


def test_a_misspelled_tl_function_names_the_students_line(tmp_path):
    """Does `check --hint` on a kernel that calls tl.maxx say the error once, with the file,
    line and source of the call, give the exception hint, and not shrink a view?"""
    bug = next(b for b in BUGS if b.name == "misspelled-tl-function")
    impl: Path = write_bug(bug, tmp_path)
    line = next(n for n, text in enumerate(impl.read_text().splitlines(), 1) if "tl.maxx" in text)
    report = run_check("strided_softmax", impl, shrink_failures=True)
    assert [h.id for h in report.hints] == ["exception"]
    text = format_report(report, show_hints=True)
    where = f"({impl.name} line {line}: `x = x - tl.maxx(x, axis=0)`)"
    assert text.count(where) == 2, text  # the first failing case, and the hint's evidence
    assert "more cases raised the same error" in text
    assert report.smallest is None
