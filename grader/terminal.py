"""Student text as an instructor's terminal shows it: every control character in plain view.

A student writes their answers, their file names, their exceptions' messages and (through
the LMS) sometimes their student id. Printed raw, an escape sequence in any of them runs in
the instructor's terminal: it erases lines, sets the window's title, or writes the clipboard
(OSC 52); a bidi override reorders what a line seems to say. `visible` writes each such
character as its Python escape (`\\x1b`, `\\u202e`), so that a listing shows what the student
wrote and does nothing else. Every command that prints student text prints it through it.
"""

from __future__ import annotations

import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""The arabic letter mark, the left-to-right and right-to-left marks, the embeddings and
overrides, and the isolates: the characters that reorder the text around them."""
_HIDDEN = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}\ud800-\udfff]")
"""C0 and C1 controls, DEL, the bidi controls, and lone surrogates (a file name that is not
UTF-8, which a terminal's encoder would refuse)."""


def visible(text: object, *, newlines: bool = False) -> str:
    """`text` as a string with every control character written as its escape (`\\x1b`);
    with `newlines`, line breaks and tabs stay (a student's answer of several lines), else
    they are escaped too, so that one line of a listing stays one line."""

    def escaped(match: re.Match) -> str:
        char = match.group()
        if newlines and char in "\n\t":
            return char
        return char.encode("unicode_escape", "backslashreplace").decode("ascii")

    return _HIDDEN.sub(escaped, str(text))
