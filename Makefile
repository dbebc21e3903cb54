# The course's everyday commands. PYTHONPATH lets nbgrader's kernels import learning/ and grader/.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
PYTHON ?= python3

.PHONY: demo test release check student-bundle secret

demo:  ## build the release, autograde the sample cohort in a scratch course, write the report
	$(PYTHON) -m nbgrader generate_assignment i1_strided_softmax --force --log-level=WARN
	$(PYTHON) -m grader.demo --course scratch/demo --report reports/cohort

test:  ## every test (GPU tests skip without a CUDA device)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest -q

release:  ## regenerate release/ from source/ (commit both)
	$(PYTHON) -m nbgrader generate_assignment i1_strided_softmax --force

check:  ## check the reference solution, as a student checks their work
	$(PYTHON) -m learning.workshops.check strided_softmax --hint --impl grader/reference.py

student-bundle:  ## the zip students get: release notebooks, learning/, environment, README
	$(PYTHON) -m grader.bundle --out dist/i1-student.zip

secret:  ## create the course secret (course_secret.txt, git-ignored) that draws the hidden tests
	$(PYTHON) -m grader.seeding new --course $(CURDIR)
