"""The cohort report shows every timing refusal to the instructor (issue 25): a time below the
copy roof (the physics floor) flagged for review, a wrong output on a timed input, a timing
that failed; an honest timing is no refusal, and the speed plots draw no refused time as a
speed. Built from timing sidecars written here, read back as the report reads them."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_timing_protocol import timed  # noqa: F401  (the fake-server fixture)

from grader import cohort
from grader.cohort import timings
from grader.course import ASSIGNMENT, NOTEBOOK
from grader.grading import timing_record

FLOOR_REASON = (
    "0.012 ms a call is faster than a plain copy of the same bytes (0.118 ms) allows: a time "
    "no softmax can reach, refused"
)
"""grader.grading.gpu_timing's words for the physics floor (test_the_floor_s_own_words ties
the report to them)."""
WRONG_REASON = "wrong output on a timed input (its checksum differs from the reference's)"


def _shape(rows, cols, student_ms, reference_ms, reason="", correct=True, **more) -> dict:
    """One shape of a timing sidecar, as gpu_timing writes it (copy and harness included)."""
    return {
        "rows": rows,
        "cols": cols,
        "student_ms": student_ms,
        "reference_ms": reference_ms,
        "student_min_ms": student_ms * 0.98,
        "student_max_ms": student_ms * 1.03,
        "ratio": student_ms / reference_ms,
        "correct": correct,
        "fraction": 0.0 if reason else 1.0,
        "reason": reason,
        "copy_ms": reference_ms * 0.9,
        "harness_ms": 0.004,
        "reference_alone_ms": reference_ms,
        **more,
    }


def _sidecar(*shapes: dict, error: str = "") -> dict:
    """A timing sidecar of these shapes (none, and `error`: a timing that failed)."""
    fraction = sum(s["fraction"] for s in shapes) / len(shapes) if shapes else 0.0
    return {
        "schema": timing_record.SCHEMA,
        "device": "NVIDIA H200",
        "mode": "fresh",
        "reps": 21,
        "points": round(2 * fraction, 3),
        "max_points": 2,
        "fraction": fraction,
        "error": error,
        "shapes": list(shapes),
    }


SIDECARS = {
    # honest: both shapes within the full-points band
    "ada": _sidecar(_shape(4096, 4096, 0.1330, 0.1315), _shape(65536, 512, 0.2850, 0.2816)),
    # the physics floor on one shape (a tenth of the copy's time), the other honest
    "mallory": _sidecar(
        _shape(4096, 4096, 0.012, 0.1315, FLOOR_REASON, copy_ms=0.118),
        _shape(65536, 512, 0.2900, 0.2816),
    ),
    # wrong output on both timed shapes
    "bob": _sidecar(
        _shape(4096, 4096, 0.1400, 0.1315, WRONG_REASON, correct=False),
        _shape(65536, 512, 0.3000, 0.2816, WRONG_REASON, correct=False),
    ),
}


def _report(tmp_path: Path, sidecars: dict = SIDECARS) -> cohort.Report:
    """A cohort of the students in `sidecars`, each timing read from its sidecar on disk."""
    cells = [
        cohort.CellInfo(NOTEBOOK, "test_a", 1.0, "public", (), False),
        cohort.CellInfo(NOTEBOOK, "hidden_timing", 2.0, "hidden", ("hidden:timing",), True),
    ]
    students = []
    for name, sidecar in sidecars.items():
        folder = tmp_path / "autograded" / name / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / timing_record.SIDECAR).write_text(json.dumps(sidecar))
        grades = {
            (NOTEBOOK, "test_a"): cohort.CellGrade(1.0, None, None, False),
            (NOTEBOOK, "hidden_timing"): cohort.CellGrade(sidecar["points"], None, None, False),
        }
        record = cohort.StudentRecord(name, True, True, True, 0.0, grades)
        cohort.read_sidecars(record, folder)
        assert record.timing is not None and not record.unreadable, record.unreadable
        students.append(record)
    course = cohort.Cohort(tmp_path, ASSIGNMENT, cells, students)
    table = cohort.build_table(course)
    return cohort.Report(
        course,
        table,
        cohort.timing_table({r.student: r.timing for r in students}),
        cohort.hint_table(course),
        cohort.summarize(course, table),
    )


def _write(report: cohort.Report, out: Path) -> str:
    """The report's files as write_report writes them; the page's text."""
    tables = [
        *cohort.save_table(report.table, out),
        cohort.save_refusals(report.summary.timing_refused, out),
    ]
    pngs = cohort.save_plots(report, out)
    return cohort.write_html(report, out, pngs, tables).read_text()


def _section(page: str) -> str:
    """The page's section of timing refusals, up to the scores."""
    return page.split('<h2 id="refused">')[1].split('<h2 id="scores">')[0]


def test_each_refusal_is_listed_with_its_kind_and_reason_and_the_honest_one_is_not(tmp_path):
    report = _report(tmp_path)
    found = [(r.student, r.shape, r.kind, r.reason) for r in report.summary.timing_refused]
    assert found == [
        ("mallory", "4096x4096", cohort.timings.FLOOR, FLOOR_REASON),  # for review: first
        ("bob", "4096x4096", cohort.timings.WRONG, WRONG_REASON),
        ("bob", "65536x512", cohort.timings.WRONG, WRONG_REASON),
    ]
    assert [r.review for r in report.summary.timing_refused] == [True, False, False]


def test_the_summary_counts_the_refusals_and_names_the_floor_for_review(tmp_path):
    lines = cohort.summary_lines(_report(tmp_path))
    [count] = [line for line in lines if line.startswith("Timing refused:")]
    assert count.startswith(
        "Timing refused: 3 timed shapes of 2 students earned 0 timing points "
        "(1 physics floor, 2 wrong output)"
    )
    assert cohort.REFUSED_SECTION in count
    [floor] = [line for line in lines if line.startswith("For review, physics floor:")]
    assert "mallory 4096x4096 (0.012 ms a call, a plain copy 0.118 ms)" in floor
    assert "suggests tampering or a broken measurement" in floor
    assert not [line for line in lines if "ada" in line]
    assert not [line for line in lines if line.startswith("For review") and "bob" in line]


def test_an_honest_cohort_says_none_was_refused(tmp_path):
    report = _report(tmp_path, {"ada": SIDECARS["ada"]})
    assert report.summary.timing_refused == ()
    lines = cohort.summary_lines(report)
    assert "Timing refused: none (every timed shape earned its band)." in lines
    section = _section(_write(report, tmp_path / "out"))
    assert "None: every timed shape" in section and "<table" not in section


def test_the_page_lists_each_refusal_with_its_times_and_reason(tmp_path):
    out = tmp_path / "out"
    page = _write(_report(tmp_path), out)
    assert 'href="#refused"' in page
    section = _section(page)
    assert section.startswith(f"{cohort.REFUSED_SECTION}</h2>")
    rows = section.split("<tr")[2:]  # after the head's row
    assert len(rows) == 3
    mallory, *bobs = rows
    assert mallory.startswith(' class="review"><th>mallory</th><td>4096x4096</td>')
    assert "physics floor<br><b>for review</b>" in mallory
    for ms in ("0.012", "0.1315", "0.118"):  # the student, the reference beside, the copy
        assert f"<td>{ms}</td>" in mallory
    assert "faster than a plain copy of the same bytes (0.118 ms) allows" in mallory
    for row in bobs:
        assert row.startswith("><th>bob</th>") and "for review" not in row
        assert "wrong output on a timed input (its checksum differs from the reference&#x27;s)" in (
            row
        )
    assert "ada" not in section
    assert f'href="{cohort.REFUSED_CSV}"' in section
    assert f'href="{cohort.REFUSED_CSV}"' not in page.split('<h2 id="scores">')[1]
    assert "<script" not in page and "http" not in page


def test_the_refusals_csv_has_a_row_each(tmp_path):
    out = tmp_path / "out"
    _write(_report(tmp_path), out)
    with (out / cohort.REFUSED_CSV).open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["student"], r["shape"], r["kind"], r["review"]) for r in rows] == [
        ("mallory", "4096x4096", "physics floor", "yes"),
        ("bob", "4096x4096", "wrong output", "no"),
        ("bob", "65536x512", "wrong output", "no"),
    ]
    assert float(rows[0]["copy_ms"]) == pytest.approx(0.118)
    assert rows[0]["reason"] == FLOOR_REASON
    assert (out / "cohort.csv").is_file()


def test_the_command_writes_the_refusals_beside_the_table(tmp_path, monkeypatch):
    """Does `python -m grader.cohort` (its write_report, the course read as built here) write
    timing_refused.csv beside cohort.csv and link it from the refusals' section?"""
    from grader.cohort import report as report_module

    built = _report(tmp_path)
    monkeypatch.setattr(report_module, "build_report", lambda *args: built)
    out = tmp_path / "out"
    assert cohort.main([ASSIGNMENT, "--course", str(tmp_path), "--out", str(out)]) == 0
    assert {"cohort.csv", cohort.REFUSED_CSV, "index.html"} <= {p.name for p in out.iterdir()}
    assert f'href="{cohort.REFUSED_CSV}"' in _section((out / "index.html").read_text())
    assert len((out / cohort.REFUSED_CSV).read_text().splitlines()) == 1 + 3


@pytest.mark.parametrize(
    ("sidecar", "kind", "shape"),
    [
        (
            _sidecar(
                _shape(
                    4096,
                    4096,
                    0.13,
                    0.20,
                    "the reference took 0.200 ms a call beside the submission but 0.131 ms "
                    "alone: the submission's work kept the GPU busy",
                    reference_alone_ms=0.131,
                )
            ),
            timings.DISTURBED,
            "4096x4096",
        ),
        # refused in other words, but under its copy's time: the floor all the same
        (
            _sidecar(_shape(4096, 4096, 0.01, 0.13, "refused", copy_ms=0.12)),
            timings.FLOOR,
            "4096x4096",
        ),
        (
            _sidecar(error="the student's server ran out of memory"),
            timings.OUT_OF_MEMORY,
            timings.EVERY_SHAPE,
        ),
        (
            _sidecar(error="the definitions do not load (NameError: tl)"),
            timings.FAILED,
            timings.EVERY_SHAPE,
        ),
        (
            {**_sidecar(error="the timing failed"), "internal_error": True},
            timings.CHECKER,
            timings.EVERY_SHAPE,
        ),
    ],
)
def test_every_kind_of_refusal_is_named(tmp_path, sidecar, kind, shape):
    """A disturbed reference, a time under the copy's in other words, a timing that ran out of
    memory, one that failed, one the checker failed: each a refusal of its kind."""
    [refusal] = _report(tmp_path, {"eve": sidecar}).summary.timing_refused
    assert (refusal.kind, refusal.shape) == (kind, shape)
    assert refusal.reason == (
        sidecar["shapes"][0]["reason"] if sidecar["shapes"] else sidecar["error"]
    )
    assert refusal.review == (kind in (timings.FLOOR, timings.DISTURBED))


def _offsets(figure, gid_prefix: str = "") -> list[tuple[float, float]]:
    """Every point the figure's scatters draw (those whose gid starts with `gid_prefix`)."""
    return [
        tuple(xy)
        for ax in figure.axes
        for c in ax.collections
        if (c.get_gid() or "").startswith(gid_prefix)
        for xy in c.get_offsets()
    ]


def _legend_and_titles(figure) -> str:
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend()]
    texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    return " ".join(texts + [ax.get_title(loc="left") for ax in figure.axes])


def test_the_speed_plots_leave_the_floor_out_and_say_so(tmp_path):
    """Is mallory's time under the copy drawn in none of the speed plots (not as a ratio, a
    time or a bandwidth), her honest shape and bob's wrong outputs (an x) drawn, and does each
    plot say what it left out and where it is listed?"""
    timing = _report(tmp_path).timing
    floor = timing[timing["refusal"] == timings.FLOOR].iloc[0]
    figures = {
        "ratio": cohort.plot_speedup(timing, None),
        "ms": cohort.plot_kernel_vs_reference(timing),
        "gbps": cohort.plot_bandwidth(timing, None, "no benchmark results"),
    }
    impossible = {
        "ratio": floor["ratio"],
        "ms": floor["student_ms"],
        "gbps": floor["student_gbps"],
    }
    for prefix, figure in figures.items():
        gids = {c.get_gid() for ax in figure.axes for c in ax.collections}
        assert {f"{prefix}:4096x4096", f"{prefix}:65536x512"} <= gids
        drawn = [v for xy in _offsets(figure) for v in xy]
        assert drawn and impossible[prefix] not in drawn, prefix
        words = _legend_and_titles(figure)
        assert "not drawn, no honest speed: 1 refused shape (physics floor)" in words, prefix
        assert cohort.REFUSED_SECTION in words
    wrong = timing[timing["refusal"] == timings.WRONG]
    x_marks = [
        xy[0]
        for ax in figures["ratio"].axes
        for c in ax.collections
        if not c.get_gid()
        for xy in c.get_offsets()
    ]
    assert sorted(x_marks) == pytest.approx(sorted(wrong["ratio"]))
    [bandwidth] = figures["gbps"].axes
    assert bandwidth.get_ylim()[1] < floor["student_gbps"]  # the axis is the honest ones'
    for plot in cohort.PLOTS:
        if plot.needs_timing:
            assert "is left out, no honest speed" in plot.caption


def test_honest_plots_say_nothing_was_left_out(tmp_path):
    timing = _report(tmp_path, {"ada": SIDECARS["ada"]}).timing
    for figure in (
        cohort.plot_speedup(timing, None),
        cohort.plot_kernel_vs_reference(timing),
        cohort.plot_bandwidth(timing, None, "no benchmark results"),
    ):
        assert "not drawn" not in _legend_and_titles(figure)


def test_when_every_shape_is_refused_the_plots_say_so_not_needs_a_gpu(tmp_path):
    floor = _shape(4096, 4096, 0.012, 0.1315, FLOOR_REASON, copy_ms=0.118)
    report = _report(tmp_path, {"mallory": _sidecar(floor)})
    out = tmp_path / "out"
    pngs = cohort.save_plots(report, out)
    assert [p.name for p in pngs] == [p.name for p in cohort.PLOTS]  # every plot drawn
    for figure in (
        cohort.plot_speedup(report.timing, None),
        cohort.plot_kernel_vs_reference(report.timing),
        cohort.plot_bandwidth(report.timing, None, "no benchmark results"),
    ):
        text = " ".join(t.get_text() for ax in figure.axes for t in ax.texts)
        assert "every timed shape was refused" in text and cohort.NEEDS_GPU not in text
        assert not _offsets(figure, "ratio") + _offsets(figure, "ms") + _offsets(figure, "gbps")


def test_the_floor_s_own_words_are_named_the_physics_floor(timed):  # noqa: F811
    """The report's physics floor is the grading's: a student faster than the copy, timed by
    the trusted side over the real protocol (fake servers), is refused in words the report
    names the physics floor (its copy's time put aside: the words alone)."""
    points, record = timed({"call_ms": 20})  # net 10 ms against a copy's 25
    assert points == 0
    shapes = timing_record.from_json(record, "i1_timing.json").shapes
    words = [timings.refusal_kind(replace(s, copy_ms=None)) for s in shapes]
    assert words == [timings.FLOOR] * len(shapes)
