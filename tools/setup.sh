#!/usr/bin/env bash
# setup.sh -- installs everything heaplab needs on a fresh Debian machine.
# Idempotent: a package already present is not installed again.  Shared by
# `make test`, `make experiments`, `make bench` and `make notebooks`.
#
#   tools/setup.sh [base] [bench] [clients] [preload]
#
# base     compiler, Lua 5.4, Meson, CFFI, pytest, the analysis stack
# bench    the peers of the benchmarks: Boehm GC, mimalloc, jemalloc
# clients  the real programs run on heaplab-lua / heaplab-python
# preload  the real programs run on libheaplab-malloc.so (make test-preload,
#          E9): redis-server and its client, sqlite3, and Debian python3's
#          own regression tests (libpython3.X-testsuite, X of /usr/bin/python3)
#
# Python packages go into the project's virtual environment $VENV (default
# .venv at the root of the checkout), made from $PYTHON (default python3):
# ALWAYS, whatever the interpreter, so that nothing is ever installed into a
# system or user interpreter (Debian's /usr/bin/python3 refuses it anyway:
# "externally-managed-environment", PEP 668) and every machine runs the same
# package versions.  The Makefile puts $VENV/bin first on PATH: meson, ninja,
# pytest and python3 are the venv's, and Meson's Python (the one heaplab-python
# embeds) is the venv's base interpreter.  A .venv made from another
# interpreter than $PYTHON is made again (and the build folders configured
# with the old one are removed: heaplab-python embeds that interpreter).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

# `make test` runs a tiny benchmark across every allocator and the real
# programs on heaplab-lua, so base already has the peers and the Lua programs;
# and the libFuzzer targets: clang-14 with its runtimes (libFuzzer itself is in
# libclang-rt-14-dev), llvm-14 for llvm-symbolizer (readable sanitizer stacks).
apt_base="gcc make pkg-config lua5.4 liblua5.4-dev libreadline-dev valgrind libgc-dev libmimalloc-dev libjemalloc-dev lua-penlight lua-ldoc lua-dkjson lua-check lua-busted lua-filesystem luarocks clang-14 libclang-rt-14-dev llvm-14"
apt_bench=""
apt_clients=""
pip_base="meson>=1.1 meson-python>=0.15 ninja cffi>=2.0 pytest pytest-xdist hypothesis pandas matplotlib nbclient nbformat ipykernel mypy distributed rich"
# (locales: the de_DE source the preload test report_in_a_comma_locale builds a
# decimal-comma locale from, into its own folder; without it the test skips;
# binutils: readelf and nm, which preload_layout_puts_what_runs_together reads
# the library's sections and symbols with -- gcc depends on it, but the suite
# calls them itself)
apt_preload="redis-server redis-tools sqlite3 python3 locales binutils"

profiles=${*:-base}
want=""
for p in $profiles; do
  case $p in
    base) want="$want $apt_base" ;;
    bench) want="$want $apt_base $apt_bench" ;;
    clients) want="$want $apt_base $apt_clients" ;;
    preload) want="$want $apt_base $apt_preload" ;;
    *) echo "setup.sh: unknown profile '$p' (base, bench, clients, preload)" >&2; exit 2 ;;
  esac
done

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup.sh: no Python interpreter '$PYTHON' (set PYTHON=/path/to/python3)" >&2
  exit 2
fi
# What the base interpreter lacks that Debian packages for its own Python
# provide (a pyenv or self-built interpreter has them all): the venv module
# (ensurepip), the C headers and libpython (the extension and heaplab-python),
# and the test package (CPython's regrtest runs on heaplab-python in make test).
read -r pyver pyprefix <<<"$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2], sys.base_prefix)')"
if [ "$pyprefix" = /usr ]; then
  "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || want="$want python$pyver-venv"
  "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || want="$want python$pyver-dev"
  "$PYTHON" -c 'import test.test_list' 2>/dev/null || want="$want libpython$pyver-testsuite"
fi

missing=()
for pkg in $want; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- the project's virtual environment -------------------------------------
# The venv's own base interpreter (its bin/python says, from its pyvenv.cfg),
# whoever made it: a .venv the user made from the same interpreter is kept.
base_of='import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "%d.%d" % sys.version_info[:2])'
base=$("$PYTHON" -c "$base_of")
venv_base=""
[ -d "$VENV" ] && venv_base=$("$VENV/bin/python" -c "$base_of" 2>/dev/null || true)
if [ -d "$VENV" ] && [ "$venv_base" != "$base" ]; then
  echo "setup.sh: $VENV was made from ${venv_base:-an interpreter that no longer runs}; making it again from $base"
  # the build folders configured with the old venv's python (meson records its
  # path in meson-private/ and meson-info/): heaplab-python embeds that interpreter
  venv_abs=$(cd "$VENV" && pwd)
  venv_real=$(cd "$VENV" && pwd -P)
  for d in build*/; do
    [ -d "$d/meson-private" ] || continue
    if grep -rqsF -e "$venv_abs/bin/python" -e "$venv_real/bin/python" "$d/meson-private" "$d/meson-info"; then
      echo "setup.sh: removing $d (configured with the old $VENV)"
      rm -rf "$d"
    fi
  done
  rm -rf "$VENV"
fi
base=${base% *}
if [ ! -d "$VENV" ]; then
  echo "setup.sh: making the virtual environment $VENV from $base (Python $pyver)"
  "$PYTHON" -m venv "$VENV"
fi

# preload: CPython's regression tests for Debian's python3, whose package is
# named after its version (libpython3.11-testsuite on bookworm)
case " $profiles " in
  *" preload "*)
    ts="libpython$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-testsuite"
    if ! dpkg-query -W -f='${Status}' "$ts" 2>/dev/null | grep -q "install ok installed"; then
      echo "setup.sh: installing Debian packages: $ts"
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$ts" >/dev/null
    fi ;;
esac

stamp="$VENV/setup-python.stamp"
if [ ! -f "$stamp" ] || [ "$stamp" -ot "$0" ]; then
  # a venv of the same interpreter kept above may have no pip (made by `uv
  # venv`, or `python3 -m venv --without-pip`): pip comes from ensurepip
  if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "setup.sh: $VENV has no pip; installing it (ensurepip)"
    "$VENV/bin/python" -m ensurepip >/dev/null
  fi
  echo "setup.sh: installing Python packages into $VENV: $pip_base"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check $pip_base
  touch "$stamp"
fi
