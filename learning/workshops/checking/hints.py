"""Hints: the vocabulary of what the check can tell a student about failed cases.

One vocabulary of hint ids serves the check command, the hidden tests and the cohort
plots: each id, the message it prints (ending with what to look at next) and the record
that carries it with its evidence. Which hints a check's results show is `hint_rules`'.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from learning.workshops.checking.records import Failure


class HintId(enum.StrEnum):
    """A hint's id: what `check --hint` prints, the sidecars record and the zoo names; in
    the order of `hint_rules.RULES`. A hint that one failure leads to takes its id from `Failure`,
    which owns the string: one name on the wire and in the hints."""

    NOT_ATTEMPTED = Failure.NOT_ATTEMPTED.value  # an optional exercise left as its stub
    UNFINISHED = "unfinished"
    BLOCK_POINTERS = "block-pointers"
    CRASH = Failure.CRASH.value
    TIMEOUT = Failure.TIMEOUT.value
    MEMORY = Failure.MEMORY.value
    INPUT_WRITTEN = Failure.INPUT_WRITTEN.value
    STALE_OUTPUT = Failure.STALE_OUTPUT.value
    NO_KERNEL = Failure.NO_KERNEL.value
    NOT_FROM_KERNEL = Failure.NOT_FROM_KERNEL.value
    HELD = Failure.HELD.value
    COPY = Failure.COPY.value
    ALIASING = Failure.ALIASING.value  # to ROW_SUM, and BACKWARD_STRIDES: the optional ones
    OUTSIDE_VIEW = Failure.OUTSIDE_VIEW.value
    READ_AFTER_WRITE = Failure.READ_AFTER_WRITE.value
    ROW_SUM = Failure.ROW_SUM.value
    EMPTY_ROWS = Failure.EMPTY_ROWS.value
    VALIDATION = "validation"
    DTYPE = Failure.DTYPE.value
    STORE_MASK = Failure.STORE_MASK.value
    ROW_MASK = Failure.ROW_MASK.value
    OVERLAP = Failure.OVERLAP.value
    RUNNING_MAX = "running-max"
    BLOCK_SIZE = "block-size"
    PADDING = "padding"
    STABILITY = "stability"
    BACKWARD_STRIDES = "backward-strides"
    DOUBLE_OFFSET = "double-offset"
    COLUMN_STRIDE = "column-stride"
    STRIDES = "strides"
    ROW_STRIDE = "row-stride"
    OUTPUT_LAYOUT = "output-layout"
    NOT_IN_PLACE = Failure.NOT_IN_PLACE.value
    EXCEPTION = Failure.EXCEPTION.value


MESSAGES = {
    HintId.NOT_FROM_KERNEL: (
        "Your function returned the right values, but its kernel launches alone do not make "
        "them: the grader makes the same launches again, with the same grid and arguments, "
        "on new values of the same view, and those outputs are wrong. The values came from "
        "somewhere else: torch or Python (in the wrapper, a heuristic, a class body), or a "
        "buffer filled before the launch. Compute the softmax in the kernel and store it "
        "into the tensor you return."
    ),
    HintId.HELD: (
        "Held for review: the grader could not replay these cases' kernel launches in its "
        "clean room (the reason is in each case's line), so they do not count as passed "
        "until your instructor looks at them. A kernel the clean room replays is a top-level "
        "@triton.jit function of your notebook, written with triton.language (a helper it "
        "calls is @triton.jit too: a plain Python function runs only in the interpreter and "
        "does not compile on a GPU), launched with numbers, dtypes and tensors; keep to "
        "that and the cases are judged on their own."
    ),
    HintId.BLOCK_POINTERS: (
        "Triton 3.9 removed block pointers: tl.make_block_ptr raises here, though older "
        "Tritons (3.6, for one) still run it, so machines with different Tritons disagree. "
        "Compute the addresses yourself, X + row*SR + cols*SC with mask=cols < N, as in "
        "pass 1. Tensor descriptors, which replace block pointers, need a contiguous last "
        "dimension and a 16-byte aligned base and strides: a transpose, a stride-2 slice or "
        "a shifted pointer is none of these."
    ),
    HintId.NOT_ATTEMPTED: (
        "Not attempted: this optional exercise is still its stub. It earns extra credit when "
        "done, and leaving it costs nothing. To attempt it, fill in its cells marked YOUR "
        "CODE HERE, then run this check again."
    ),
    HintId.UNFINISHED: (
        "Not written yet: the function still raises its stub's NotImplementedError. Fill in "
        "the cells marked YOUR CODE HERE, then run the check again."
    ),
    HintId.COLUMN_STRIDE: (
        "Contiguous inputs pass but views whose columns are not adjacent fail: the load "
        "ignores the column stride. Load from X + row*SR + col*SC, with SC = x.stride(1) "
        "(in the backward, y and dy each with its own strides)."
    ),
    HintId.STRIDES: (
        "Contiguous inputs pass, and views whose elements are not where a contiguous "
        "tensor's are fail, row broadcasts too: the loads ignore both strides, as if row r "
        "started at r*N and its columns were adjacent. A view's row r, column c is at "
        "X + r*SR + c*SC: pass x.stride(0) and x.stride(1) to the kernel and load there "
        "(in the backward, y and dy each with its own strides)."
    ),
    HintId.ROW_STRIDE: (
        "Views whose rows share one address (row stride 0) pass, and every contiguous view "
        "fails: where a row starts is wrong. Row r starts at X + r*SR with SR = x.stride(0), "
        "counted in elements: not multiplied by N or by the element size (r*SR*N or "
        "r*SR*4 reads other rows, or past the tensor)."
    ),
    HintId.DOUBLE_OFFSET: (
        "Only views with a storage offset fail: the pointer Triton receives already points at "
        "the view's first element. Do not add x.storage_offset() again."
    ),
    HintId.OUTPUT_LAYOUT: (
        "The output's shape or layout is wrong, or rows land in the wrong places: allocate a "
        "new contiguous output, torch.empty((M, N), dtype=x.dtype, device=x.device), and "
        "store at Y + row*N + col, with the output's strides, never the input's."
    ),
    HintId.STORE_MASK: (
        "A store (or load) runs past the end of its row: lanes at columns N and beyond are "
        "active, so they write the next row's first elements or past the output. Pass "
        "mask=cols < N to tl.store as well as to tl.load."
    ),
    HintId.ROW_MASK: (
        "Lanes of rows past the last one (row >= M) are active: the mask guards the columns "
        "(cols < N) but not the rows, so a tile or program past row M-1 reads past the view "
        "and writes past the output. In a tile of several rows mask both, "
        "mask=(rows < M)[:, None] & (cols < N)[None, :], and keep the rows past M finite "
        "before the row max (tl.where(rows[:, None] < M, x, 0.0)); where the grid has more "
        "programs than rows, or a loop runs past M, skip the row: if row < M."
    ),
    HintId.OVERLAP: (
        "Every value is right, but two programs wrote the same elements (the evidence names "
        "them by grid id): each row must be written by exactly one program. In a grid-stride "
        "loop step by the number of programs, tl.range(pid, M, tl.num_programs(0)); launch "
        "as many programs as the kernel has rows for, and let no grid axis repeat a row."
    ),
    HintId.PADDING: (
        "Probabilities are too small: rows sum to less than one, so masked lanes count in the "
        "sum. Load the tail with other=-float('inf') so exp() makes them zero."
    ),
    HintId.STABILITY: (
        "Rows of large values give NaN or inf: exp(x) overflows to inf near x = +1e4 and "
        "underflows to 0 near x = -1e4, so such a row divides inf by inf, or 0 by 0. "
        "Subtract the row maximum before exp (x - tl.max(x, axis=0)): the largest term is "
        "then exp(0) = 1, and the sum at least 1."
    ),
    HintId.RUNNING_MAX: (
        "Rows that start with a long run of -inf give NaN: in an online softmax the running "
        "max is still -inf after the first tiles, and rescaling by exp(-inf - -inf) is NaN. "
        "While the max is -inf, shift by 0 instead: "
        'shift = tl.where(m == -float("inf"), 0.0, m).'
    ),
    HintId.BLOCK_SIZE: (
        "Wide or odd widths fail: the block must cover the whole row and be a power of two. "
        "Use BLOCK = triton.next_power_of_2(N) and mask the tail."
    ),
    HintId.DTYPE: (
        "The output's dtype differs from the input's: allocate the output with dtype=x.dtype "
        "and cast the fp32 result back when you store it."
    ),
    HintId.VALIDATION: (
        "Bad input is not refused with a clear error: call "
        "learning.workshops.contracts.matrix(x) and warps(num_warps) before anything else."
    ),
    HintId.EMPTY_ROWS: (
        "Inputs with zero rows go wrong: return the empty output before launching; a grid of "
        "zero programs is not a launch to make."
    ),
    HintId.NO_KERNEL: (
        "No Triton kernel ran: the result must come from your kernel, launched as "
        "kernel[(M,)](...), not from torch."
    ),
    HintId.COPY: (
        "Torch reads the input outside your kernel: x.contiguous() on a view, .to(), "
        ".float() or torch math make a second full pass over memory, the pass that reading "
        "the view through its strides avoids (x.contiguous() returns a contiguous input as "
        "it is, which is why only views fail). Pass x itself and x.stride() to the kernel "
        "and return the output the kernel writes."
    ),
    HintId.STALE_OUTPUT: (
        "A second call with the same shape and new values returned old results: compute every "
        "call from its input; do not cache outputs."
    ),
    HintId.INPUT_WRITTEN: (
        "The input's memory changed: the kernel must only read X. Store into the new output "
        "Y, never through the input's pointer or strides."
    ),
    HintId.ALIASING: (
        "A view whose elements share addresses was not refused: in a stride-0 broadcast or "
        "a view with overlapping strides, several elements are one address, so writing them "
        "in place stores several results there. Call writable_matrix(x) (from "
        "learning.workshops.contracts) before launching: it raises a ValueError "
        "naming the strides."
    ),
    HintId.OUTSIDE_VIEW: (
        "Storage outside the view changed: in place, the only addresses to store to are the "
        "view's own, X + row*SR + col*SC for col < N. Store through the same pointers you "
        "loaded from, with both strides and the column mask."
    ),
    HintId.READ_AFTER_WRITE: (
        "A program read an element that another program overwrites: on a GPU programs run in "
        "any order, so it may read the softmax instead of the input. In place, the program "
        "that writes a row must be the only one that reads it, and read it whole before "
        "writing: one program per row, the row in one block."
    ),
    HintId.NOT_IN_PLACE: (
        "The view was softmaxed but the call did not return it: an in-place op returns its "
        "input, as torch's x.exp_() does. End with return x."
    ),
    HintId.BACKWARD_STRIDES: (
        "Cases where y and dy have different strides fail, and those with the same strides "
        "pass: dy is read with y's strides. Pass dy.stride(0) and dy.stride(1) to the kernel "
        "and load DY + row*SRD + col*SCD."
    ),
    HintId.ROW_SUM: (
        "dx equals y * dy: the row sum is missing. Softmax couples a row's outputs, so "
        "dx = y * (dy - sum(dy * y)), the sum over the row's columns (tl.sum(dy * y, axis=0)) "
        "with masked lanes loaded as 0."
    ),
    HintId.CRASH: (
        "The implementation crashed the process (a segfault, a fatal error, or an illegal "
        "address on the GPU): look for a load or store without a mask, or an address computed "
        "from the wrong strides."
    ),
    HintId.MEMORY: (
        "The implementation ran out of memory: a call allocates far more than one output of "
        "M x N. Look for allocations inside a loop, or a tensor sized from the storage "
        "rather than the view."
    ),
    HintId.EXCEPTION: (
        "Every failing case raised the same error, so nothing after it ran: the evidence "
        "names it, and the line of your code it came from (a misspelled tl function, an "
        "argument the kernel does not take, a name not defined). Fix that line, then run "
        "the check again."
    ),
    HintId.TIMEOUT: (
        "The implementation did not finish in time: look for a loop that never ends, or a "
        "grid far larger than the number of rows."
    ),
}


@dataclass(frozen=True)
class Hint:
    """A clue for one failure pattern, with the cases that show it."""

    id: HintId
    message: str
    evidence: tuple[str, ...]

    def to_json(self) -> dict:
        return {"id": self.id, "message": self.message, "evidence": list(self.evidence)}
