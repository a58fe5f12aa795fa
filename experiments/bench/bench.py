"""The benchmark driver: runs bench-<allocator> executables side by side.

Every measurement is one fresh process (one workload, one run), so peak RSS
is that run's own and no allocator inherits another's heap.  Runs are
interleaved -- round 1 of every arm, then round 2 ... -- so a burst of load on
the machine lands on every arm rather than on one.  What is reported are
medians, min-max, and ratios taken in the same invocation; the targets are
judged on the fastest runs, with the ratio of medians beside it (time_ratio).

    python3 experiments/bench/bench.py run [--quick]   # the table (make bench uses pytest)
    python3 experiments/bench/bench.py check --exe heaplab=PATH ...   # meson test, suite bench
    python3 experiments/bench/bench.py pair "CMD_A" "CMD_B" [--rounds N]   # an A/B, side by side
    python3 experiments/bench/bench.py phases "CMD_A" "CMD_B"... [--rounds N]   # binary-trees by phase

Standard library only: the meson test runs it without the Python package.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys

MiB = 1 << 20
ALLOCATORS = ("heaplab", "boehm", "mimalloc", "jemalloc", "glibc")
PACKAGES = {"boehm": "libgc-dev", "mimalloc": "libmimalloc-dev", "jemalloc": "libjemalloc-dev"}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class BenchError(RuntimeError):
    pass


class UsageError(BenchError):
    """What the command line asked cannot be run (exit 2): a command that
    does not start, an empty one, --exe without '=', --rounds < 1."""


# ---- finding and running the executables -------------------------------------------

def find_exes(build_dir=None, exes=None):
    """{allocator: path}.  `exes` (name -> path) wins; otherwise the build dir
    ($HEAPLAB_BUILD or ./build under the repository)."""
    if exes:
        out = _Exes(exes)
        out.given = True
        return out
    build_dir = build_dir or os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")
    folder = os.path.join(build_dir, "experiments", "bench")
    out = _Exes()
    out.searched = folder
    for name in ALLOCATORS:
        path = os.path.join(folder, f"bench-{name}")
        if os.access(path, os.X_OK):
            out[name] = path
    return out


class _Exes(dict):
    """find_exes' answer, which remembers the folder it looked in (or that
    --exe gave them: given)."""
    searched = None
    given = False


def require(exes, names):
    missing = [n for n in names if n not in exes]
    if not missing:
        return
    folder = getattr(exes, "searched", None)
    if getattr(exes, "given", False):
        # (it blamed the peers' packages and ninja: with --exe no build
        # folder is searched, the others were simply not given -- the bench
        # hunt, session 32)
        raise BenchError(f"--exe gave {', '.join(sorted(exes))} only; this run needs "
                         f"{', '.join(missing)} too: give each as --exe NAME=PATH (with --exe "
                         f"no build folder is searched), or leave --exe out to use the build "
                         f"folder's, or run --workload release / churn / compact (heaplab "
                         f"only); Meson builds a peer only when its package is found: "
                         + ", ".join(f"{n} {PACKAGES[n]}" for n in missing if n in PACKAGES))
    if folder is not None and not os.path.isdir(folder):
        # (it blamed the peers' packages, installed, and named no folder: a
        # HEAPLAB_BUILD or --build of a folder that is not there -- the
        # installation hunt, session 26)
        raise BenchError(f"no benchmark executables: {folder} is not there (the build folder "
                         f"is --build, $HEAPLAB_BUILD or ./build; make builds it)")
    hints = ", ".join(f"{n} ({PACKAGES.get(n, 'part of the build')})" for n in missing)
    raise BenchError(f"benchmark executables missing: {hints}"
                     + (f" (looked in {folder})" if folder else "") +
                     "; run tools/setup.sh and ninja -C build (Meson builds a peer only when "
                     "its package is found)")


# The driver's own variables: not passed on as heaplab options
OWN_VARIABLES = ("HEAPLAB_BENCH_DEPTH", "HEAPLAB_BENCH_RUNS", "HEAPLAB_BENCH_RESULTS",
                 "HEAPLAB_BUILD", "HEAPLAB_RESULTS")


def child_env():
    """The environment of every benchmark process: the caller's, without
    LD_PRELOAD (a preloaded malloc made the glibc arm jemalloc's, and every
    other arm its host: the bench hunt, session 27; test_bench_preload.py
    strips it too), with MALLOC_PERTURB_=0.  HEAPLAB_<OPTION> variables are
    kept: they set heaplab options, as docs/performance.md promises, for
    every heaplab arm -- heaplab_env() names them, the records carry them and
    env_warning() says so."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["MALLOC_PERTURB_"] = "0"
    return env


def heaplab_env():
    """{name: value} of the HEAPLAB_* variables every heaplab arm will see
    (an option, a fault site...), the driver's own (OWN_VARIABLES) left out."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith("HEAPLAB_") and k not in OWN_VARIABLES}


def env_warning():
    """The warning line for the environment the arms inherit, or None."""
    parts = []
    hl = heaplab_env()
    if hl:
        parts.append(" ".join(f"{k}={v}" for k, v in hl.items()) +
                     " in the environment: every heaplab arm runs with it (its options and "
                     "the targets' verdicts do not show it; the records' provenance does)")
    if os.environ.get("LD_PRELOAD"):
        parts.append(f"LD_PRELOAD={os.environ['LD_PRELOAD']} in the environment: not passed "
                     "to the benchmarks")
    return "; ".join(parts) or None


def record_of(cmd, p):
    """The JSON record a finished run (a subprocess result) printed."""
    try:
        rec = json.loads(p.stdout)
    except ValueError:
        raise BenchError(f"{' '.join(cmd)}: exit {p.returncode}, no JSON record;"
                         f" stderr: {p.stderr[-2000:]}") from None
    if not isinstance(rec, dict):
        raise BenchError(f"{' '.join(cmd)}: exit {p.returncode}, printed {type(rec).__name__} "
                         f"JSON ({p.stdout.strip()[:100]!r}), not a benchmark record (an object)")
    if rec.get("error") or p.returncode:
        # (a run killed by a signal after printing its record said "None (exit -11)")
        err = p.stderr.strip().splitlines()
        raise BenchError(f"{' '.join(cmd)}: "
                         + (f"{rec['error']} " if rec.get("error") else "its record has no error, ")
                         + f"but {exit_status(p.returncode)}"
                         + (f"; stderr: {err[-1][:300]}" if err else ""))
    for key, types in (("time_ns", (int, float)), ("checksum", str)):
        # (a record without time_ns was a KeyError traceback in compare and pair)
        if not isinstance(rec.get(key), types) or isinstance(rec.get(key), bool):
            raise BenchError(f"{' '.join(cmd)}: exit 0, printed a JSON object with "
                             + (f"{key!r} {rec[key]!r:.40}" if key in rec else f"no {key!r}")
                             + f" ({p.stdout.strip()[:100]!r}): not a benchmark record")
    if not rec["time_ns"] > 0:
        # (pair and compare divided by it: a ZeroDivisionError traceback)
        raise BenchError(f"{' '.join(cmd)}: exit 0, printed a record with time_ns "
                         f"{rec['time_ns']!r}: a timed part takes more than 0 ns, not a "
                         f"benchmark record to time")
    return rec


def load_warning(load):
    """The warning line for a load average (1 minute) of >= 1, or None: the
    project's speed claims hold only at load < 1 (docs/performance.md's
    quiet checks) -- run, compare and pair printed their ratios under any
    load without a word."""
    if load >= 1:
        return (f"load average {load:.2f} >= 1: other work is running; ratios and times "
                f"measured now are no speed claim (those need load < 1)")
    return None


def warn_load(when):
    """Print load_warning's line (stderr) for the load now; returns the load."""
    load = os.getloadavg()[0]
    line = load_warning(load)
    if line:
        print(f"bench: warning ({when}): {line}", file=sys.stderr, flush=True)
    return load


def exit_status(rc):
    """A subprocess's returncode in words: 'exit 1', 'killed by SIGSEGV (signal 11)'."""
    if rc < 0:
        import signal
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "a signal"
        return f"killed by {name} (signal {-rc})"
    return f"exit {rc}"


def _run(cmd, timeout):
    """subprocess.run of one benchmark command; a command that cannot start
    (no such executable) or runs past the timeout is a BenchError naming it
    (subprocess.run kills the child on any exception, Ctrl-C included)."""
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env(), timeout=timeout)
    except OSError as e:
        raise UsageError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(cmd)}: no result within {timeout} s (killed)") from None


def run_one(exe, workload, args=(), options=(), timeout=600):
    """One process, one workload run: its JSON record."""
    cmd = [exe, workload, *map(str, args)]
    for o in options:
        cmd += ["-o", o]
    return record_of(cmd, _run(cmd, timeout))


def run_pair(cmd_a, cmd_b, rounds=4, timeout=600):
    """An A/B of two benchmark commands (argument lists) run at the same time,
    pinned to CPU 0 and CPU 1, swapped every round: both see the same moment
    of the host, so a slow spell of the VM lands on both (they share the
    memory system, so the times are slower than alone: the ratio is what this
    is for).  Yields (record A, record B) per round."""
    if len(os.sched_getaffinity(0)) < 2:
        raise BenchError("pair: needs 2 CPUs, this process may use "
                         f"{len(os.sched_getaffinity(0))}")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    for i in range(rounds):
        order = cpus if i % 2 == 0 else cpus[::-1]
        procs = []
        try:
            for cmd, cpu in zip((cmd_a, cmd_b), order):
                try:
                    procs.append(subprocess.Popen(
                        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                        preexec_fn=lambda c=cpu: os.sched_setaffinity(0, {c})))
                except OSError as e:
                    raise UsageError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None
            try:
                outs = [p.communicate(timeout=timeout) for p in procs]   # both finish first
            except subprocess.TimeoutExpired:
                raise BenchError(f"pair: no result within {timeout} s (both killed)") from None
        finally:
            # B that cannot start, a timeout, Ctrl-C: no benchmark is left running
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
                for f in (p.stdout, p.stderr):
                    f.close()
        yield tuple(record_of(cmd, subprocess.CompletedProcess(cmd, p.returncode, *out))
                    for cmd, p, out in zip((cmd_a, cmd_b), procs, outs))


def run_rounds(cmds, rounds=3, timeout=600, progress=None):
    """The commands (argument lists) run one after another, round after round
    (not side by side: a collector's mark threads need the second CPU), so a
    slow spell of the host falls on the commands of one round alike.  Returns,
    per command, its records; progress(round, records) after each round."""
    runs = [[] for _ in cmds]
    for r in range(rounds):
        for i, cmd in enumerate(cmds):
            runs[i].append(record_of(cmd, _run(cmd, timeout)))
        if progress:
            progress(r, [recs[-1] for recs in runs])
    return runs


def run_phases(cmds, rounds=3, timeout=600):
    """binary-trees phase by phase: run_rounds, every record with its phases
    (checked as each round ends, not after the last)."""
    def check(_round, recs):
        for cmd, rec in zip(cmds, recs):
            if not rec.get("phases"):
                raise BenchError(f"{' '.join(cmd)}: the record has no phases "
                                 f"(phases are binary-trees')")
    return run_rounds(cmds, rounds, timeout, progress=check)


def _work(rec):
    """What a record computed, apart from how: its workload (the floor's fill is
    the same bytes as a fill) and parameters without the heaplab options and
    --warm.  Records of the same work must have the same checksum."""
    params = rec.get("params")
    params = ({k: v for k, v in params.items() if k not in ("options", "warm")}
              if isinstance(params, dict) else params)
    wl = rec.get("workload")
    return ("fill" if wl == "floor" else wl, json.dumps(params, sort_keys=True))


def command_checksum_problems(runs):
    """pair, compare, phases: the commands' records (per command, one per round)
    that did the same work (_work) must agree on the checksum -- docs/
    performance.md: every allocator computes the same checksum over the same
    work, and a result that differs is no result to time.  They never looked
    (a bench-mimalloc computing another tree was timed, its ratio printed,
    exit 0).  Returns (problems, notes): a line per disagreement, and a note
    when commands did different work (their checksums not compared)."""
    problems, notes = [], []
    groups = {}
    for i, recs in enumerate(runs):
        for rnd, rec in enumerate(recs):
            groups.setdefault(_work(rec), {}).setdefault(rec["checksum"], []).append(
                (i + 1, rnd + 1))
    for work, sums in groups.items():
        if len(sums) > 1:
            problems.append(f"CHECKSUMS DIFFER ({work[0]}, the same work): " + "; ".join(
                f"{cs} from " + ", ".join(f"#{c} round {r}" for c, r in where)
                for cs, where in sorted(sums.items())))
    if len(groups) > 1:
        works = [sorted({_work(rec) for rec in recs}) for recs in runs]
        notes.append("commands doing different work (workload or parameters), checksums "
                     "compared within each: " + ", ".join(
                         f"#{i + 1} {w[0][0]}" for i, w in enumerate(works) if w))
    return problems, notes


def report_checksums(runs):
    """Print command_checksum_problems' lines (stderr); 1 if the checksums differ."""
    problems, notes = command_checksum_problems(runs)
    for line in notes:
        print(line, file=sys.stderr)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


COMPARE_COLUMNS = ["#", "fastest s", "median s", "/ last: fastest", "/ last: median",
                   "/ last: median of rounds", "rounds' range", "peak MiB"]


def compare_rows(runs):
    """One row per command of interleaved rounds (run_rounds): its fastest and
    median time, their ratios to the last command's, the median of the
    per-round ratios (each round's run against the same round's run of the
    last command: the one least moved by a drift of the host between
    rounds) with their range, and the highest VmHWM."""
    ref = runs[-1]
    if any(len(recs) != len(ref) for recs in runs):
        raise BenchError("compare: every command needs the same number of rounds")
    rows = []
    for i, recs in enumerate(runs):
        t = [r["time_ns"] for r in recs]
        rt = [r["time_ns"] for r in ref]
        per = sorted(a / b for a, b in zip(t, rt))
        peak = max(r.get("vmhwm_bytes") or r.get("maxrss_bytes") or 0 for r in recs)
        rows.append([f"#{i + 1}", f"{min(t) / 1e9:.3f}", f"{statistics.median(t) / 1e9:.3f}",
                     f"{min(t) / min(rt):.3f}", f"{statistics.median(t) / statistics.median(rt):.3f}",
                     f"{statistics.median(per):.3f}", f"{per[0]:.3f}-{per[-1]:.3f}",
                     f"{peak / MiB:.1f}"])
    return rows


# make bench's (and the bench notebook's) phase table: these arms' records,
# phase_rows' columns for them
PHASE_ARMS = ("heaplab generational", "heaplab", "mimalloc")
PHASE_COLUMNS = ["binary-trees phase", "generational ms", "/ mimalloc", "default ms",
                 "/ mimalloc", "mimalloc ms", "gen minor", "gen full", "gen gc ms",
                 "gen promoted MiB"]


def phase_rows(runs):
    """One row per phase: each command's fastest time of that phase (ms), its
    ratio to the last command's, and the collector's counters of the first
    command's fastest whole run where it has them."""
    names = [p["phase"] for p in runs[0][0]["phases"]]
    for recs in runs[1:]:
        if [p["phase"] for p in recs[0]["phases"]] != names:
            raise BenchError("the commands' phases differ: give them the same --depth")
    best = lambda recs, k: min(r["phases"][k]["ns"] for r in recs)  # noqa: E731
    fastest = min(runs[0], key=lambda r: r["time_ns"])
    rows = []
    for k, name in enumerate(names + ["total"]):
        row = [name]
        for recs in runs:
            ns = best(recs, k) if name != "total" else min(r["time_ns"] for r in recs)
            ref = (best(runs[-1], k) if name != "total"
                   else min(r["time_ns"] for r in runs[-1]))
            row.append(f"{ns / 1e6:.1f}")
            if recs is not runs[-1]:
                row.append(f"{ns / ref:.3f}" if ref else "")
        ph = fastest["phases"][k] if name != "total" else None
        if ph and "gc_ns" in ph:
            row += [ph["minor_cycles"], ph["full_marks"], f"{ph['gc_ns'] / 1e6:.1f}",
                    f"{ph['promoted_bytes'] / MiB:.0f}"]
        else:
            row += ["", "", "", ""]
        rows.append(row)
    return rows


# ---- the suite -------------------------------------------------------------------------

class Arm:
    """One line of a workload: an allocator with its arguments."""

    def __init__(self, name, allocator, args=(), options=()):
        self.name = name
        self.allocator = allocator
        self.args = list(args)
        self.options = list(options)
        self.records = []

    def times(self):
        return [r["time_ns"] / 1e9 for r in self.records]

    def median(self, key=None):
        vals = self.times() if key is None else [key(r) for r in self.records]
        return statistics.median(vals)

    def span(self, key=None):
        vals = self.times() if key is None else [key(r) for r in self.records]
        return min(vals), max(vals)

    def fastest(self):
        return min(self.times())

    def rss(self):
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a run
        # started from a big process (a notebook kernel, a fat pytest) would
        # report its launcher's peak
        return statistics.median(r["vmhwm_bytes"] for r in self.records)

    def checksums(self):
        return {r["checksum"] for r in self.records}


class Workload:
    def __init__(self, name, title, arms, runs, reference=None, warmup=None):
        self.name = name
        self.title = title
        self.arms = arms
        self.runs = runs
        self.reference = reference     # arm name the ratios divide by
        # (args, options) of a heaplab run made, and discarded, before every
        # run of every arm
        self.warmup = warmup

    def arm(self, name):
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)


# The fill with transparent huge pages (issue 19): the heap's 2 MiB chunks
# each faulted in with one MADV_POPULATE_WRITE (docs/performance.md, the
# fourth round), against the 4 KiB page-fault floor.
HUGE_OPTION = "thp=populate"
HUGE_ARM = f"heaplab {HUGE_OPTION}"
# ... and without the prefault helper (thp_prefault, default 4 since item 27), beside it
PREFAULT_OPTION = "thp_prefault=0"
PREFAULT_ARM = f"{HUGE_ARM} {PREFAULT_OPTION}"
# ... and what no page supply can beat: a fill into the resident huge pages
# of a dropped one (--warm, page_release=0: no fault in its timed part)
WARM_ARM = "heaplab into resident huge pages (bound)"
WARM_OPTIONS = [HUGE_OPTION, "page_release=0"]


# the workloads of suite(), in its order (run --workload's choices)
WORKLOADS = ("binary-trees", "fill", "churn", "release", "pause", "compact")


def env_int(name, default, lo, hi):
    """The whole number $name (default when unset), lo..hi, or a UsageError
    naming the variable: HEAPLAB_BENCH_RUNS=0 or -2 ran every other workload
    first and then failed on an empty median, =abc broke even --help."""
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        n = int(v)
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise UsageError(f"{name}={v!r}: expected a whole number {lo}..{hi}")
    return n


def suite(quick=False, depth=None, runs=None):
    """The full configuration (make bench), or a quicker one for development.
    HEAPLAB_BENCH_DEPTH (1..30) and HEAPLAB_BENCH_RUNS (>= 1) are read here, a
    value out of range a UsageError naming it before anything runs."""
    depth = depth or env_int("HEAPLAB_BENCH_DEPTH", 18 if quick else 20, 1, 30)
    runs = runs or env_int("HEAPLAB_BENCH_RUNS", 2 if quick else 3, 1, 1000)
    fill = 192 * MiB
    bt = ["--depth", depth]
    off = ["page_release=0"]
    gen = ["generational=1"]
    sub = ["subpage_release=1"]
    compact = ["compact=sparse"]
    return [
        Workload("binary-trees", f"binary-trees depth {depth} (GCBench shape)", [
            Arm("heaplab", "heaplab", bt),
            Arm("heaplab page_release=0", "heaplab", bt, off),
            # issue 19: the seed's trigger (gc_live_ratio alone), before gc_growth_ratio
            Arm("heaplab gc_growth_ratio=0", "heaplab", bt, ["gc_growth_ratio=0"]),
            # issue 19: the default collector before it tenured (every cycle
            # traces the long-lived tree; E1-E6 run so: SEED_POLICIES)
            Arm("heaplab tenure_full_marks=0", "heaplab", bt, ["tenure_full_marks=0"]),
            Arm("heaplab generational", "heaplab", bt, gen),
            Arm("heaplab generational page_release=0", "heaplab", bt, gen + off),
            # issue 18: the options' cost on a workload they do not help
            # (binary-trees holds the heap: compaction is pinned all along)
            Arm("heaplab subpage_release=1", "heaplab", bt, sub),
            Arm("heaplab compact=sparse", "heaplab", bt, compact),
            Arm("boehm", "boehm", bt),
            Arm("mimalloc", "mimalloc", bt),
            Arm("jemalloc", "jemalloc", bt),
            Arm("glibc", "glibc", bt),
        ], runs + 2, reference="mimalloc"),
        Workload("fill", "bulk fill 192 MiB of 256-byte objects", [
            Arm("page-fault floor", "heaplab", ["--bytes", fill, "--size", 256]),
            Arm("heaplab", "heaplab", ["--bytes", fill, "--size", 256]),
            Arm(HUGE_ARM, "heaplab", ["--bytes", fill, "--size", 256], [HUGE_OPTION]),
            Arm(PREFAULT_ARM, "heaplab", ["--bytes", fill, "--size", 256],
                [HUGE_OPTION, PREFAULT_OPTION]),
            Arm(WARM_ARM, "heaplab", ["--bytes", fill, "--size", 256, "--warm"], WARM_OPTIONS),
            Arm("boehm", "boehm", ["--bytes", fill, "--size", 256]),
            Arm("mimalloc", "mimalloc", ["--bytes", fill, "--size", 256]),
            Arm("jemalloc", "jemalloc", ["--bytes", fill, "--size", 256]),
            Arm("glibc", "glibc", ["--bytes", fill, "--size", 256]),
        ], runs + 2, reference="page-fault floor",
            # Before every run of every arm, a huge-page fill of the same size in a process of
            # its own, discarded: each arm then faults memory freed a moment ago.  Without it
            # the arms after a long pause get 2 MiB blocks this VM's free page reporting had
            # given back to its host, which fault on the host too (item 21: 10-40x slower,
            # and the huge-page row's median above 4x the floor).  The same for every arm.
            warmup=(["--bytes", fill, "--size", 256], [HUGE_OPTION])),
        Workload("churn", "fill/drop churn: 8 x 64 MiB of 256-byte objects", [
            Arm("page_release=1", "heaplab", ["--bytes", 64 * MiB, "--size", 256, "--rounds", 8]),
            Arm("page_release=0", "heaplab", ["--bytes", 64 * MiB, "--size", 256, "--rounds", 8],
                off),
            Arm("subpage_release=1", "heaplab",
                ["--bytes", 64 * MiB, "--size", 256, "--rounds", 8], sub),
            Arm("compact=sparse", "heaplab", ["--bytes", 64 * MiB, "--size", 256, "--rounds", 8],
                compact),
        ], runs + 2, reference="page_release=0"),
        Workload("release", "release cost: 192 MiB of 256-byte objects dropped", [
            Arm("contiguous", "heaplab", ["--bytes", fill, "--size", 256]),
            # every empty page in one trim: the runs are what the calls are for
            Arm("contiguous, one trim", "heaplab", ["--bytes", fill, "--size", 256],
                ["release_per_sweep=65536"]),
            Arm("scattered", "heaplab", ["--bytes", fill, "--size", 256, "--scattered"]),
        ], runs),
        Workload("pause", "full collection, 192 MiB of 256-byte objects live", [
            Arm("heaplab", "heaplab", ["--bytes", fill, "--size", 256]),
            # issue 19: parallel marking, the same pause on one and two threads
            Arm("heaplab mark_threads=1", "heaplab", ["--bytes", fill, "--size", 256],
                ["mark_threads=1"]),
            Arm("heaplab mark_threads=2", "heaplab", ["--bytes", fill, "--size", 256],
                ["mark_threads=2"]),
            Arm("boehm", "boehm", ["--bytes", fill, "--size", 256]),
        ], runs + 2, reference="boehm"),
        # issue 18: the collection after a drop that left 1 object in 10:
        # with compact=sparse it evacuates ~19 MiB; its mark is a full mark
        # of the same heap
        Workload("compact", "collection after keeping 1 in 10 of 192 MiB (256-byte objects)", [
            Arm("compact=never", "heaplab", ["--bytes", fill, "--size", 248, "--keep", 10],
                ["compact=never"]),
            Arm("compact=sparse", "heaplab", ["--bytes", fill, "--size", 248, "--keep", 10],
                compact),
        ], runs + 2, reference="compact=never"),
    ]


def tiny_suite():
    """make test: correctness only, a few seconds."""
    bt = ["--depth", 8]
    small = ["--bytes", 2 * MiB, "--size", 256]
    return [
        Workload("binary-trees", "binary-trees depth 8", [
            Arm(a, a, bt) for a in ALLOCATORS] + [
            Arm("heaplab page_release=0", "heaplab", bt, ["page_release=0"]),
            # a tiny trigger: many cycles, so the checksum covers the collector
            Arm("heaplab small trigger", "heaplab", bt,
                ["gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k", "verify=1"]),
            # generational, a tiny nursery: minor cycles land inside trees
            # being built (the write barrier's case), the verifier checks
            # every cycle that no marked object refers to an unmarked one
            Arm("heaplab generational", "heaplab", bt,
                ["generational=1", "young_bytes=64k", "gc_trigger_min_bytes=64k", "verify=1"])],
            1),
        # tenuring: depth 12 on 4 KiB pages, a whole mark every second full
        # mark -- about 40 full marks, 60 pages tenured, the remembered set
        # traced -- with the verifier on, and the checksum against mimalloc's
        Workload("binary-trees", "binary-trees depth 12, tenuring and parallel marking", [
            Arm("mimalloc", "mimalloc", ["--depth", 12]),
            Arm("heaplab tenuring", "heaplab", ["--depth", 12],
                ["generational=1", "young_bytes=64k", "gc_trigger_min_bytes=64k",
                 "page_size=4k", "tenure_full_marks=2", "verify=1"]),
            # the default collector tenures too: 41 cycles, 20 whole marks,
            # the tree's 64 pages tenured in between
            Arm("heaplab default tenuring", "heaplab", ["--depth", 12],
                ["gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k", "page_size=4k",
                 "tenure_full_marks=2", "verify=1"]),
            # issue 19: parallel marking with the verifier after every mark
            # (the long-lived tree's 8,191 objects pass the 4,096 a mark
            # marks alone before helpers join), full and minor marks
            Arm("heaplab mark_threads=2", "heaplab", ["--depth", 12],
                ["mark_threads=2", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                 "verify=1"]),
            Arm("heaplab generational mark_threads=2", "heaplab", ["--depth", 12],
                ["generational=1", "young_bytes=64k", "gc_trigger_min_bytes=64k",
                 "mark_threads=2", "verify=1"])], 1),
        Workload("fill", "fill 2 MiB", [Arm("page-fault floor", "heaplab", small)] + [
            Arm(a, a, small) for a in ALLOCATORS] + [
            Arm(HUGE_ARM, "heaplab", small, [HUGE_OPTION]),
            Arm(WARM_ARM, "heaplab", small + ["--warm"], WARM_OPTIONS)], 1),
        Workload("pause", "pause 2 MiB", [Arm("heaplab", "heaplab", small),
                                          Arm("boehm", "boehm", small)], 1),
        Workload("churn", "churn", [Arm("page_release=1", "heaplab", small + ["--rounds", 3]),
                                    Arm("page_release=0", "heaplab", small + ["--rounds", 3],
                                        ["page_release=0"])], 1),
        # issue 18: the options on, with the verifier (sub-page state, no
        # reference left in an evacuated page), the same checksums
        Workload("binary-trees", "binary-trees depth 10, sub-page release and compaction", [
            Arm("mimalloc", "mimalloc", ["--depth", 10]),
            Arm("heaplab subpage_release", "heaplab", ["--depth", 10],
                ["subpage_release=1", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                 "verify=1"]),
            Arm("heaplab compact=always", "heaplab", ["--depth", 10],
                ["compact=always", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                 "verify=1"])], 1),
        Workload("compact", "compact 8 MiB", [
            Arm("compact=never", "heaplab", ["--bytes", 8 * MiB, "--size", 248, "--keep", 10],
                ["compact=never", "verify=1"]),
            Arm("compact=sparse", "heaplab", ["--bytes", 8 * MiB, "--size", 248, "--keep", 10],
                ["compact=sparse", "subpage_release=1", "verify=1"])], 1),
        Workload("release", "release", [
            Arm("contiguous", "heaplab", ["--bytes", 16 * MiB, "--size", 256]),
            Arm("contiguous, one trim", "heaplab", ["--bytes", 16 * MiB, "--size", 256],
                ["release_per_sweep=65536"]),
            Arm("scattered", "heaplab", ["--bytes", 16 * MiB, "--size", 256, "--scattered"])], 1),
    ]


def workload_cmd(w, arm):
    return "floor" if arm.name == "page-fault floor" else w.name


def run_suite(workloads, exes, log=None):
    require(exes, sorted({a.allocator for w in workloads for a in w.arms}))
    for w in workloads:
        for rnd in range(w.runs):
            for arm in w.arms:
                if w.warmup:
                    run_one(exes["heaplab"], w.name, *w.warmup)
                rec = run_one(exes[arm.allocator], workload_cmd(w, arm), arm.args, arm.options)
                arm.records.append(rec)
                if log:
                    log(f"{w.name:13} {arm.name:24} run {rnd + 1}/{w.runs}: "
                        f"{rec['time_ns'] / 1e9:8.3f} s  rss {rec['vmhwm_bytes'] / MiB:7.1f} MiB")
    return workloads


# ---- checks --------------------------------------------------------------------------

def checksum_problems(workloads):
    """Checksums must agree across every allocator (and every run) of a
    workload; the floor's fill is the same bytes as every allocator's fill."""
    problems = []
    for w in workloads:
        if w.name in ("churn", "release"):
            continue  # heaplab only: checked on their own below
        # (compact: both arms keep the same survivors, so the same checksum)
        sums = {a.name: a.checksums() for a in w.arms}
        every = set().union(*sums.values())
        if len(every) != 1:
            problems.append(f"{w.name}: checksums differ: " +
                            ", ".join(f"{k}={sorted(v)}" for k, v in sums.items()))
    for w in workloads:
        # verify=1: a failed check repairs the marks, so the checksum alone
        # would not show it
        for a in w.arms:
            for r in a.records:
                if r.get("notes", {}).get("verify_failures"):
                    problems.append(f"{w.name}/{a.name}: {r['notes']['verify_failures']} cycles "
                                    "failed verification")
    for w in workloads:
        # the bound's fill must find every page resident
        for a in w.arms:
            if a.name == WARM_ARM:
                for r in a.records:
                    if r["notes"]["timed_minflt"] > 64:
                        problems.append(f"{w.name}/{a.name}: {r['notes']['timed_minflt']} page "
                                        "faults in the timed part: not a bound")
    for w in workloads:
        # binary-trees' phases: the same ones for every allocator, inside the
        # timed part, and a collector's counters within its own
        if w.name != "binary-trees":
            continue
        for a in w.arms:
            for r in a.records:
                if r.get("phases") is None:
                    continue  # (a record saved before the phases were: results of old runs)
                ph = r["phases"]
                got = [p["phase"] for p in ph]
                top = max(r["params"]["depth"], 6)  # (bench.h's bench_max_depth)
                names = (["stretch", "long-lived"] + [f"d{d}" for d in range(4, top + 1, 2)]
                         + ["final"])
                if got != names:
                    problems.append(f"binary-trees/{a.name}: phases {got}, expected {names}")
                elif sum(p["ns"] for p in ph) > r["time_ns"]:
                    problems.append(f"binary-trees/{a.name}: the phases take "
                                    f"{sum(p['ns'] for p in ph)} ns of {r['time_ns']}")
                elif a.allocator == "heaplab" and (
                        sum(p["cycles"] for p in ph) > r["notes"]["cycles"]
                        or sum(p["gc_ns"] for p in ph) > r["notes"]["gc_ns"]
                        or any(p["full_marks"] + p["minor_cycles"] != p["cycles"] for p in ph)):
                    problems.append(f"binary-trees/{a.name}: the phases' counters "
                                    "exceed the run's")
    for w in workloads:
        if w.name == "churn":
            sums = {a.name: a.checksums() for a in w.arms}
            if len(set().union(*sums.values())) != 1:
                problems.append(f"churn: checksums differ between arms: {sums}")
        if w.name == "compact":
            for a in w.arms:
                for r in a.records:
                    moved = r["notes"]["evacuated_bytes"]
                    if (a.name == "compact=never") != (moved == 0):
                        problems.append(f"compact/{a.name}: {moved} bytes evacuated")
        if w.name == "release":
            for a in w.arms:
                for r in a.records:
                    n = r["notes"]
                    if n["released_pages"] == 0:
                        problems.append(f"release/{a.name}: nothing was released")
                    if a.name == "contiguous, one trim" and n["release_calls"] > n["released_runs"]:
                        problems.append(f"release/{a.name}: {n['release_calls']} calls for "
                                        f"{n['released_runs']} runs of pages (one call per run)")
    return problems


# ---- figures and the table -----------------------------------------------------------

def fmt_s(x):
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.3f} s"


def rows_of(w):
    rows = []
    ref = w.arm(w.reference) if w.reference else None
    for a in w.arms:
        med = a.median()
        lo, hi = a.span()
        ratio = f"{med / ref.median():.3f}" if ref else ""
        cpu = a.median(lambda r: (r["user_ns"] + r["sys_ns"]) / 1e9)
        rows.append([w.name, a.name, str(len(a.records)), fmt_s(med), f"{fmt_s(lo)} - {fmt_s(hi)}",
                     ratio, fmt_s(cpu), f"{a.rss() / MiB:.1f}", sorted(a.checksums())[0][-8:]])
    return rows


def per(x, y, fmt=".1f"):
    """x / y formatted, or "" when y is 0: a HEAPLAB_* option that makes a
    workload do nothing (HEAPLAB_PAGE_RELEASE=0: no page released;
    HEAPLAB_COMPACT_LIVE_PCT=1: nothing evacuated) made the table a
    ZeroDivisionError traceback, the records unsaved (the bench hunt,
    session 32); checksum_problems says what was not done."""
    return f"{x / y:{fmt}}" if y else ""


def release_rows(w):
    rows = []
    for a in w.arms:
        n = lambda k: a.median(lambda r: r["notes"][k])  # noqa: E731
        mib = n("released_pages") * n("page_size") / MiB
        calls, runs_ = n("release_calls"), n("released_runs")
        rows.append([a.name, f"{mib:.1f}", f"{calls:.0f}", f"{runs_:.0f}",
                     per(calls, runs_, ".3f"), f"{n('trims'):.0f}",
                     per(n("trim_ns") / 1e3, mib), per(calls, mib, ".3f"),
                     per(n("floor_one_call_ns") / 1e3, a.records[0]["params"]["bytes"] / MiB),
                     per(n("floor_per_page_ns") / 1e3,
                         n("floor_per_page_calls") * n("page_size") / MiB)])
    return rows


def table(rows, header):
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: " | ".join(str(c).ljust(wd) for c, wd in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), "-+-".join("-" * wd for wd in widths)] + [line(r) for r in rows])


def time_ratio(a, b):
    """Time of arm a over arm b: (fastest runs, medians).  The targets are
    judged on the fastest runs: on a shared VM, interference only adds time,
    so the fastest of the interleaved runs is the nearest to what the code
    itself costs (the medians here moved by 10% between two arms running the
    same code); the ratio of medians is printed beside it."""
    return a.fastest() / b.fastest(), a.median() / b.median()


def fmt_ratio(r):
    return f"{r[0]:.3f} (median {r[1]:.3f})"


def targets(workloads):
    """DESIGN.md section 8, each as (what, ours, target, ok)."""
    by = {w.name: w for w in workloads}
    out = []
    if "binary-trees" in by:
        bt = by["binary-trees"]
        # issue 19: the default collector within 1.2x mimalloc's time and no
        # more peak RSS than Boehm; the generational one faster than mimalloc
        # with at most 1.3x its peak RSS
        for name, tmax, rss_ref, rmax in (("heaplab", 1.2, "boehm", 1.0),
                                          ("heaplab generational", 1.0, "mimalloc", 1.3)):
            h = bt.arm(name)
            hb = time_ratio(h, bt.arm("boehm"))
            hm = time_ratio(h, bt.arm("mimalloc"))
            rr = h.rss() / bt.arm(rss_ref).rss()
            out.append((f"binary-trees: {name} / boehm time", fmt_ratio(hb), "< 1", hb[0] < 1))
            out.append((f"binary-trees: {name} / mimalloc time", fmt_ratio(hm), f"<= {tmax}",
                        hm[0] <= tmax))
            out.append((f"binary-trees: {name} / {rss_ref} peak RSS", f"{rr:.3f}", f"<= {rmax}",
                        rr <= rmax))
    if "fill" in by:
        f = by["fill"]
        r = time_ratio(f.arm("heaplab"), f.arm("page-fault floor"))
        out.append(("fill: heaplab / page-fault floor", fmt_ratio(r), "<= 1.2", r[0] <= 1.2))
        if any(a.name == HUGE_ARM for a in f.arms):
            r = time_ratio(f.arm(HUGE_ARM), f.arm("page-fault floor"))
            out.append(("fill with huge pages / 4 KiB page-fault floor", fmt_ratio(r), "<= 0.3",
                        r[0] <= 0.3))
        if any(a.name == WARM_ARM for a in f.arms):
            # not a target: the fill's own work, every page already resident
            r = time_ratio(f.arm(WARM_ARM), f.arm("page-fault floor"))
            out.append(("(bound) fill into resident huge pages / page-fault floor",
                        fmt_ratio(r), "", None))
        # not a target: what a page fault costs on this machine, which moves
        # every ratio above that sets a collector against a malloc or the
        # floor (1.4 us on the seventh session's VM, 11-17 us before it:
        # docs/performance.md) -- the floor's one-byte-per-page touch
        per = []
        for rec in f.arm("page-fault floor").records:
            ns = rec.get("notes", {}).get("touch_one_byte_per_page_ns")
            p = rec.get("params", {})
            if ns and p.get("bytes") and p.get("size"):
                total = -(-p["bytes"] // p["size"]) * p["size"]
                per.append(ns / -(-total // os.sysconf("SC_PAGESIZE")) / 1e3)
        if per:
            out.append(("(machine) a 4 KiB page fault: the floor's one-byte-per-page touch",
                        f"{min(per):.2f} us (median {statistics.median(per):.2f})", "", None))
    ab = []
    if "binary-trees" in by:
        bt = by["binary-trees"]
        ab.append(("binary-trees", time_ratio(bt.arm("heaplab"),
                                              bt.arm("heaplab page_release=0"))))
        ab.append(("binary-trees generational",
                   time_ratio(bt.arm("heaplab generational"),
                              bt.arm("heaplab generational page_release=0"))))
    if "churn" in by:
        c = by["churn"]
        ab.append(("churn", time_ratio(c.arm("page_release=1"), c.arm("page_release=0"))))
    if ab:
        gm = (statistics.geometric_mean([r[0] for _, r in ab]),
              statistics.geometric_mean([r[1] for _, r in ab]))
        parts = ", ".join(f"{n} {r[0]:.3f}" for n, r in ab)
        out.append((f"page_release on / off, geomean of the fastest ({parts})", fmt_ratio(gm),
                    "<= 1.01", gm[0] <= 1.01))
    if "release" in by:
        # One trim releasing every empty page: calls against the runs of pages
        # mincore saw go (with the default budget of 1024 pages a trim, each
        # trim's coldest pages are not one address range: see the table).
        c = by["release"].arm("contiguous, one trim")
        calls = c.median(lambda r: r["notes"]["release_calls"])
        runs_ = c.median(lambda r: r["notes"]["released_runs"])
        # (nothing released -- HEAPLAB_PAGE_RELEASE=0 -- is no verdict: it said ok)
        out.append(("release: contiguous, calls per run of pages",
                    f"{calls:.0f} calls / {runs_:.0f} runs" if runs_ else "nothing released",
                    "<= 1 per run", calls <= runs_ if runs_ else None))
    if "pause" in by:
        p = by["pause"]
        r = time_ratio(p.arm("heaplab"), p.arm("boehm"))
        out.append(("pause: heaplab / GC_gcollect", fmt_ratio(r), "(reported)", None))
        names = {a.name for a in p.arms}
        if {"heaplab mark_threads=1", "heaplab mark_threads=2"} <= names:
            # issue 19: the same pause on two mark threads against one
            r = time_ratio(p.arm("heaplab mark_threads=2"), p.arm("heaplab mark_threads=1"))
            out.append(("pause: 2 mark threads / 1", fmt_ratio(r), "<= 0.65", r[0] <= 0.65))
    # issue 18: each option on against the same heap without it
    opt = []
    if "binary-trees" in by and "heaplab subpage_release=1" in {a.name for a in by["binary-trees"].arms}:
        bt = by["binary-trees"]
        opt += [("binary-trees", "subpage_release=1", bt.arm("heaplab subpage_release=1"),
                 bt.arm("heaplab")),
                ("binary-trees", "compact=sparse", bt.arm("heaplab compact=sparse"),
                 bt.arm("heaplab"))]
    if "churn" in by and "subpage_release=1" in {a.name for a in by["churn"].arms}:
        c = by["churn"]
        opt += [("churn", "subpage_release=1", c.arm("subpage_release=1"), c.arm("page_release=1")),
                ("churn", "compact=sparse", c.arm("compact=sparse"), c.arm("page_release=1"))]
    for wname, oname, on, off_ in opt:
        out.append((f"{wname}: {oname} / default", fmt_ratio(time_ratio(on, off_)), "(reported)",
                    None))
    if "compact" in by:
        for what, ours in compact_figures(by["compact"]):
            out.append((what, ours, "(reported)", None))
    return out


def compact_figures(w):
    """The compaction's own figures (medians over the runs): its time per MiB
    evacuated, against the full mark of the same heap in the same cycle."""
    s = w.arm("compact=sparse")
    med = lambda k: s.median(lambda r: r["notes"][k])  # noqa: E731
    mib = med("evacuated_bytes") / MiB
    never = w.arm("compact=never")
    return [
        ("compact: evacuation per MiB evacuated",
         f"{med('compact_ns') / 1e6 / mib:.2f} ms/MiB ({mib:.1f} MiB, "
         f"{med('evacuated_objects'):.0f} objects)" if mib else
         "nothing evacuated (0 MiB)"),
        ("compact: evacuation / full mark of the same heap",
         f"{per(med('compact_ns'), med('mark_ns'), '.2f') or '-'} "
         f"(mark {med('mark_ns') / 1e6:.1f} ms)"),
        ("compact: the cycle's pause, sparse / never",
         fmt_ratio(time_ratio(s, never))),
    ]


def compact_rows(w):
    rows = []
    for a in w.arms:
        med = lambda k: a.median(lambda r: r["notes"][k])  # noqa: E731
        mib = med("evacuated_bytes") / MiB
        rows.append([a.name, fmt_s(a.median()), fmt_s(med("mark_ns") / 1e9),
                     fmt_s(med("compact_ns") / 1e9), f"{mib:.1f}",
                     f"{med('compact_ns') / 1e6 / mib:.2f}" if mib else "",
                     fmt_s(med("second_gc_ns") / 1e9), f"{med('live_bytes') / MiB:.1f}"])
    return rows


def render(workloads, load=None, env=None):
    """The table make bench prints and saves; env: the HEAPLAB_* variables the
    heaplab arms ran with ({name: value}, heaplab_env()), shown first."""
    parts = []
    if env:
        parts.append("ENVIRONMENT: " + " ".join(f"{k}={v}" for k, v in env.items()) +
                     " -- every heaplab arm ran with it (the arms' options do not show it)")
    rows = []
    for w in workloads:
        if w.name != "release":
            rows += rows_of(w)
    parts.append(table(rows, ["workload", "arm", "runs", "median", "min - max",
                              "ratio", "process cpu", "peak RSS MiB", "checksum"]))
    parts.append("median, min - max: the timed part, wall clock; ratio = median / the workload's"
                 " reference arm (binary-trees: mimalloc; fill: page-fault floor; churn:"
                 " page_release=0; pause: boehm); process cpu: user + sys of the whole process"
                 " (median), which load on the machine disturbs less; compact: compact=never")
    for w in workloads:
        if w.name == "binary-trees":
            runs = [w.arm(n).records for n in PHASE_ARMS if any(a.name == n for a in w.arms)]
            if len(runs) == len(PHASE_ARMS) and all(r and r[0].get("phases") for r in runs):
                parts.append("")
                parts.append(table(phase_rows(runs), PHASE_COLUMNS))
                parts.append("fastest time of each phase over the runs (`bench.py phases` "
                             "compares any commands this way); gen: the generational arm's "
                             "counters in its fastest run")
        if w.name == "compact":
            parts.append("")
            parts.append(table(compact_rows(w), [
                "compact", "pause", "of it: mark", "of it: evacuation", "MiB evacuated",
                "ms/MiB", "next full cycle", "live MiB after"]))
        if w.name == "release":
            parts.append("")
            parts.append(table(release_rows(w), [
                "release", "MiB released", "calls", "runs", "calls/run", "trims",
                "us/MiB (trim)", "calls/MiB", "floor 1 call us/MiB", "floor per page us/MiB"]))
    tg = targets(workloads)
    if tg:
        parts.append("")
        parts.append(table([[w, o, t, {True: "ok", False: "BEHIND", None: ""}[ok]]
                            for w, o, t, ok in tg], ["target (DESIGN.md 8)", "ours", "target", ""]))
    if load:
        parts.append(f"load average before / after: {load[0]} / {load[1]}")
    return "\n".join(parts)


def arm_json(w, a, provenance=None):
    """An arm in the harness's results format (docs/harness.md), with
    `provenance`: how its runs were made (at least "env", the HEAPLAB_*
    variables its heaplab processes saw, and "ld_preload", the caller's
    LD_PRELOAD that they did not see)."""
    if provenance is None:
        provenance = {"env": heaplab_env(), "ld_preload": os.environ.get("LD_PRELOAD") or None}
    ref = w.arm(w.reference) if w.reference else None
    records = []
    for i, r in enumerate(a.records):
        records.append({
            "experiment": "bench", "arm": f"{w.name}/{a.name}", "phase": f"run{i + 1}",
            "index": i, "duration_s": r["time_ns"] / 1e9, "rss_peak": r["vmhwm_bytes"],
            "tree_phases": r.get("phases"),  # (binary-trees': the driver's own "phases")
            "notes": {"allocator": r["allocator"], "workload": r["workload"],
                      "checksum": r["checksum"], "objects": r["objects"],
                      "time_ns": r["time_ns"], "user_ns": r["user_ns"], "sys_ns": r["sys_ns"],
                      "minflt": r["minflt"], "vmhwm_bytes": r["vmhwm_bytes"],
                      "maxrss_bytes": r["maxrss_bytes"], **r["notes"]},
        })
    lo, hi = a.span()
    return {"experiment": "bench", "title": w.title, "arm": f"{w.name}/{a.name}",
            "options": {o.split("=")[0]: o.split("=", 1)[1] for o in a.options},
            "params": a.records[0]["params"] if a.records else {}, "pid": None, "error": None,
            "records": records,
            "notes": {"workload": w.name, "allocator": a.allocator, "median_s": a.median(),
                      "min_s": lo, "max_s": hi, "peak_rss_bytes": a.rss(),
                      "reference": w.reference,
                      "ratio": a.median() / ref.median() if ref else None},
            "series": [], "provenance": provenance}


def writable_folder(folder):
    """Make folder (and its parents) and check that a file can be written in
    it -- before a run, not after: an unwritable --results was found only when
    the run was over (a traceback, the records lost).  UsageError naming it."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".bench-probe.{os.getpid()}.tmp")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise UsageError(f"--results {folder}: cannot write there "
                         f"({e.strerror or e}{': ' + e.filename if e.filename else ''})") from None


def experiment_output_in(folder):
    """Why `folder` holds the experiment suite's output rather than bench
    records, or None: save() writes DIR/table.txt and DIR/records.csv of
    every arm JSON under DIR, so `--results results` overwrote the pytest
    session's results/table.txt and wrote a records.csv of every experiment
    (the bench hunt, session 32).  Signs: effects.json (the plugin's), a
    subfolder (an experiment's, a sweep run's: bench writes none), a
    table.txt bench did not write."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None         # (not there yet: writable_folder makes it)
    if "effects.json" in names:
        return "effects.json, the experiment suite's"
    subs = sorted(n for n in names if not n.startswith(".")
                  and os.path.isdir(os.path.join(folder, n)))
    if subs:
        return "folder(s) " + ", ".join(subs[:4]) + (" ..." if len(subs) > 4 else "") + \
            " (an experiment's results or a sweep run)"
    if "table.txt" in names:
        try:
            with open(os.path.join(folder, "table.txt")) as f:
                text = f.read()
        except OSError:
            text = ""
        if "the records in this folder (" not in text:
            return "a table.txt bench.py did not write"
    return None


def write_atomic(path, text):
    """heaplab.harness.write_atomic's way (docs/harness.md), in the standard
    library (the meson test runs this file without the package): `text` into
    a temporary file of the same folder (.<name>.<pid>.<random>.tmp), flushed,
    then os.replace()d -- a crash, a Ctrl-C or a full disk leaves the old
    file or the new one, never half of one (save() wrote each arm's JSON in
    place: a failed write left a truncated file where a complete one was)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}."
                               f"{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def run_provenance(made_by, load=None, argv=None):
    """How a run's records were made, saved with every arm (arm_json's
    "provenance"): the heaplab commit (git rev-parse HEAD of this checkout, and
    whether the tree had changes), the UTC time, who ran it (make bench, bench.py
    run) and the command line, the load average before and after, and the
    environment that matters (heaplab_env(), LD_PRELOAD, which the arms did not
    get).  A folder's records may come from several runs: provenance_lines()
    says which."""
    import datetime

    def git(*args):
        try:
            p = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                               timeout=10)
            return p.stdout.strip() if p.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            return None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"made_by": made_by,
            "command": shlex.join(argv if argv is not None else [sys.executable, *sys.argv]),
            "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit, "changed_files": None if status is None else bool(status),
            "load_before": load[0] if load else None, "load_after": load[1] if load else None,
            "env": heaplab_env(), "ld_preload": os.environ.get("LD_PRELOAD") or None}


def provenance_lines(arms):
    """One line per run the arms (arm JSON dicts) come from: when, by what,
    at which commit, the load, the environment, which workloads and how many
    runs per arm.  Arms saved before provenance was recorded are counted
    apart."""
    runs = {}
    for a in arms:
        pv = a.get("provenance") or {}
        key = (pv.get("time_utc"), pv.get("made_by"), pv.get("command"))
        runs.setdefault(key, (pv, []))[1].append(a)
    lines = []
    for (when, made_by, command), (pv, group) in sorted(runs.items(), key=lambda kv: str(kv[0])):
        wls = sorted({a["arm"].split("/")[0] for a in group},
                     key=lambda n: (WORKLOADS.index(n) if n in WORKLOADS else 99, n))
        n = sorted({len(a.get("records") or []) for a in group})
        runs_txt = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
        what = f"{', '.join(wls)} ({len(group)} arms, {runs_txt} runs per arm)"
        if when is None:
            lines.append(f"{what}: no provenance recorded (saved by an older bench.py)")
            continue
        commit = (pv.get("commit") or "?")[:12] + (" with changes" if pv.get("changed_files")
                                                    else "")
        line = f"{what}: {made_by} at {when}, commit {commit}"
        if pv.get("load_before") is not None:
            line += f", load {pv['load_before']} / {pv['load_after']}"
        if pv.get("env"):
            line += ", ENVIRONMENT " + " ".join(f"{k}={v}" for k, v in pv["env"].items())
        lines.append(line + f"; command: {command}")
    return lines


def workloads_from_arms(arms):
    """bench.Workload objects rebuilt from arm JSON dicts (arm_json's format:
    the records of a folder), in the suite's order, so that the driver's own
    checks, table and targets run on exactly those records."""
    order = [f"{w.name}/{a.name}" for w in suite(depth=20, runs=1) for a in w.arms]
    rank = lambda a: (order.index(a["arm"]) if a["arm"] in order else len(order))  # noqa: E731
    ws = {}
    for a in sorted(arms, key=lambda a: (WORKLOADS.index(a["arm"].split("/")[0])
                                         if a["arm"].split("/")[0] in WORKLOADS else 99,
                                         rank(a))):
        wname, name = a["arm"].split("/", 1)
        w = ws.setdefault(wname, Workload(wname, a.get("title", wname), [], len(a["records"]),
                                          a["notes"].get("reference")))
        x = Arm(name, a["notes"]["allocator"],
                options=[f"{k}={v}" for k, v in (a.get("options") or {}).items()])
        for r in a["records"]:
            n = r["notes"]
            x.records.append({**n, "notes": n, "params": a.get("params") or {},
                              "phases": r.get("tree_phases")})
        w.arms.append(x)
    return list(ws.values())


def _folder_arm_files(folder):
    """(path, arm) of each bench arm JSON file directly in folder (what
    save() writes): a file that cannot be read or is not JSON is a
    BenchError naming it."""
    found = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise BenchError(f"{path}: cannot be read or is not JSON ({e}): remove it") from None
        if isinstance(data, dict) and data.get("experiment") == "bench" and "records" in data:
            found.append((path, data))
    return found


def arm_file_stem(arm):
    """The name (without .json) of the file save() writes an arm's record to:
    'fill/page-fault floor' -> 'fill_page-fault_floor'."""
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in arm)


def _one_file_per_arm(found):
    """(kept, copies) of _folder_arm_files' (path, arm): one file per arm --
    the one save() writes for it (arm_file_stem), else the last by name --
    and (path, the kept file's path, arm name) of each other file of the
    same arm, left out."""
    by_arm = {}
    for path, a in found:
        by_arm.setdefault(str(a.get("arm")), []).append((path, a))
    chosen = {}
    for arm, files in by_arm.items():
        own = [f for f in files if os.path.basename(f[0]) == arm_file_stem(arm) + ".json"]
        chosen[arm] = (own or files)[-1][0]
    kept = [(path, a) for path, a in found if chosen[str(a.get("arm"))] == path]
    copies = [(path, chosen[str(a.get("arm"))], str(a.get("arm")))
              for path, a in found if chosen[str(a.get("arm"))] != path]
    return kept, copies


def folder_arms(folder):
    """The bench arm JSON files directly in folder (what save() writes), one
    per arm (arm_copies names the others): a file that cannot be read or is
    not JSON is a BenchError naming it."""
    return [a for _, a in _one_file_per_arm(_folder_arm_files(folder))[0]]


def arm_copies(folder):
    """One line per bench arm JSON directly in folder that holds an arm
    another file there holds too (a copy: 'fill_glibc (1).json' beside
    fill_glibc.json), saying which one table.txt, records.csv and
    bench.ipynb take (records.csv had the rows of both, and a notebook's
    groupby of it counted the arm's runs twice).  The notebook read its records with load_arms, which
    warned of the pair and kept both, the last one read taking the place of
    the other in its plots; folder_arms took both without a word, and the
    table made the workload of both (h40left, session 40)."""
    return [f"{path} and {kept} are both bench arm {arm!r}: two records of one arm side by "
            f"side; {os.path.basename(kept)} is the one read (the file bench.py writes for "
            f"the arm, else the last by name), {os.path.basename(path)} is left out of the "
            f"table, records.csv and bench.ipynb; remove the one that is not wanted"
            for path, kept, arm in _one_file_per_arm(_folder_arm_files(folder))[1]]


def records_below(folder):
    """The subfolders of folder (at any depth) that hold bench arm JSON
    files: no part of the folder's records, which are the files directly in
    it (what save() writes, what its table.txt and records.csv are made of)
    -- an older run kept below it, or the folder named is one above the
    records (HEAPLAB_BENCH_RESULTS=results for results/bench).  bench.ipynb
    read them too (load_arms walks every subfolder): a kept run's arm took
    the place of the folder's own, and record_problems checked the files
    directly in the folder only.  A file there that cannot be read is
    passed over: it is not read."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if root == folder:
            continue
        for name in sorted(files):
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                with open(os.path.join(root, name)) as f:
                    data = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("experiment") == "bench" and "records" in data:
                out.append(root)
                break
    return out


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def record_problem(a):
    """What makes a bench arm record (arm_json's shape) unusable by the table
    and docs/notebooks/bench.ipynb, or None.  They read these fields as
    arm_json writes them: a hand-edited or another tool's record without
    one (no notes.checksum) stopped a notebook cell with a bare KeyError."""
    arm = a.get("arm")
    if not isinstance(arm, str) or "/" not in arm:
        return f"'arm' is {arm!r:.60}, expected '<workload>/<arm>' (binary-trees/heaplab)"
    if not isinstance(a.get("title"), str):
        return f"'title' is {a.get('title')!r:.60}, expected a string"
    for k in ("options", "params", "notes"):
        if not isinstance(a.get(k), dict):
            return f"{k!r} is {a.get(k)!r:.60}, expected an object"
    notes = a["notes"]
    if not isinstance(notes.get("allocator"), str):
        return f"notes.allocator is {notes.get('allocator')!r:.60}, expected a string"
    if "reference" not in notes or not isinstance(notes["reference"], (str, type(None))):
        return (f"notes.reference is {notes.get('reference', 'missing')!r:.60}, expected the "
                f"workload's reference arm or null")
    recs = a.get("records")
    if not isinstance(recs, list) or not recs:
        return f"'records' is {recs!r:.60}, expected a list of one record per run"
    for i, r in enumerate(recs):
        if not isinstance(r, dict) or not isinstance(r.get("notes"), dict):
            return f"record {i} has no 'notes' object (a run's figures and checksum)"
        n = r["notes"]
        for k in ("time_ns", "vmhwm_bytes", "user_ns", "sys_ns"):
            if not _number(n.get(k)):
                return (f"record {i}: " + (f"no notes.{k}" if k not in n else
                                           f"notes.{k} is {n[k]!r:.60}") + ", expected a number")
        if not isinstance(n.get("checksum"), str):
            return (f"record {i}: " + ("no notes.checksum" if "checksum" not in n else
                                       f"notes.checksum is {n['checksum']!r:.60}")
                    + ", expected the run's checksum (a string)")
        if not _number(r.get("duration_s")):
            return f"record {i}: 'duration_s' is {r.get('duration_s')!r:.60}, expected a number"
        ph = r.get("tree_phases")
        if ph is not None and not (isinstance(ph, list) and all(
                isinstance(p, dict) and isinstance(p.get("phase"), str) and _number(p.get("ns"))
                for p in ph)):
            return f"record {i}: 'tree_phases' is {ph!r:.60}, expected [{{phase, ns, ...}}, ...]"
    return None


def record_problems(folder):
    """One line per bench arm JSON directly in folder that record_problem
    refuses: '<file>: not a benchmark record: <what is wrong>; ...'."""
    return [f"{path}: not a benchmark record (bench.py's arm JSON): {why}; remove it or move it "
            f"out of the folder" for path, a in _folder_arm_files(folder)
            for why in [record_problem(a)] if why]


def folder_table(folder):
    """The table of every bench arm in folder (render, with the runs they come
    from: provenance_lines), as table.txt holds it."""
    arms = folder_arms(folder)
    # the ENVIRONMENT line says "every heaplab arm ran with it": only when
    # that is so -- a folder of several runs may differ (the review, session
    # 27); the per-run lines below the table then say which had what
    envs = [(a.get("provenance") or {}).get("env") or {} for a in arms]
    same = all(e == envs[0] for e in envs) if envs else True
    try:
        text = render(workloads_from_arms(arms), env=envs[0] if envs and same else None)
        if not same:
            text = ("ENVIRONMENT: differs between the runs of this folder (their lines at the "
                    "end say which HEAPLAB_* variables each had)\n" + text)
    except KeyError as e:       # (an arm a table row needs is not in the folder)
        text = f"no table: the arms in this folder lack {e} that the table needs"
    copies = arm_copies(folder)
    return (text + "\n\nthe records in this folder (" + os.path.abspath(folder) + ") come from:\n"
            + "\n".join("  " + line for line in provenance_lines(arms))
            + "".join("\nCOPY: " + line for line in copies))


def save(workloads, folder, provenance=None):
    """Write each arm's JSON (with provenance: run_provenance()) into folder,
    then make the folder's table.txt and records.csv again from EVERY arm JSON
    in it -- a run of one workload into a folder of make bench's records
    replaced that workload's JSON only, and left the table and CSV of the
    earlier run (the bench hunt, session 27).  records.csv is the harness's
    (heaplab.harness.write_csv) of the same files as the table (folder_arms:
    one per arm, directly in the folder); without the package it is removed
    instead of left stale.  Returns the table's text."""
    os.makedirs(folder, exist_ok=True)
    for w in workloads:
        for a in w.arms:
            data = arm_json(w, a, provenance)
            write_atomic(os.path.join(folder, f"{arm_file_stem(data['arm'])}.json"),
                         json.dumps(data))
    text = folder_table(folder)
    write_atomic(os.path.join(folder, "table.txt"), text + "\n")
    try:
        from heaplab.harness import write_csv
    except ImportError:
        write_csv = None
    if write_csv is not None:
        # the rows of the files the table and bench.ipynb read (folder_arms):
        # the CSV had those of a copy of an arm and of the runs kept below
        # the folder too, counted twice by a notebook's groupby
        write_csv(folder, files=[path for path, _ in
                                 _one_file_per_arm(_folder_arm_files(folder))[0]])
    elif os.path.exists(os.path.join(folder, "records.csv")):
        os.remove(os.path.join(folder, "records.csv"))
    return text


# ---- command line --------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["run", "check", "pair", "phases", "compare"])
    ap.add_argument("commands", nargs="*",
                    help='pair: two benchmark commands, e.g. "OLD/bench-heaplab binary-trees"; '
                         'phases: binary-trees commands, the last one the reference; '
                         'compare: benchmark commands, the last one the reference')
    ap.add_argument("--rounds", type=int, default=None,
                    help="pair: rounds (default 4); phases, compare: rounds (default 3); "
                         "not run (its runs: HEAPLAB_BENCH_RUNS)")
    ap.add_argument("--exe", action="append", default=[], help="allocator=path (repeatable)")
    ap.add_argument("--build", help="the Meson build folder (default ./build)")
    ap.add_argument("--quick", action="store_true", help="depth 18, 2 runs")
    ap.add_argument("--results", help="write JSON records here")
    ap.add_argument("--workload", action="append", default=[],
                    help="run: only this workload (repeatable: " + ", ".join(WORKLOADS) + ")")
    # intermixed: `pair --rounds 8 "A" "B"` was "unrecognized arguments: A B"
    # (argparse took the commands as done once an option followed the mode)
    args = ap.parse_intermixed_args(argv)
    for e in args.exe:
        name, eq, path = e.partition("=")
        if not eq or not name or not path:
            ap.error(f"--exe {e!r}: expected ALLOCATOR=PATH (e.g. heaplab=build/experiments/"
                     f"bench/bench-heaplab)")
        if name not in ALLOCATORS:
            ap.error(f"--exe {e!r}: no allocator {name!r} (allocators: {', '.join(ALLOCATORS)})")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            ap.error(f"--exe {e!r}: {path} is not an executable file")
    if args.rounds is not None and args.mode in ("run", "check"):
        # (it was taken, then ignored: run ran HEAPLAB_BENCH_RUNS's runs)
        ap.error(f"--rounds: pair, phases and compare only (the runs of {args.mode} are "
                 f"HEAPLAB_BENCH_RUNS{'' if args.mode == 'run' else ': check runs once'})")
    # (each was taken, then ignored: `check --results DIR` wrote nothing and
    # exited 0, `pair --results DIR` saved no record, `compare --quick` ran
    # the commands as given; the commands of pair, compare and phases name
    # their executables, --exe and --build choose run's and check's)
    for given, name, modes in ((args.results, "--results", ("run",)),
                               (args.workload, "--workload", ("run",)),
                               (args.quick, "--quick", ("run",)),
                               (args.exe, "--exe", ("run", "check")),
                               (args.build, "--build", ("run", "check"))):
        if given and args.mode not in modes:
            ap.error(f"{name}: {' and '.join(modes)} only ({args.mode} "
                     + ("runs the commands given, as given" if args.mode in
                        ("pair", "compare", "phases") else "runs the tiny suite and writes no "
                        "record") + ")")
    if args.rounds is not None and args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: at least 1")
    cmds = []
    for c in args.commands:
        try:
            cmd = shlex.split(c)
        except ValueError as e:
            ap.error(f"command {c!r}: {e}")
        if not cmd:
            ap.error(f"an empty command ({c!r}): each command is one quoted argument, e.g. "
                     f"\"build/experiments/bench/bench-heaplab fill\"")
        cmds.append(cmd)
    exes = dict(e.split("=", 1) for e in args.exe) if args.exe else None
    exes = find_exes(args.build, exes)
    warning = env_warning()
    if warning:
        print(f"bench: warning: {warning}", file=sys.stderr, flush=True)
    try:
        if args.mode == "pair":
            if len(args.commands) != 2:
                ap.error("pair needs two commands (each one quoted argument)")
            a, b = cmds
            runs = [[], []]
            load0 = warn_load("before")
            for ra, rb in run_pair(a, b, args.rounds or 4):
                same = _work(ra) != _work(rb) or ra["checksum"] == rb["checksum"]
                print(f"A {ra['time_ns'] / 1e9:.3f} s  B {rb['time_ns'] / 1e9:.3f} s  "
                      f"B/A {rb['time_ns'] / ra['time_ns']:.3f}"
                      + ("" if same else "  CHECKSUMS DIFFER"), flush=True)
                runs[0].append(ra)
                runs[1].append(rb)
            load1 = warn_load("after")
            # (docs/performance.md quotes pairs by their median B/A and load:
            # pair printed neither)
            ratios = [rb["time_ns"] / ra["time_ns"] for ra, rb in zip(*runs)]
            print(f"median B/A {statistics.median(ratios):.3f} over {len(ratios)} rounds "
                  f"(range {min(ratios):.3f}-{max(ratios):.3f}); load average before / after: "
                  f"{load0:.2f} / {load1:.2f}", flush=True)
            return report_checksums(runs)
        if args.mode == "compare":
            if len(args.commands) < 2:
                ap.error("compare needs two or more benchmark commands (each one quoted "
                         "argument), the last one the reference")
            for i, c in enumerate(args.commands):
                print(f"#{i + 1}: {c}")
            warn_load("before")
            load0 = os.getloadavg()

            def progress(r, recs):
                print(f"round {r + 1}: " + "  ".join(
                    f"#{i + 1} {rec['time_ns'] / 1e9:.3f} s" for i, rec in enumerate(recs)) +
                    f"  (load {os.getloadavg()[0]:.2f})", flush=True)
            runs = run_rounds(cmds, args.rounds or 3, progress=progress)
            warn_load("after")
            load1 = os.getloadavg()
            print(table(compare_rows(runs), COMPARE_COLUMNS))
            print(f"{args.rounds or 3} interleaved rounds (each runs every command once, in "
                  f"order); load average before / after: {load0[0]:.2f} / {load1[0]:.2f}")
            return report_checksums(runs)
        if args.mode == "phases":
            if not args.commands:
                ap.error("phases needs one or more binary-trees commands (each one quoted "
                         "argument)")
            warn_load("before")
            load0 = os.getloadavg()
            runs = run_phases(cmds, args.rounds or 3)
            warn_load("after")
            load1 = os.getloadavg()
            header = ["phase"]
            for i in range(len(cmds)):
                header.append(f"#{i + 1} ms")
                if i + 1 < len(cmds):
                    header.append(f"#{i + 1} / #{len(cmds)}")
            header += ["#1 minor", "#1 full", "#1 gc ms", "#1 promoted MiB"]
            for i, c in enumerate(args.commands):
                print(f"#{i + 1}: {c}")
            print(table(phase_rows(runs), header))
            print(f"fastest time of each phase over {args.rounds or 3} interleaved rounds; "
                  f"the counters are #1's fastest run's; load average before / after: "
                  f"{load0[0]:.2f} / {load1[0]:.2f}")
            return report_checksums(runs)
        if args.mode == "check":
            ws = run_suite(tiny_suite(), exes)
            problems = checksum_problems(ws)
            for w in ws:
                for a in w.arms:
                    if w.name == "release":
                        n = a.records[0]["notes"]
                        print(f"{w.name:13} {a.name:24} {n['released_pages']} pages released in "
                              f"{n['release_calls']} calls, {n['released_runs']} runs")
                    else:
                        print(f"{w.name:13} {a.name:24} checksum {sorted(a.checksums())}")
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 1
            print("checksums agree across", ", ".join(sorted(exes)))
            return 0
        ws = suite(quick=args.quick)    # (HEAPLAB_BENCH_DEPTH/RUNS checked: UsageError)
        unknown = set(args.workload) - {w.name for w in ws}
        if unknown:     # (before --results is made: nothing of a refused run is left)
            ap.error(f"no workload {', '.join(sorted(unknown))}: the workloads are "
                     f"{', '.join(w.name for w in ws)}")
        if args.results:
            why = experiment_output_in(args.results)
            if why:
                raise UsageError(
                    f"--results {args.results}: it holds {why}; bench.py writes table.txt and "
                    f"records.csv of every arm JSON under the folder, over the experiments' -- "
                    f"give a folder of bench records only, e.g. "
                    f"{os.path.join(args.results, 'bench')} (what make bench uses)")
            writable_folder(args.results)
        warn_load("before")
        load0 = os.getloadavg()
        if args.workload:
            ws = [w for w in ws if w.name in args.workload]
        ws = run_suite(ws, exes, log=lambda s: print(s, file=sys.stderr))
        warn_load("after")
        load1 = os.getloadavg()
        problems = checksum_problems(ws)
        if args.results:
            # (saved before the table is made: a table that cannot be made
            # lost the run's records)
            try:
                save(ws, args.results, run_provenance(
                    "bench.py run", (f"{load0[0]:.2f}", f"{load1[0]:.2f}"),
                    ["experiments/bench/bench.py", *(sys.argv[1:] if argv is None else argv)]))
            except OSError as e:     # (a disk that filled up during the run)
                raise BenchError(f"--results {args.results}: the records could not be written "
                                 f"({e.strerror or e}{': ' + e.filename if e.filename else ''})"
                                 ) from None
        print(render(ws, (f"{load0[0]:.2f}", f"{load1[0]:.2f}"), env=heaplab_env()))
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
        return 0
    except UsageError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # the benchmark children are killed on the way out (run_pair's
        # finally, subprocess.run): one line, no traceback
        print("bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
