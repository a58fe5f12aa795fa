#!/usr/bin/env bash
# coverage.sh -- line and branch coverage of core/ by the test suites (make coverage).
#
#   tools/coverage.sh [BUILD_DIR]          (default build-cov)
#
# Builds with -Db_coverage=true (gcc + gcov) in BUILD_DIR, and the Python
# extension the same way in BUILD_DIR-py; runs the C scenario tests, the Lua
# tests, the preloaded library's tests (make test-preload's), a 10 s soak
# and the Python tests (tests/python, against that extension: PYTHONPATH
# puts it before any installed heaplab); then gcovr reports core/ only.
# Fails when line or branch coverage falls below the floors below (set a
# little under the figures measured when they were written; README.md has
# the figures).  Reports: BUILD_DIR/coverage.txt and
# BUILD_DIR/coverage.html.
set -euo pipefail
LINE_FLOOR=${COV_LINE_FLOOR:-96}
BRANCH_FLOOR=${COV_BRANCH_FLOOR:-80}
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

# each step's output goes to a log; a failing step prints the end of it
step() {
  local log=$1; shift
  "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2
    echo "coverage.sh: failed: $* (whole output: $log)" >&2; exit 1; }
}

echo "coverage.sh: C, Lua and preload tests"
# the preload suite runs real programs on libheaplab-malloc.so, the core's
# manual mode compiled into it: its counts go to core/'s files too
step "$cov/tests.log" meson test -C "$cov" --no-rebuild --suite c --suite lua --suite preload \
  --print-errorlogs
echo "coverage.sh: a 10 s soak"
step "$cov/soak.log" "$cov/tests/soak/heaplab-soak" --duration 10

echo "coverage.sh: Python tests against $cov-py"
# the package as pip installs it, staged (the copies of the instrumented
# objects write their counts to this build)
site=$(tools/stage-package.sh "$cov-py")
# (one test left out: it runs bench.py under a 2 KiB RLIMIT_FSIZE, and the
# instrumented bench program writing its .gcda files at exit dies of SIGXFSZ
# -- a failure of this build, not of the code: make test runs it)
(cd tests/python && PYTHONPATH="$site" HEAPLAB_BUILD="$root/$cov" \
  step "$root/$cov-py/pytest.log" $PYTHON -m pytest -q -p no:cacheprovider . \
  -k "not test_a_failed_save_leaves_the_earlier_records_whole")

echo "coverage.sh: gcovr (core/ only)"
# registry.c's hl__pin_code is defined on another line in the preloaded
# library's copy of the core (#if): gcovr 8's default merge of functions
# (strict) refused the two -- "Got function hl__pin_code on multiple lines",
# no report at all.  Kept apart (older gcovr has no such option, merges them).
merge=()
$PYTHON -m gcovr --help | grep -q -- --merge-mode-functions && merge=(--merge-mode-functions=separate)
$PYTHON -m gcovr -r "$root" --filter 'core/' "${merge[@]}" --txt "$cov/coverage.txt" \
  --html-details "$cov/coverage.html" --print-summary \
  --fail-under-line "$LINE_FLOOR" --fail-under-branch "$BRANCH_FLOOR" "$cov" "$cov-py" \
  || { echo "coverage.sh: core/ coverage fell below the floor (lines $LINE_FLOOR%, branches $BRANCH_FLOOR%); see $cov/coverage.txt" >&2; exit 1; }
