"""The course's cells, as the gradebook keeps them: the only grader input a notebook has.

`nbgrader generate_assignment` saves every cell of the course's notebook that has a grade id
(its source, hidden regions included, its type, its flags, its points). Grading reads
hidden regions, flags and points from here and never from a submission, where a student
can write a hidden region of their own or flip a cell's `grade` flag: a submission's cell
counts as a course cell only by its grade id, and what it then is comes from this record.

The cells are read once per process for each (gradebook, assignment, notebook): `nbgrader
autograde` grades every student in one process, and the course's cells do not change
while it runs (`read_course_cells.cache_clear()` forgets them, for a process that runs
`generate_assignment` again).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from nbformat import NotebookNode

from grader.grading.hidden_regions import Check, hidden_checks, hidden_region

SCHEMA_VERSION = 3
"""nbgrader's cell metadata schema, as `generate_assignment` writes it."""


@dataclass(frozen=True)
class CourseCell:
    """One cell of the course's notebook, as the gradebook keeps it. `points` is None for
    a cell that is not a grade cell; `hidden` is its hidden-test region (code cells only),
    or None."""

    grade_id: str
    cell_type: str
    source: str
    locked: bool
    checksum: str | None
    points: float | None
    solution: bool
    task: bool = False
    hidden: str | None = field(init=False)

    def __post_init__(self) -> None:
        region = hidden_region(self.source) if self.cell_type == "code" else None
        object.__setattr__(self, "hidden", region)

    @property
    def grade(self) -> bool:
        """Whether nbgrader scores the cell."""
        return self.points is not None

    def nbgrader_metadata(self) -> dict:
        """The cell's `nbgrader` metadata as `generate_assignment` writes it into the
        release, from which a submission's own copy is restored."""
        meta = {
            "grade": self.grade,
            "grade_id": self.grade_id,
            "locked": self.locked,
            "schema_version": SCHEMA_VERSION,
            "solution": self.solution,
            "task": self.task,
            "cell_type": self.cell_type,
            "checksum": self.checksum,
        }
        if self.grade:
            meta["points"] = self.points
        return meta


class CourseNotFound(LookupError):
    """The gradebook has no source for the notebook being graded."""


def course_cells_from(gradebook, notebook: str, assignment: str) -> tuple[CourseCell, ...]:
    """The course notebook's cells with a grade id, in the source's order (the order in
    which `generate_assignment` saved them), read from an open nbgrader `Gradebook`."""
    from nbgrader.api import MissingEntry

    try:
        saved = gradebook.find_notebook(notebook, assignment)
    except MissingEntry:
        raise CourseNotFound(
            f"the gradebook has no notebook {notebook!r} in assignment {assignment!r}: run "
            f"`nbgrader generate_assignment {assignment}` in the course folder first"
        ) from None
    points = {cell.name: float(cell.max_score) for cell in saved.grade_cells}
    solutions = {cell.name for cell in saved.solution_cells}
    tasks = {cell.name for cell in saved.task_cells}
    return tuple(
        CourseCell(
            cell.name,
            cell.cell_type,
            cell.source or "",
            bool(cell.locked),
            cell.checksum,
            points.get(cell.name),
            cell.name in solutions,
            cell.name in tasks,
        )
        for cell in saved.source_cells
    )


def course_cells_of(source: NotebookNode) -> tuple[CourseCell, ...]:
    """The course cells of the course's own source notebook (`source/<assignment>/`, the
    instructor's file, never a submission), for tests and tools without a gradebook. A
    solution cell's source is left empty, so the instructor's answers never travel from
    here (the gradebook holds its stub); checksums are None."""
    cells = []
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade_id"):
            continue
        solution = bool(meta.get("solution"))
        points = float(meta.get("points", 0)) if meta.get("grade") else None
        text = "" if solution else cell.source
        locked, task = bool(meta.get("locked")), bool(meta.get("task"))
        cells.append(
            CourseCell(meta["grade_id"], cell.cell_type, text, locked, None, points, solution, task)
        )
    return tuple(cells)


@functools.lru_cache(maxsize=8)
def read_course_cells(db_url: str, assignment: str, notebook: str) -> tuple[CourseCell, ...]:
    """The course notebook's cells from the gradebook at `db_url`, read once per process
    (see the module). CourseNotFound when the assignment was never generated."""
    from nbgrader.api import Gradebook  # slow to import: only when grading

    with Gradebook(db_url) as gradebook:
        return course_cells_from(gradebook, notebook, assignment)


def course_for(resources: dict) -> tuple[CourseCell, ...]:
    """The course cells of the notebook an nbgrader preprocessor is grading (its
    `resources["nbgrader"]`: the gradebook, the assignment and the notebook)."""
    info = resources.get("nbgrader", {})
    missing = [key for key in ("db_url", "assignment", "notebook") if not info.get(key)]
    if missing:
        raise CourseNotFound(
            f"resources['nbgrader'] lacks {', '.join(missing)}: the course's cells are read "
            "only inside `nbgrader autograde`"
        )
    return read_course_cells(info["db_url"], info["assignment"], info["notebook"])


def course_hidden_checks(
    cells: Sequence[CourseCell],
) -> list[tuple[str, list[Check]]]:
    """Each course grade cell's hidden checks, (grade_id, checks), in the source's order;
    a cell without a hidden region is left out. Only a grade cell's region is graded: its
    outputs are what `SaveAutoGrades` scores."""
    return [
        (c.grade_id, hidden_checks(c.hidden)) for c in cells if c.grade and c.hidden is not None
    ]


def claimed_id(cell: NotebookNode) -> str | None:
    """The grade id a notebook cell's metadata claims, whatever shape the metadata has (a
    submission's is the student's to write)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def graded_regions(
    nb: NotebookNode, course: Sequence[CourseCell]
) -> list[tuple[int, str, list[Check]]]:
    """The hidden regions to grade in `nb`: (cell index, grade id, checks) for each code
    cell whose grade id is a course grade cell with a hidden region, the checks parsed from
    the course's source, never from `nb`'s. A grade id claimed by several cells counts once,
    at its last cell (as nbgrader's DeduplicateIds keeps it); any other cell, whatever its
    source or metadata says, is not graded here."""
    checks = dict(course_hidden_checks(course))
    last: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        gid = claimed_id(cell)
        if gid in checks:
            last[gid] = index
    graded = [(i, gid, checks[gid]) for gid, i in last.items() if nb.cells[i].cell_type == "code"]
    return sorted(graded, key=lambda region: region[0])
