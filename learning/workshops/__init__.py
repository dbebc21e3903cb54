"""Workshop I1, softmax over real tensor views.

Importing any part of it first checks the installed torch and Triton (`versions.py`): outside
the supported range the import fails with the fix, rather than giving wrong verdicts later.
"""

from learning.workshops import versions

versions.check()
