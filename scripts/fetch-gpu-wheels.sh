#!/usr/bin/env bash
# Download, into DEST (default .whl), the wheels that a CUDA machine with PyTorch and Triton but no
# Jupyter needs to run nbgrader end to end: Python 3.12, x86-64, about 30 MB. The machine needs no index.
set -euo pipefail
dest=${1:-.whl}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest"
plats=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64 any; do plats="$plats --platform $p"; done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $plats -d "$dest" -r "$here/gpu-wheels.txt"
echo "$(ls "$dest" | wc -l) wheels in $dest ($(du -sh "$dest" | cut -f1))"
