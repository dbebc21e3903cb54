"""The optional exercises' bugs: edits of the reference's in-place and backward softmaxes."""

from __future__ import annotations

from grader.edits import Edit
from grader.zoo.bug import Bug

_IN_PLACE_CELLS = frozenset({"test_inplace", "hidden_inplace"})
_BACKWARD_CELLS = frozenset({"test_backward", "hidden_backward"})
_IN_PLACE_STORE = "tl.store(ptrs, y.to(X.dtype.element_ty), mask=mask)"
FOLLOW_ON_BUGS = (
    Bug(
        "inplace-accepts-aliasing",
        "aliasing",
        "checks x with matrix(x), which lets a broadcast through, so rows sharing addresses "
        "are written several times over",
        (Edit("strided_softmax_", "M, N = writable_matrix(x)", "M, N = matrix(x)"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-stores-as-if-contiguous",
        "write-outside-view",
        "stores the result at X + row*N + col, where a contiguous output would be, instead of "
        "back through the view's strides",
        (Edit("softmax_inplace_kernel", "tl.store(ptrs, y", "tl.store(X + row * N + cols, y"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-column-tiles",
        "read-after-write",
        "splits each row's columns over programs that each read the whole row, so a later "
        "program reads columns an earlier one already overwrote",
        (
            Edit(
                "softmax_inplace_kernel",
                "N, BLOCK: tl.constexpr):",
                "N, BLOCK: tl.constexpr, TILE: tl.constexpr):",
            ),
            Edit(
                "softmax_inplace_kernel",
                _IN_PLACE_STORE,
                _IN_PLACE_STORE.replace(
                    "mask=mask", "mask=mask & (cols // TILE == tl.program_id(1))"
                ),
            ),
            Edit(
                "strided_softmax_",
                "softmax_inplace_kernel[(M,)](x, *x.stride(), N, BLOCK=block,",
                "softmax_inplace_kernel[(M, triton.cdiv(N, 4))](x, *x.stride(), N, BLOCK=block, "
                "TILE=4,",
            ),
        ),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-not-attempted",
        "not-attempted",
        "leaves the optional in-place exercise as its stub: not attempted, which costs "
        "nothing and earns no extra credit",
        (
            Edit(
                "strided_softmax_",
                "    M, N = writable_matrix(x)\n",
                '    raise NotImplementedError("not written yet: your code goes here")\n'
                "    M, N = writable_matrix(x)\n",
            ),
        ),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-returns-nothing",
        "not-in-place",
        "softmaxes x in place but forgets to return it, so the caller gets None",
        (Edit("strided_softmax_", "num_warps=num_warps)\n    return x", "num_warps=num_warps)"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "backward-reads-dy-with-y-strides",
        "backward-strides",
        "passes y's strides for dy too, so dy is read right only where both views share strides",
        (Edit("strided_softmax_backward", "*dy.stride())", "*y.stride())"),),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-reads-contiguous-rows",
        "strides",
        "loads y and dy at row*N + col, as public backward kernels written for contiguous "
        "gradients do: every pair with a view that is not contiguous is misread",
        (
            Edit("softmax_backward_kernel", "Y + row * SRY + cols * SCY", "Y + row * N + cols"),
            Edit("softmax_backward_kernel", "DY + row * SRD + cols * SCD", "DY + row * N + cols"),
        ),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-ignores-column-strides",
        "column-stride",
        "loads y and dy at row*SR + col, each row from its own stride but its columns as if "
        "adjacent, as the tutorial's forward kernel does",
        (
            Edit("softmax_backward_kernel", "row * SRY + cols * SCY", "row * SRY + cols"),
            Edit("softmax_backward_kernel", "row * SRD + cols * SCD", "row * SRD + cols"),
        ),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-without-row-sum",
        "row-sum",
        "returns y * dy, leaving out the row sum that couples a softmax row's gradients",
        (Edit("softmax_backward_kernel", "dx = y * (dy - tl.sum(dy * y, axis=0))", "dx = y * dy"),),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
)
"""Bugs of the two optional exercises (`strided_softmax_`, `strided_softmax_backward`)."""
