"""The check's own code: its modules import each other in one direction only, and a failure
has one name from the case that shows it to the hint it leads to."""

from __future__ import annotations

import ast
from pathlib import Path

from learning.workshops.checking.hints import HintId
from learning.workshops.checking.records import Failure

CHECKING = Path(__file__).resolve().parents[1] / "learning" / "workshops" / "checking"
PACKAGE = "learning.workshops.checking"


def imports(path: Path) -> set[str]:
    """The checking modules `path` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                found |= {alias.name for alias in node.names}
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module.removeprefix(PACKAGE + ".").split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix(PACKAGE + ".").split(".")[0]
                for a in node.names
                if a.name.startswith(PACKAGE + ".")
            }
    return found - {path.stem}


def graph() -> dict[str, set[str]]:
    return {p.stem: imports(p) for p in CHECKING.glob("*.py") if p.stem != "__init__"}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the modules, as the path that closes it, or None."""
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for other in sorted(edges.get(module, ())):
            if state.get(other) == 1:
                return [*path, module, other]
            if other not in state and (found := visit(other, [*path, module])):
                return found
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state and (found := visit(module, [])):
            return found
    return None


def test_no_checking_module_imports_one_that_imports_it():
    """Do the check's modules import each other without a cycle (cases and followons
    apart, lazy imports inside functions counted too)?"""
    edges = graph()
    assert "cases" not in edges["followons"] and "followons" in edges["cases"]
    assert cycle(edges) is None, " -> ".join(cycle(edges))


def test_the_cycle_finder_can_find_a_cycle():
    """Can the test above fail: does it find a cycle where there is one?"""
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_private_name_crosses_a_module():
    """Does every checking module import only public names from the others?"""
    crossing = []
    for path in CHECKING.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                crossing += [f"{path.stem}: {a.name}" for a in node.names if a.name[0] == "_"]
    assert crossing == []


def test_a_failure_and_its_hint_have_one_name():
    """Is every failure that shares its name with a hint spelled as that hint, so the wire,
    the sidecars and the hints say the same word?"""
    shared = [f for f in Failure if f.name in HintId.__members__]
    assert len(shared) >= 13
    assert all(HintId[f.name].value == f.value for f in shared), [
        (f.name, f.value, HintId[f.name].value) for f in shared if HintId[f.name] != f.value
    ]


def test_the_json_report_names_its_schema_and_failures_as_hints():
    """Does `check --json` say which schema it is, and spell a case's failure as the hint
    it leads to?"""
    from learning.workshops.check import SCHEMA, Report
    from learning.workshops.checking.records import CaseResult, Verdict

    result = CaseResult("contiguous", Verdict(Failure.NO_KERNEL, "no Triton kernel ran"))
    report = Report("strided_softmax", "x.py", "interpreter", "cpu", 1, [result], [])
    data = report.to_json()
    assert data["schema"] == SCHEMA == "i1-check/2"
    assert data["cases"][0]["failure"] == HintId.NO_KERNEL == "no-kernel"


def test_feedback_has_words_for_every_failure():
    """Does the hidden cells' feedback have its own words for every failure a case can end
    with (the checker's own fault aside), keyed by the same names?"""
    from grader.grading.feedback import FAILURE_WORDS

    assert set(FAILURE_WORDS) == {f.value for f in Failure} - {Failure.INTERNAL_ERROR}
