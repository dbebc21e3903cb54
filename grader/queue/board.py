"""The class board: each student's best verified benchmark, by GPU model.

    python -m grader.queue board --course DIR --out board.html [--instructor]

A job counts when it finished with exit status 0 and its receipt verifies under the course's
key for that job and student (`grader.queue.receipt`). Its two figures are geometric means
over the run's cells (shape, layout, mode), each cell taking the student's fastest checked
`direct` row over num_warps:
- ratio to the reference: the reference's time / the student's (above 1: faster), the
  reference being PyTorch's softmax (or its backward) timed in the same run, the rows the
  receipt's `reference` fact repeats;
- share of the copy roof: the run's `roof` row's time / the student's (1: as fast as a plain
  copy of the same bytes), the rows of the receipt's `copy_roof` fact.
A student's best is the highest ratio per GPU model. Students appear under the name they chose
(PUT /api/name) or an anonymous one, `student-` and 6 hex digits of an HMAC of their id under a
course key: stable, and nobody without the course secret can tell whose it is. The instructor's
view adds each student's id and roster name.
"""

from __future__ import annotations

import hmac
import html
import math
import re
from datetime import UTC, datetime
from pathlib import Path

from grader.queue import receipt
from grader.queue.store import Outcome, Store

SCHEMA = "i1-queue-board/1"
NAME_KEY = b"i1-queue-name/1"
ANONYMOUS = "student-"
NAME = re.compile(r"\w[\w .'-]{1,31}")
"""A board name: 2 to 32 letters, digits, spaces and . ' - _, starting with a letter or digit."""
REFERENCE_VARIANTS = ("torch_softmax", "torch")
"""The variants of a benchmark run that are the reference (the forward's, the backward's)."""


def anonymous_name(key: bytes, student: str) -> str:
    """The student's stable anonymous board name under the course's name key."""
    return ANONYMOUS + hmac.new(key, student.encode(), "sha256").hexdigest()[:6]


def name_problem(name: str, student: str, taken: dict[str, str]) -> str | None:
    """Why `name` cannot be `student`'s board name (`taken`: the names others chose); None
    when it can."""
    if not NAME.fullmatch(name):
        return "a board name is 2 to 32 letters, digits, spaces or . ' - _; choose another"
    if name.lower().startswith(ANONYMOUS):
        return f"names starting with {ANONYMOUS!r} are the anonymous ones; choose another"
    if any(n.lower() == name.lower() for s, n in taken.items() if s != student):
        return f"another student chose {name!r}; choose another"
    return None


def figures(result: dict) -> dict | None:
    """The job's ratio to the reference and share of the copy roof; None when its result
    holds no cell timed for both the student's kernel and the reference."""
    rows = result.get("rows") if isinstance(result, dict) else None
    if not isinstance(rows, list):
        return None
    mine = _fastest(rows, ("direct",))
    reference = _fastest(rows, REFERENCE_VARIANTS)
    roof = _fastest(rows, ("roof",))
    ratio = _geomean([reference[c] / mine[c] for c in mine if c in reference])
    if ratio is None:
        return None
    share = _geomean([roof[c] / mine[c] for c in mine if c in roof])
    return {"ratio_to_reference": ratio, "share_of_copy_roof": share}


def _fastest(rows: list, variants: tuple[str, ...]) -> dict[tuple, float]:
    """The fastest checked median_ms of `variants` per cell (rows, cols, layout, mode)."""
    best: dict[tuple, float] = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("variant") not in variants:
            continue
        ms = row.get("median_ms")
        if not row.get("checked") or not isinstance(ms, int | float) or not ms > 0:
            continue
        cell = (row.get("rows"), row.get("cols"), row.get("layout"), row.get("mode"))
        best[cell] = min(ms, best.get(cell, math.inf))
    return best


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def verified(course_root: Path, outcome: Outcome) -> bool:
    """Whether the course signed this job's result, for this job and student, and it ran."""
    facts = outcome.receipt
    if outcome.exit_status != 0 or not isinstance(facts, dict):
        return False
    if facts.get("job") != outcome.job.id or facts.get("student") != outcome.job.student:
        return False
    try:
        receipt.verify(course_root, outcome.result, facts)
    except receipt.ReceiptError:
        return False
    return True


def board(course_root: Path, store: Store, roster: dict[str, str] | None = None) -> dict:
    """The board as JSON; with the `roster` (id -> name), the instructor's view."""
    key = receipt.course_key(course_root, NAME_KEY)
    chosen = store.names()
    best: dict[tuple[str, str], dict] = {}
    for outcome in store.outcomes("benchmark"):
        if not verified(course_root, outcome):
            continue
        found = figures(outcome.result)
        if found is None:
            continue
        gpu = (outcome.receipt.get("gpu") or {}).get("name") or outcome.result.get("device")
        mark = (gpu or "unknown GPU", outcome.job.student)
        if mark not in best or found["ratio_to_reference"] > best[mark]["ratio_to_reference"]:
            finished = datetime.fromtimestamp(outcome.finished, UTC).isoformat(timespec="seconds")
            best[mark] = {**found, "finished": finished}
    gpus: dict[str, list[dict]] = {}
    for (gpu, student), entry in best.items():
        shown = {"name": chosen.get(student) or anonymous_name(key, student), **entry}
        if roster is not None:
            shown |= {"student": student, "roster_name": roster.get(student, "")}
        gpus.setdefault(gpu, []).append(shown)
    for entries in gpus.values():
        entries.sort(key=lambda e: (-e["ratio_to_reference"], e["name"]))
        for rank, entry in enumerate(entries, 1):
            entry["rank"] = rank
    return {
        "schema": SCHEMA,
        "view": "class" if roster is None else "instructor",
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpus": [{"gpu": gpu, "entries": gpus[gpu]} for gpu in sorted(gpus)],
    }


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin-bottom: 2rem; }
th, td { padding: 0.3rem 0.8rem; border-bottom: 1px solid #ddd; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: bold; padding: 0.5rem 0; }
"""


def render(data: dict) -> str:
    """The board as one static HTML page (no script, nothing fetched)."""
    instructor = data["view"] == "instructor"
    heads = ["#", "Name", *(["Student", "Roster name"] if instructor else [])]
    heads += ["× reference", "Share of copy roof", "Finished"]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Class board</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Class board: best verified results</h1>",
        "<p>Each student's best benchmark run through the class queue whose receipt the course "
        "verified. × reference: PyTorch's softmax's time over yours, timed in the same job "
        "(above 1 is faster). Share of copy roof: a plain copy's time over yours (1 is as fast "
        f"as copying the bytes). Generated {html.escape(data['generated'])}.</p>",
    ]
    if not data["gpus"]:
        parts.append("<p>No verified result yet.</p>")
    for group in data["gpus"]:
        parts.append(f'<table data-gpu="{html.escape(group["gpu"])}">')
        parts.append(f"<caption>{html.escape(group['gpu'])}</caption><tr>")
        parts.extend(f"<th>{html.escape(h)}</th>" for h in heads)
        parts.append("</tr>")
        for entry in group["entries"]:
            cells = [str(entry["rank"]), entry["name"]]
            if instructor:
                cells += [entry["student"], entry["roster_name"]]
            share = entry["share_of_copy_roof"]
            cells += [
                f"{entry['ratio_to_reference']:.2f}",
                "" if share is None else f"{share:.0%}",
                entry["finished"],
            ]
            numeric = {0, len(cells) - 3, len(cells) - 2}
            parts.append("<tr>")
            parts.extend(
                f'<td class="num">{html.escape(c)}</td>'
                if i in numeric
                else f"<td>{html.escape(c)}</td>"
                for i, c in enumerate(cells)
            )
            parts.append("</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
