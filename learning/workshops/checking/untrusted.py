"""Read what a submission made without letting it raise in the checker: its objects and its data.

A student's object can lie about itself: its class's `__name__` can be a metaclass property
that raises, its `__str__` can raise or return a string subclass whose methods raise, its
`__class__` can name another class (so `isinstance` asks it), its `__traceback__` can be a
property. The checker reads such objects only through `class_name`, `made`, `text` and
`traceback_of`, which read past the object's own hooks and say what could not be read
instead of raising. Data a child sends (a JSON line) is decoded by `decoded`, which refuses
what was not asked for: a line that is not JSON, nests too deep, or is not an object.
Whatever fails here is the submission's doing, and its failure names the cause.
"""

from __future__ import annotations

import json
from types import TracebackType

NAME_LIMIT = 100
"""Characters kept of a class's name."""
TEXT_LIMIT = 100_000
"""Characters kept of any text read from a student's object (the callers cut it further)."""
MAX_DEPTH = 32
"""How deep a child's JSON may nest: every record the checker asks for is under 10 deep."""
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "true or false"}
_JSON_KINDS[type(None)] = "null"
_TYPE_NAME = type.__dict__["__name__"]
_TRACEBACK = BaseException.__dict__["__traceback__"]
_CAUSE = BaseException.__dict__["__cause__"]


class Unreadable(ValueError):
    """Data from a child that is not what the checker asked for; the message says how."""


def plain_text(value: str) -> str:
    """`value` as a plain `str`: a subclass's own methods (strip, splitlines) cannot run."""
    return str.__str__(value)


def class_name(obj: object) -> str:
    """The name of `obj`'s real class (`type(obj)`, not what `obj.__class__` claims), read
    past any metaclass, without NUL characters and cut to NAME_LIMIT."""
    return plain_text(_TYPE_NAME.__get__(type(obj)))[:NAME_LIMIT].replace("\0", "?")


def made(obj: object, *classes: type) -> bool:
    """Whether `obj`'s real class is one of `classes` or derives from one (`isinstance`
    without asking `obj.__class__`, which a student's object can make raise or lie)."""
    return issubclass(type(obj), classes)


def text(obj: object) -> str:
    """`str(obj)` as a plain string cut to TEXT_LIMIT, or, when its `__str__` raises or
    returns no string, a sentence in parentheses that says so."""
    try:
        said = str(obj)
    except Exception as exc:  # the object's own __str__: its failure, said as such
        return f"(its message could not be read: its __str__ raised {class_name(exc)})"
    if not made(said, str):
        return "(its message could not be read: its __str__ returned no string)"
    return plain_text(said)[:TEXT_LIMIT]


def unreadable(said: str) -> bool:
    """Whether `said`, from `text`, is its sentence for a message that could not be read."""
    return said.startswith("(its message could not be read")


def traceback_of(exc: BaseException) -> TracebackType | None:
    """The traceback Python recorded for `exc`, whatever its class says `__traceback__` is."""
    return _TRACEBACK.__get__(exc) if made(exc, BaseException) else None


def cause_of(exc: BaseException) -> BaseException | None:
    """The exception `exc` was raised from (`raise ... from`), read past its class's hooks."""
    return _CAUSE.__get__(exc) if made(exc, BaseException) else None


def decoded(line: bytes | str) -> dict:
    """The JSON object one line of a child's report holds; Unreadable when it is not JSON,
    nests deeper than MAX_DEPTH, or is not an object."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise Unreadable(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise Unreadable(f"not JSON ({class_name(exc)})") from None
    if not isinstance(value, dict):
        raise Unreadable(f"JSON {_JSON_KINDS.get(type(value), 'value')}, not an object")
    if depth(value) > MAX_DEPTH:
        raise Unreadable(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value: object) -> int:
    """How deep JSON data nests (a scalar 0, `[]` 1), walked without recursion and no
    further than just past MAX_DEPTH."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, level = stack.pop()
        deepest = max(deepest, level)
        inner = item.values() if isinstance(item, dict) else item
        stack.extend((v, level + 1) for v in inner if isinstance(v, (dict, list)))
    return deepest
