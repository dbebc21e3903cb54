"""Which feedback pages changed since the last feedback run, bundled to upload.

`grader.feedback` writes every student's pages afresh each run, so the folder alone cannot
say whose page is new. After each run this module fingerprints every page it finds,
`feedback/<student>/<assignment>/*.html` (a sha256 of its bytes), compares them with the
fingerprints the previous run recorded, `reports/feedback/<assignment>.json`, and zips the
pages that are new or changed into `reports/feedback/<assignment>-<time>.zip`
(`<student>/<page>.html` each, and `MANIFEST.txt`, also written beside the zip as
`<assignment>-<time>.txt`), so the instructor uploads those and no others. A student whose
pages are gone since (resubmitted, no feedback until autograded again) is listed as
withdrawn. Measured: two runs over unchanged grades write byte-identical pages (a 425 KB
graded page; nbgrader's feedback carries no time but the submission's), so the bytes are the
fingerprint; a regrade that changes what a page shows changes it.

A missing or unreadable record counts as no earlier run: every page is bundled, and the
result says why (`Bundle.note`).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.terminal import visible
from learning.workshops.checking.sidecars import RecordError, RecordMissing, of_schema, read_json

BUNDLE_FOLDER = Path("reports") / "feedback"
"""Where, under the course, the record and the bundles go (git-ignored with `reports/`)."""
SCHEMA = "i1-feedback-pages/1"
MANIFEST = "MANIFEST.txt"


@dataclass
class Bundle:
    """What changed since the last feedback run, and the zip that holds it (None: nothing)."""

    changed: list[str] = field(default_factory=list)  # new or changed pages
    withdrawn: list[str] = field(default_factory=list)  # pages gone since
    unchanged: int = 0
    zip_path: Path | None = None
    note: str = ""  # why every page counts as new, when it does


def page_fingerprints(root: Path, assignment: str) -> dict[str, dict[str, str]]:
    """{student: {page name: sha256 of its bytes}} of every feedback page of `assignment`."""
    pages: dict[str, dict[str, str]] = {}
    for page in sorted(Path(root).glob(f"feedback/*/{assignment}/*.html")):
        if page.is_file() and not page.is_symlink():
            student = page.parent.parent.name
            pages.setdefault(student, {})[page.name] = hashlib.sha256(page.read_bytes()).hexdigest()
    return pages


def record_path(root: Path, assignment: str) -> Path:
    """The fingerprints the last feedback run of `assignment` recorded."""
    return Path(root) / BUNDLE_FOLDER / f"{assignment}.json"


def read_record(root: Path, assignment: str) -> tuple[dict[str, dict[str, str]], str]:
    """The last run's fingerprints and ""; or {} and why there are none to compare with."""
    path = record_path(root, assignment)
    try:
        pages = of_schema(read_json(path), SCHEMA, path).get("pages")
    except RecordMissing:
        return {}, "no earlier feedback run recorded: every page is new"
    except RecordError as exc:
        return {}, f"{exc}: every page counts as new"
    if not isinstance(pages, dict):
        return {}, f"{path}: pages is {pages!r}, not an object: every page counts as new"
    return pages, ""


def bundle_changes(
    root: Path, assignment: str, *, everything: bool = False, now: datetime | None = None
) -> Bundle:
    """Compare the pages with the last run's, zip the new and changed ones (all of them with
    `everything`), and record this run's fingerprints."""
    root = Path(root)
    if everything:
        before, note = {}, "every page bundled (--all)"
    else:
        before, note = read_record(root, assignment)
    after = page_fingerprints(root, assignment)
    bundle = Bundle(note=note)
    bundle.changed = sorted(s for s, pages in after.items() if before.get(s) != pages)
    bundle.withdrawn = sorted(set(before) - set(after))
    bundle.unchanged = len(after) - len(bundle.changed)
    folder = root / BUNDLE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    if bundle.changed or bundle.withdrawn:
        bundle.zip_path = _write_zip(root, assignment, bundle, after, now or datetime.now())
    record = {"schema": SCHEMA, "assignment": assignment, "pages": after}
    part = folder / f".{assignment}.json.part"
    part.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(part, record_path(root, assignment))
    return bundle


def manifest(assignment: str, bundle: Bundle, after: dict[str, dict[str, str]]) -> str:
    """The bundle's manifest: what to upload for whom, and whose feedback was withdrawn."""
    lines = [
        f"Feedback for {assignment}: pages new or changed since the last feedback run.",
        "Upload each student's page(s) below to their submission; the others are unchanged.",
        "",
    ]
    for student in bundle.changed:
        lines += [f"{visible(student)}/{page}" for page in sorted(after[student])]
    if bundle.withdrawn:
        lines += ["", "Withdrawn (no page now; resubmitted since graded, not autograded yet):"]
        lines += [visible(student) for student in bundle.withdrawn]
    return "\n".join(lines) + "\n"


def _write_zip(
    root: Path, assignment: str, bundle: Bundle, after: dict[str, dict[str, str]], now: datetime
) -> Path:
    stem = f"{assignment}-{now:%Y%m%d-%H%M%S}"
    folder = root / BUNDLE_FOLDER
    zip_path, count = folder / f"{stem}.zip", 1
    while zip_path.exists():  # two runs in one second
        count += 1
        zip_path = folder / f"{stem}-{count}.zip"
    text = manifest(assignment, bundle, after)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as bundled:
        bundled.writestr(MANIFEST, text)
        for student in bundle.changed:
            for page in sorted(after[student]):
                source = root / "feedback" / student / assignment / page
                bundled.write(source, f"{student}/{page}")
    zip_path.with_suffix(".txt").write_text(text)
    return zip_path
