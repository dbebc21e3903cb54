"""The seconds each test file took (setup, call and teardown of its tests, on every xdist
worker), printed at the end of the run with the files over their budget flagged:
`--file-budget=SECONDS` (`make test` passes 60)."""

from __future__ import annotations

from collections import defaultdict

import pytest

SHOWN = 10
"""Files the table lists at least (every file over its budget is listed too)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """--file-budget: print the time per test file at the end, flagging files over SECONDS."""
    parser.addoption(
        "--file-budget",
        type=float,
        metavar="SECONDS",
        help="at the end, print the seconds each test file took and flag those over SECONDS",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Count on the controller (or a run without xdist), where every worker's reports arrive."""
    budget = config.getoption("file_budget")
    if budget is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileBudget(budget), "file_budget_table")


class FileBudget:
    """Each file's reported seconds, summed as the reports arrive."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    @pytest.hookimpl(trylast=True)  # after --durations: the last table before the totals
    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_sep("=", f"seconds per test file (budget {self.budget_s:g} s)")
        for line in table(self.seconds, self.budget_s):
            terminalreporter.write_line(line)


def table(seconds: dict[str, float], budget_s: float) -> list[str]:
    """The slowest files, every file over `budget_s` among them, then the total."""
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    over = [path for path, s in ranked if s > budget_s]
    shown = ranked[: max(SHOWN, len(over))]
    lines = [f"{s:8.1f} s  {path}{'  OVER BUDGET' if s > budget_s else ''}" for path, s in shown]
    rest = ranked[len(shown) :]
    if rest:
        lines.append(f"{'':12}({len(rest)} more files, each at most {rest[0][1]:.1f} s)")
    lines.append(
        f"{sum(seconds.values()):8.1f} s  total of {len(ranked)} files (summed over workers); "
        f"{len(over)} over {budget_s:g} s"
    )
    return lines
