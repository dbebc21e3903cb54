"""The cross-process records: one definition each, whose loader refuses a bad file with its
reason, and the timing policy (bands, labels, the cell's points) defined once."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import nbformat
import pytest
from test_cohort import FAKE_TIMING

import grader.grading.gpu_timing as gpu_timing
from grader import cohort, collected, recheck
from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.grading import grading_log, runner, timing_record
from grader.grading.timing_record import BANDS, MAX_POINTS, SIDECAR, band
from learning.workshops.checking import sidecars
from learning.workshops.checking.faults import INTERNAL_ERROR
from learning.workshops.checking.sidecars import (
    HINTS_SCHEMA,
    HINTS_SIDECAR,
    RecordError,
    RecordMissing,
)
from learning.workshops.measuring import results
from learning.workshops.notebook.testing import expect_cases, record_status

# -- the hint sidecar --------------------------------------------------------------------


def test_hint_sidecar_written_by_a_test_cell_loads_as_typed_outcomes(tmp_path, monkeypatch):
    """Does what a test cell writes while autograding load back as the outcomes it wrote?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.chdir(tmp_path)
    record_status("public:copy_rows", "failed", ["transpose"], ["padding"])
    record_status("hidden:timing", INTERNAL_ERROR, internal_errors=["KeyError at x.py:1"])
    record = sidecars.load_hints(tmp_path / HINTS_SIDECAR)
    assert record.tests == {
        "public:copy_rows": sidecars.Outcome("failed", ("transpose",), ("padding",)),
        "hidden:timing": sidecars.Outcome(INTERNAL_ERROR, internal_errors=("KeyError at x.py:1",)),
    }
    assert cohort.load_internal_errors(tmp_path / HINTS_SIDECAR) == {"hidden:timing"}
    assert cohort.load_hints(tmp_path / HINTS_SIDECAR)["public:copy_rows"] == ["padding"]


def test_the_cohort_reads_the_key_a_test_cell_writes():
    """Is the key the cohort reads from a cell's source the one `expect_cases` records?"""
    source = 'expect_cases(strided_softmax, "strided_softmax", ["transpose", "contiguous"])'
    assert cohort.sidecar_keys(source) == (
        sidecars.public_key("strided_softmax", {"contiguous", "transpose"}),
    )
    assert "public_key(op, wanted)" in inspect.getsource(expect_cases)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "not JSON (Expecting property name enclosed in double quotes, line 1)"),
        ("[]", "holds a JSON list, not an object"),
        ('{"schema": "i1-hints/0", "tests": {}}', "schema is 'i1-hints/0', expected 'i1-hints/1'"),
        ('{"schema": "i1-hints/1", "tests": []}', "tests is [], not an object of test entries"),
        ('{"schema": "i1-hints/1", "tests": {"t": 3}}', "test 't' is 3, not an object"),
        (
            '{"schema": "i1-hints/1", "tests": {"t": {"status": "ok"}}}',
            "test 't' has status 'ok', not one of ('passed', 'failed', 'internal-error')",
        ),
        (
            '{"schema": "i1-hints/1", "tests": {"t": {"status": "failed", "hints": [3]}}}',
            "test 't': hints is [3], not a list of strings",
        ),
        (
            '{"schema": "i1-hints/1", "tests": {"t": {"status": "failed", "passed": true}}}',
            "test 't' says passed True, status failed",
        ),
    ],
)
def test_a_bad_hint_sidecar_is_refused_with_its_reason(tmp_path, text, reason):
    """Does each kind of bad hint sidecar raise RecordError naming the file and the fault?"""
    path = tmp_path / HINTS_SIDECAR
    path.write_text(text)
    with pytest.raises(RecordError) as info:
        sidecars.load_hints(path)
    assert info.value.path == path and info.value.reason == reason
    assert str(info.value) == f"{path}: {reason}"


def test_a_missing_sidecar_is_missing_not_bad(tmp_path):
    """Is an absent file RecordMissing (the writer never ran), a RecordError like the rest?"""
    with pytest.raises(RecordMissing, match="no such file"):
        sidecars.load_hints(tmp_path / HINTS_SIDECAR)
    with pytest.raises(RecordMissing):
        timing_record.load(tmp_path / SIDECAR)


# -- the timing sidecar ------------------------------------------------------------------


def _timing(tmp_path: Path, **changes) -> Path:
    path = tmp_path / SIDECAR
    path.write_text(json.dumps({**FAKE_TIMING, **changes}))
    return path


def test_timing_sidecar_loads_typed(tmp_path):
    """Does a sidecar shaped like grader.grading.gpu_timing's load with its numbers and shapes?"""
    record = timing_record.load(_timing(tmp_path))
    assert (record.points, record.max_points, record.device) == (1.5, 2, "NVIDIA H200")
    assert [s.shape for s in record.shapes] == ["4096x4096", "65536x512"]
    assert record.shapes[0].student_ms == 0.1618 and record.shapes[0].correct is True
    failed = {"schema": timing_record.SCHEMA, "points": 0.0, "max_points": 2, "shapes": []}
    (tmp_path / "failed.json").write_text(json.dumps({**failed, "error": "no GPU"}))
    assert timing_record.load(tmp_path / "failed.json").error == "no GPU"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema": None}, "schema is None, expected 'i1-timing/1'"),
        ({"points": "1.5"}, "points is '1.5', not float"),
        ({"points": 3}, "points 3 of max_points 2: not 0 <= points <= max"),
        ({"max_points": 0, "points": 0}, "points 0 of max_points 0: not 0 <= points <= max"),
        ({"shapes": {}}, "shapes is {}, not a list"),
        ({"speed": "fast"}, "unexpected fields ['speed']"),
        ({"versions": {"torch": 2}}, "versions is {'torch': 2}, not an object of strings"),
        ({"shapes": [{"rows": 4}]}, "shape 0: missing cols, student_ms, reference_ms"),
    ],
)
def test_a_bad_timing_sidecar_is_refused_with_its_reason(tmp_path, changes, reason):
    """Does each kind of bad timing sidecar raise RecordError naming the fault?"""
    with pytest.raises(RecordError) as info:
        timing_record.load(_timing(tmp_path, **changes))
    assert info.value.reason.startswith(reason)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("ratio", "1.2", "shape 1: ratio is '1.2', not float"),
        ("correct", 1, "shape 1: correct is 1, not bool"),
        ("ratio", 0.0, "shape 1: student_ms, reference_ms, ratio (0.3302, 0.2816, 0.0): not all"),
        ("fraction", 1.5, "shape 1: fraction is 1.5, not between 0 and 1"),
    ],
)
def test_a_bad_shape_is_refused_with_its_reason(tmp_path, field, value, reason):
    """Is a mistyped or impossible number in one shape refused, naming the shape?"""
    shapes = [FAKE_TIMING["shapes"][0], {**FAKE_TIMING["shapes"][1], field: value}]
    with pytest.raises(RecordError) as info:
        timing_record.load(_timing(tmp_path, shapes=shapes))
    assert info.value.reason.startswith(reason)


def test_recheck_says_why_a_timing_record_is_bad(tmp_path):
    """Does the recheck give 0 with the record's fault, and the fraction of a good one?"""
    _timing(tmp_path, points="2")
    fraction, why = recheck.timing_record(tmp_path)
    assert fraction == 0.0
    assert why == f"{SIDECAR} beside the notebook is not a timing record: points is '2', not float"
    _timing(tmp_path)
    assert recheck.timing_record(tmp_path) == (0.75, "the timing record gives 1.5 points")
    (tmp_path / SIDECAR).unlink()
    assert "the timing cell never measured" in recheck.timing_record(tmp_path)[1]


def test_the_cohort_marks_unreadable_sidecars_with_the_reason(tmp_path):
    """Is a bad sidecar left out of the student's data and named, with why, in the summary?"""
    _timing(tmp_path, schema="i1-timing/0")
    (tmp_path / HINTS_SIDECAR).write_text(json.dumps({"schema": HINTS_SCHEMA, "tests": []}))
    record = cohort.StudentRecord("ada", True, True, True, 0.0)
    cohort.read_sidecars(record, tmp_path)
    assert record.hints is None and record.timing is None and not record.internal
    assert record.unreadable == (
        f"{HINTS_SIDECAR}: tests is [], not an object of test entries",
        f"{SIDECAR}: schema is 'i1-timing/0', expected 'i1-timing/1'",
    )
    cell = cohort.CellInfo("nb", "test_a", 1.0, "public", ("public:a",), False)
    course = cohort.Cohort(tmp_path, ASSIGNMENT, [cell], [record])
    table = cohort.build_table(course)
    report = cohort.Report(
        course,
        table,
        cohort.timing_table({}),
        cohort.hint_table(course),
        cohort.summarize(course, table),
    )
    assert (
        f"Unreadable sidecar: ada: {SIDECAR}: schema is 'i1-timing/0', expected 'i1-timing/1'; "
        "its data is left out of this report (autograde the submission again to rewrite it)."
    ) in cohort.summary_lines(report)


# -- the grading record and collect's record of a submission -----------------------------


def _grading_record(tmp_path: Path, **changes) -> Path:
    """A grading record as `GradingLog` writes it, with `changes` made to its fields."""
    log = grading_log.GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    log.timed_without_gpu()
    log.finish()
    path = grading_log.record_paths(tmp_path, ASSIGNMENT, "ada")[1]
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return path


def test_a_grading_record_loads_typed_and_an_absent_one_is_none(tmp_path):
    """Does a record `GradingLog` wrote load back with its fields, is a student never graded
    None, and does a record from before `timed_without_gpu` read as timed on a GPU?"""
    assert grading_log.read_record(tmp_path, ASSIGNMENT, "ada") is None
    _grading_record(tmp_path)
    record = grading_log.read_record(tmp_path, ASSIGNMENT, "ada")
    assert (record.status, record.timed_without_gpu) == ("graded", True)
    path = _grading_record(tmp_path)
    old = json.loads(path.read_text())
    del old["timed_without_gpu"]
    path.write_text(json.dumps(old))
    assert grading_log.read_record(tmp_path, ASSIGNMENT, "ada").timed_without_gpu is False


def test_every_field_of_a_grading_record_says_what_it_must_be():
    """Does the loader know the kind of every field a grading record has, and no other?"""
    fields = {f.name for f in dataclasses.fields(grading_log.GradingRecord)}
    assert set(grading_log.KINDS) == fields


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema": "i1-grading/0"}, "schema is 'i1-grading/0', expected 'i1-grading/1'"),
        ({"status": "done"}, "status is 'done', not one of ('grading', 'graded', 'ungradable')"),
        ({"lines": "graded"}, "lines is 'graded', not a list of strings"),
        ({"adjusted": {"nb:a": "2"}}, "adjusted is {'nb:a': '2'}, not an object of points"),
        ({"timed_without_gpu": "no"}, "timed_without_gpu is 'no', not true or false"),
        ({"holds": [{"source": "screen"}]}, "hold 1: not a hold: "),
        ({"grade": 3}, "unexpected fields ['grade']"),
    ],
)
def test_a_bad_grading_record_is_refused_with_its_reason(tmp_path, changes, reason):
    """Does each kind of bad grading record raise RecordError naming the file and the fault,
    where it read as "never graded" before?"""
    path = _grading_record(tmp_path, **changes)
    with pytest.raises(RecordError) as info:
        grading_log.read_record(tmp_path, ASSIGNMENT, "ada")
    assert info.value.path == path and info.value.reason.startswith(reason)


def test_a_grading_over_an_unreadable_record_starts_afresh_and_says_so(tmp_path):
    """Does grading a submission whose last record is unreadable replace it, saying why in
    the log, and does `--changed` count that submission as changed?"""
    path = _grading_record(tmp_path)
    path.write_text("{")
    assert grading_log.changed_since_graded(tmp_path, ASSIGNMENT, "ada")
    grading_log.GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    record = grading_log.read_record(tmp_path, ASSIGNMENT, "ada")
    assert record.status == "grading" and not record.timed_without_gpu
    assert record.lines[-1].endswith(
        "the last grading record was unreadable (not JSON (Expecting property name enclosed "
        "in double quotes, line 1)): replaced; its hand grades are kept for review, as no "
        "record of their answers was read"
    )


def _evidence(folder: Path, **changes) -> None:
    evidence = collected.Evidence((("a.zip", "x.ipynb"),), False, None, None, "now", "renamed")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / collected.EVIDENCE).write_text(json.dumps({**evidence.to_json(), **changes}))


def test_collects_record_loads_as_written_and_an_absent_one_is_missing(tmp_path):
    """Does what collect writes beside a submission load back as written, and is a folder
    without one RecordMissing?"""
    with pytest.raises(RecordMissing):
        collected.load_evidence(tmp_path)
    _evidence(tmp_path)
    assert collected.load_evidence(tmp_path) == collected.Evidence(
        (("a.zip", "x.ipynb"),), False, None, None, "now", "renamed"
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema": "i1-collected/0"}, "schema is 'i1-collected/0', expected 'i1-collected/1'"),
        ({"files": [["a.zip", "x"]]}, "files is [['a.zip', 'x']], not a list of {download, "),
        ({"lms_late": "yes"}, "lms_late is 'yes', not true or false"),
        ({"collected": None}, "collected is None, not a string"),
        ({"late": True}, "not collect's record: "),
    ],
)
def test_a_bad_collect_record_is_refused_with_its_reason(tmp_path, changes, reason):
    """Does each kind of bad record of collect's raise RecordError naming the file and the
    fault, where it read as "no record" before?"""
    _evidence(tmp_path, **changes)
    with pytest.raises(RecordError) as info:
        collected.load_evidence(tmp_path)
    assert info.value.path == tmp_path / collected.EVIDENCE
    assert info.value.reason.startswith(reason)


def test_the_cohort_report_does_not_import_the_export():
    """Does no module of the cohort report import grader.export (a submission's outcome is
    grader.outcome's)?"""
    for path in sorted((REPO / "grader" / "cohort").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(
                node, ast.ImportFrom
            ):  # from grader.export import X; from grader import export
                names += [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            assert not any(n.startswith("grader.export") for n in names), path.name


# -- the benchmark results ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"device": 5}, "device is 5, not a string"),
        ({"versions": ["torch"]}, "versions is ['torch'], not an object of strings"),
        ({"rows": {}}, "rows must be a list"),
    ],
)
def test_a_bad_results_file_is_refused_with_its_reason(tmp_path, changes, reason):
    """Is a results file with a mistyped run field refused, naming the file and the field?"""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**json.loads(results.H200_SAMPLE.read_text()), **changes}))
    with pytest.raises(results.ResultsError, match=re.escape(f"{path}: {reason}")):
        results.load(path)
    with pytest.raises(cohort.CohortError, match=re.escape(f"bad --benchmark file: {path}: ")):
        cohort.build_report(tmp_path, ASSIGNMENT, path)


# -- the timing policy -------------------------------------------------------------------


def _timing_cell() -> nbformat.NotebookNode:
    source = nbformat.read(REPO / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    graded = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
    return graded["hidden_timing"]


def test_the_timing_cell_gives_the_policys_points():
    """Do the source notebook's hidden_timing metadata and its timing_points call both give
    the policy's MAX_POINTS, as the trusted side's default does?"""
    cell = _timing_cell()
    assert cell.metadata["nbgrader"]["points"] == MAX_POINTS
    calls = [
        node
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "timing_points"
    ]
    assert len(calls) == 1
    passed = calls[0].args[:1] or [k.value for k in calls[0].keywords if k.arg == "max_points"]
    assert ast.literal_eval(passed[0]) == MAX_POINTS
    default = inspect.signature(runner.Runner.timing_points).parameters["max_points"].default
    assert default == MAX_POINTS


def test_the_source_timing_cell_skips_on_a_cpu_with_one_sentence(monkeypatch, capsys):
    """Run as the instructor runs the source notebook, on a machine without CUDA, does the
    timing cell print that it skipped, with require_cuda's sentence, and raise nothing?"""
    import torch

    from learning.workshops.measuring import timing

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    smoke_tests = {"expect_cases": lambda *_: None, "strided_softmax": None}
    exec(_timing_cell().source, smoke_tests)
    with pytest.raises(timing.NoCudaError) as no_cuda:
        timing.require_cuda()
    assert capsys.readouterr().out == f"Skipped: {no_cuda.value}\n"


def test_bands_score_and_label_from_one_definition():
    """Does each band's limit earn its fraction, and is each labelled as that fraction?"""
    assert [b.label for b in BANDS] == ["full points", "3/4", "1/2", "1/4"]
    for each in BANDS:
        assert band(each.limit) == each.fraction
        assert band(each.limit * 1.001) < each.fraction
    assert band(100.0) == timing_record.SLOWEST_FRACTION
    assert gpu_timing.band is band


def test_the_course_configures_the_bands_and_a_bad_configuration_is_refused():
    """Do configured bands score as written, and is each kind of bad configuration refused
    with a sentence saying what is wrong?"""
    bands = timing_record.bands_from_config([(1.2, 1.0), (3.0, 0.5)], 0.0)
    assert [band(r, bands, 0.0) for r in (1.15, 2.0, 4.0)] == [1.0, 0.5, 0.0]
    assert [b.label for b in bands] == ["full points", "1/2"]
    refused = [
        ([], 0.1, "no band is given"),
        ([(0.9, 1.0)], 0.1, "below 1"),
        ([(1.5, 1.0), (1.2, 0.5)], 0.1, "limits must rise"),
        ([(1.1, 0.5), (1.5, 1.0)], 0.1, "fractions must not"),
        ([(1.1, 1.5)], 0.1, "at most 1"),
        ([(1.1, 0.5)], 0.9, "slowest fraction"),
    ]
    for pairs, slowest, says in refused:
        with pytest.raises(ValueError, match=says):
            timing_record.bands_from_config(pairs, slowest)


def test_points_come_from_the_ratios_and_the_courses_bands_not_the_childs_fractions(tmp_path):
    """Does the trusted side score each shape from its ratio with the configured bands,
    whatever fraction the timing child (the student's process) wrote, and keep the bands in
    the record?"""
    shape = {
        "rows": 4096,
        "cols": 4096,
        "student_ms": 2.0,
        "reference_ms": 1.0,
        "student_min_ms": 1.9,
        "student_max_ms": 2.2,
        "ratio": 2.0,
        "correct": True,
        "fraction": 1.0,  # what a forged child would claim
        "reason": "",
        "events_ms": 100.0,
    }
    wrong = {**shape, "correct": False, "reason": "wrong output after timing"}
    record = {"schema": timing_record.SCHEMA, "fraction": 1.0, "seconds": 1.0}
    record["shapes"] = [shape, wrong]
    bands = timing_record.bands_from_config([(1.1, 1.0), (2.5, 0.5)], 0.1)
    assert gpu_timing._score(record, 2, tmp_path / "t.json", bands, 0.1) == ""
    assert [s["fraction"] for s in record["shapes"]] == [0.5, 0.0]
    assert record["points"] == 0.5
    assert record["bands"] == [[1.1, 1.0], [2.5, 0.5]]


def test_the_course_config_names_the_bands_the_code_defaults_to():
    """Does nbgrader_config.py spell out the timing bands (so instructors find them), as the
    code's defaults, and do they pass the check grading applies?"""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    pairs = [tuple(p) for p in config.GradeHiddenCells.timing_bands]
    assert pairs == [(b.limit, b.fraction) for b in BANDS]
    slowest = config.GradeHiddenCells.timing_slowest_fraction
    assert slowest == timing_record.SLOWEST_FRACTION
    assert timing_record.bands_from_config(pairs, slowest) == BANDS
