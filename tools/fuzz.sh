#!/usr/bin/env bash
# fuzz.sh -- run heaplab's libFuzzer targets (fuzz/) one after the other.
#
#   tools/fuzz.sh SECONDS [BUILD_DIR] [TARGET...]
#
# Each target runs SECONDS seconds under ASan + UBSan, starting from the seed
# corpus in the repository (fuzz/corpus/<target>/, never written to) plus
# what earlier runs found (BUILD_DIR/corpus/<target>/).  A crash, a failed
# property (the harness aborts with a line saying what), a leak, a timeout
# or an out-of-memory stops the run with status 1; the input is saved under
# BUILD_DIR/artifacts/ and the command to reproduce it is printed.
set -euo pipefail
secs=${1:?usage: tools/fuzz.sh SECONDS [BUILD_DIR] [TARGET...]}
build=${2:-build-fuzz}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_heap fuzz_options)
root=$(cd "$(dirname "$0")/.." && pwd)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/$t"
  [ -x "$exe" ] || { echo "fuzz.sh: $exe is not built (make build-fuzz)" >&2; exit 2; }
  work="$build/corpus/$t"
  mkdir -p "$work"
  log="$build/$t.log"
  echo "fuzz.sh: $t for ${secs}s (seeds: fuzz/corpus/$t, corpus: $work, log: $log)"
  # -max_len: programs of up to 1 KiB (len_control=0: long ones from the start,
  # a heap bug needs a history); -timeout: one input
  # running 20 s is a hang
  if "$exe" -max_total_time="$secs" -max_len=1024 -len_control=0 -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
      "$work" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz.sh: $t clean: $runs inputs in ${secs}s, $cov"
  else
    status=1
    echo "fuzz.sh: $t FAILED; the end of $log:" >&2
    grep -v '^\s*NEW_FUNC\|^#[0-9]' "$log" | tail -40 >&2
    art=$(ls -t "$build/artifacts/$t-"* 2>/dev/null | head -1 || true)
    [ -n "$art" ] && echo "fuzz.sh: reproduce with: $exe $art" >&2
  fi
done
exit $status
