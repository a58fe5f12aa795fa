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
set -euo pipefail
PYTHON=${PYTHON:-python3}

# `make test` runs a tiny benchmark across every allocator and the real
# programs on heaplab-lua, so base already has the peers and the Lua programs.
apt_base="gcc make pkg-config lua5.4 liblua5.4-dev libreadline-dev valgrind libgc-dev libmimalloc-dev libjemalloc-dev lua-penlight lua-ldoc lua-dkjson lua-check lua-busted lua-filesystem luarocks"
apt_bench=""
apt_clients=""
apt_preload="redis-server redis-tools sqlite3 python3"
pip_base="meson>=1.1 meson-python>=0.15 ninja cffi>=2.0 pytest hypothesis pandas matplotlib nbclient nbformat ipykernel"

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

stamp=".setup-python.stamp"
if [ ! -f "$stamp" ] || [ "$stamp" -ot "$0" ]; then
  echo "setup.sh: installing Python packages: $pip_base"
  # shellcheck disable=SC2086
  $PYTHON -m pip install -q --disable-pip-version-check $pip_base
  touch "$stamp"
fi
