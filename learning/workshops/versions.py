"""The torch and Triton versions this package supports, refused at import outside them.

Much of the checking hooks private APIs. The ownership audit (`audit.py`) and the
interpreter patches (`interpreter.py`) read or replace parts of `triton.runtime.interpreter`
(`interpreter_builder.create_masked_load/_store` and `grid_idx`, `InterpretedFunction.run`
and `.warmup`, `_patch_lang_core`, `TensorHandle`) and `Autotuner._bench`; launch counting
(`launches.py`) wraps `KernelInterface.__getitem__` and adds to the `HookChain`
`triton.knobs.runtime.launch_enter_hook`; the PTX evidence (`evidence.py`) compiles an
`ASTSource` for a `GPUTarget`; on the torch side, `allocations.py` and `launches.py` record
operators with `torch.utils._python_dispatch.TorchDispatchMode` and `_pytree`. They were
checked on Triton 3.6 and 3.9 with torch 2.11 and 2.13; the ranges below span those and
stop before the next untried minor release, where a change could give wrong verdicts.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

SUPPORTED = {"torch": ((2, 11), (2, 14)), "triton": ((3, 6), (3, 10))}
"""Each package's supported versions, from the first included to the first excluded."""
DISTRIBUTIONS = {"torch": ("torch",), "triton": ("triton", "pytorch-triton")}
"""The distributions that install each package (PyTorch's nightlies ship `pytorch-triton`)."""
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class UnsupportedVersion(ImportError):
    """torch or Triton is missing, or outside the versions this package supports."""


def requirement(name: str) -> str:
    """The pip requirement for `name`'s supported range, e.g. 'torch>=2.11,<2.14'."""
    low, high = SUPPORTED[name]
    return f"{name}>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"


def release(version: str) -> tuple[int, ...] | None:
    """The release numbers of a version, without pre-release or local parts.

    '3.6.0+git1234' and '3.6.0rc1' give (3, 6, 0); a version without numbers gives None.
    """
    found = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def installed(name: str) -> str | None:
    """The installed version of `name` as its distribution states it; None if not installed."""
    for distribution in DISTRIBUTIONS[name]:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def supported(name: str, version: str | None) -> bool:
    """Whether `version` of `name` lies in its supported range."""
    numbers = release(version) if version is not None else None
    low, high = SUPPORTED[name]
    return numbers is not None and low <= numbers < high


def message(wrong: dict[str, str | None]) -> str:
    """One paragraph: what is installed, what is supported, and the commands that fix it
    (pip for this very Python, so they install where the import failed)."""
    found = " and ".join(
        f"{name} {version} is installed" if version else f"{name} is not installed"
        for name, version in wrong.items()
    )
    commands = [f'{sys.executable} -m pip install "{requirement(name)}"' for name in wrong]
    if "torch" in wrong:
        commands[0] += f" (without a GPU, add --index-url {CPU_INDEX} for the CPU build)"
    ranges = " and ".join(requirement(name) for name in SUPPORTED)
    return (
        f"learning.workshops cannot run here: {found}, and it supports only {ranges}, the "
        "versions its ownership audit, launch counting and PTX evidence were checked on (they "
        "hook private torch and Triton APIs, so another version could give wrong verdicts). "
        f"Fix it with {' and '.join(commands)}, then restart Python (in a notebook, the kernel)."
    )


def check() -> None:
    """Raise UnsupportedVersion, with the fix, unless torch and Triton are supported."""
    wrong = {name: installed(name) for name in SUPPORTED}
    wrong = {name: version for name, version in wrong.items() if not supported(name, version)}
    if wrong:
        raise UnsupportedVersion(message(wrong))
