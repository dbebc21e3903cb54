"""The receipt a queued job's result carries: the facts of its run, signed by the course.

The worker supplies the facts (the GPU, its clocks, the copy roof and the reference timed in
the same job, the draw's hash, the phase times: docs/queue.md); `sign` adds the schema, the
sha256 of the result's canonical JSON and an HMAC-SHA256 over the canonical JSON of all the
rest, under a key derived from the course secret (`grader.seeding`). Only the course can sign
and verify: students cannot check a receipt offline, the course can
(`python -m grader.queue verify FILE`), and so can the trusted side where grading accepts a
remote result. A file to verify is either the service's result answer ({"result", "receipt"})
or a results file with its receipt under "receipt" (`split`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from grader.seeding import course_secret

SCHEMA = "i1-receipt/1"
RECEIPT_KEY = b"i1-queue-receipt/1"
"""What the receipt key is derived for; another purpose (the board's names) gets another key."""


class ReceiptError(ValueError):
    """A receipt that does not hold: an edited result or receipt, or none; one line."""


def course_key(course_root: Path, purpose: bytes) -> bytes:
    """The course's key for `purpose`: HMAC-SHA256 of `purpose` under the course secret."""
    secret = bytes.fromhex(course_secret(Path(course_root)))
    return hmac.new(secret, purpose, hashlib.sha256).digest()


def canonical(value: object) -> bytes:
    """`value` as the bytes its hash and signature are taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def sign(course_root: Path, facts: dict, result: dict) -> dict:
    """The facts with the schema, the result's sha256 and the course's signature added."""
    unsigned = {
        **facts,
        "schema": SCHEMA,
        "result_sha256": hashlib.sha256(canonical(result)).hexdigest(),
    }
    unsigned.pop("signature", None)
    signature = hmac.new(course_key(course_root, RECEIPT_KEY), canonical(unsigned), "sha256")
    return {**unsigned, "signature": signature.hexdigest()}


def verify(course_root: Path, result: dict, receipt: dict) -> None:
    """Nothing when the course signed this receipt for this result; ReceiptError otherwise."""
    if not isinstance(receipt, dict) or receipt.get("schema") != SCHEMA:
        raise ReceiptError(f"not a queue receipt (its schema is not {SCHEMA})")
    unsigned = {k: v for k, v in receipt.items() if k != "signature"}
    expected = hmac.new(course_key(course_root, RECEIPT_KEY), canonical(unsigned), "sha256")
    if not hmac.compare_digest(expected.hexdigest(), str(receipt.get("signature", ""))):
        raise ReceiptError(
            "the receipt was edited, or signed by another course: its signature does not match"
        )
    if hashlib.sha256(canonical(result)).hexdigest() != receipt["result_sha256"]:
        raise ReceiptError("the result was edited after the course signed it: its sha256 differs")


def split(document: object) -> tuple[dict, dict]:
    """(result, receipt) of a file to verify: the service's answer, or a results file that
    holds its receipt under "receipt"."""
    if not isinstance(document, dict) or "receipt" not in document:
        raise ReceiptError(
            "it carries no receipt: verify the file a --remote run wrote (its receipt is in it)"
        )
    if "result" in document and set(document) <= {"result", "receipt", "exit_status"}:
        return document["result"], document["receipt"]
    return {k: v for k, v in document.items() if k != "receipt"}, document["receipt"]
