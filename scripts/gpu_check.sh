#!/usr/bin/env bash
# The whole GPU check on a CUDA machine with torch and triton but no Jupyter or index:
# installs nbgrader's wheels from .whl/ (fetch them with scripts/fetch-gpu-wheels.sh
# on a machine with an index) and bubblewrap from .debs/ (`apt-get download bubblewrap`),
# then runs grader.gpu_check, which prints a short table last.
# Usage: scripts/gpu_check.sh OUT_FOLDER [--skip STEP ...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/gpu}
shift || true
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .whl ] && ! python3 -c 'import nbgrader' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH
  python3 -m ipykernel install --user --name python3 >/dev/null
fi
# Bytecode, written once: a Python that writes none itself (PYTHONDONTWRITEBYTECODE, as on the
# H200 host) over packages installed without it imports torch from source in every grading
# process, 5 s each there, about five processes a submission (ready_to_grade notes it too).
packages=("$(python3 -c 'import pathlib, torch; print(pathlib.Path(torch.__file__).parents[1])')")
[ -d /tmp/site ] && packages+=(/tmp/site)
# (it exits 1 for the few files in site-packages that are not Python 3: templates, old tests)
python3 -m compileall -qq -j 0 "${packages[@]}" learning grader 2>/dev/null || true
if ! command -v bwrap >/dev/null && compgen -G ".debs/bubblewrap_*.deb" >/dev/null; then
  # grading is sandboxed: bubblewrap from the Debian package carried in .debs/
  dpkg -x .debs/bubblewrap_*.deb /tmp/bwrap && export PATH=/tmp/bwrap/usr/bin:$PATH
fi
# The course secret is git-ignored, so this copy of the tree has none: every draw here
# (the tests, the scratch course's autograde) comes from a throwaway one.
export I1_COURSE_SECRET=${I1_COURSE_SECRET:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "gpus", torch.cuda.device_count())'
# The shards step grades into PostgreSQL: Debian's server if installed, else the binaries of
# the pgserver wheel in .whl/ (self-contained; scripts/gpu-wheels.txt lists it), started as a
# private cluster for this run (tests/services.py) and stopped at the end.
if [ -z "${I1_GRADEBOOK_URL:-}" ]; then
  if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && compgen -G ".whl/pgserver-*.whl" >/dev/null; then
    rm -rf /tmp/pgserver && python3 -m zipfile -e .whl/pgserver-*.whl /tmp/pgserver
    chmod -R a+rX /tmp/pgserver && chmod a+x /tmp/pgserver/pgserver/pginstall/bin/*
    export I1_PG_BINDIR=/tmp/pgserver/pgserver/pginstall/bin
  fi
  mkdir -p "$out" && python3 tests/services.py postgres > "$out/postgres.txt" 2>&1 &
  pg=$!
  # it stops its cluster; `|| true`, or set -e makes the script exit 143 (the server's SIGTERM)
  trap 'kill $pg 2>/dev/null; wait $pg 2>/dev/null || true' EXIT
  for _ in $(seq 150); do grep -q '^I1_GRADEBOOK_URL=' "$out/postgres.txt" && break; sleep 0.2; done
  url=$(sed -n 's/^I1_GRADEBOOK_URL=//p' "$out/postgres.txt")
  [ -n "$url" ] && export I1_GRADEBOOK_URL=$url || echo "no PostgreSQL: $(tail -3 "$out/postgres.txt")"
fi
python3 -m grader.gpu_check --out "$out" "$@"
