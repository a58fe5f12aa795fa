"""The benchmark driver's binary-trees phases (experiments/bench/bench.py):
the per-phase table `bench.py phases` prints, the check `make test-bench`
runs on every record, and the machine's fault cost `make bench` reports.
Synthetic records: what is tested is the driver's arithmetic and its
refusals, not a measurement."""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "heaplab_bench_driver", os.path.join(ROOT, "experiments", "bench", "bench.py"))
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)

NAMES = ["stretch", "long-lived", "d4", "d6", "final"]  # (depth 6: bench_max_depth)


def record(ns, allocator="mimalloc", gc=False, time_ns=None, cycles=100, gc_ns=10**9):
    phases = []
    for name, t in zip(NAMES, ns):
        p = {"phase": name, "ns": t}
        if gc:
            p.update(cycles=2, minor_cycles=1, full_marks=1, gc_ns=1000, promoted_bytes=2 << 20)
        phases.append(p)
    return {"allocator": allocator, "params": {"depth": 6}, "phases": phases,
            "time_ns": time_ns if time_ns is not None else sum(ns) + 5, "checksum": "0x1",
            "notes": {"cycles": cycles, "gc_ns": gc_ns}}


def test_phase_rows_take_each_phase_fastest_and_divide_by_the_last_command():
    a = [record([10, 20, 30, 40, 50], gc=True, time_ns=200),
         record([12, 18, 33, 41, 49], gc=True, time_ns=190)]
    b = [record([20, 20, 20, 20, 20]), record([10, 40, 15, 80, 25])]
    rows = bench.phase_rows([a, b])
    assert [r[0] for r in rows] == NAMES + ["total"]
    # phase, #1 ms, #1 / #2, #2 ms, then #1's counters
    d4 = rows[2]
    assert d4[1] == f"{30 / 1e6:.1f}" and d4[2] == f"{30 / 15:.3f}" and d4[3] == f"{15 / 1e6:.1f}"
    assert rows[1][2] == f"{18 / 20:.3f}"  # (the fastest of each, not of one run)
    assert d4[4:] == [1, 1, f"{1000 / 1e6:.1f}", "2"]
    total = rows[-1]
    assert total[2] == f"{190 / min(r['time_ns'] for r in b):.3f}" and total[4:] == ["", "", "", ""]


def test_phase_rows_refuse_commands_with_different_phases():
    other = record([1, 2, 3, 4, 5])
    other["phases"][2]["phase"] = "d8"
    with pytest.raises(bench.BenchError, match="same --depth"):
        bench.phase_rows([[record([1, 2, 3, 4, 5])], [other]])


def workload(*arms):
    w = bench.Workload("binary-trees", "t", [], 1, reference="mimalloc")
    for name, allocator, records in arms:
        a = bench.Arm(name, allocator)
        a.records = records
        w.arms.append(a)
    return w


def test_the_check_finds_a_missing_phase_time_outside_and_counters_beyond_the_run():
    good = workload(("heaplab", "heaplab", [record([1] * 5, "heaplab", gc=True)]),
                    ("mimalloc", "mimalloc", [record([1] * 5)]))
    assert bench.checksum_problems([good]) == []
    missing = record([1] * 5)
    del missing["phases"][-1]
    slow = record([1] * 5, time_ns=3)
    counted = record([1] * 5, "heaplab", gc=True, cycles=1)
    for bad, what in ((missing, "expected"), (slow, "the phases take"),
                      (counted, "counters exceed")):
        problems = bench.checksum_problems([workload(("x", bad["allocator"], [bad]))])
        assert len(problems) == 1 and what in problems[0], problems
    # a record saved before the phases were (results of old runs): not judged
    old = record([1] * 5)
    del old["phases"]
    assert bench.checksum_problems([workload(("x", "mimalloc", [old]))]) == []


def test_make_bench_reports_what_a_page_fault_costs():
    def floor(ns):
        return {"time_ns": 10**8, "checksum": "0x2", "vmhwm_bytes": 0,
                "params": {"bytes": 192 << 20, "size": 256},
                "notes": {"touch_one_byte_per_page_ns": ns}}
    f = bench.Workload("fill", "t", [], 2, reference="page-fault floor")
    for name in ("page-fault floor", "heaplab"):
        a = bench.Arm(name, "heaplab")
        a.records = [floor(49152 * 2000), floor(49152 * 1500)]
        f.arms.append(a)
    rows = {what: ours for what, ours, _, _ in bench.targets([f])}
    (row,) = [ours for what, ours in rows.items() if what.startswith("(machine)")]
    pages = 192 * 1024 * 1024 // os.sysconf("SC_PAGESIZE")
    assert row == f"{49152 * 1500 / pages / 1e3:.2f} us (median {49152 * 1750 / pages / 1e3:.2f})"


def timed(time_ns, vmhwm=0):
    return {"time_ns": time_ns, "vmhwm_bytes": vmhwm, "checksum": "0x1", "notes": {}}


def test_compare_rows_give_fastest_median_and_the_median_of_each_rounds_ratio():
    # three rounds; the host slows down in round 3 for both commands
    a = [timed(110, 5 << 20), timed(100, 7 << 20), timed(300, 6 << 20)]
    ref = [timed(100), timed(100), timed(250, 1 << 20)]
    rows = bench.compare_rows([a, ref])
    assert len(rows[0]) == len(bench.COMPARE_COLUMNS)
    _, fastest, median, r_fast, r_med, r_rounds, spread, peak = rows[0]
    assert fastest == f"{100 / 1e9:.3f}" and median == f"{110 / 1e9:.3f}"
    assert r_fast == f"{100 / 100:.3f}" and r_med == f"{110 / 100:.3f}"
    # per round: 1.10, 1.00, 1.20 -> median 1.10, range 1.000-1.200
    assert r_rounds == "1.100" and spread == "1.000-1.200"
    assert peak == "7.0"  # the highest VmHWM of the command's runs
    assert rows[1][3:7] == ["1.000", "1.000", "1.000", "1.000-1.000"] and rows[1][7] == "1.0"


def test_compare_refuses_uneven_rounds_and_a_single_command():
    with pytest.raises(bench.BenchError, match="same number of rounds"):
        bench.compare_rows([[timed(1), timed(2)], [timed(1)]])
    with pytest.raises(SystemExit) as e:
        bench.main(["compare", "build/experiments/bench/bench-glibc binary-trees"])
    assert e.value.code == 2
