"""Student text as an instructor's terminal shows it: every control character in plain view.

A student writes their answers, their file names, their exceptions' messages and (through
the LMS) sometimes their student id. Printed raw, an escape sequence in any of them runs in
the instructor's terminal: it erases lines, sets the window's title, or writes the clipboard
(OSC 52); a bidi override reorders what a line seems to say. `visible` writes each such
character as its Python escape (`\\x1b`, `\\u202e`), so that a listing shows what the student
wrote and does nothing else. Every command that prints student text prints it through it.
"""

from __future__ import annotations

import unicodedata

HIDDEN_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
"""Unicode's controls (C0, C1, DEL), format characters (the bidi overrides and isolates,
zero-width spaces), lone surrogates (a file name that is not UTF-8, which a terminal's
encoder would refuse), private-use and unassigned code points, and the line and paragraph
separators: nothing of these shows as itself."""


def visible(text: object, *, newlines: bool = False) -> str:
    """`text` as a string with every hidden character (`HIDDEN_CATEGORIES`) written as its
    escape (`\\x1b`); with `newlines`, line breaks and tabs stay (a student's answer of
    several lines), else they are escaped too, so that one line of a listing stays one line."""
    return "".join(_shown(char, newlines) for char in str(text))


def _shown(char: str, newlines: bool) -> str:
    if unicodedata.category(char) not in HIDDEN_CATEGORIES or (newlines and char in "\n\t"):
        return char
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")
