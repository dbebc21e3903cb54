"""The check engine: cases and their ordered checks, the audit, hints, the child process
that runs a submission's code, and the sidecar records it leaves for the grader."""
