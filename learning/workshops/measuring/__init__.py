"""GPU timing, and the benchmark's results file with the course's recorded H200 run."""
