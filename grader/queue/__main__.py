import sys

from grader.queue.cli import main

sys.exit(main())
