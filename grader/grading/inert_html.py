"""Feedback pages in which nothing a student wrote runs: their markdown and outputs sanitised.

nbconvert's HTMLExporter trusts the notebook it renders: raw HTML in a markdown cell passes
through, a `text/html` output (`display(HTML(...))`) is written as it is, and an
`application/javascript` output (`display(Javascript(...))`) becomes a `<script>`. nbgrader's
feedback template renders markdown cells itself, past nbconvert's `sanitize_html` switch. A
feedback page is uploaded to the LMS and opened in a browser, so a student's `<script>` or
`<img onerror=...>` would run there, in the LMS's page or the student's own.

`InertHTMLExporter` is the HTMLExporter `nbgrader generate_feedback` uses (the course's
nbgrader_config.py, `GenerateFeedback.exporter_class`). After the course's preprocessors:

- every output keeps only the kinds a page shows without running anything (`SHOWN`: text,
  HTML, markdown, LaTeX source, PNG, JPEG, SVG), so scripts and widgets are gone;
- an image output keeps, of its metadata, only a numeric width and height (nbconvert writes
  them into the `<img>` tag unquoted);
- a code cell's execution count is a number or nothing (nbconvert writes it unescaped);
- a grade id is escaped (nbgrader's template writes it into links unescaped);

and in the template, rendered markdown (cells, outputs) and HTML outputs pass through `clean`,
the nh3 sanitiser (Rust's ammonia): formatting, tables, code and images stay; scripts, event
attributes, styles, frames, forms and `javascript:` links go; a `data:` address stays only as
an image's source, where a browser runs nothing. SVG outputs are shown as images, never
inline. Plots (PNG outputs) and text outputs are as nbconvert writes them: escaped.
"""

from __future__ import annotations

import html
import re

import nh3
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbformat import NotebookNode

SHOWN = (
    "text/plain",
    "text/html",
    "text/markdown",
    "text/latex",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
)
"""The output kinds a feedback page shows; every other kind (scripts, widgets) is dropped."""
IMAGES = ("image/png", "image/jpeg")
"""The outputs whose metadata nbconvert's template writes into their `<img>` tag."""
_IMAGE_DATA = re.compile(r"\s*data:image/(png|jpeg|gif|webp|svg\+xml);base64,[\w+/=\s]*\Z", re.I)
_CLEANER = nh3.Cleaner(
    attributes={
        **nh3.ALLOWED_ATTRIBUTES,
        "*": {"class", "lang", "title"},  # class: highlighted code, pandas' tables
        **{f"h{level}": {"id"} for level in range(1, 7)},  # the headings' anchors
    },
    url_schemes=nh3.ALLOWED_URL_SCHEMES | {"data"},  # then only images' (_attribute)
    attribute_filter=lambda tag, name, value: _attribute(tag, name, value),
)


def _attribute(tag: str, name: str, value: str) -> str | None:
    """An attribute as it stays: a `data:` address only as an image's source, of an image."""
    if value.lstrip().lower().startswith("data:"):
        return value if (tag, name) == ("img", "src") and _IMAGE_DATA.match(value) else None
    return value


def clean(fragment: str | bytes) -> str:
    """An HTML fragment a student wrote, with nothing left in it that runs (see the module)."""
    text = fragment.decode() if isinstance(fragment, bytes) else str(fragment)
    return _CLEANER.clean(text)


def inert_cell(cell: NotebookNode) -> None:
    """Make what nbconvert writes of `cell` outside `clean` inert (see the module)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    if isinstance(meta, dict) and "grade_id" in meta:
        meta["grade_id"] = html.escape(str(meta["grade_id"]))
    if cell.cell_type != "code":
        return
    if not isinstance(cell.get("execution_count"), int):
        cell.execution_count = None
    for output in cell.get("outputs", []):
        if isinstance(output.get("data"), dict):
            output["data"] = {kind: v for kind, v in output["data"].items() if kind in SHOWN}
        if "metadata" in output:
            output["metadata"] = _image_sizes(output["metadata"])


def _image_sizes(metadata: object) -> dict:
    """Of an output's metadata, each image's numeric width and height, nothing else."""
    if not isinstance(metadata, dict):
        return {}
    return {
        kind: {k: v for k, v in sizes.items() if k in ("width", "height") and _number(v)}
        for kind, sizes in metadata.items()
        if kind in IMAGES and isinstance(sizes, dict)
    }


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class InertHTMLExporter(HTMLExporter):
    """nbconvert's HTMLExporter for pages a student's notebook must not run anything in."""

    def _preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        nb, resources = super()._preprocess(nb, resources)
        for cell in nb.cells:
            inert_cell(cell)
        return nb, resources

    def _init_resources(self, resources: dict) -> dict:
        """The template's switches: HTML outputs cleaned, scripts and widgets left out
        (whatever the config says), SVG as an image."""
        resources = super()._init_resources(resources)
        resources["should_sanitize_html"] = True
        resources["should_not_encode_svg"] = False
        return resources

    @pass_context
    def markdown2html(self, context, source: str) -> str:
        """Markdown rendered as nbconvert renders it (attachments inlined), then cleaned."""
        return clean(super().markdown2html(context, source))

    def default_filters(self):
        yield from super().default_filters()
        yield ("clean_html", clean)
