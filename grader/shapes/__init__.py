"""Correct decompositions of the row softmax, one complete module each, as real code writes them.

Students copy public Triton kernels, and those split the work in many ways besides the
reference's one program per row on grid axis 0: rows on another axis, persistent grid-stride
loops, several rows per program, column tiles with an online softmax, compiled handles,
autotune and heuristics. Each `<name>.py` here is one such decomposition that the check must
pass, and `grader.zoo` writes bugs as small edits of these files as well as of the reference.

Every module has the same layout, because a builder splits it into notebook cells:

1. a one-line docstring: which decomposition, and where real code is written this way;
2. exactly these imports (stdlib imports such as `math` may join them)::

       import torch
       import triton
       import triton.language as tl

       from learning.workshops.contracts import device_context, matrix, warps

3. kernels, helpers and constants, in any number, with any names and decorators;
4. `launch_softmax(x, num_warps=4)`, second to last: the launch on a 2-D view with no
   checks, returning a new contiguous output of x's dtype;
5. `strided_softmax(x, num_warps=4)`, last: `matrix(x)` and `warps(num_warps)` first, the
   empty output returned without a launch for zero rows, the launch inside
   `device_context(x)`.

Every kernel reads the input only through its real strides (never `x.contiguous()` or torch
math on x), computes in fp32 with masked loads padded by -inf, subtracts the row max, casts
back on store with `.to(Y.dtype.element_ty)`, masks every load and store, and uses int64 row
offsets. The modules do not call `select_mode()`: whoever imports them does that first.
"""
