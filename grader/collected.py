"""What collect records beside each submission it writes: `i1_collected.json`, and its
typed loader (a missing record and a corrupt one told apart, the latter with its reason).

- A submission that is new or changed is written to `submitted/<student>/<assignment>/`:
  the notebook, `timestamp.txt` (its time, none when unknown) and `i1_collected.json` (which
  download and file it came from, the LMS's late marker, its time and where that came from;
  nbgrader never copies it on, `CourseDirectory.ignore`; `load_evidence` reads it back and
  refuses a bad file with its reason, which collect notes and reads as no `--take`, and the
  export as an unknown late marker). Unchanged ones are not touched, so
  `grader.parallel --changed` grades exactly the new and resubmitted work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from learning.workshops.checking.sidecars import RecordError, of_schema, read_json

EVIDENCE = "i1_collected.json"
"""What collect writes beside each submission it takes (ignored by nbgrader's copies)."""
SCHEMA = "i1-collected/1"


@dataclass(frozen=True)
class Evidence:
    """What collect records beside a submission it writes (`EVIDENCE`): the download and the
    file in it of each notebook, the LMS's late marker, the submission time and where it came
    from, when it was collected, and why `--take` took it in (None: collect matched it)."""

    files: tuple[tuple[str, str], ...]  # (download, file) of each notebook
    lms_late: bool
    submitted_at: str | None
    time_from: str | None
    collected: str
    taken: str | None = None

    def to_json(self) -> dict:
        files = [{"download": download, "file": file} for download, file in self.files]
        return {"schema": SCHEMA, **asdict(self), "files": files}


def load_evidence(folder: Path) -> Evidence:
    """What collect recorded beside the submission in `folder`; RecordMissing when it wrote
    nothing there, RecordError saying why a file is not its record."""
    path = Path(folder) / EVIDENCE
    data = dict(of_schema(read_json(path), SCHEMA, path))
    data.pop("schema")
    try:
        evidence = Evidence(**data)
    except TypeError as exc:
        raise RecordError(path, f"not collect's record: {exc}") from None
    files = evidence.files
    pairs = isinstance(files, list) and all(
        isinstance(f, dict) and set(f) == {"download", "file"} for f in files
    )
    if not pairs or not all(isinstance(v, str) for f in files for v in f.values()):
        raise RecordError(path, f"files is {files!r}, not a list of {{download, file}} strings")
    if not isinstance(evidence.lms_late, bool):
        raise RecordError(path, f"lms_late is {evidence.lms_late!r}, not true or false")
    for name in ("submitted_at", "time_from", "collected", "taken"):
        value = getattr(evidence, name)
        if not isinstance(value, str) and (value is not None or name == "collected"):
            raise RecordError(path, f"{name} is {value!r}, not a string")
    return replace(evidence, files=tuple((f["download"], f["file"]) for f in files))
