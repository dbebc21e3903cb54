"""Feedback pages whole in themselves: nothing loaded from the internet, so a student reads
one offline, or from an LMS that serves it as a file (nbgrader_config.py's
HTMLExporter.extra_template_basedirs, grader/grading/templates/feedback/)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from grader import course

ASSIGNMENT = course.ASSIGNMENT
EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)


class Loads(HTMLParser):
    """What a page loads: each script's, stylesheet's, image's or frame's address, and the
    addresses its inline CSS reads (url(), @import)."""

    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []
        self._style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("script", "img", "iframe", "embed", "source", "audio", "video"):
            self.addresses.append(found.get("src") or "")
        if tag == "link":
            self.addresses.append(found.get("href") or "")
        if tag == "object":
            self.addresses.append(found.get("data") or "")
        self.addresses += CSS_URL.findall(found.get("style") or "")
        self._style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._style = False

    def handle_data(self, data: str) -> None:
        if self._style:
            self.addresses += CSS_URL.findall(data)


def external_loads(page: str) -> list[str]:
    """The addresses on the internet that `page` loads when opened."""
    loads = Loads()
    loads.feed(page)
    return [a for a in loads.addresses if a and EXTERNAL.match(a)]


def test_the_check_sees_a_cdn_script_and_stylesheet():
    """Does the check find what nbgrader's own template loaded (MathJax from a CDN), a
    stylesheet, and a CSS import, and pass inline scripts, data images and CSS comments?"""
    page = (
        '<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js"></script>'
        '<link rel="stylesheet" href="//cdn.example/x.css">'
        "<style>/* https://getbootstrap.com */ @import 'https://fonts.example/f.css';"
        " .a { background: url(../fonts/x.woff) }</style>"
        '<script type="text/x-mathjax-config">init()</script><img src="data:image/png;base64,AA">'
    )
    assert external_loads(page) == [
        "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js",
        "//cdn.example/x.css",
        "https://fonts.example/f.css",
    ]


@pytest.mark.nbgrader
def test_a_generated_feedback_page_loads_nothing_from_the_internet(shared_course):
    """Does `nbgrader generate_feedback`, with the course's config, write a page that loads
    no script, stylesheet or image from the internet (nbgrader's template loads MathJax
    from a CDN), its styles still inlined?"""
    root = shared_course.root
    course.nbgrader(root, "generate_feedback", ASSIGNMENT, "--force", "--student", "solution")
    page = (root / "feedback" / "solution" / ASSIGNMENT / "strided_softmax.html").read_text()
    assert external_loads(page) == []
    assert "<script" not in page  # MathJax was its only script
    assert "Bootstrap" in page and "(Score:" in page  # nbgrader's feedback template, styled
