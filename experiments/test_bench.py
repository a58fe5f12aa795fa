"""Benchmarks against Boehm GC, mimalloc, jemalloc and glibc malloc -- issue 8,
DESIGN.md section 8.  Not part of the experiment suite: `make bench` or
`python -m pytest experiments -m bench` selects it.

Protocol (experiments/bench/bench.py runs the C program of
experiments/bench/, one fresh process per run, runs interleaved):
  binary-trees  GCBench shape, depth 20: heaplab (collected, raw objects),
                heaplab generational (option generational), each also with
                page_release=0, heaplab with subpage_release=1 and with
                compact=sparse (issue 18: their cost where they do not help),
                Boehm GC (GC_malloc, collecting), mimalloc / jemalloc / glibc
                (explicit free)
  fill          192 MiB of 256-byte objects against the page-fault floor
                (mmap + writing the same bytes), every allocator
  churn         8 rounds of fill 64 MiB / drop / collect, page_release on, off,
                subpage_release=1, compact=sparse
  release       192 MiB dropped: every page (contiguous) or every other
                (scattered); calls, runs of pages, time per MiB
  pause         a full collection with 192 MiB of 256-byte objects live,
                heaplab against GC_gcollect
  compact       the collection after keeping 1 object in 10 of 192 MiB:
                compact=never against sparse; the evacuation's time per MiB
                evacuated against the full mark of the same heap

Asserted: every peer is present, and every allocator's checksums agree
(trees, fills).  The speed targets are reported as ratios measured side by
side (the table, and lab effects marked ok/FAIL) -- never asserted on a time.
"""
import importlib.util
import os
import sys

import pytest

from heaplab.harness import results_dir

pytestmark = pytest.mark.bench

_spec = importlib.util.spec_from_file_location(
    "heaplab_bench", os.path.join(os.path.dirname(__file__), "bench", "bench.py"))
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)


def test_bench(lab, capsys):
    exes = bench.find_exes()
    bench.require(exes, bench.ALLOCATORS)

    def log(line):
        with capsys.disabled():
            print(line, flush=True)

    warning = bench.env_warning()
    if warning:
        log(f"bench: warning: {warning}")
    load0 = os.getloadavg()[0]
    workloads = bench.run_suite(bench.suite(), exes, log=log)
    load1 = os.getloadavg()[0]

    # every arm's JSON with its provenance, then table.txt and records.csv made from
    # every arm JSON in the folder (bench.save): a later `bench.py run --workload X
    # --results results/bench` keeps them consistent
    folder = os.path.join(results_dir(), "bench")
    bench.save(workloads, folder, bench.run_provenance(
        "make bench", (f"{load0:.2f}", f"{load1:.2f}"),
        [os.path.basename(sys.executable), "-m", "pytest", *sys.argv[1:]]))
    text = bench.render(workloads, (f"{load0:.2f}", f"{load1:.2f}"), env=bench.heaplab_env())
    with capsys.disabled():
        print("\n" + text + f"\nrecords: {folder} (table.txt: every arm in it)", flush=True)

    for what, ours, target, ok in bench.targets(workloads):
        lab.effect("bench", what, ours, target, ok=ok)

    problems = bench.checksum_problems(workloads)
    assert not problems, "\n".join(problems)
