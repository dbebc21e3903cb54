"""The student's side of the I1 course: contracts, views, checks, hints and pictures."""
