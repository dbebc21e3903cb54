"""What runs while `nbgrader autograde` grades a submission: the notebook run in the sandbox
(`execute`, over `grader.isolation`, which holds no nbgrader), the hidden and timing cells
graded on the trusted side, the cells put back, the feedback, the grading log and the late
policy. The instructor's commands live one level up, in `grader`."""
