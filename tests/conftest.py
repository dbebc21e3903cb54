"""Test setup: Triton's interpreter without a GPU, a headless matplotlib, the repo importable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("MPLBACKEND", "Agg")

from learning.workshops.contracts import select_mode  # noqa: E402

# Before any test module defines a @triton.jit kernel: without CUDA, kernels run on CPU tensors.
select_mode(verbose=False)
