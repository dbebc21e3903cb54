"""A JupyterLab of the browser test's own, and what a student sees in it (tests/test_browser.py).

`lab(root, home)` starts the students' JupyterLab (`python -m learning.workshops.lab`) on a
free loopback port with a random token, serving
`root`, with a temporary Jupyter home of its own in `home` (config, data, runtime, settings,
workspaces), and stops it and every kernel it started on exit. `run_notebook` opens a
notebook in headless chromium (Debian's, at /usr/bin/chromium: Playwright downloads no browser
here), runs it as a student does, and reads back from the rendered page what each cell shows;
`run_in_terminal` opens a terminal from the File menu, types a command line and reads back
what the terminal shows.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRAWING = frozenset({"draw_view", "plot_warps", "plot_layouts"})
"""The course's drawing functions: a cell that calls one must show a picture."""

SETTINGS = {
    # no toast asking whether to fetch Jupyter's news, no update check
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # every cell attached to the page, so each can be read and the screenshot is whole
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "scrollPastEnd": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # the terminal's text also in the page (xterm.js draws on a canvas otherwise); what the
    # shell runs is unchanged
    "@jupyterlab/terminal-extension/plugin": {"screenReaderMode": True},
}
"""User settings of the test's JupyterLab, written before it starts."""

START_TIMEOUT_S = 90
CELL_TIMEOUT_MS = 180_000


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab: its address, token and the folder it serves."""

    url: str
    token: str
    root: Path
    home: Path

    def api(self, method: str, path: str) -> object:
        """Call the server's REST API; return the decoded JSON answer (None when empty)."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """Shut down every kernel the server runs (each notebook gets a fresh one)."""
        for kernel in self.api("GET", "api/kernels"):
            self.api("DELETE", f"api/kernels/{kernel['id']}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(home: Path) -> dict[str, str]:
    """A student's environment for the server and its kernels: the repository importable, a
    Jupyter home of its own, matplotlib's notebook backend, no course secret of the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTEST"))}
    for name in ("MPLBACKEND", "TRITON_INTERPRET", "IPYTHONDIR"):
        env.pop(name, None)  # conftest's Agg backend would hide every figure
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["I1_COURSE_SECRET"] = secrets.token_hex(32)
    for name in ("config", "data", "runtime", "ipython"):
        (home / name).mkdir(parents=True, exist_ok=True)
    env["JUPYTER_CONFIG_DIR"] = str(home / "config")
    env["JUPYTER_DATA_DIR"] = str(home / "data")
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    env["IPYTHONDIR"] = str(home / "ipython")
    return env


def write_settings(folder: Path) -> None:
    for plugin, values in SETTINGS.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def processes_mentioning(text: str) -> list[int]:
    """Ids of the live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@contextmanager
def lab(root: Path, home: Path) -> Iterator[Lab]:
    """JupyterLab serving `root`, its Jupyter home in `home`; stopped, kernels and all, on
    exit."""
    write_settings(home / "settings")
    port, token = free_port(), secrets.token_hex(24)
    command = [
        sys.executable,
        "-m",
        "learning.workshops.lab",  # the students' JupyterLab
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")  # containers and CI run as root
    log = (home / "server.log").open("w")
    server = subprocess.Popen(
        command,
        cwd=root,
        env=server_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    running = Lab(f"http://127.0.0.1:{port}/", token, root, home)
    try:
        wait_until_up(running, server)
        yield running
    finally:
        stop(running, server)
        log.close()


def wait_until_up(running: Lab, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early:\n{server_log(running)}")
        try:
            running.api("GET", "api/status")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer in {START_TIMEOUT_S} s:\n{server_log(running)}")


def server_log(running: Lab) -> str:
    return (running.home / "server.log").read_text(errors="replace")[-4000:]


def stop(running: Lab, server: subprocess.Popen) -> None:
    """Shut the kernels down, then the server; kill whatever of ours is left."""
    if server.poll() is None:
        try:
            running.shut_down_kernels()
        except (urllib.error.URLError, ConnectionError):
            pass
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    for pid in processes_mentioning(str(running.home)):  # kernels name their runtime file
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# What a notebook is expected to show, from its JSON.


def drawing_cells(notebook: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells that always draw: they call a drawing function, or a
    function the notebook defines that does, outside any definition of their own and any
    `if` (a picture that waits for a condition, such as the explorer's exercise waiting for
    a prediction, is not owed)."""
    trees = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            code = "\n".join(  # magics and shell escapes as a statement that calls nothing
                re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in cell.source.splitlines()
            )
            trees[index] = ast.parse(code)
    drawing = set(DRAWING)
    definitions = {
        node.name: node
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }
    grew = True
    while grew:  # functions that call a drawing function, directly or not
        grew = False
        for name, node in definitions.items():
            if name not in drawing and called(node.body) & drawing:
                drawing.add(name)
                grew = True
    return [index for index, tree in trees.items() if called(top_level(tree)) & drawing]


def top_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements a cell always runs: neither the bodies of what it defines nor the
    branches of an `if`."""
    skipped = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.If
    return [node for node in tree.body if not isinstance(node, skipped)]


def called(nodes: list[ast.stmt]) -> set[str]:
    """Names of the functions called anywhere in `nodes`."""
    names = set()
    for statement in nodes:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                function = node.func
                if isinstance(function, ast.Name):
                    names.add(function.id)
                elif isinstance(function, ast.Attribute):
                    names.add(function.attr)
    return names


# What the page shows.


@dataclass(frozen=True)
class ShownError:
    """An error output as the page renders it: the exception's name and its last lines."""

    ename: str
    text: str


@dataclass(frozen=True)
class ShownCell:
    """One cell as the page shows it after the run."""

    kind: str  # code, markdown, raw
    prompt: str  # the input prompt, "[7]:" once run
    errors: tuple[ShownError, ...]
    images: int
    stderr: int  # stderr outputs that are not errors


TRACEBACK = re.compile(r"^-{20,}\n(?P<ename>[\w.]+)\s+Traceback \(most recent call last\)")
SYNTAX = re.compile(r"^\s*Cell In\[\d+\], line \d+\n(?:.*\n)*?(?P<ename>\w+Error): ", re.M)
FAILED_TEST = re.compile(r"^(?P<ename>AssertionError): ")
"""A failed test cell's error: its message alone, no frames (testing.message_only)."""

READ_CELLS = """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => ({
    kind: cell.classList.contains('jp-CodeCell') ? 'code'
        : cell.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    prompt: (cell.querySelector('.jp-InputArea-prompt') || {innerText: ''}).innerText.trim(),
    stderr: Array.from(cell.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    )).map(output => output.innerText),
    images: cell.querySelectorAll('.jp-OutputArea-output img').length,
}))"""


def shown_cells(page) -> list[ShownCell]:
    """Every cell of the open notebook as the page renders it.

    JupyterLab 4 renders an error output and a stderr stream alike (both with the mime type
    application/vnd.jupyter.stderr, the error's traceback as text), so an error is a stderr
    output that reads as IPython's traceback: the dashed rule and `Name  Traceback (most
    recent call last)`, or for a syntax error `Cell In[n], line m` ... `SyntaxError: `, or
    for a failed test, whose error shows its message alone, `AssertionError: `.
    """
    cells = []
    for raw in page.evaluate(READ_CELLS):
        errors, other = [], 0
        for text in raw["stderr"]:
            match = TRACEBACK.match(text) or SYNTAX.match(text) or FAILED_TEST.match(text)
            if match:
                errors.append(ShownError(match["ename"], text))
            else:
                other += 1
        cells.append(ShownCell(raw["kind"], raw["prompt"], tuple(errors), raw["images"], other))
    return cells


# Driving the page as a student does.

VIEWPORT = {"width": 1280, "height": 900}
STATUS = '.jp-StatusBar-TextItem[title^="Change kernel"]'
"""The status bar's kernel item, `Python 3 | Idle` once the kernel waits for work."""

IDLE = f"""() => {{
    const status = document.querySelector('{STATUS}');
    return status !== null && status.innerText.trim().endsWith('| Idle');
}}"""

RAN_ALL = f"""() => {{
    const prompts = Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell'))
        .map(cell => cell.querySelector('.jp-InputArea-prompt').innerText);
    return ({IDLE})() && prompts.length > 0 && /\\d/.test(prompts[0])
        && !prompts.some(prompt => prompt.includes('*'));
}}"""
"""Run All has finished: nothing queued or running, the first cell ran, the kernel idle (a
cell that failed stops the run: the cells after it keep an empty prompt)."""

RAN_CELL = f"""(index) => {{
    const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
    return ({IDLE})() && /\\d/.test(cell.querySelector('.jp-InputArea-prompt').innerText);
}}"""


def open_notebook(browser, running: Lab, path: str):
    """A new page with the notebook at `path` (relative to the lab's root) open, its kernel
    started and idle. Each notebook gets a workspace of its own, so no earlier tab reopens."""
    page = browser.new_page(viewport=VIEWPORT)
    workspace = re.sub(r"\W", "-", path)
    page.goto(f"{running.url}lab/workspaces/{workspace}/tree/{path}?reset&token={running.token}")
    page.wait_for_function(IDLE, timeout=CELL_TIMEOUT_MS)
    page.keyboard.press("Control+b")  # close the file browser: the notebook takes the width
    return page


def run_all_cells(page) -> None:
    """Run > Run All Cells, as a student who expects no error; wait until it stops."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(RAN_ALL, timeout=CELL_TIMEOUT_MS)


def run_each_cell(page) -> None:
    """Run every cell from the top, one at a time (Ctrl+Enter, then J to the next), waiting
    for each: Run All would stop at the first error, and an unfinished notebook has several."""
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.first.click()
    page.keyboard.press("Escape")  # command mode
    for index in range(cells.count()):
        page.keyboard.press("Control+Enter")
        if "jp-CodeCell" in (cells.nth(index).get_attribute("class") or ""):
            page.wait_for_function(RAN_CELL, arg=index, timeout=CELL_TIMEOUT_MS)
        page.keyboard.press("j")


def save_screenshot(page, path: Path) -> None:
    """A screenshot of the whole notebook: the window made as tall as the notebook, whose
    cells otherwise scroll inside it."""
    hidden = page.evaluate(
        """() => {
            const outer = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
            outer.scrollTop = 0;
            return outer.scrollHeight - outer.clientHeight;
        }"""
    )
    page.set_viewport_size({"width": VIEWPORT["width"], "height": VIEWPORT["height"] + hidden})
    page.wait_for_timeout(500)  # let the lab lay out at its new size
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


@dataclass(frozen=True)
class Opened:
    """What the lab shows around a notebook once it is open and its kernel idle, before
    anything runs."""

    modified: bool  # the notebook's tab carries the unsaved-changes mark (jp-mod-dirty)
    tabs: tuple[str, ...]  # the main area's tabs
    menus: tuple[str, ...]  # the menu bar's menus
    toolbar: tuple[str, ...]  # the notebook toolbar's labelled buttons
    sidebars: tuple[str, ...]  # the side bars' tabs, by their captions
    palette: tuple[str, ...]  # every command the command palette offers
    disabled: tuple[str, ...]  # the plugins the page's configuration disables
    routes: dict[str, int]  # the HTTP status the page's fetch of each of ROUTES gets


ROUTES = (
    "formgrader",  # nbgrader's formgrader (instructors)
    "assignments/validate",  # what Validate posts the notebook to: 405 to a GET when served
    f"nbgrader_version?version={version('nbgrader')}",  # what Validate asks first
)
"""Server addresses of nbgrader's, relative to the lab's base URL, fetched from the page."""

MODIFIED = "() => document.querySelectorAll('.lm-DockPanel .lm-TabBar-tab.jp-mod-dirty').length > 0"
"""A tab of the main area carries JupyterLab's unsaved-changes mark (the dot for its close
button)."""

READ_OPENED = f"""async (routes) => ({{
    modified: ({MODIFIED})(),
    tabs: Array.from(document.querySelectorAll('.lm-DockPanel .lm-TabBar-tab'))
        .map(tab => tab.innerText.trim()),
    menus: Array.from(document.querySelectorAll('.lm-MenuBar-itemLabel')).map(m => m.innerText),
    toolbar: Array.from(document.querySelectorAll('.jp-NotebookPanel-toolbar .jp-ToolbarButton'))
        .map(b => b.innerText.trim()).filter(text => text),
    sidebars: Array.from(document.querySelectorAll('.jp-SideBar .lm-TabBar-tab'))
        .map(tab => tab.title),
    disabled: JSON.parse(
        document.getElementById('jupyter-config-data').textContent).disabledExtensions || [],
    routes: Object.fromEntries(await Promise.all(routes.map(async route => {{
        const config = JSON.parse(document.getElementById('jupyter-config-data').textContent);
        const answer = await fetch(config.baseUrl + route,
            {{headers: {{Authorization: 'token ' + config.token}}}});
        return [route, answer.status];
    }}))),
}})"""
SETTLE_MS = 2000
"""How long an opened notebook is left before its tab is read: kernel information arrives
after the kernel is idle, and a notebook whose metadata differs from it is marked then."""


def read_palette(page) -> tuple[str, ...]:
    """The labels of every command in the command palette, opened as a student opens it
    (Ctrl+Shift+C) and closed again."""
    page.keyboard.press("Control+Shift+c")
    palette = page.locator(".jp-ModalCommandPalette")
    palette.wait_for(state="visible")
    labels = palette.locator(".lm-CommandPalette-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
    palette.wait_for(state="hidden")
    return tuple(labels)


def read_opened(page) -> Opened:
    """What the lab shows around the notebook just opened in `page`, once settled."""
    page.wait_for_timeout(SETTLE_MS)
    raw = page.evaluate(READ_OPENED, list(ROUTES))
    shown = {k: tuple(v) for k, v in raw.items() if k not in ("modified", "routes")}
    return Opened(raw["modified"], palette=read_palette(page), routes=raw["routes"], **shown)


def run_notebook(browser, running: Lab, path: str, screenshot: Path, *, each_cell: bool = False):
    """Open the notebook at `path`, read what the lab shows around it and save a screenshot
    of the window then (`screenshot` with -opened added to its name), run it (Run All, or
    `each_cell` one at a time), save a screenshot of the whole notebook to `screenshot` (also
    when the run fails), and return what was shown on opening, its cells as shown after the
    run, and whether its tab is marked modified then. The notebook's kernel is shut down
    afterwards."""
    page = open_notebook(browser, running, path)
    try:
        opened = read_opened(page)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot.with_name(f"{screenshot.stem}-opened.png")))
        (run_each_cell if each_cell else run_all_cells)(page)
        return opened, shown_cells(page), page.evaluate(MODIFIED)
    finally:
        try:
            save_screenshot(page, screenshot)
        finally:
            page.close()
            running.shut_down_kernels()


# A terminal, as a student opens one.

TERMINAL_VIEWPORT = {"width": 1280, "height": 1400}
"""Tall enough that a check's whole report stays on the terminal's screen."""
TERMINAL_TEXT = """() => {
    const tree = document.querySelector('.jp-Terminal .xterm-accessibility-tree');
    return tree === null ? null : Array.from(tree.children)
        .map(row => row.textContent.replace(/\\u00a0/g, ' ').trimEnd()).join('\\n');
}"""
"""The terminal's screen, row by row (xterm.js's accessibility rows)."""


def run_in_terminal(
    browser, running: Lab, command: str, done: str, screenshot: Path, timeout_ms: int = 180_000
) -> str:
    """Open a terminal as a student does (File > New > Terminal), type `command` and Enter,
    wait until the screen matches the regular expression `done`, save a screenshot and
    return the screen's text. The terminal is shut down afterwards."""
    page = browser.new_page(viewport=TERMINAL_VIEWPORT)
    try:
        page.goto(f"{running.url}lab/workspaces/terminal?reset&token={running.token}")
        page.locator(".lm-MenuBar-itemLabel").get_by_text("File", exact=True).click()
        page.locator(".lm-Menu-itemLabel").get_by_text("New", exact=True).hover()
        page.locator(".lm-Menu-itemLabel").get_by_text("Terminal", exact=True).click()
        prompt = "(text) => text !== null && /[$#] *$/m.test(text)"
        page.wait_for_function(f"() => ({prompt})(({TERMINAL_TEXT})())", timeout=timeout_ms)
        page.locator(".jp-Terminal").click()
        page.keyboard.type(command)
        page.keyboard.press("Enter")
        finished = f"(pattern) => new RegExp(pattern, 'm').test(({TERMINAL_TEXT})() || '')"
        try:
            page.wait_for_function(finished, arg=done, timeout=timeout_ms)
        finally:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
        return page.evaluate(TERMINAL_TEXT)
    finally:
        page.close()
        for terminal in running.api("GET", "api/terminals"):
            running.api("DELETE", f"api/terminals/{terminal['name']}")
