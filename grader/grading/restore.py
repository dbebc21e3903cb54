"""Put back, before grading, every cell of the course's notebook that a student deleted,
moved or edited, and the course's metadata on each.

nbgrader's `OverwriteCells` restores the source, type and points of a locked cell that is
still in the submission; it leaves a deleted cell deleted, so a deleted test cell silently
costs its points, and it cannot put back a solution cell. A flipped flag (`grade` turned off
on a locked test cell, say) makes its checksum fail, and a student's cell that calls itself
a grade cell stops `DeduplicateIds` or `CheckCellMetadata`: either way the notebook was
ungradable. `RestoreGradeCells` runs first (before `DeduplicateIds`) and:

- gives each course cell of the submission (by grade id; one claimed twice is the course's at
  its last cell, as `DeduplicateIds` keeps it) the course's nbgrader metadata from the
  gradebook (`grader.grading.course_cells`): grade, solution, locked, points, grade id;
- takes all nbgrader metadata off every other cell: a cell of the student's own is never
  graded, whatever it says it is;
- cuts a hidden-test region out of every code cell whose course source has none (the
  student's own cells, solution cells): the sandbox would cut it too, and only the course's
  regions are graded;
- then does what `OverwriteCells` does, puts back every course cell (test, solution,
  locked) that the submission lacks, from the gradebook's copy of the source (a test cell
  whole, hidden tests included; a solution cell as its stub), and puts the course's cells
  in the source's order; each of the student's own cells travels with the course cell it
  followed, so extra cells and reordered markdown change nothing.

What it did goes to the student's grading log (`grader.grading.grading_log`) and nbgrader's log.
"""

from __future__ import annotations

from collections.abc import Sequence

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import OverwriteCells

from grader.grading.course_cells import CourseCell, claimed_id, course_for
from grader.grading.grading_log import log_for
from grader.grading.hidden_regions import split_hidden_tests, strip_hidden_tests

_PUT_BACK = "Put back by the grader: this cell was missing from the submission."
FLAGS = ("grade", "solution", "locked", "task")
"""The nbgrader flags restored from the course's source (points and the grade id besides)."""
SHOWN_CHARS = 60
"""How much of a student's own grade id the log shows."""


def put_back(cell: CourseCell) -> NotebookNode:
    """The course cell as it goes back into a submission that lacks it."""
    if cell.cell_type == "code":
        restored = nbformat.v4.new_code_cell(f"# {_PUT_BACK}\n{cell.source}")
    else:
        restored = nbformat.v4.new_markdown_cell(f"*{_PUT_BACK}*\n\n{cell.source}")
    restored.metadata["nbgrader"] = cell.nbgrader_metadata()
    if cell.locked:
        restored.metadata.update(editable=False, deletable=False)
    return restored


def restore_metadata(cells: list[NotebookNode], course: Sequence[CourseCell]) -> list[str]:
    """Give each course cell among `cells` the course's nbgrader metadata and take it off
    every other cell (see the module); what changed, for the log."""
    known = {cell.grade_id: cell for cell in course}
    claims = [claimed_id(cell) for cell in cells]
    last = {gid: index for index, gid in enumerate(claims) if gid in known}
    notes = []
    for index, (cell, gid) in enumerate(zip(cells, claims, strict=True)):
        meta = cell.metadata.get("nbgrader")
        if gid in known and last[gid] == index:
            flipped = flipped_flags(meta, known[gid])
            cell.metadata["nbgrader"] = NotebookNode(known[gid].nbgrader_metadata())
            if flipped:
                notes.append(f"{gid} (flipped: its {', '.join(flipped)} put back)")
        elif "nbgrader" in cell.metadata:
            del cell.metadata["nbgrader"]
            claim = foreign_claim(meta, gid, gid in known)
            if claim:
                notes.append(
                    f"cell {index + 1}, the student's own ({claim}; its nbgrader metadata "
                    "taken off: never graded)"
                )
    return notes


def flipped_flags(meta: object, cell: CourseCell) -> list[str]:
    """What a course cell's submitted nbgrader metadata says otherwise than the course."""
    if not isinstance(meta, dict):
        return ["metadata"]
    flipped = [f"{flag} flag" for flag in FLAGS if meta.get(flag, False) != getattr(cell, flag)]
    if cell.grade and _points(meta.get("points")) != cell.points:
        flipped.append(f"points ({cell.points:g})")
    return flipped


def _points(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def foreign_claim(meta: object, gid: str | None, repeats: bool) -> str | None:
    """What a cell that is not the course's claimed with its nbgrader metadata, or None
    when it claimed nothing (empty or all-false metadata, as a pasted cell can carry)."""
    if repeats:
        return f"it repeated the grade id of the course's cell {gid}"
    if gid is not None:
        shown = gid if len(gid) <= SHOWN_CHARS else gid[:SHOWN_CHARS] + "..."
        return f"its grade id {shown!r} is not the course's"
    if not isinstance(meta, dict):
        return "it carried nbgrader metadata nbgrader cannot read"
    flags = [flag for flag in FLAGS if meta.get(flag)]
    return f"it said {', '.join(flags)}: true" if flags else None


def cut_foreign_regions(cells: list[NotebookNode], course: Sequence[CourseCell]) -> list[str]:
    """Cut the hidden-test regions out of every cell that is or becomes code and whose
    course source has none (run after `restore_metadata`, which decides which cells are
    the course's); what was cut, for the log."""
    known = {cell.grade_id: cell for cell in course}
    notes = []
    for index, cell in enumerate(cells):
        own = known.get(claimed_id(cell))
        code = (own.cell_type if own else cell.cell_type) == "code"
        visible, region = split_hidden_tests(cell.source)
        if code and region is not None and (own is None or own.hidden is None):
            cell.source = visible
            where = own.grade_id if own else f"cell {index + 1}, the student's own"
            notes.append(f"{where} (a hidden-test region the course did not write: cut out)")
    return notes


def grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def in_source_order(
    cells: list[NotebookNode], source: Sequence[CourseCell]
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
        ordered.append(present.get(cell.grade_id) or put_back(cell))
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
    """nbgrader's OverwriteCells, which also puts back the course's metadata, deleted
    cells and the source's order, and cuts hidden regions the course did not write (see
    the module)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        course = course_for(resources)
        notes = restore_metadata(nb.cells, course) + cut_foreign_regions(nb.cells, course)
        self._edited: dict[str, str] = {}
        nb, resources = super().preprocess(nb, resources)
        nb.cells, missing, moved = in_source_order(nb.cells, course)
        kinds = {cell.grade_id: cell for cell in course}
        notes += [
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

    def report_change(self, name: str, attr: str, old, new) -> None:
        """nbgrader's warning that a course cell changed, except for a locked cell's checksum:
        nbgrader compares it with the source's cell, hidden tests included, which the release
        never had, so it warns for every hidden cell of every untouched submission
        (jupyter/nbgrader#1961). A real edit is told by `preprocess_cell`, hidden tests aside
        ("edited: its source restored"); the source is put back either way."""
        if attr != "checksum":
            super().report_change(name, attr, old, new)

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
