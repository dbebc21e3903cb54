"""`python -m grader.cohort ASSIGNMENT --out DIR`: see `grader.cohort.cli`."""

import sys

from grader.cohort.cli import main

sys.exit(main())
