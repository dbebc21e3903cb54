"""The gradebook connection every grader command shares: which URL (`--db`, the course's
`CourseDirectory.db_url`, which reads I1_GRADEBOOK_URL, else the course's gradebook.db),
PostgreSQL's driver and connect timeout, opening nbgrader's Gradebook with one-line errors,
and on PostgreSQL an advisory lock so that shards started at once create its tables once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from pathlib import Path


class GradebookError(Exception):
    """The gradebook at a URL cannot be opened or read; the message says what to check."""


GRADEBOOK_URL_ENV = "I1_GRADEBOOK_URL"
"""Environment variable with the gradebook's SQLAlchemy URL: the course's nbgrader_config.py
reads it into `CourseDirectory.db_url`, so nbgrader and every grader command use it."""
POSTGRES_DRIVER = "postgresql+psycopg"
"""The PostgreSQL driver the `course` extra installs (psycopg 3, `psycopg[binary]`)."""
CONNECT_TIMEOUT_S = 20
"""Seconds a PostgreSQL connection may take before it fails (libpq's connect_timeout)."""
_CREATE_LOCK = 0x1_5747_AD3B
"""The PostgreSQL advisory lock under which a gradebook's tables are created, once."""


def database_url(url: str) -> str:
    """`url` with PostgreSQL's driver named: `postgresql://` and `postgres://` become
    `postgresql+psycopg://`, the driver the `course` extra installs, whatever SQLAlchemy's
    default for a plain URL is; a PostgreSQL URL without a `connect_timeout` gets one, so an
    unreachable server fails in seconds, not minutes. Other URLs are returned as they are."""
    url = url.strip()
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            url = f"{POSTGRES_DRIVER}://{url[len(plain) :]}"
    if url.startswith(f"{POSTGRES_DRIVER}://") and "connect_timeout=" not in url:
        url += ("&" if "?" in url else "?") + f"connect_timeout={CONNECT_TIMEOUT_S}"
    return url


def gradebook_url(root: Path, url: str | None = None) -> str:
    """The gradebook URL of the course at `root`, for every grader command: `url` when given
    (a `--db` option), else the course's `CourseDirectory.db_url` (its nbgrader_config.py,
    which reads I1_GRADEBOOK_URL), else the SQLite file `gradebook.db` in the course."""
    url = url or _course_setting(root, "db_url")
    return database_url(url) if url else f"sqlite:///{(Path(root) / 'gradebook.db').resolve()}"


def add_gradebook_option(parser: argparse.ArgumentParser) -> None:
    """The `--db URL` option of every grader command that opens the gradebook."""
    parser.add_argument(
        "--db",
        metavar="URL",
        help="the gradebook's SQLAlchemy URL, e.g. postgresql://USER:PASSWORD@HOST/DB "
        "(default: the course's CourseDirectory.db_url, which this course takes from "
        "I1_GRADEBOOK_URL; else its gradebook.db)",
    )


def course_id(root: Path) -> str:
    """The course's `CourseDirectory.course_id`, nbgrader's default when it sets none."""
    return _course_setting(root, "course_id") or "default_course"


def _course_setting(root: Path, name: str) -> str | None:
    """One `CourseDirectory` setting of the course's nbgrader_config.py; None when unset."""
    from traitlets.config.loader import PyFileConfigLoader

    if not (Path(root) / "nbgrader_config.py").is_file():
        return None
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return config.get("CourseDirectory", {}).get(name) or None


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite gradebook URL; None for any other database."""
    if not url.startswith("sqlite:///"):
        return None
    return Path(url.removeprefix("sqlite:///").split("?")[0])


def shown_url(url: str) -> str:
    """`url` as messages show it: a SQLite file's path, any other URL without its password."""
    path = sqlite_file(url)
    if path is not None:
        return str(path)
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: shown as given, less anything after a colon
        return url.split("@")[-1]


def alembic_on_path() -> None:
    """Put this Python's `bin` folder on PATH when `alembic` is not on it (a `.venv` Python
    run by its path): nbgrader runs the `alembic` command when it creates a gradebook, and
    without it the new gradebook is left without its version stamp."""
    if shutil.which("alembic") is None and (Path(sys.executable).parent / "alembic").exists():
        os.environ["PATH"] = os.pathsep.join(
            p for p in (str(Path(sys.executable).parent), os.environ.get("PATH")) if p
        )


def open_gradebook(url: str, course_id: str = "default_course"):
    """nbgrader's Gradebook at `url`; a one-line GradebookError when it is not a readable one.

    On PostgreSQL the gradebook is opened under an advisory lock, so that processes started
    at once (shards on several nodes) create its tables and course row once, not in a race.
    """
    from nbgrader.api import Gradebook  # slow to import: only when a gradebook is opened
    from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

    alembic_on_path()
    url = database_url(url)
    try:
        with _created_once(url):
            return Gradebook(url, course_id)
    except DatabaseError as exc:
        reason = _first_line(exc.orig if exc.orig is not None else exc)
        if sqlite_file(url) is not None:
            raise GradebookError(
                f"cannot read the gradebook {shown_url(url)} ({reason}): check that it is the "
                "course's nbgrader gradebook and that no other process holds it"
            ) from None
        raise GradebookError(
            f"cannot open the gradebook {shown_url(url)} ({reason}): check the URL (--db, "
            f"{GRADEBOOK_URL_ENV} or CourseDirectory.db_url) and that its server is up"
        ) from None
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as exc:
        reason = _first_line(exc)
        raise GradebookError(
            f"cannot open the gradebook {shown_url(url)} ({reason}): give an SQLAlchemy URL "
            "such as postgresql://USER:PASSWORD@HOST:5432/DATABASE, with the `course` extra "
            'installed (pip install -e ".[course]" brings the psycopg driver)'
        ) from None


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


@contextlib.contextmanager
def _created_once(url: str):
    """Hold a PostgreSQL advisory lock for the block (nothing for other databases)."""
    if not url.startswith("postgresql"):
        yield
        return
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _CREATE_LOCK})
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _CREATE_LOCK})
    finally:
        engine.dispose()
