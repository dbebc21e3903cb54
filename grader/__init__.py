"""The instructor's side of the I1 course: reference, hidden cases, zoo, release and grading.

Never shipped to students.
"""
