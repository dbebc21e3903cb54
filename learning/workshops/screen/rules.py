"""The source screen's rules: what each one finds in a submission's definitions, why it
matters, and what a student writes instead.

A rule names only what can still change what grading measures or reads from the student's
process: the checks' children and the timing server load the notebook's definitions
(`learning.workshops.checking.loader`), so code there runs beside the harness that builds the
inputs and reports the outputs, the storages and the launches. Which attack each rule
answers, and why the rules the screen once had and dropped are not needed, is the table in
docs/grading.md ("What the source screen reads"); `tests/test_screen.py` ties it to `RULES`.

Names are dotted paths as the screen resolves them through imports and plain aliases
(`import subprocess as sp` makes `sp.run` read `subprocess.run`). A rule applies to a name
and to every attribute of it (`subprocess` covers `subprocess.run`): `rule_of`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One rule: its stable id, why a line that breaks it is held, and what to write instead
    (both in words a student reads)."""

    id: str
    why: str
    instead: str


RULES = {
    rule.id: rule
    for rule in (
        Rule(
            "monkeypatch",
            "it changes a module that grading uses in the same process (torch, Triton, the "
            "course's own), so what the checks read back is no longer what your code did",
            "leave other modules as they are: define a function of your own instead",
        ),
        Rule(
            "interpreter-access",
            "it reaches into the interpreter (frames, the module table, the garbage "
            "collector's references), where the harness that judges your code keeps its state",
            "pass your function what it needs as arguments",
        ),
        Rule(
            "native-code",
            "native code can rewrite the memory of the process that reports your results",
            "compute in your Triton kernel; for a debug print, print outside your functions",
        ),
        Rule(
            "process",
            "a thread, process, signal or timer keeps running after your function returns, "
            "beside the checks that read what it left",
            "run it in a terminal, or in a line of its own outside your functions (grading "
            "never runs those)",
        ),
        Rule(
            "raw-descriptor",
            "raw file descriptors and sockets reach the channel your results are reported on",
            "print to see a value; write files with open() and a name",
        ),
        Rule(
            "dispatch-internals",
            "torch's dispatch modes and Triton's launch hooks are how the checks watch your "
            "code; switching them off or replacing them hides what it did",
            "use torch's and Triton's public API",
        ),
        Rule(
            "dynamic-code",
            "code built or looked up at run time hides what runs from this reading",
            "name what you call: write the import and the call out",
        ),
        Rule(
            "module-file",
            "a Python file written where grading runs would be imported by the checks' next "
            "process in place of the module of that name",
            "keep your code in the notebook's cells",
        ),
    )
}
"""Every rule, by id."""

UNFINISHED = "unfinished"
"""The rule id of a notebook the screen could not finish reading within its bounds."""

WHOLE_MODULES = {
    **dict.fromkeys(
        (
            "subprocess multiprocessing _thread pty concurrent.futures.process "
            "torch.multiprocessing torch.distributed"
        ).split(),
        "process",
    ),
    **dict.fromkeys("socket fcntl select selectors _socket".split(), "raw-descriptor"),
    **dict.fromkeys("cffi _ctypes mmap torch.utils.cpp_extension".split(), "native-code"),
    **dict.fromkeys(
        (
            "pickle _pickle marshal dill cloudpickle runpy code codeop zipimport torch.package "
            "torch.hub importlib.machinery"
        ).split(),
        "dynamic-code",
    ),
    **dict.fromkeys(
        "builtins __builtin__ __main__".split(),
        "interpreter-access",
    ),
    **dict.fromkeys(
        "torch.overrides torch.library triton.knobs triton.runtime.interpreter".split(),
        "dispatch-internals",
    ),
}
"""Modules any attribute of which breaks a rule (and the module itself, passed around)."""

NAMES = {
    **dict.fromkeys(
        (
            "threading.Thread threading.Timer concurrent.futures.ThreadPoolExecutor "
            "concurrent.futures.ProcessPoolExecutor asyncio.create_subprocess_exec "
            "asyncio.create_subprocess_shell asyncio.to_thread atexit.register "
            "signal.signal signal.alarm signal.setitimer signal.pthread_kill signal.raise_signal "
            "signal.set_wakeup_fd signal.siginterrupt os.fork os.forkpty os.system os.popen "
            "os.execl os.execle os.execlp os.execlpe os.execv os.execve os.execvp os.execvpe "
            "os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv os.spawnve os.spawnvp "
            "os.spawnvpe os.posix_spawn os.posix_spawnp os.kill os.killpg os._exit os.abort "
            "os.setsid os.setpgid os.setpgrp os.register_at_fork"
        ).split(),
        "process",
    ),
    **dict.fromkeys(
        (
            "os.fdopen os.write os.read os.dup os.dup2 os.open os.openpty os.pipe os.pipe2 "
            "os.close os.closerange os.lseek os.sendfile os.writev os.readv os.pwrite os.pread "
            "os.set_inheritable os.set_blocking os.ftruncate os.memfd_create os.eventfd "
            "io.FileIO"
        ).split(),
        "raw-descriptor",
    ),
    **dict.fromkeys(
        (
            "ctypes.CDLL ctypes.PyDLL ctypes.cdll ctypes.pydll ctypes.pythonapi "
            "ctypes.LibraryLoader ctypes.string_at ctypes.wstring_at ctypes.memmove "
            "ctypes.memset ctypes.cast ctypes.addressof torch.ops.load_library "
            "torch.classes.load_library"
        ).split(),
        "native-code",
    ),
    **dict.fromkeys(
        (
            "sys._getframe sys._current_frames sys._current_exceptions sys.settrace "
            "sys.setprofile sys.modules sys.meta_path sys.path_hooks sys.path_importer_cache "
            "sys.addaudithook sys.monitoring gc.get_referrers "
            "gc.get_referents gc.get_objects inspect.currentframe inspect.stack inspect.trace "
            "inspect.getouterframes inspect.getinnerframes traceback.walk_stack "
            "traceback.walk_tb threading.settrace threading.setprofile "
            "threading.settrace_all_threads threading.setprofile_all_threads"
        ).split(),
        "interpreter-access",
    ),
    **dict.fromkeys(
        (
            "importlib.reload importlib.util.spec_from_file_location "
            "importlib.util.spec_from_loader importlib.util.module_from_spec types.FunctionType "
            "types.CodeType types.LambdaType operator.attrgetter operator.methodcaller torch.load "
            "torch.jit.load"
        ).split(),
        "dynamic-code",
    ),
    **dict.fromkeys("os.putenv os.unsetenv".split(), "monkeypatch"),
}
"""Dotted names (and their attributes) that break a rule; the rest of their module does not
(`threading.Lock`, `os.environ.get`, `inspect.signature`, `gc.collect` are ordinary)."""

REEXPORTED = frozenset(
    "sys os io builtins ctypes gc inspect importlib subprocess threading multiprocessing "
    "socket signal pickle marshal _thread mmap traceback operator types".split()
)
"""Modules other modules hand out as attributes (`torch.sys`, `os.sys`, `np.os`): a dotted
name through one is read as a name of that module too."""
PRIVATE_UNDER = ("torch", "triton")
"""Packages whose private names (`torch._C`, `triton.runtime._allocation`) are dispatch
internals: the public API of both does all the course asks."""

ATTRIBUTES = {
    **dict.fromkeys(
        (
            "f_back f_globals f_locals f_builtins f_code f_trace gi_frame cr_frame ag_frame "
            "tb_frame tb_next __globals__ __builtins__ __subclasses__ __code__ __closure__ "
            "__self__ __func__ __defaults__ __kwdefaults__ __getattribute__ __setattr__ "
            "__delattr__ __reduce__ __reduce_ex__ __loader__ __spec__ __import__"
        ).split(),
        "interpreter-access",
    ),
    **dict.fromkeys(
        (
            "__torch_function__ __torch_dispatch__ launch_enter_hook launch_exit_hook "
            "jit_post_compile_hook jit_cache_hook"
        ).split(),
        "dispatch-internals",
    ),
    **dict.fromkeys("from_address from_buffer in_dll".split(), "native-code"),
}
"""Attributes that break a rule on any object, whatever it is (a frame, a function, a
ctypes type): the screen cannot always say what an object is, but these names say enough."""

HOOK_METHODS = frozenset({"__torch_function__", "__torch_dispatch__"})
"""Methods whose definition makes a class intercept torch's calls."""
TENSOR_BASES = ("torch.Tensor", "torch.nn.Parameter", "torch.overrides", "torch.utils")
"""Bases of a class that intercepts what torch does with its instances."""

BUILTINS = {
    "eval": "dynamic-code",
    "exec": "dynamic-code",
    "compile": "dynamic-code",
    "globals": "dynamic-code",
    "vars": "dynamic-code",
    "__import__": "dynamic-code",
    "__builtins__": "interpreter-access",
    "breakpoint": "interpreter-access",
}
"""Builtins that break a rule wherever they are named (a literal `__import__("x")` is read
as `import x` instead)."""
LOOKUPS = frozenset({"getattr", "setattr", "delattr"})
"""Builtins that hide a name when it is computed."""

MUTATORS = frozenset(
    "update pop popitem setdefault clear append insert extend remove discard "
    "__setitem__ __delitem__".split()
)
"""Methods that change a container in place: called on a module's attribute (`sys.path`,
`os.environ`, a hook's list), they change what the rest of the process sees."""

UNTOUCHED = frozenset("matplotlib seaborn pandas PIL IPython tqdm ipywidgets".split())
"""Modules grading never uses while it checks: changing them (`plt.rcParams[...] = ...`)
changes no verdict."""

MODULE_FILES = (".py", ".pth", ".so", ".pyc")
"""The suffixes of files Python imports."""
RAW_MEMORY = ("/proc/self/mem", "/dev/mem", "/proc/self/fd")
"""Paths that read or write a process's memory or descriptors as a file."""


@functools.lru_cache(maxsize=4096)
def rule_of(name: str) -> str | None:
    """The rule a use of the dotted name `name` breaks, or None; a name reached through a
    module another hands out (`torch.sys._getframe`) is read as that module's too."""
    parts = name.split(".")
    for at in range(1, len(parts)):
        if parts[at] in REEXPORTED:
            rule = _rule_of(parts[at:])
            if rule:
                return rule
    return _rule_of(parts)


def _rule_of(parts: list[str]) -> str | None:
    """The rule of the longest prefix of `parts` the tables name, else of a private name."""
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        rule = NAMES.get(prefix) or WHOLE_MODULES.get(prefix)
        if rule:
            return rule
    private = any(p.startswith("_") and not p.endswith("__") for p in parts[1:])
    return "dispatch-internals" if parts[0] in PRIVATE_UNDER and private else None


def rule_under(module: str) -> str | None:
    """A rule some name of `module` breaks, or None (a star import of it hides which)."""
    prefix = module + "."
    under = (rule for name, rule in {**NAMES, **WHOLE_MODULES}.items() if name.startswith(prefix))
    return rule_of(f"{module}.*") or next(under, None)
