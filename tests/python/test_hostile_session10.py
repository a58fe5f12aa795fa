"""Defects a hostile user of the Python API found (session 10): lifetimes
across fork() and threads, raw handles, re-initialised owners, and bad
arguments that were accepted or gave unclear errors.  Each test failed
before its fix (the commit that added it says how that was checked)."""
import os
import subprocess
import sys
import textwrap

import pytest

import heaplab


def run_python(code, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


# ---- thin() beside threads that change the graph ----------------------------------------

def test_thin_while_another_thread_changes_the_graph():
    """hl_thin counted the leaves, allocated the new root -- which may drop
    the heap lock (a background collector's safepoint) -- and walked again,
    storing every leaf it found into a root sized by the first count: leaves
    added meanwhile were written past the end of the root (malloc memory):
    'double free or corruption' within seconds, a heap-buffer-overflow under
    ASan; leaves dropped meanwhile left empty slots."""
    p = run_python("""
        import heaplab, random, threading, time
        # every large allocation waits for a cycle (thin's new root too),
        # and the other thread runs meanwhile
        h = heaplab.Heap(collector="background", large_trigger_bytes=4096,
                         pacing_give_up_cycles=1000)
        g = h.alloc(0, refs=256)
        stop = threading.Event()
        def mutate():
            rng = random.Random(1)
            while not stop.is_set():
                g[rng.randrange(256)] = h.alloc(8) if rng.random() < 0.5 else None
        def thin():
            while not stop.is_set():
                t = h.thin(g, 1)
                # every slot holds a leaf (a graph that shrank meanwhile
                # left empty slots at the end)
                assert t.checksum()[1] == len(t) + 1, (t.checksum(), len(t))
                t.release()
        threads = [threading.Thread(target=f) for f in (mutate, thin)]
        for t in threads:
            t.start()
        time.sleep(2)
        stop.set()
        for t in threads:
            t.join()
        h.check()
        print("ok")
    """)
    assert p.returncode == 0 and p.stdout.startswith("ok"), (p.returncode, p.stderr[-2000:])
