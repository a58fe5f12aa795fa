# heaplab -- the two commands of README.md:
#   make experiments   set up, build, install, run the experiment suite, print its table
#   make test          set up, build, run every test (C, C under ASan+UBSan, Python, Lua)
# Everything a fresh Debian machine lacks is installed by tools/setup.sh.

PYTHON ?= python3
BUILD  ?= build
# The project's virtual environment (tools/setup.sh makes it from $(PYTHON)
# and installs every Python package there; nothing goes into $(PYTHON)
# itself).  From here on PYTHON is the venv's interpreter, and the venv's bin
# comes first on PATH, so meson, ninja and pytest are the venv's too.
VENV   ?= .venv
BASE_PYTHON := $(PYTHON)
override PYTHON := $(abspath $(VENV))/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))
ASAN   ?= build-asan
TSAN   ?= build-tsan
PYASAN ?= build-pyasan
FUZZ   ?= build-fuzz
SOAK_BUILD ?= $(BUILD)
COV    ?= build-cov
FUZZ_SECONDS ?= 300
DURATION ?= 600
export MALLOC_PERTURB_ = 0
# A new compiler warning fails the plain build (meson's werror) where every
# warning was last cleared -- make test's plain, ASan, TSan, Python-ASan and
# fuzz builds emit none (session 45) -- with GCC 12.2.0 (Debian 12's, the
# CI's) on x86-64.  Nowhere else: another compiler's or version's new
# warnings must not fail a fresh clone's make test; a pip install, an
# embedding build and tools/mutants.py's builds (a mutation whose edit leaves
# a warning is not a broken one) set up their own.
WERROR := $(shell [ "$$($${CC:-cc} -dumpfullversion 2>/dev/null)" = 12.2.0 ] && \
                  [ "$$(uname -m)" = x86_64 ] && echo -Dwerror=true)

.PHONY: all setup build build-asan install test test-c test-asan test-python test-python-asan test-lua \
        test-clients test-bench test-notebooks test-tsan build-tsan experiments bench \
        notebooks lua clean distclean docs test-lua-testes build-fuzz fuzz test-fuzz soak \
        test-soak test-side-by-side coverage mutants test-preload \
        test-python-alone test-python-shared test-alone setup-preload

all: build

setup:
	@PYTHON="$(BASE_PYTHON)" VENV="$(VENV)" tools/setup.sh base

$(BUILD)/build.ninja:
	meson setup $(BUILD) --buildtype=release $(WERROR)

build: setup $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN)/build.ninja:
	meson setup $(ASAN) --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dasserts=true

build-asan: setup $(ASAN)/build.ninja
	ninja -C $(ASAN)

# the Python package (meson-python builds the CFFI extension; INSTALLED=1:
# make test's last phase, after test-python-alone installed it)
install: setup
ifneq ($(INSTALLED),1)
	$(PYTHON) -m pip install -q --disable-pip-version-check --no-build-isolation .
endif

$(TSAN)/build.ninja:
	meson setup $(TSAN) --buildtype=debug -Db_sanitize=thread -Db_lundef=false -Dlua=disabled

build-tsan: setup $(TSAN)/build.ninja
	ninja -C $(TSAN) threads-tests

test-c: build
	meson test -C $(BUILD) --suite c --print-errorlogs

# (meson test builds what the suites run, no more: not build-asan's launchers,
# benchmark drivers, preload library and soak, which no suite runs here)
test-asan: setup $(ASAN)/build.ninja
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 meson test -C $(ASAN) --suite c --suite lua --print-errorlogs

# the threaded scenarios under ThreadSanitizer
test-tsan: build-tsan
	TSAN_OPTIONS=halt_on_error=1 meson test -C $(TSAN) --no-rebuild --suite threads --print-errorlogs

# The binding's lifetimes under AddressSanitizer: the Python package with an
# instrumented extension (finalizers, Ctrl-C, threads racing close/stop), and
# the model test of random programs with compactions and sub-page releases.
$(PYASAN)/build.ninja:
	meson setup $(PYASAN) --buildtype=debug -Dpython=true -Dtests=false -Dlua=disabled \
	  -Db_sanitize=address,undefined -Db_lundef=false -Dasserts=true

test-python-asan: setup build $(PYASAN)/build.ninja
	ninja -C $(PYASAN)
	site=$$(tools/stage-package.sh $(PYASAN)) && cd tests/python && \
	  LD_PRELOAD="$$(gcc -print-file-name=libasan.so):$$(gcc -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:allocator_may_return_null=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONMALLOC=malloc \
	  PYTHONPATH=$$site HEAPLAB_BUILD=$(abspath $(BUILD)) \
	  HEAPLAB_MODEL_EXAMPLES=15 \
	  $(PYTHON) -m pytest -q -p no:cacheprovider --capture=sys test_reliability.py test_bad_input.py \
	  test_threads.py test_same_words.py test_compaction_model.py test_conservative_region.py

PYTEST_RUN = cd tests/python && HEAPLAB_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q

test-python: install build
	$(PYTEST_RUN) .

# make test splits the Python tests in two: those that measure the process
# (sampled footprints, bounded waits) run in test-alone; the rest (marked
# shares_the_machine) in test-side-by-side, two pytest-xdist workers at once
# (serial 222-226 s, -n 2 170-179 s, make test-side-by-side, interleaved
# pairs, session 42)
test-python-alone: install build
	$(PYTEST_RUN) -m 'not shares_the_machine' .

test-python-shared: install build
	$(PYTEST_RUN) -n 2 -m shares_the_machine .

test-lua: build
	meson test -C $(BUILD) --suite lua --print-errorlogs

# real programs on heaplab-lua / heaplab-python (issue 10)
test-clients: build install
	meson test -C $(BUILD) --suite clients --print-errorlogs

# real programs on libheaplab-malloc.so (LD_PRELOAD) and its C tests (issue 17)
test-preload: build setup-preload
	meson test -C $(BUILD) --suite preload --print-errorlogs

# a tiny benchmark configuration: correctness only (issue 8)
test-bench: build
	meson test -C $(BUILD) --suite bench --print-errorlogs

# every notebook under docs/notebooks runs headless (issue 9)
test-notebooks: install
	$(PYTHON) -m heaplab.notebooks docs/notebooks --check

# libFuzzer targets (fuzz/, issue 16): clang, ASan + UBSan, their own build dir
$(FUZZ)/build.ninja:
	CC=clang-14 meson setup $(FUZZ) --buildtype=debugoptimized -Dfuzz=true -Dasserts=true \
	  -Db_sanitize=address,undefined -Db_lundef=false

build-fuzz: setup $(FUZZ)/build.ninja
	ninja -C $(FUZZ)

# each target for FUZZ_SECONDS (default 300) seconds
fuzz: build-fuzz
	tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ)

# fuzz_heap 20 seconds, fuzz_options 30 (make fuzz runs long); every
# property strict, fuzz_heap's out-of-memory one too (an allocation refused
# that succeeds when retried after an explicit major collection is a
# finding).  The seed corpora (the regression inputs) are run first by
# fuzz.sh itself: libFuzzer runs every input of its corpus folders before it
# mutates, and one that fails fails the run (a `-runs=0` pass of its own ran
# each seed twice).  Read up to fuzz.sh's -max_len, so a longer seed is
# refused.  (fuzz_heap had 30 s when its oracle's poison scans were
# coverage-instrumented: 139 inputs in them, its 52 seeds taking ~15 s; now
# ~470 in 20 s, the seeds ~5 s.)  Both run when the first fails.
test-fuzz: build-fuzz
	@long=$$(find fuzz/corpus -type f -size +1024c); [ -z "$$long" ] || \
	  { echo "test-fuzz: seeds longer than tools/fuzz.sh's -max_len=1024 (run cut short): $$long" >&2; exit 1; }
	@st=0; tools/fuzz.sh 20 $(FUZZ) fuzz_heap || st=1; tools/fuzz.sh 30 $(FUZZ) fuzz_options || st=1; exit $$st

# every experiment's workload shape across threads, random fault schedules,
# verify on, for DURATION seconds (default 600); figures at the end
soak: build
	$(SOAK_BUILD)/tests/soak/heaplab-soak --duration $(DURATION) --threads 4

# the short soak configuration (30 s)
test-soak: build
	meson test -C $(BUILD) --suite soak --print-errorlogs --logbase testlog-soak

# line and branch coverage of core/ by the C, Lua, preload and Python tests
# (gcovr); fails below the floors in tools/coverage.sh.  (build and install:
# the Python tests import the instrumented package first on PYTHONPATH, but
# its console script, pytest plugin and version come from the installed
# package's metadata, and test_sweep's Lua arms from build/: a fresh clone's
# make coverage failed 29 of them without, session 41)
coverage: setup build install setup-preload
	PYTHON=$(PYTHON) tools/coverage.sh $(COV)

# make test in two lanes.  First, one at a time, the phases whose tests use
# both cores or do not bear a neighbour: the C suite and the ASan suites
# (threaded scenarios: 1.8-2 cores busy), the TSan suite (one core busy, but
# its threaded scenarios ran 1.7-2.3x slower beside the other lane, even at
# nice 19 or SCHED_IDLE: the two CPUs share more than the scheduler's time),
# and the set-up the rest needs (the preload profile's packages -- the E9
# notebook drives redis-server --, the Python package).  Then two lanes at
# once: test-alone runs the phases whose tests bound waits or sample
# footprints one after another (the main pytest run, the Python ASan run, the
# Lua, clients, preload and bench suites: about one core busy, much of it
# waiting for their programs), and test-side-by-side runs beside them, at the
# lowest CPU priority, what asserts no time and no footprint.  (nice 19 gives
# a task a weight of 15 against a default task's 1024.)
test: test-c test-asan test-tsan setup-preload install
	@$(MAKE) --no-print-directory -j2 INSTALLED=1 test-alone test-side-by-side

test-alone: install
	@$(MAKE) --no-print-directory -j1 INSTALLED=1 test-python-alone test-python-asan test-lua \
	  test-clients test-preload test-bench

# The notebooks (each runs and draws), the fuzzers and the soak (each runs a
# fixed time and checks results) and the Python tests marked
# shares_the_machine (the models, the conventions: no time, no footprint)
# share the machine with each other, at nice 19: with test-alone's phases
# when make test runs them.  Each one's output is printed whole when it ends.
# (The package is installed once, before: four pip installs at once in the
# venv would race; under make test, which installed it, INSTALLED=1.)
test-side-by-side: install
	nice -n 19 $(MAKE) --no-print-directory -j4 --output-sync=target INSTALLED=1 test-notebooks \
	  test-fuzz test-soak test-python-shared

setup-preload: setup
	@PYTHON="$(BASE_PYTHON)" VENV="$(VENV)" tools/setup.sh preload

experiments: install build setup-preload
	$(PYTHON) -m pytest experiments -q

# the mutation audit (issue 22, docs/mutants.md): each mutation of tools/mutants.toml
# in a scratch copy under $TMPDIR, built and run against its tests; fails if one
# survives or no longer applies.  Not part of make test (tens of minutes).
mutants: setup
	$(PYTHON) tools/mutants.py

# the benchmarks against Boehm GC, mimalloc, jemalloc, glibc (issue 8): the
# table on the terminal, records under results/bench (docs/performance.md)
bench: install build
	@PYTHON="$(BASE_PYTHON)" VENV="$(VENV)" tools/setup.sh bench
	$(PYTHON) -m pytest experiments -m bench -q

notebooks: install
	$(PYTHON) -m heaplab.notebooks docs/notebooks

# the Lua module's reference, from the LDoc comments in bindings/lua (config.ld)
docs: setup
	ldoc --fatalwarnings -d $(BUILD)/docs/lua .
	@echo "open $(BUILD)/docs/lua/index.html"

# Lua 5.4.4's own test suite on heaplab-lua (docs/clients.md): needs a copy,
# LUA_TESTES=/path/to/lua-5.4.4/testes (or HEAPLAB_FETCH_LUA_TESTES=1)
test-lua-testes: build
	meson test -C $(BUILD) --suite clients lua_testes --print-errorlogs -v

lua: build
	@echo "heaplab = require 'heaplab' is on the path; try: h = heaplab.heap{}"
	LUA_CPATH="$(BUILD)/bindings/lua/?.so;;" lua5.4 -i -e 'heaplab = require "heaplab"'

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) $(PYASAN) $(FUZZ) $(COV) $(COV)-py build-luarocks results .setup-python.stamp

# clean, and the project's virtual environment too
distclean: clean
	rm -rf $(VENV)
