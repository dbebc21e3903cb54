"""The LMS's downloads: the release notebooks in each (a zip of submissions, or a loose file),
by student, named as the course's `FileNameCollectorPlugin.named_regexp` says, and the other
files whose names give their student; a later download's file wins.

- Every download stays in `downloaded/<assignment>/archive/` (a zip of submissions, or a
  loose notebook), taken oldest first by its file's modification time (the moment it was
  saved), then by name. An LMS download holds each student's latest submission, so a later
  download replaces what an earlier one gave for every student it holds; students it lacks
  keep theirs. One download holding two notebooks for one student is refused for them.
- File names are matched with the course's `FileNameCollectorPlugin.named_regexp` (Canvas's
  pattern in nbgrader_config.py: `student_id`, `file_id`, and `late`, Canvas's `late_`
  marker, kept as evidence).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader import uploads

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
"""A notebook larger than this in a download is skipped, with a warning."""


class DownloadError(ValueError):
    """A download that cannot be collected as it is: the message says why and what to do."""


@dataclass(frozen=True)
class Found:
    """One student's notebook in one download."""

    student: str
    notebook: str  # the release notebook's file name
    download: str
    member: str
    data: bytes
    lms_late: bool


def downloads(folder: Path) -> list[Path]:
    """The downloads in `folder`, oldest first (modification time, then name)."""
    if not folder.is_dir():
        return []
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name))


def _members(path: Path) -> list[tuple[str, zipfile.ZipInfo | None]]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            return [(i.filename, i) for i in archive.infolist() if not i.is_dir()]
    return [(path.name, None)]


@dataclass(frozen=True)
class Stray:
    """A file in a download whose name gives its student but is not a release notebook's."""

    student: str
    download: str
    member: str


def find_notebooks(
    download: Path, pattern: str, notebooks: set[str], say, stray=lambda _: None
) -> list[Found]:
    """The release notebooks in one download, by student; each other file whose name gives
    its student goes to `stray`, and the rest are skipped with a line to `say`."""
    found = []
    for member, info in _members(download):
        match = re.match(pattern, f"{download.name}/{member}")
        named = match is not None and "student_id" in match.groupdict()
        notebook = Path(match["file_id"]).stem + ".ipynb" if named else ""
        if notebook not in notebooks:
            owner = uploads.owner(member)
            if owner is None:
                say(f"skipped {download.name}: {member}: not named as the LMS names submissions")
            else:
                stray(Stray(owner[0], download.name, member))
            continue
        size = info.file_size if info else download.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            say(f"skipped {download.name}: {member}: {size} bytes, over {MAX_NOTEBOOK_BYTES}")
            continue
        if info is None:
            data = download.read_bytes()
        else:
            with zipfile.ZipFile(download) as archive:
                data = archive.read(info)
        late = bool(match.groupdict().get("late"))
        found.append(Found(match["student_id"], notebook, download.name, member, data, late))
    return found


def latest(found: list[Found], order: list[str]) -> dict[tuple[str, str], Found]:
    """Each (student, notebook)'s file from the latest download that holds it; CollectError
    when one download holds two for the same student and notebook."""
    rank = {name: i for i, name in enumerate(order)}
    chosen: dict[tuple[str, str], Found] = {}
    for item in sorted(found, key=lambda f: rank[f.download]):
        key = (item.student, item.notebook)
        old = chosen.get(key)
        if old is not None and old.download == item.download:
            raise DownloadError(
                f"{item.download} holds two files for student {item.student}: {old.member} and "
                f"{item.member}; remove the older one from the download and collect again"
            )
        chosen[key] = item
    return chosen


def read_member(download: Path, member: str) -> bytes:
    """One file of a download (a zip's member, or the loose file itself), size-checked."""
    if zipfile.is_zipfile(download):
        with zipfile.ZipFile(download) as archive:
            info = archive.getinfo(member)
            if info.file_size > MAX_NOTEBOOK_BYTES:
                raise DownloadError(f"{member}: {info.file_size} bytes, over {MAX_NOTEBOOK_BYTES}")
            return archive.read(info)
    data = download.read_bytes()
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise DownloadError(f"{member}: {len(data)} bytes, over {MAX_NOTEBOOK_BYTES}")
    return data
