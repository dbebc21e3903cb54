"""The course secret: the token every hidden test case is drawn from, kept outside git.

    python -m grader.seeding new [--course DIR] [--force]

It lives in `<course>/course_secret.txt` (the course folder holds `nbgrader_config.py`),
is git-ignored, readable by its owner alone, and never ships: not in the student bundle,
the release, the feedback or a sandbox. The same secret, student and submission time draw
the same cases, so a regrade reproduces its grades; a new secret draws other cases for
everyone. `I1_COURSE_SECRET` (64 hex characters) overrides the file, for CI and throwaway
courses. Grading refuses to start without a secret (`grader.grading.readiness.ready_to_grade`).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path

FILE = "course_secret.txt"
ENV = "I1_COURSE_SECRET"
"""An environment variable that, when set, is the secret (for CI and throwaway courses)."""
CONFIG = "nbgrader_config.py"
_TOKEN = re.compile(r"[0-9a-f]{64}")


class MissingSecret(Exception):
    """The course has no usable secret; the one-line message names the file and the command
    that makes one."""


def command(root: Path) -> str:
    """The command that creates the secret of the course at `root`."""
    return f"python -m grader.seeding new --course {root}"


def secret_path(root: Path) -> Path:
    """Where the secret of the course at `root` lives."""
    return Path(root).absolute() / FILE


def course_folder(start: Path | None = None) -> Path:
    """The course around `start` (default: here): the nearest folder, `start` or above it,
    that holds nbgrader_config.py; `start` itself when none does."""
    here = Path(start or Path.cwd()).absolute()
    return next((p for p in (here, *here.parents) if (p / CONFIG).is_file()), here)


def course_secret(root: Path) -> str:
    """The secret of the course at `root`: `I1_COURSE_SECRET` when set, else the token in
    `<root>/course_secret.txt`. MissingSecret, saying what to run, when it is absent or not
    64 hex characters."""
    path = secret_path(root)
    made_by = command(path.parent)
    if os.environ.get(ENV) is not None:
        token = os.environ[ENV].strip().lower()
        if not _TOKEN.fullmatch(token):
            raise MissingSecret(
                f"{ENV} is set but is not 64 hex characters: unset it to use {path} (made by "
                f"`{made_by}`), or set it to the output of "
                "`python -c 'import secrets; print(secrets.token_hex(32))'`."
            )
        return token
    try:
        token = path.read_text(encoding="ascii").strip().lower()
    except FileNotFoundError:
        raise MissingSecret(
            f"no course secret at {path}: create it with `{made_by}` (every hidden test case "
            'is drawn from it; docs/instructor-guide.md, "The course secret").'
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        token, why = "", getattr(exc, "strerror", None) or str(exc)
    else:
        why = "it is not 64 hex characters"
    if not _TOKEN.fullmatch(token):
        raise MissingSecret(
            f"cannot use the course secret at {path} ({why}): restore the one you grade with, "
            f"or make a new one with `{made_by} --force` (a new one draws other hidden cases)."
        )
    return token


def new_secret(root: Path, force: bool = False) -> Path:
    """Write a fresh random secret to `<root>/course_secret.txt`, mode 0600, and return its
    path. FileExistsError when there is one already and not `force` (rotation)."""
    path = secret_path(root)
    token = secrets.token_hex(32)
    if not force:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        _write(fd, token)
        return path
    fresh = path.with_name(f".{FILE}.{os.getpid()}.new")  # then renamed over the old one
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        _write(fd, token)
        os.replace(fresh, path)
    finally:
        fresh.unlink(missing_ok=True)
    return path


def _write(fd: int, token: str) -> None:
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)


ADVICE = (
    "Keep it until this term's grades are final: the same secret, student and submission "
    "time draw the same hidden cases, so regrades reproduce grades. Rotate it (--force) "
    "between cohorts, before the first autograde; rotating mid-term changes every regrade's "
    "hidden cases. Treat it like a password (it is git-ignored and never ships); if it "
    "leaked, rotate it and regrade."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.seeding", description=__doc__.splitlines()[0]
    )
    actions = parser.add_subparsers(dest="action", required=True)
    new = actions.add_parser("new", help=f"write a fresh secret to <course>/{FILE}")
    new.add_argument("--course", default=".", help="the course folder (default: here)")
    new.add_argument("--force", action="store_true", help="replace an existing secret (rotate)")
    args = parser.parse_args(argv)
    root = Path(args.course).absolute()
    if not (root / CONFIG).is_file():
        print(
            f"secret: {root} is not a course folder (it has no {CONFIG}); pass --course with "
            "the folder that holds it.",
            file=sys.stderr,
        )
        return 2
    existed = secret_path(root).exists()
    try:
        path = new_secret(root, args.force)
    except FileExistsError:
        print(
            f"secret: {secret_path(root)} already exists; it draws every hidden test case, so "
            "keep it, or pass --force to rotate it (regrades then draw other cases).",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        print(f"secret: cannot write {secret_path(root)}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{'Replaced' if existed else 'Wrote'} the course secret {path} (mode 0600).")
    if os.environ.get(ENV) is not None:
        print(f"Note: {ENV} is set in this shell and overrides the file while it is.")
    print(ADVICE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
