"""The record of uploads collect could not take (grader.uploads): what each file is, and a
loader that refuses a corrupt record with its reason."""

from __future__ import annotations

import pytest

from grader import uploads
from grader.uploads import Upload
from learning.workshops.checking.sidecars import RecordError, RecordMissing

NOTEBOOKS = {"strided_softmax.ipynb"}


@pytest.mark.parametrize(
    ("uploaded", "why", "takes_as"),
    [
        ("strided_softmax (1).ipynb", "a renamed copy of strided_softmax.ipynb", NOTEBOOKS),
        ("strided_softmax-1 (1).ipynb", "a renamed copy of strided_softmax.ipynb", NOTEBOOKS),
        ("my work.ipynb", "a notebook not named strided_softmax.ipynb", NOTEBOOKS),
        ("strided_softmax.py", "a .py file, not the notebook", set()),
        ("notes.txt", "a .txt file, not the notebook", set()),
        ("README", "a file with no extension, not the notebook", set()),
    ],
)
def test_what_each_upload_is(uploaded, why, takes_as):
    """Is each kind of upload told apart, and only a notebook taken as the release's?"""
    assert uploads.classify(uploaded, NOTEBOOKS) == (why, "".join(takes_as))


def test_the_student_comes_from_canvas_prefix():
    """Does Canvas's prefix give the student, the uploaded name and the late marker, and a
    name without it give nothing?"""
    assert uploads.owner("doejane_late_12345_987001_strided_softmax (1).ipynb") == (
        "12345",
        "strided_softmax (1).ipynb",
        True,
    )
    assert uploads.owner("sub/doejane_12345_987001_notes.txt") == ("12345", "notes.txt", False)
    assert uploads.owner("strided_softmax.py") is None


def test_a_record_round_trips_and_a_corrupt_one_is_refused(tmp_path):
    """Does a written record load back; is an absent one RecordMissing (no uploads) and a
    corrupt one RecordError with its reason, never None for both?"""
    path = uploads.record_path(tmp_path, "a")
    with pytest.raises(RecordMissing):
        uploads.load(path)
    assert uploads.not_gradable(tmp_path, "a") == {}
    kept = [Upload("1", "s.zip", "x_1_2_strided_softmax.py", "a .py file, not the notebook", "f")]
    uploads.write(tmp_path, "a", kept)
    assert uploads.load(path) == kept
    for text, reason in (
        ("{", "not JSON"),
        ('{"schema": "i1-uploads/2", "uploads": []}', "schema is 'i1-uploads/2'"),
        ('{"schema": "i1-uploads/1", "uploads": [{"student": 1}]}', "upload 1 is not an object"),
    ):
        path.write_text(text)
        with pytest.raises(RecordError, match=reason):
            uploads.not_gradable(tmp_path, "a")


def test_only_students_without_a_submission_are_not_gradable(tmp_path):
    """Is a student with a folder in submitted/ left out, and two files of one student given
    on one line?"""
    py = Upload("1", "s.zip", "x_1_2_strided_softmax.py", "a .py file, not the notebook", "ask")
    txt = Upload("1", "s.zip", "x_1_3_notes.txt", "a .txt file, not the notebook", "ask")
    other = Upload("2", "s.zip", "y_2_4_notes.txt", "a .txt file, not the notebook", "ask")
    uploads.write(tmp_path, "a", [py, txt, other])
    (tmp_path / "submitted" / "2" / "a").mkdir(parents=True)
    assert uploads.not_gradable(tmp_path, "a") == {
        "1": "submitted, not gradable as is: strided_softmax.py (a .py file, not the notebook); "
        "ask | submitted, not gradable as is: notes.txt (a .txt file, not the notebook); ask"
    }
