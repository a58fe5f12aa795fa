#!/usr/bin/env bash
# stage-package.sh BUILD_DIR -- the heaplab Python package of a meson build
# configured with -Dpython=true, laid out as `pip install .` lays it out (the
# CFFI extension, the option table generated from heaplab.h, py.typed,
# libheaplab-malloc.so, the experiments), staged under BUILD_DIR/stage by
# `meson install --destdir`.  Prints the folder to put first on PYTHONPATH.
# Used by `make test-python-asan` (an instrumented extension) and
# tools/coverage.sh (a gcov one: the copies write their counts to the build).
set -euo pipefail
build=${1:?usage: tools/stage-package.sh BUILD_DIR}
[ -f "$build/build.ninja" ] || { echo "stage-package.sh: $build is not a meson build" >&2; exit 1; }
stage="$(cd "$build" && pwd)/stage"
rm -rf "$stage"
meson install -C "$build" --no-rebuild --quiet --destdir "$stage" \
  --tags runtime,python-runtime >/dev/null
init=$(find "$stage" -path '*/heaplab/__init__.py' | head -n 1)
if [ -z "$init" ] || [ ! -f "$(dirname "$init")/_options.py" ]; then
  echo "stage-package.sh: $build installed no heaplab package (configured with -Dpython=true?)" >&2
  exit 1
fi
dirname "$(dirname "$init")"
