"""The class board: each student's best verified benchmark, by GPU model.

    python -m grader.queue board --course DIR --out board.html [--instructor]

A job counts when it finished with exit status 0 and its receipt verifies under the course's
key for that job and student (`grader.queue.receipt`). Its two figures come from the
receipt's "verified" fact alone, the course's own timing of the upload
(`grader.queue.verified_timing`), never from the results the student's process wrote: they
are geometric means over the shapes timed with every output right and nothing refused:
- ratio to the reference: the course's reference's time / the student's (above 1: faster),
  the reference the timing cell grades against;
- share of the copy roof: a plain device copy of the same bytes' time / the student's (1: as
  fast as the copy).
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


def figures(verified: object) -> dict | None:
    """The job's ratio to the reference and share of the copy roof, from the course's timing
    (the receipt's "verified" fact); None when it timed no shape right."""
    shapes = verified.get("shapes") if isinstance(verified, dict) else None
    good = [
        shape
        for shape in (shapes if isinstance(shapes, list) else [])
        if isinstance(shape, dict)
        and shape.get("correct") is True
        and not shape.get("reason")
        and _positive(shape, "student_ms", "reference_ms")
    ]
    ratio = _geomean([s["reference_ms"] / s["student_ms"] for s in good])
    if ratio is None:
        return None
    share = _geomean([s["copy_ms"] / s["student_ms"] for s in good if _positive(s, "copy_ms")])
    return {"ratio_to_reference": ratio, "share_of_copy_roof": share}


def _positive(shape: dict, *keys: str) -> bool:
    return all(isinstance(shape.get(k), int | float) and shape[k] > 0 for k in keys)


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
        found = figures(outcome.receipt.get("verified"))
        if found is None:
            continue
        sampled = (outcome.receipt.get("gpu") or {}).get("name")
        gpu = outcome.receipt["verified"].get("device") or sampled
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
        "<p>Each student's best benchmark job through the class queue, as the course timed it "
        "(the grader's timing, on the workshop's two shapes, every output checked) and signed. "
        "× reference: the course's reference kernel's time over yours (above 1 is faster). "
        "Share of copy roof: a plain copy of the same bytes' time over yours (1 is as fast as "
        f"copying them). Generated {html.escape(data['generated'])}.</p>",
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
