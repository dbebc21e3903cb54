"""GPU timing, the benchmark's sweep and its results file, with the course's recorded H200 run."""
