"""Put back, before grading, every cell of the course's notebook that a student deleted,
moved or edited.

nbgrader's `OverwriteCells` restores the source, type and points of a locked cell that is
still in the submission; it leaves a deleted cell deleted, so a deleted test cell silently
costs its points, and it cannot put back a solution cell. `RestoreGradeCells` does what
`OverwriteCells` does, then:

- puts back every cell of the course's source (test, solution, locked) that the submission
  lacks, from the gradebook's copy of the source: a test cell whole, hidden tests included;
  a solution cell as its stub, so the rest of the notebook grades normally;
- puts the course's cells in the source's order; each of the student's own cells travels
  with the course cell it followed, so extra cells and reordered markdown change nothing.

What it did goes to the student's grading log (`grader.grading.grading_log`) and nbgrader's log.
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat
from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import OverwriteCells

from grader.grading.grading_log import log_for
from grader.grading.sandbox import strip_hidden_tests

_PUT_BACK = "Put back by the grader: this cell was missing from the submission."


@dataclass(frozen=True)
class SourceCell:
    """One cell of the course's notebook, as the gradebook keeps it."""

    grade_id: str
    cell_type: str
    source: str
    locked: bool
    checksum: str | None
    points: float | None  # None: not a grade cell
    solution: bool

    def restored(self) -> NotebookNode:
        """The cell as it goes back into a submission that lacks it."""
        nbgrader = {
            "grade_id": self.grade_id,
            "grade": self.points is not None,
            "solution": self.solution,
            "locked": self.locked,
            "task": False,
            "schema_version": 3,
            "checksum": self.checksum,
        }
        if self.points is not None:
            nbgrader["points"] = self.points
        if self.cell_type == "code":
            cell = nbformat.v4.new_code_cell(f"# {_PUT_BACK}\n{self.source}")
        else:
            cell = nbformat.v4.new_markdown_cell(f"*{_PUT_BACK}*\n\n{self.source}")
        cell.metadata["nbgrader"] = nbgrader
        if self.locked:
            cell.metadata.update(editable=False, deletable=False)
        return cell


def source_cells(gradebook: Gradebook, notebook: str, assignment: str) -> list[SourceCell]:
    """The course notebook's cells with a grade id, in the source's order (the order in
    which `nbgrader generate_assignment` saved them, as nbgrader's own restoring assumes)."""
    saved = gradebook.find_notebook(notebook, assignment)
    points = {cell.name: float(cell.max_score) for cell in saved.grade_cells}
    solutions = {cell.name for cell in saved.solution_cells}
    return [
        SourceCell(
            cell.name,
            cell.cell_type,
            cell.source,
            bool(cell.locked),
            cell.checksum,
            points.get(cell.name),
            cell.name in solutions,
        )
        for cell in saved.source_cells
    ]


def grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def in_source_order(
    cells: list[NotebookNode], source: list[SourceCell]
) -> tuple[list[NotebookNode], list[str], list[str]]:
    """`cells` with every source cell present once, in the source's order; the student's
    other cells follow the source cell they followed. Returns the cells, the grade ids put
    back, and the grade ids that were out of place."""
    known = {cell.grade_id for cell in source}
    after: dict[str | None, list[NotebookNode]] = {None: []}
    present: dict[str, NotebookNode] = {}
    anchor = None
    for cell in cells:
        gid = grade_id(cell)
        if gid in known and gid not in present:
            present[gid] = cell
            anchor = gid
            after.setdefault(gid, [])
        else:
            after[anchor].append(cell)
    ordered = list(after[None])
    for cell in source:
        ordered.append(present.get(cell.grade_id) or cell.restored())
        ordered.extend(after.get(cell.grade_id, []))
    missing = [cell.grade_id for cell in source if cell.grade_id not in present]
    return ordered, missing, out_of_place(list(present), [c.grade_id for c in source])


def out_of_place(seen: list[str], order: list[str]) -> list[str]:
    """The ids of `seen` to move so that the rest keep `order`: those outside a longest
    run of `seen` that is increasing in `order`."""
    rank = [order.index(gid) for gid in seen]
    best: list[list[int]] = []  # best[i]: longest increasing run ending at i (indices)
    for i, r in enumerate(rank):
        runs = [best[j] for j in range(i) if rank[j] < r]
        best.append(max(runs, key=len, default=[]) + [i])
    keep = set(max(best, key=len, default=[]))
    return [gid for i, gid in enumerate(seen) if i not in keep]


class RestoreGradeCells(OverwriteCells):
    """nbgrader's OverwriteCells, which also puts back deleted cells and the source's
    order (see the module)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        self._edited: dict[str, str] = {}
        nb, resources = super().preprocess(nb, resources)
        for cell in nb.cells:  # a grade id the course does not know: the student's own cell
            if grade_id(cell) is None:
                cell.get("metadata", {}).pop("nbgrader", None)
        with Gradebook(self.db_url) as gradebook:
            source = source_cells(gradebook, self.notebook_id, self.assignment_id)
        nb.cells, missing, moved = in_source_order(nb.cells, source)
        kinds = {cell.grade_id: cell for cell in source}
        notes = [
            f"{gid} (deleted: {'its stub' if kinds[gid].solution else 'the cell'} put back)"
            for gid in missing
        ]
        notes += [f"{gid} (moved: put back in place)" for gid in moved]
        notes += [f"{gid} ({what})" for gid, what in self._edited.items()]
        for note in notes:
            self.log.warning("Restored cell %s", note)
        log = log_for(self.config, resources)
        if log is not None:
            log.restored(notes)
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        before = (cell.cell_type, cell.source)
        cell, resources = super().preprocess_cell(cell, resources, index)
        gid = grade_id(cell)
        if gid and before[0] != cell.cell_type:
            self._edited[gid] = "its type restored"
        elif gid and _lines(before[1]) != _lines(strip_hidden_tests(cell.source)):
            self._edited[gid] = "edited: its source restored"  # not just the hidden tests
        return cell, resources


def _lines(source: str) -> list[str]:
    """`source`'s lines as a student's edit would change them (trailing blanks aside)."""
    lines = [line.rstrip() for line in source.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
