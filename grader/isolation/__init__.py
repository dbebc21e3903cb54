"""The operating-system side of isolating untrusted code: no nbgrader, no course in here."""
