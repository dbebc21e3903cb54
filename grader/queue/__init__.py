"""The class GPU queue (issue 52): students send a notebook, a GPU runs it, a receipt comes back.

`store` keeps the jobs in the course's gradebook database, `service` is the HTTP API,
`tokens` the students' and the instructor's tokens, `receipt` signs and verifies results,
`board` the class board, `cli` the `python -m grader.queue` commands; the worker side is
`worker` and `runner` (docs/queue.md).
"""
