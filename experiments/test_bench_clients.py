"""Speed of the real interpreters on heaplab's manual mode -- issue 10.  Not
part of the experiment suite: `make bench` (pytest -m bench) selects it.

Protocol: each workload runs in a fresh process per run, the allocators
interleaved run by run (so drift hits them alike), REPS runs each; the
figure is the process's CPU time (user + system, from wait4), the median
and the best of the runs, and the ratio heaplab / baseline.

  lua binary-trees   tests/clients/programs/binary_trees.lua 16 on heaplab-lua,
                     against the same binary on the C library (HEAPLAB_ALLOCATOR=libc)
  lua dkjson         Debian's dkjson speed test (programs/dkjson_speed.lua,
                     30000 iterations), the same two arms
  python alloc       programs/alloc_heavy.py 3 on heaplab-python against
                     plain python3 (pymalloc), and against PYTHONMALLOC=malloc
  manual hot path    heaplab-manual-bench: hl_malloc / hl_free_sized /
                     hl_realloc against malloc / free / realloc, pattern by pattern

Asserted: every arm of a workload prints the same results (the checksums,
the decoded JSON).  The target -- no slower than the system allocator -- is
reported as ratios (lab effects marked ok/FAIL), never asserted on a time.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import pytest

from heaplab.harness import child_env, results_dir, write_atomic

pytestmark = pytest.mark.bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "clients", "programs")
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"), "clients")
REPS = int(os.environ.get("HEAPLAB_BENCH_REPS", "5"))


def exe(name):
    path = os.path.join(BUILD, name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built: run `make` (ninja -C build) first")
    return path


def run_once(argv, env):
    """One fresh process: (cpu seconds, wall seconds, stdout).  The CPU time
    is the child's own (RUSAGE_CHILDREN before and after it is reaped);
    stderr is not parsed."""
    e = {k: v for k, v in child_env().items()
         if not (k.startswith("HEAPLAB_") or k == "PYTHONMALLOC")}
    e.update(env)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 0, f"{argv}: exit {p.returncode}\n{p.stderr[-2000:]}"
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, wall, p.stdout


def measure(arms, reps=REPS):
    """arms: {name: (argv, env)}, run interleaved, reps times each."""
    res = {n: {"cpu": [], "wall": [], "out": None} for n in arms}
    for _ in range(reps):
        for name, (argv, env) in arms.items():
            cpu, wall, out = run_once(argv, env)
            res[name]["cpu"].append(cpu)
            res[name]["wall"].append(wall)
            res[name]["out"] = out
    for r in res.values():
        r["median"] = statistics.median(r["cpu"])
        r["best"] = min(r["cpu"])
    return res


def report(lab, workload, res, ours, base, lines):
    o, b = res[ours], res[base]
    ratio = o["median"] / b["median"]
    best = o["best"] / b["best"]
    lines.append(f"{workload:28s} {ours:>14s} {o['median']:7.3f}s  {base:>14s} {b['median']:7.3f}s"
                 f"  ratio {ratio:.3f} (best {best:.3f})")
    lab.effect("bench", f"{workload}: {ours} / {base} CPU", f"{ratio:.3f}x (best {best:.3f}x)",
               "<= 1.0x (no slower than the system allocator)", arm=ours, ok=ratio <= 1.0)
    return {"workload": workload, "arm": ours, "baseline": base, "median_s": o["median"],
            "baseline_median_s": b["median"], "ratio": ratio, "best_ratio": best,
            "cpu_s": o["cpu"], "baseline_cpu_s": b["cpu"]}


def test_bench_clients(lab, capsys):
    lua, py = exe("heaplab-lua"), exe("heaplab-python")
    rows, lines = [], []

    trees = measure({
        "heaplab": ([lua, os.path.join(PROGRAMS, "binary_trees.lua"), "16"], {}),
        "libc": ([lua, os.path.join(PROGRAMS, "binary_trees.lua"), "16"],
                 {"HEAPLAB_ALLOCATOR": "libc"}),
    })
    assert trees["heaplab"]["out"] == trees["libc"]["out"], "binary-trees checks differ"
    rows.append(report(lab, "lua binary-trees 16", trees, "heaplab", "libc", lines))

    speed = [lua, os.path.join(PROGRAMS, "dkjson_speed.lua"), "30000"]
    dk = measure({"heaplab": (speed, {}), "libc": (speed, {"HEAPLAB_ALLOCATOR": "libc"})})
    assert (dk["heaplab"]["out"].splitlines()[2:] == dk["libc"]["out"].splitlines()[2:]), \
        "dkjson results differ"
    rows.append(report(lab, "lua dkjson speed test", dk, "heaplab", "libc", lines))

    alloc = [os.path.join(PROGRAMS, "alloc_heavy.py"), "3"]
    pyres = measure({
        "heaplab-python": ([py] + alloc, {}),
        "python3": ([sys.executable] + alloc, {}),
        "PYTHONMALLOC=malloc": ([sys.executable] + alloc, {"PYTHONMALLOC": "malloc"}),
    })
    outs = {n: r["out"] for n, r in pyres.items()}
    assert len(set(outs.values())) == 1, f"alloc_heavy.py checksums differ: {outs}"
    rows.append(report(lab, "python alloc_heavy", pyres, "heaplab-python", "python3", lines))
    rows.append(report(lab, "python alloc_heavy", pyres, "heaplab-python", "PYTHONMALLOC=malloc",
                       lines))

    p = subprocess.run([exe("heaplab-manual-bench"), "1"], capture_output=True, text=True,
                       env=child_env(), timeout=600)
    assert p.returncode == 0, p.stderr
    for line in p.stdout.splitlines():
        r = json.loads(line)
        lines.append(f"{'manual ' + r['pattern']:28s} {'hl_*':>14s} {r['heaplab_ns']:7.2f}ns "
                     f"{'libc':>14s} {r['libc_ns']:7.2f}ns  ratio {r['ratio']:.3f}")
        lab.effect("bench", f"manual {r['pattern']}: hl_* / libc ns per op", f"{r['ratio']:.3f}x",
                   "<= 1.0x", ok=r["ratio"] <= 1.0)
        rows.append({"workload": "manual " + r["pattern"], **r})

    folder = os.path.join(results_dir(), "bench")
    os.makedirs(folder, exist_ok=True)
    write_atomic(os.path.join(folder, "clients.json"),
                 json.dumps({"reps": REPS, "load": os.getloadavg(), "rows": rows}, indent=1))
    with capsys.disabled():
        print("\nclients (CPU seconds, median of %d interleaved runs):\n" % REPS
              + "\n".join(lines) + f"\nrecords: {folder}/clients.json", flush=True)
