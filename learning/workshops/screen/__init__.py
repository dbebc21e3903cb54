"""The source screen: a reading of a submission's code that decides what a person reads,
never what it scores.

Values decide points: every verdict is computed on the trusted side from data. The screen
reads, as data, the code the checks' children and the timing server load (the notebook's
definitions) and names each line that could change what grading measures or reads from
the student's process (`rules`): grading holds such a grade for an instructor's review
with the line and the reason, its points computed as without it, and the student's
`check` shows the same lines before submission.

    from learning.workshops.screen import screen_file, report_lines
    screened = screen_file(Path("strided_softmax.ipynb"))   # in a bounded child
    print("\n".join(report_lines(screened)))

`reading` is the reading itself, top to bottom; `rules` the rules and the names they cover;
`running` the bounded child and the student's words.
"""

from learning.workshops.screen.reading import Finding, read_file
from learning.workshops.screen.running import Screened, report_lines, screen_file

__all__ = ["Finding", "Screened", "read_file", "report_lines", "screen_file"]
