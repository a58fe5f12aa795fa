#!/usr/bin/env bash
# coverage.sh -- line and branch coverage of core/ by the test suites (make coverage).
#
#   tools/coverage.sh [BUILD_DIR]          (default build-cov)
#
# Builds with -Db_coverage=true (gcc + gcov) in BUILD_DIR, and the Python
# extension the same way in BUILD_DIR-py; runs the C scenario tests, the Lua
# tests, a 10 s soak and the Python tests (tests/python, against that
# extension: PYTHONPATH puts it before any installed heaplab); then gcovr
# reports core/ only.  Fails when line or branch coverage falls below the
# floors below (set a little under the figures measured when they were
# written; README.md has the figures).  Reports: BUILD_DIR/coverage.txt and
# BUILD_DIR/coverage.html.
set -euo pipefail
LINE_FLOOR=${COV_LINE_FLOOR:-95}
BRANCH_FLOOR=${COV_BRANCH_FLOOR:-78}
PYTHON=${PYTHON:-python3}
cov=${1:-build-cov}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

$PYTHON -c 'import gcovr' 2>/dev/null || $PYTHON -m pip install -q --disable-pip-version-check gcovr

[ -f "$cov/build.ninja" ] || meson setup "$cov" --buildtype=debug -Db_coverage=true >/dev/null
[ -f "$cov-py/build.ninja" ] || meson setup "$cov-py" --buildtype=debug -Db_coverage=true \
  -Dpython=true -Dtests=false -Dlua=disabled >/dev/null
ninja -C "$cov" >/dev/null
ninja -C "$cov-py" >/dev/null
# counts from earlier runs would add up
find "$cov" "$cov-py" -name '*.gcda' -delete

echo "coverage.sh: C and Lua tests"
meson test -C "$cov" --no-rebuild --suite c --suite lua --print-errorlogs >/dev/null
echo "coverage.sh: a 10 s soak"
"$cov/tests/soak/heaplab-soak" --duration 10 >/dev/null

echo "coverage.sh: Python tests against $cov-py"
pkg="$cov-py/pkg/heaplab"
rm -rf "$cov-py/pkg" && mkdir -p "$pkg"
ln -s "$root"/bindings/python/heaplab/*.py "$pkg/"
ln -s "$root/$cov-py"/bindings/python/_heaplab*.so "$pkg/"
(cd tests/python && PYTHONPATH="$root/$cov-py/pkg" HEAPLAB_BUILD="$root/$cov" \
  $PYTHON -m pytest -q -p no:cacheprovider . >/dev/null)

echo "coverage.sh: gcovr (core/ only)"
$PYTHON -m gcovr -r "$root" --filter 'core/' --txt "$cov/coverage.txt" \
  --html "$cov/coverage.html" --print-summary \
  --fail-under-line "$LINE_FLOOR" --fail-under-branch "$BRANCH_FLOOR" "$cov" "$cov-py" \
  || { echo "coverage.sh: core/ coverage fell below the floor (lines $LINE_FLOOR%, branches $BRANCH_FLOOR%); see $cov/coverage.txt" >&2; exit 1; }
