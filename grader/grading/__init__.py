"""What runs while `nbgrader autograde` grades a submission: the sandbox, the hidden and
timing cells graded on the trusted side, the cells put back, the feedback, the grading log
and the late policy. The instructor's commands live one level up, in `grader`."""
