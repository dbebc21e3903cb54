"""The uploads `grader.collect` could not take as a notebook, by student: their record
(`downloaded/<assignment>/i1_uploads.json`) and what the export and the cohort report say.

A Canvas download names each file `<name>_[late_]<user id>_<file id>_<uploaded name>`, so the
student is known even when the uploaded name is not the notebook's: a `.py`, a notebook the
browser renamed (`strided_softmax (1).ipynb`), a `notes.txt`. Collect classifies each such
file (`classify`), says the fix, and writes the record on every run; `not_gradable` reads it
for the students who have no submission in `submitted/`. A notebook under another name is
taken as is by `python -m grader.collect ASSIGNMENT --take STUDENT FILE`; anything else
cannot be graded as a notebook, and the fix is to ask the student for one.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from learning.workshops.checking.sidecars import RecordError, RecordMissing, of_schema, read_json

RECORD = "i1_uploads.json"
SCHEMA = "i1-uploads/1"
CANVAS_NAME = re.compile(r"^[^/_]+_(?P<late>late_)?(?P<student_id>\d+)_\d+_(?P<uploaded>.+)$")
"""Canvas's name for a file in its submissions download: its prefix names the student."""
COPY_MARKS = re.compile(r"(?:-\d+)?(?: \(\d+\))?$")
"""What Canvas (`-1`, a resubmission) and browsers (` (1)`, a second download) append."""
NOT_GRADABLE = "submitted, not gradable as is"
FIELDS = ("student", "download", "file", "why", "fix", "takes_as")


@dataclass(frozen=True)
class Upload:
    """One file in a download that collect did not take as the student's notebook."""

    student: str
    download: str
    file: str  # its name in the download
    why: str  # e.g. "a .py file, not the notebook"
    fix: str  # the command that takes it in, or what to ask the student for
    takes_as: str = ""  # the release notebook `--take` writes it as; "" when it cannot

    @property
    def name(self) -> str:
        """The name the student gave the file (Canvas's prefix taken off)."""
        found = owner(self.file)
        return found[1] if found else PurePosixPath(self.file).name

    def reason(self) -> str:
        """The one line the export and the cohort report show for the student."""
        return f"{NOT_GRADABLE}: {self.name} ({self.why}); {self.fix}"


def owner(file: str) -> tuple[str, str, bool] | None:
    """(student id, uploaded name, Canvas's late marker) from a Canvas file name, or None
    when not one."""
    match = CANVAS_NAME.match(PurePosixPath(file).name)
    return (match["student_id"], match["uploaded"], bool(match["late"])) if match else None


def classify(uploaded: str, notebooks: set[str]) -> tuple[str, str]:
    """(why it is not gradable as is, the release notebook it can be taken as, or "")."""
    path = PurePosixPath(uploaded)
    suffix = path.suffix.lower()
    if suffix == ".ipynb":
        stem = COPY_MARKS.sub("", path.stem)
        if f"{stem}.ipynb" in notebooks:
            return f"a renamed copy of {stem}.ipynb", f"{stem}.ipynb"
        if len(notebooks) == 1:
            only = next(iter(notebooks))
            return f"a notebook not named {only}", only
        return f"a notebook named as none of {', '.join(sorted(notebooks))}", ""
    kind = f"a {suffix} file" if suffix else "a file with no extension"
    return f"{kind}, not the notebook", ""


def fix(assignment: str, student: str, file: str, takes_as: str, notebooks: set[str]) -> str:
    """What takes the file in (`--take`), or what to ask the student for."""
    if takes_as:
        name = shlex.quote(PurePosixPath(file).name)
        return f"take it with: python -m grader.collect {assignment} --take {student} {name}"
    wanted = " and ".join(sorted(notebooks))
    return f"cannot be autograded: ask the student to upload {wanted}, then collect again"


def record_path(root: Path, assignment: str) -> Path:
    return Path(root) / "downloaded" / assignment / RECORD


def write(root: Path, assignment: str, uploads: list[Upload]) -> Path:
    """Replace the record with `uploads` (what the downloads hold now)."""
    path = record_path(root, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"schema": SCHEMA, "assignment": assignment, "uploads": [asdict(u) for u in uploads]}
    part = path.with_name(f".{path.name}.part")
    part.write_text(json.dumps(data, indent=2) + "\n")
    part.replace(path)
    return path


def load(path: Path) -> list[Upload]:
    """The record at `path`; RecordMissing when absent, RecordError saying why a file is no
    such record."""
    data = of_schema(read_json(path), SCHEMA, path)
    entries = data.get("uploads")
    if not isinstance(entries, list):
        raise RecordError(path, f"uploads is {entries!r}, not a list")
    uploads = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or set(entry) != set(FIELDS):
            raise RecordError(path, f"upload {number} is not an object of {', '.join(FIELDS)}")
        if not all(isinstance(entry[k], str) for k in FIELDS):
            raise RecordError(path, f"upload {number} has a field that is not a string")
        uploads.append(Upload(**entry))
    return uploads


def not_gradable(root: Path, assignment: str) -> dict[str, str]:
    """Student id -> one line ("submitted, not gradable as is: strided_softmax.py (a .py file,
    not the notebook); ...") for each student whose uploads collect could not take and who
    has no submission in `submitted/`. Empty when collect has written no record; a corrupt
    record raises RecordError (a ValueError), whose message names the file and the fault."""
    try:
        uploads = load(record_path(root, assignment))
    except RecordMissing:
        return {}
    reasons: dict[str, list[str]] = {}
    for upload in uploads:
        if not (Path(root) / "submitted" / upload.student / assignment).is_dir():
            reasons.setdefault(upload.student, []).append(upload.reason())
    return {student: " | ".join(lines) for student, lines in sorted(reasons.items())}
