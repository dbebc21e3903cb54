# The course's everyday commands. On first use they build the project environment, .venv, and
# run everything with its Python; `make test PYTHON=python3` uses an existing environment instead
# (no .venv). PYTHONPATH lets nbgrader's kernels import learning/ and grader/.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
VENV := .venv
PYTHON ?= $(VENV)/bin/python
# torch's wheel index: PyTorch's CPU-only one where there is no nvidia-smi, else PyPI's default.
CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(if $(shell command -v nvidia-smi),,$(CPU_INDEX))
# Whether TORCH_INDEX answers: one request for its torch page, 5 s at most. pip alone retried an
# index that accepts and never answers for 99.6 s (5 tries of its 15 s timeout) before the fallback.
ANSWERS = import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5)
# torch's requirement as pyproject.toml states it, e.g. torch>=2.11,<2.14
TORCH = $(shell sed -n 's/^ *"\(torch[<>=!~][^"]*\)",*$$/\1/p' pyproject.toml)

ifeq ($(PYTHON),$(VENV)/bin/python)
SETUP := $(VENV)/.installed
# .venv/bin first, so what nbgrader and the tests launch by name is the environment's
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
endif

.PHONY: demo test release check student-bundle secret venv

# The release is generated inside the scratch course (grader.course.new_course): demo writes
# only scratch/demo and reports/cohort.
demo: $(SETUP)  ## build the release, autograde the sample cohort in a scratch course, write the report
	$(PYTHON) -m grader.demo --course scratch/demo --report reports/cohort

test: $(SETUP)  ## every test (GPU tests skip without a CUDA device)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest -q -n auto --dist loadgroup --durations=10 --file-budget=60

release: $(SETUP)  ## regenerate release/ from source/ (commit both)
	$(PYTHON) -m nbgrader generate_assignment i1_strided_softmax --force

check: $(SETUP)  ## check the reference solution, as a student checks their work
	$(PYTHON) -m learning.workshops.check strided_softmax --hint --impl grader/reference.py

student-bundle: $(SETUP)  ## the zip students get: release notebooks, learning/, environment, README
	$(PYTHON) -m grader.bundle --out dist/i1-student.zip

secret: $(SETUP)  ## create the course secret (course_secret.txt, git-ignored) that draws the hidden tests
	$(PYTHON) -m grader.seeding new --course $(CURDIR)

venv: $(VENV)/.installed  ## only build .venv

# Built once; rebuilt (in place) only when pyproject.toml changes. A failed step leaves no stamp,
# so the next make retries.
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
ifneq ($(TORCH_INDEX),)
	if $(VENV)/bin/python -c '$(ANSWERS)' "$(TORCH_INDEX)" 2>/dev/null; then \
	  $(VENV)/bin/python -m pip install -q --index-url $(TORCH_INDEX) "$(TORCH)" \
	  || $(VENV)/bin/python -m pip install -q "$(TORCH)"; \
	else \
	  echo "torch: $(TORCH_INDEX) gave no answer in one try of 5 s; the configured index then"; \
	  $(VENV)/bin/python -m pip install -q "$(TORCH)"; \
	fi
else
	$(VENV)/bin/python -m pip install -q "$(TORCH)"
endif
	$(VENV)/bin/python -m pip install -q -e ".[course,dev]"
	# jupyter-events asks for jsonschema[format-nongpl], whose rfc3987-syntax builds an Earley
	# parser on import: 2.3 s in every process that imports nbformat (each nbgrader command,
	# each graded notebook's runner). Its IRI format check is never used here; without it
	# jsonschema skips that one format.
	$(VENV)/bin/python -m pip uninstall -q -y rfc3987-syntax
	$(VENV)/bin/python -m ipykernel install --sys-prefix --name python3
	touch $@
