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
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer's shadow memory needs more address space than 1 GiB")

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


# ---- lifetimes: finalizers, copies, threads -----------------------------------------

def test_a_finalizer_closing_the_heap_during_its_call_does_not_deadlock():
    """#3: close() from a finalizer that runs inside a method of the same heap
    (same thread) waited for that method forever.  A finalizer runs wherever
    Python allocates; here it runs exactly inside a call (the binding's own
    plumbing, given a Python function instead of a C one), then as it happens
    under an aggressive cyclic GC."""
    p = run_python("""
        import gc, heaplab
        h = heaplab.Heap()
        def closes_inside(ptr, *args):
            h.close()          # what a finalizer does, inside the call
            return 0
        h._call(closes_inside)
        assert h.closed
        try:
            h.alloc(8)
            raise SystemExit("a closed heap allocated")
        except heaplab.HeapClosed:
            pass
        h = heaplab.Heap()
        class Closer:
            def __init__(self): self.me = self    # a cycle: freed by the cyclic GC
            def __del__(self): h.close()
        gc.set_threshold(5)
        for i in range(20000):
            if i % 50 == 0:
                Closer()
            try:
                h.alloc(64).release()
            except heaplab.HeapClosed:
                h = heaplab.Heap()
        print("ok")
    """, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("ok"), (p.returncode, p.stderr[-2000:])


_FINALIZER_IN_THE_BINDING = """
    import gc, os, sys, threading, heaplab
    threshold = int(sys.argv[1])

    class Owner:
        def __init__(self, heap):
            self.heap, self.me = heap, self   # a cycle: only the cyclic GC frees it
        def __del__(self):
            self.heap.close()

    def scenario(name, warm, first_call):
        h = heaplab.Heap()
        out = []
        def thread_main():
            if warm:
                h.stats()             # not this thread's first call on h
            gc.disable()
            gc.collect()
            Owner(h)                  # garbage from now on
            gc.set_threshold(threshold)
            gc.enable()
            try:
                first_call(h)
                out.append("returned")
            except heaplab.HeapClosed:
                out.append("closed")
            finally:
                gc.set_threshold(700)
        t = threading.Thread(target=thread_main, daemon=True)
        t.start()
        t.join(10)
        if t.is_alive():
            print(f"threshold {threshold}: {name}: HANG (closed={h.closed})", flush=True)
            os._exit(1)
        h.close()

    scenario("first call trim", False, lambda h: h.trim())
    scenario("first call close", False, lambda h: h.close())
    scenario("close after a call", True, lambda h: h.close())
    print("ok", flush=True)
"""


def test_a_finalizer_closing_the_heap_inside_the_bindings_plumbing_does_not_hang():
    """A finalizer that closes the heap, run by a garbage collection inside the
    binding's own code: in a thread's first call (the thread-local's first
    dict, made after the call was counted: close() waited for its own
    thread's call) and inside close() itself, which held a plain lock across
    code that allocates (the nested close() waited for its own thread).  The
    gen-0 threshold places the collection; every threshold 1..30 runs in a
    child of its own (6-8 hung the first, 5-8 the second; a helper's
    reproducers)."""
    from concurrent.futures import ThreadPoolExecutor
    code = textwrap.dedent(_FINALIZER_IN_THE_BINDING)

    def one(threshold):
        try:
            p = subprocess.run([sys.executable, "-c", code, str(threshold)], capture_output=True,
                               text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return f"threshold {threshold}: no exit in 60 s"
        if p.returncode or "ok" not in p.stdout:
            return p.stdout.strip() or p.stderr[-500:]
        return None
    # (two children at a time: each is its own process, the 30 take half as long)
    with ThreadPoolExecutor(2) as pool:
        hung = [h for h in pool.map(one, range(1, 31)) if h is not None]
    assert not hung, hung


def test_heaps_and_samplers_refuse_copies_refs_copy_as_dup():
    """#4: copy.copy(heap) crashed the interpreter; copy.copy(ref) made two owners."""
    import copy
    import pickle
    with heaplab.Heap() as h:
        for what in (h, heaplab.Sampler(0.01)):
            for f in (copy.copy, copy.deepcopy, pickle.dumps):
                with pytest.raises(TypeError, match="cannot be"):
                    f(what)
        r = h.alloc(16, refs=1)
        r.write(b"x" * 16)
        c = copy.copy(r)
        assert c is not r and c == r and c._ref != r._ref   # a second root
        r.release()
        assert c.read() == b"x" * 16
        with pytest.raises(TypeError):
            copy.deepcopy(c)
        s = h.stats()
        s2 = pickle.loads(pickle.dumps(s))
        assert s2.as_dict() == s.as_dict() and copy.copy(s).cycles == s.cycles
        h.collect()
        e = h.events()[0]
        e2 = pickle.loads(pickle.dumps(e))
        assert e2.as_dict() == e.as_dict()


def test_a_released_ref_compares_and_hashes():
    """#15: == and hash on a released Ref raised."""
    with heaplab.Heap() as h:
        a = h.alloc(8)
        b = a.dup()
        assert a == b and hash(a) == hash(b)
        seen = {a}
        a.release()
        assert a == a and a != b and a in seen   # its hash did not change
        assert hash(a) == hash(a)


def test_sampler_stop_races_summary():
    """#7: Sampler.stop() racing summary() from another thread was a use after
    free (ASan); now stop() waits for the calls in flight."""
    import threading
    for _ in range(20):
        s = heaplab.Sampler(0.0005, 64)
        stop = threading.Event()
        errors = []

        def reader():
            while not stop.is_set():
                try:
                    s.summary()
                    s.series()
                except heaplab.Error as e:
                    assert "stopped" in str(e)
                    return
                except Exception as e:   # anything else is the defect
                    errors.append(e)
                    return

        t = [threading.Thread(target=reader) for _ in range(3)]
        for x in t:
            x.start()
        s.stop()
        stop.set()
        for x in t:
            x.join()
        assert not errors, errors


def test_a_call_failing_while_another_thread_closes_keeps_its_message():
    """A failed call read its message (hl_heap_error) after it stopped counting
    as a call in flight: a close() in another thread, waiting for it, could
    free the heap first -- a use after free (ASan, make test-python-asan), or
    an empty message when close() had already cleared the pointer."""
    import threading
    messages = []
    for _ in range(60):
        h = heaplab.Heap(reserve_bytes="64m")
        go = threading.Event()

        def failing():
            go.wait()
            while True:
                try:
                    h.inject("no_such_site", "off")
                except heaplab.HeapClosed:
                    return
                except heaplab.InvalidArgument as e:
                    messages.append(str(e))

        t = [threading.Thread(target=failing) for _ in range(3)]
        for x in t:
            x.start()
        go.set()
        while not messages:
            pass
        h.close()
        for x in t:
            x.join()
    assert all("no_such_site" in m for m in messages), [m for m in messages
                                                        if "no_such_site" not in m][:3]


def test_a_call_failing_under_a_pending_close_keeps_its_message():
    """close() interrupted by Ctrl-C while it waits leaves the free to the last
    call in flight; that call, failing, freed the heap before reading its
    message and raised Interrupted('') -- no word of what was interrupted."""
    code = """
        import heaplab, threading, time
        h = heaplab.Heap()
        out = {}
        def worker():
            try:
                h.fill(6 << 30, 64)
                out["e"] = None
            except BaseException as e:
                out["e"] = e
        t = threading.Thread(target=worker)
        t.start()
        while h.stats().small_live_bytes < (16 << 20):
            if not t.is_alive():
                raise SystemExit(f"the fill ended before the test began: {out['e']!r}")
            time.sleep(0.001)
        print("ready", flush=True)
        try:
            h.close()
        except KeyboardInterrupt:
            pass
        t.join()
        e = out["e"]
        print(f"closed={h.closed} {type(e).__name__}: [{e}]")
    """
    status, out = _interrupt_child(code, 0.2, timeout=60)
    assert status == 0 and "closed=True Interrupted: [fill: interrupted" in out, out


# ---- Ctrl-C -----------------------------------------------------------------------------

def _interrupt_child(code, delay, timeout=30):
    """Run code in a child, SIGINT it after delay seconds; its (status, output)."""
    import signal
    import time
    import select
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the child says "ready" within the timeout, or the test fails with what
    # it said (a child that never got ready -- its fill refused on a machine
    # short of memory -- hung the whole suite here)
    ready = select.select([p.stdout], [], [], timeout)[0]
    line = p.stdout.readline().strip() if ready else ""
    if line != "ready":
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"the child did not say ready (in {timeout} s): {line}{out}{err}")
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out + err
    return p.returncode, out + err


def test_ctrl_c_in_a_loop_of_calls_never_hangs_nor_is_swallowed():
    """#5: a SIGINT at a random moment in a loop of alloc/stats left the heap
    marked active (close() and exit hung), or was swallowed by Ref.__del__."""
    import random
    code = """
        import heaplab, sys
        h = heaplab.Heap()
        keep = []
        print("ready", flush=True)
        try:
            while True:
                r = h.alloc(64, refs=1)
                r[0] = h.alloc(8)
                keep.append(r)
                if len(keep) > 100:
                    keep.clear()
                h.stats()
        except KeyboardInterrupt:
            keep.clear()
            h.close()
            print("interrupted and closed")
    """
    from concurrent.futures import ThreadPoolExecutor
    rng = random.Random(16)
    delays = [rng.uniform(0.05, 0.3) for _ in range(25)]
    # (two children at a time, each interrupted at its own moment)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda d: _interrupt_child(code, d, timeout=20), delays))
    for i, (status, out) in enumerate(runs):
        assert status == 0 and "interrupted and closed" in out, f"run {i}: {status} {out[-1500:]}"


@pytest.mark.parametrize("before", [
    "pass",
    "heaplab.harness.run_command_arm(['true'], allocator='glibc')",
    "heaplab.harness.run_in_group(['true'], dict(os.environ), None, 30)",
    "exec('with heaplab.sweep._stops_deferred(): pass')",
])
def test_ctrl_c_stops_a_long_fill_and_leaks_nothing(before):
    """#5: SIGINT during a long fill came only when it returned, and its root
    leaked (handles=1, GiB pinned until close()).  Also after a harness run:
    the harness's and the sweeps' Ctrl-C deferrals swap SIGINT's Python
    handler for a while, signal.signal replaced heaplab's handler in front of
    CPython's, and putting the old one back did not put the chain back -- the
    fill ran to its end (3-37 s) before the KeyboardInterrupt (the review,
    session 26)."""
    code = f"""
        import os, time, heaplab, heaplab.harness, heaplab.sweep
        {before}
        h = heaplab.Heap()
        print("ready", flush=True)
        t0 = time.monotonic()
        try:
            r = h.fill(6 << 30, 256)
            print("not interrupted")
        except KeyboardInterrupt:
            dt = time.monotonic() - t0
            s = h.stats()
            h.collect(major=True)   # (partial pages wait for a major sweep)
            print(f"interrupted after {{dt:.2f}} s handles={{s.handles}} "
                  f"live={{h.stats().small_live_bytes}}")
    """
    status, out = _interrupt_child(code, 0.3, timeout=120)
    assert status == 0 and "interrupted after" in out, out
    words = dict(w.split("=") for w in out.split() if "=" in w)
    secs = float(out.split("interrupted after ")[1].split()[0])
    assert secs < 2.0, out
    assert words["handles"] == "0" and words["live"] == "0", out


# ---- every bad argument is a documented exception ---------------------------------------

BAD_VALUES = [-1, 2 ** 64, 2 ** 63, -(2 ** 63) - 1, 1.5, float("nan"), "8", None, True, [1], b"x"]
OK_EXCEPTIONS = (TypeError, ValueError, IndexError, heaplab.Error)


def _calls(h, r, s):
    """(name, callable taking one argument) for every argument of the public API."""
    yield "Heap(warm_pages=x)", lambda x: heaplab.Heap(warm_pages=x).close()
    yield "alloc(size)", lambda x: h.alloc(x)
    yield "alloc(refs)", lambda x: h.alloc(8, refs=x)
    yield "fill(total)", lambda x: h.fill(x, 64)
    yield "fill(size)", lambda x: h.fill(1024, x)
    yield "fill(refs)", lambda x: h.fill(1024, 64, refs=x)
    yield "fill(stride)", lambda x: h.fill(1024, 64, stride=x)
    yield "collect(cycles)", lambda x: h.collect(cycles=x)
    yield "collect(major)", lambda x: h.collect(major=x)
    yield "churn(duration)", lambda x: h.churn(x, 64, 1024)
    yield "churn(size)", lambda x: h.churn(0.001, x, 1024)
    yield "churn(live)", lambda x: h.churn(0.001, 64, x)
    yield "churn(rate)", lambda x: h.churn(0.001, 64, 1024, x)
    yield "inject(site)", lambda x: h.inject(x, "off")
    yield "inject(mode)", lambda x: h.inject("release", x)
    yield "inject(n)", lambda x: h.inject("release", "first", x)
    yield "inject(errno)", lambda x: h.inject("release", "first", 1, x)
    yield "r[i]", lambda x: r[x]
    yield "r[i] =", lambda x: r.__setitem__(x, None)
    yield "r[0] = v", lambda x: r.__setitem__(0, x)
    yield "read(offset)", lambda x: r.read(x)
    yield "read(length)", lambda x: r.read(0, x)
    yield "write(data)", lambda x: r.write(x)
    yield "write(offset)", lambda x: r.write(b"a", x)
    yield "Sampler(interval)", lambda x: heaplab.Sampler(x).stop()
    yield "Sampler(capacity)", lambda x: heaplab.Sampler(0.01, x).stop()
    yield "series(start)", lambda x: s.series(x)


def test_every_bad_argument_is_a_documented_exception():
    """#15: 40 raw OverflowErrors from cffi, r.write(5) writing five zero bytes,
    Sampler(True) meaning one second, read(0, 2**40) an empty MemoryError.
    Every argument of the API gets every hostile value: what it raises must be
    a documented exception with a message (a value may also be valid)."""
    h = heaplab.Heap()
    r = h.alloc(64, refs=2)
    r.write(b"\x5a" * 64)
    s = heaplab.Sampler(0.01)
    try:
        for name, call in _calls(h, r, s):
            for v in BAD_VALUES:
                try:
                    call(v)
                except OK_EXCEPTIONS as e:
                    assert str(e), f"{name}({v!r}): {type(e).__name__} without a message"
                    assert not isinstance(e, (OverflowError, SystemError)), f"{name}({v!r}): {e!r}"
                except Exception as e:
                    raise AssertionError(f"{name}({v!r}): undocumented {type(e).__name__}: {e}")
        with pytest.raises(TypeError, match="bytes-like"):
            r.write(5)
        with pytest.raises(TypeError, match="interval_s"):
            heaplab.Sampler(True)
        with pytest.raises(IndexError, match="outside a 64-byte payload"):
            r.read(0, 2 ** 40)
        with pytest.raises(IndexError, match="outside"):
            r.read(65)
        # the range's end past 2^64 was said wrapped: "bytes [18446744073709551615, 1)"
        with pytest.raises(IndexError, match=r"^read: 18446744073709551615 bytes at offset 2 "
                                             r"outside a 64-byte payload$"):
            r.read(2, 2 ** 64 - 1)
        with pytest.raises(ValueError, match="errno"):
            h.inject("release", "always", errno=2 ** 31)
        with pytest.raises(ValueError, match="start must be >= 0"):
            s.series(-1)
        assert r.read()[1:] == b"\x5a" * 63   # survived every bad call (write(b"x") was valid)
        h.check()
    finally:
        s.stop()
        h.close()


def test_a_finalizer_making_a_ref_of_finalized_garbage_leaves_the_anchors_whole():
    """A __del__ that calls alloc() (or fill()) on a heap of the same garbage,
    whose anchor's destructor had run: the root made for the new Ref took a
    reference on the retired anchor (a spare), and retired it a second time
    when it went.  The list of live anchors then ran into the spares, and
    every later Heap and Sampler got one and the same anchor: a heap's call
    read a sampler as its hl_heap * (SIGSEGV), and one heap's close() freed
    another's.  The call now raises HeapClosed and takes no reference."""
    p = run_python("""
        import gc, heaplab
        said = []
        class Node:
            def __del__(self):
                for call in (lambda: self.h.alloc(8), lambda: self.h.fill(4096, 64)):
                    try:
                        call()
                        said.append("ok")
                    except heaplab.Error as e:
                        said.append(type(e).__name__)
        def garbage():
            h = heaplab.Heap()        # made first: its anchor is finalized before Node's __del__
            n = Node(); n.h = h; n.me = n
        gc.disable()
        for _ in range(3):
            garbage()
            gc.collect()
        print("said", sorted(set(said)), flush=True)
        anchor = lambda o: int(heaplab.ffi.cast("uintptr_t", o._anchor))
        x, y, s = heaplab.Heap(), heaplab.Heap(), heaplab.Sampler(0.01)
        print("distinct", len({anchor(x), anchor(y), anchor(s)}), flush=True)
        rx, ry = x.alloc(8), y.alloc(64)
        x.close()
        print("y after x.close()", ry.size, y.stats().handles, flush=True)
        s.summary()
        y.close(); s.close()
        print("done", flush=True)
    """)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "said ['HeapClosed']" in p.stdout, p.stdout
    assert "distinct 3" in p.stdout, p.stdout
    assert "y after x.close() 64 1" in p.stdout and "done" in p.stdout, p.stdout


def test_a_finalizer_using_finalized_refs_regions_and_owners_touches_nothing_else():
    """Three siblings of the test above, in a finalizer of garbage whose
    Ref, region, heap or sampler was finalized before it:
    - cffi's finalize of a Ref's root (and a region's) ran the destructor
      and freed the root's memory, which the Ref still pointed at: the
      finalizer's release() then read freed memory -- and dropped the
      handle of a new Ref that had reused it (8 live Refs, 7 handles); a
      region's remove() locked a 'mutex' in malloc's free lists (a hang);
    - close() of the finalized heap (stop() of the sampler) closed whatever
      new heap had reused its anchor since.
    Each is now a no-op: the root's memory lives as long as its Ref, and a
    close() goes only to an anchor of the owner's serial."""
    p = run_python("""
        import gc, heaplab
        h = heaplab.Heap()
        out = []
        class Node:
            def __del__(self):
                if hasattr(self, "r"):
                    fresh = [h.alloc(16) for i in range(8)]
                    for i, f in enumerate(fresh):
                        f.write(b"live %d" % i)
                    self.r.release(); self.r.release()
                    out.append(("refs", [f.released for f in fresh].count(True),
                                h.stats().handles - self.handles_before,
                                [f.read()[:6] for f in fresh] == [b"live %d" % i for i in range(8)]))
                    self.keep = fresh
                if hasattr(self, "reg"):
                    fresh = [h.conservative_region(4) for i in range(8)]
                    self.reg.remove()
                    out.append(("regions", [g.removed for g in fresh].count(True)))
                    for g in fresh:
                        g.remove()
                if hasattr(self, "owner"):
                    h2 = heaplab.Heap()          # takes the spare anchor
                    r2 = h2.alloc(16); r2.write(b"h2 lives")
                    getattr(self.owner, self.how)()
                    out.append((self.how, h2.closed, r2.read()[:8]))
                    h2.close()
        def refs():
            r = h.alloc(8)                       # made before the Node: finalized first
            n = Node(); n.r = r; n.me = n; n.handles_before = h.stats().handles - 1
        def region():
            reg = h.conservative_region(4)
            n = Node(); n.reg = reg; n.me = n
        def owner(make, how):
            o = make()
            n = Node(); n.owner = o; n.how = how; n.me = n
        gc.disable()
        for make in (refs, region, lambda: owner(heaplab.Heap, "close"),
                     lambda: owner(lambda: heaplab.Sampler(0.01), "stop")):
            make()
            gc.collect()
        for o in out:
            print(o)
        h.check()
        print("done")
    """, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "('refs', 0, 8, True)" in p.stdout, p.stdout
    assert "('regions', 0)" in p.stdout, p.stdout
    assert "('close', False, b'h2 lives')" in p.stdout, p.stdout
    assert "('stop', False, b'h2 lives')" in p.stdout, p.stdout
    assert "done" in p.stdout


@pytest.mark.shares_the_machine  # a race hunt (40,000 rounds, ~10 s): no wait bounded, nothing sampled
def test_a_ref_released_by_another_thread_mid_call_is_stale():
    """A Ref's methods checked the handle, then read it again for the call:
    a release() by another thread in between passed 0 to the library, whose
    'handle is null' was an InvalidArgument (3 of 3,000 rounds).  The
    handle is read once; released meanwhile, it is stale there: StaleRef.
    (The mutant ref-handle-read-twice fails at round 344-3,776 of 5 runs:
    40,000 rounds here.  Under AddressSanitizer, make test-python-asan, which
    runs alone -- 13 s of its 44 s -- 10,000 rounds: what is checked there is
    the memory of a release beside the calls; the plain run hunts the race.)"""
    import threading
    h = heaplab.Heap()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    bad = []
    rounds = 10000 if "libasan" in os.environ.get("LD_PRELOAD", "") else 40000
    try:
        for _ in range(rounds):
            r = h.alloc(64)
            t = threading.Thread(target=r.release)
            t.start()
            for op in (r.read, r.checksum, lambda: r.size, r.dup, lambda: r.write(b"x"),
                       lambda: r[0] if len(r) else None, r.__hash__):
                try:
                    x = op()
                    if isinstance(x, heaplab.Ref):
                        x.release()
                except heaplab.StaleRef:
                    pass
                except heaplab.Error as e:
                    bad.append(f"{type(e).__name__}: {e}")
            t.join()
            if bad:
                break
    finally:
        sys.setswitchinterval(old)
        h.close()
    assert not bad, bad[:3]


def test_effective_options_say_the_reservation_the_heap_got():
    """The option hunt, session 31: under RLIMIT_AS 8 GiB, Heap(reserve_bytes=64g)
    had h.options["reserve_bytes"] 68719476736 while stats().reserved_bytes and
    range() said 4,286,185,472 -- h.options is "the effective options"."""
    import resource
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer's shadow memory needs more address space than 8 GiB")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    p = run_python("""
        import heaplab
        h = heaplab.Heap(reserve_bytes=64 << 30)
        got = h.stats().reserved_bytes
        assert got < 8 << 30 and h.range()[1] == got, (got, h.range())
        assert h.options["reserve_bytes"] == got, (h.options["reserve_bytes"], got)
        print("ok", got)
    """, preexec=limit)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    with heaplab.Heap(reserve_bytes=(4 << 20) + 1, generational=True, young_bytes="64k") as h:
        assert h.options["reserve_bytes"] == h.stats().reserved_bytes == 4 << 20, h.options
        assert h.options["young_min_bytes"] == h.options["young_bytes"] == 65536, h.options
        with heaplab.Heap(**h.options) as again:   # the effective options make the heap again
            assert again.options == h.options
