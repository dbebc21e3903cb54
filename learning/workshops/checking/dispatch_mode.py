"""The base of the checks' torch dispatch modes, which never imports `torch._dynamo`.

torch wraps every `TorchDispatchMode` subclass's `__torch_dispatch__` so that Dynamo skips
it, and that wrapper imports `torch._dynamo` on its first call: 1.2 s on 2 CPU cores and
3-4 s on the H200 machine, paid once by every process that checks a kernel (the notebook,
each grading child). The checks' modes only record operations and serve allocations, and
nothing compiles them, so they opt out of the wrapper through torch's own switch.
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class DispatchMode(TorchDispatchMode):
    """A `TorchDispatchMode` whose `__torch_dispatch__` runs as written, with no Dynamo."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False
