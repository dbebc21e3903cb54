"""The trusted side: hidden regions read, kernel output disarmed, cases drawn per submission."""

from __future__ import annotations

import nbformat
from sandboxing import needs_sandbox

from grader.grading import ahead as checks_ahead
from grader.grading import trusted
from grader.grading.hidden import Draw, hidden_cases, hidden_views, run_function_check
from grader.grading.hidden_regions import hidden_checks, hidden_region
from grader.zoo.bug import REFERENCE
from learning.workshops.checking.isolation import Session

REGION = """# smoke test first
### BEGIN HIDDEN TESTS
from grader.grading.hidden import expect_hidden

expect_hidden("strided_softmax")
timing_points(max_points=2)
### END HIDDEN TESTS
"""


def test_hidden_checks_are_read_from_the_region():
    """Does the trusted side find which checks a hidden region calls, with their arguments?"""
    region = hidden_region(REGION)
    assert hidden_checks(region) == [
        ("expect_hidden", ["strided_softmax"], {}),
        ("timing_points", [], {"max_points": 2}),
    ]
    assert hidden_region("print('no hidden tests')") is None


def test_a_smoke_tests_output_in_a_hidden_cell_cannot_score():
    """Are an error, stderr and a result value of a hidden cell's smoke test disarmed, while
    what it printed stays for the student to read?"""
    new = nbformat.v4.new_output
    outputs = [
        new("stream", name="stdout", text="strided_softmax: 1 public case passes.\n"),
        new("stream", name="stderr", text="a warning\n"),
        new("execute_result", data={"text/plain": "2.0"}),
        new("error", ename="AssertionError", evalue="smoke failed", traceback=[]),
    ]
    kept = trusted.as_notes(outputs)
    assert [o.output_type for o in kept] == ["stream", "stream"]
    assert all(o.name == "stdout" for o in kept)
    assert kept[1].text == trusted.SMOKE_FAILED + "\n"


def test_no_text_of_the_childs_reaches_a_hidden_cell_from_its_smoke_test():
    """Is a smoke test's error (its class name and message, both the child's to choose: here
    a list of the student's hidden cases) told in the grader's words alone?"""
    new = nbformat.v4.new_output
    leak = "hidden-transpose-0 hidden-wide 3x1234"
    error = new("error", ename=f"Leak_{leak}", evalue=f"seen: {leak}", traceback=[leak])
    kept = trusted.as_notes([error])
    assert [o.text for o in kept] == [trusted.SMOKE_FAILED + "\n"]
    assert all(leak not in str(o) for o in kept)


def test_each_submission_gets_fresh_cases_of_the_same_kinds():
    """Do two students, or one student's two submissions, meet the same kinds of view with
    other shapes and values, while one grading's draw repeats exactly?"""
    draws = [Draw(7, "ada", "2026-11-30T10:00"), Draw(7, "bob", "2026-11-30T10:00")]
    draws.append(Draw(7, "ada", "2026-11-30T11:00"))
    suites = [hidden_cases("strided_softmax", d) for d in draws]
    kinds = [[(c.layout, c.bad_input, c.fill == "large") for c in s] for s in suites]
    assert kinds[0] == kinds[1] == kinds[2]
    shapes = [[(c.rows, c.cols, c.dtype) for c in s] for s in suites]
    assert shapes[0] != shapes[1] and shapes[0] != shapes[2]
    assert len({d.seed for d in draws}) == 3
    assert hidden_cases("strided_softmax", draws[0]) == suites[0]
    views = [hidden_views(d) for d in draws[:2]]
    assert [tuple(v.shape) for v in views[0]] != [tuple(v.shape) for v in views[1]]


@needs_sandbox
def test_function_checks_run_the_student_sandboxed(tmp_path):
    """Is a plain function's hidden check answered from a sandboxed child, right or wrong?"""
    from grader.isolation.cgroups import sandbox_cgroups
    from grader.isolation.sandbox import inside, sandboxed
    from grader.isolation.scratch import scratch

    with scratch() as work, sandbox_cgroups() as cgroups:
        impl = work / "impl.py"
        impl.write_text(REFERENCE.read_text().replace("start + row * row_stride", "row"))
        seen = inside(work, impl)

        def wrap(argv):
            return sandboxed(argv, work=work, cgroups=cgroups)

        with Session(seen, wrap) as session:
            assert run_function_check("worksheet", session, Draw(7, "ada"))[0]
            passed, said = run_function_check("address_table", session, Draw(7, "ada"))
    assert not passed and said.startswith("address_table is wrong for a")


def test_sidecars_start_afresh_with_nothing_from_the_submission(tmp_path):
    """Are a submitted hints file (a forged hidden pass, say) and an earlier timing record
    gone when grading starts, so that every entry is this side's own?"""
    import json

    forged = {"hidden:strided_softmax": {"passed": True, "status": "passed", "failed": []}}
    (tmp_path / "i1_hints.json").write_text(json.dumps({"tests": forged}))
    (tmp_path / "i1_timing.json").write_text('{"points": 2}')
    trusted.restart_sidecars(tmp_path)
    assert not (tmp_path / "i1_timing.json").exists()
    assert json.loads((tmp_path / "i1_hints.json").read_text())["tests"] == {}


def test_what_the_sandbox_cuts_out_is_what_gets_graded():
    """However the markers are written, is every line cut from the sandboxed cell a line the
    trusted side grades (so no hidden check can go missing between the two)?"""
    from grader.grading.hidden_regions import strip_hidden_tests

    source = 'x = 1\n# BEGIN HIDDEN TESTS\nexpect_hidden("copy_rows")\n# END HIDDEN TESTS\ny = 2'
    assert strip_hidden_tests(source) == "x = 1\ny = 2"
    assert hidden_checks(hidden_region(source)) == [("expect_hidden", ["copy_rows"], {})]


@needs_sandbox
def test_checks_shared_between_two_children_run_as_in_one():
    """With the hidden checks shared out between two sandboxed children, does every check run
    ahead, with the same verdicts as in one child, for a submission with a bug?"""
    from grader.course import ASSIGNMENT, NOTEBOOK, REPO
    from grader.edits import apply
    from grader.zoo import BUGS

    bug = next(b for b in BUGS if b.name == "ignores-column-stride")
    nb = nbformat.read(REPO / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    optional = {"hidden_inplace", "hidden_backward"}  # fewer checks, the same sharing
    nb.cells = [
        c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in optional
    ]
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = apply(cell.source, bug.edits, skip_absent=True)
    regions = [hidden_region(c.source) for c in nb.cells if c.cell_type == "code"]
    checks = [check for region in regions if region for check in hidden_checks(region)]
    plan = [
        (checks_ahead.RUN_AHEAD[name], (args[0],))
        for name, args, _ in checks
        if name in checks_ahead.RUN_AHEAD
    ]
    verdicts, lanes = {}, {}
    for children in (1, 2):
        ahead = checks_ahead.ChecksAhead(nb, Draw("a secret", "ada"), plan, children)
        try:
            runner = ahead.runner()
            lanes[children] = len(ahead._lanes)
            verdicts[children] = {
                key: [(r.name, r.passed) for r in run.results]
                if hasattr(run, "results")
                else run[0]
                for key, run in runner.done.items()
            }
            assert all(ran_ahead for _, ran_ahead in runner.took.values())
        finally:
            ahead.close()
    assert lanes == {1: 1, 2: 2}
    assert verdicts[1] == verdicts[2]
    assert set(verdicts[2]) == {
        "address_table",
        "copy_rows",
        "softmax_kernel",
        "strided_softmax",
    }
    assert not all(passed for _, passed in verdicts[2]["strided_softmax"])
    assert verdicts[2]["address_table"] is True


def test_children_follow_the_cores():
    """One child per 4 cores shares a submission's checks, at least one and at most three."""
    cores = (1, 2, 4, 8, 12, 16, 128)
    assert [checks_ahead.default_children(c) for c in cores] == [1, 1, 1, 2, 3, 3, 3]
