"""Reliability defects a hostile probe found (issue 16), as the user met them
from Python; the C tests prove the mechanisms, these the user's reproducers."""
import os
import subprocess
import sys
import textwrap

import pytest

import heaplab


def run_python(code, env=None, preexec=None, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **(env or {})),
                          preexec_fn=preexec)


def test_garbage_never_runs_out_of_a_small_reservation():
    """#1: 4 MiB and nothing live: OutOfMemory after ~52 k allocations before."""
    with heaplab.Heap(reserve_bytes=4 << 20) as h:
        for _ in range(200_000):
            h.alloc(64).release()
        assert h.stats().cycles > 0


def test_a_failed_fill_leaves_room_for_the_next_allocation():
    """#1: after a fill that ran out of room, every small alloc failed until
    collect() was called by hand."""
    with heaplab.Heap(reserve_bytes=4 << 20) as h:
        keep = h.fill(2 << 20, 64)
        with pytest.raises(heaplab.OutOfMemory):
            h.fill(2 << 20, 64)
        for _ in range(20_000):
            h.alloc(64).release()
        keep.release()


def test_churn_under_ulimit_v():
    """#1: under ulimit -v 1 GiB the reservation is halved below the trigger in
    force; no cycle ever ran and churn failed."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    p = run_python("""
        import heaplab
        h = heaplab.Heap()
        r = h.churn(0.5, 256, 1 << 20)
        s = h.stats()
        assert s.reserved_bytes < 1 << 30 and s.cycles > 0, s
        print("ok", s.reserved_bytes, s.gc_trigger_bytes, r.allocated_bytes)
    """, preexec=limit)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stderr


def test_heap_limit_is_enforced_with_the_sync_collector():
    """#13: heap_limit_bytes did nothing with the sync collector."""
    with heaplab.Heap(heap_limit_bytes=32 << 20) as h:
        keep = []
        with pytest.raises(heaplab.OutOfMemory, match="heap_limit_bytes"):
            for _ in range(200):
                keep.append(h.alloc(1 << 20))
        s = h.stats()
        assert s.small_live_bytes + s.large_live_bytes <= 32 << 20
        keep.clear()
        h.alloc(1 << 20)
