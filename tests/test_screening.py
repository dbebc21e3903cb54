"""What the source screen's flags cost when a submission is graded (grader/grading/screening.py)."""

from __future__ import annotations

import nbformat
from nbgrader.utils import determine_grade

from grader.course import ASSIGNMENT, NOTEBOOK, REPO, solved_notebook
from grader.grading.course_cells import course_cells_of
from grader.grading.screen import Flag
from grader.grading.screening import cells_lost, cost, functions_tested, screen_submission
from grader.zoo import COPY_FIRST

SOURCE = REPO / "source" / ASSIGNMENT / NOTEBOOK
COURSE = course_cells_of(nbformat.read(SOURCE, as_version=4))


def flag(rule: str, functions: tuple[str, ...] = ()) -> Flag:
    return Flag(rule, "pass3", 3, f"a line that breaks {rule}", functions)


def test_an_instruction_flag_costs_the_cells_of_the_functions_it_reaches():
    """Does torch computing in strided_softmax cost the pass-3 cells and the timing, and
    nothing that tests another function?"""
    lost = cells_lost([flag("torch-compute", ("strided_softmax",))], COURSE)
    assert set(lost) == {"test_pass3", "hidden_pass3", "hidden_timing"}
    assert "breaks torch-compute" in lost["hidden_pass3"]


def test_a_tampering_flag_costs_every_test_cell():
    """Does a flag for tampering cost every test cell, the address table's included?"""
    lost = cells_lost([flag("checker-module")], COURSE)
    tests = {c.grade_id for c in COURSE if c.grade and c.cell_type == "code" and not c.solution}
    assert set(lost) == tests and "hidden_addresses" in lost


def test_the_copy_first_shortcut_loses_its_wrapper_cells_and_is_still_timed():
    """Is the zoo's copy-first shortcut flagged, costing its wrapper's correctness cells but
    not the timing, which prices the copy (the workshop's own variant)?"""
    flags = screen_submission(solved_notebook(REPO, COPY_FIRST), SOURCE)
    assert {f.rule for f in flags} == {"tensor-copy"}
    assert set(cells_lost(flags, COURSE)) == {"test_pass3", "hidden_pass3"}


def test_each_test_cell_names_the_function_it_runs():
    """Does each course test cell name the student's function its checks call?"""
    by_id = {c.grade_id: functions_tested(c) for c in COURSE if c.grade and not c.solution}
    assert by_id["test_pass1"] == by_id["hidden_pass1"] == {"copy_rows"}
    assert by_id["hidden_pass2"] == {"launch_softmax"}
    assert by_id["hidden_timing"] == {"strided_softmax"}
    assert by_id["hidden_addresses"] == set()


def test_a_flagged_timing_cell_scores_zero_though_its_points_are_a_value():
    """nbgrader scores a cell by its first error or result value: does a flagged timing cell,
    whose points come as a result value, score 0?"""
    cell = nbformat.v4.new_code_cell("timing_points(max_points=2)")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "hidden_timing", "points": 2}
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="timing: 2 of 2 points.\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "2.0"}, execution_count=1),
    ]
    assert determine_grade(cell)[0] == 2.0
    cost(cell, "cell pass3, line 3: calls torch.softmax")
    assert determine_grade(cell)[0] == 0
    assert "Not scored" in cell.outputs[0].evalue
