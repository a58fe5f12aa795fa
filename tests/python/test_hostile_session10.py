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


# ---- fork() from a process whose threads use the heap -----------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_close_in_a_fork_child_while_another_thread_was_in_a_call():
    """The child of a fork taken while another thread was inside a call of
    the heap (here a churn) inherited the count of calls in flight; the
    thread that would have finished that call stayed in the parent, so
    close() in the child waited for it forever."""
    p = run_python("""
        import faulthandler, heaplab, os, threading, time
        h = heaplab.Heap(collector="background")
        keep = h.alloc(16)
        keep.write(b"k" * 16)
        t = threading.Thread(target=h.churn, args=(1.5, 64, 1 << 20))
        t.start()
        while not h._calls:       # the churn is in flight
            time.sleep(0.001)
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(20, exit=True)
            assert keep.read() == b"k" * 16
            h.alloc(64).release()
            h.close()
            os._exit(0 if h.closed else 1)
        _, status = os.waitpid(pid, 0)
        t.join()
        assert keep.read() == b"k" * 16
        h.close()
        print("child", status)
    """)
    assert p.returncode == 0 and p.stdout.strip() == "child 0", (p.stdout, p.stderr[-2000:])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_beside_a_thread_that_holds_the_owner_lock():
    """A Ref's release, a region's word access and close() hold the heap's
    owner lock (owners.c) inside C, the GIL released; a fork taken meanwhile
    gave the child a lock held by a thread it does not have, and its next
    release, region access or close waited forever (7 children of 20 here;
    one fork in forty beside threads that only release Refs)."""
    p = run_python("""
        import faulthandler, heaplab, os, threading
        h = heaplab.Heap()
        region = h.conservative_region(4 << 20)   # scrub() holds the lock a while
        stop = threading.Event()
        def scrubs():
            while not stop.is_set():
                region.scrub()
        t = threading.Thread(target=scrubs)
        t.start()
        hung = 0
        for i in range(20):
            mine = h.alloc(8)
            pid = os.fork()
            if pid == 0:
                faulthandler.dump_traceback_later(5, exit=True)
                mine.release()
                region.scrub()
                h.close()
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            hung += status != 0
        stop.set()
        t.join()
        h.close()
        print("hung", hung)
    """, timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "hung 0", (p.stdout, p.stderr[-2000:])


# ---- objects that owned a handle or a heap twice ----------------------------------------

def test_a_ref_cannot_be_made_from_a_raw_handle():
    """heaplab.Ref(heap, handle) was callable: it made a second owner of the
    handle, and when it died it released the first Ref's root -- the object
    was left to the next collection while its Ref still existed."""
    with heaplab.Heap() as h:
        a = h.alloc(32)
        a.write(b"a" * 32)
        for args in ((h, a._ref), (h, 12345), (h, -1), (None, 0), ()):
            with pytest.raises(TypeError, match="made by the heap"):
                heaplab.Ref(*args)
        h.collect(major=True)
        assert a.read() == b"a" * 32 and not a.released


@pytest.mark.parametrize("make", [heaplab.Heap, lambda: heaplab.Sampler(0.01)],
                         ids=["Heap", "Sampler"])
def test_init_twice_is_refused_and_the_first_object_lives_on(make):
    """h.__init__() on a live heap made a new C heap and dropped the old one
    under its Refs: they then raised 'belongs to another heap' (their object
    was gone); a Sampler's thread was replaced the same way."""
    owner = make()
    try:
        with pytest.raises(TypeError, match="initialised twice"):
            owner.__init__()
        assert not owner.closed
        if isinstance(owner, heaplab.Heap):
            b = owner.alloc(16)
            b.write(b"b" * 16)
            warm = owner.options["warm_pages"]
            with pytest.raises(TypeError, match="initialised twice"):
                owner.__init__(warm_pages=warm + 1)
            assert b.read() == b"b" * 16 and owner.options["warm_pages"] == warm
        else:
            owner.mark()
            assert owner.summary()["samples"] >= 1
    finally:
        owner.close()


# ---- names that C reads differently --------------------------------------------------------

def test_a_nul_inside_an_option_name_or_a_fault_spec_is_refused():
    """C reads a string up to its first NUL: Heap(**{'warm_pages\\0junk': 5})
    set warm_pages, and inject('release\\0junk', 'off\\0x', 0, 'ENOMEM\\0x')
    armed the fault -- bad input accepted without a word."""
    with pytest.raises(heaplab.UnknownOption, match=r"warm_pages\\x00junk"):
        heaplab.Heap(**{"warm_pages\0junk": 5})
    with heaplab.Heap() as h:
        for args, what in (((("release\0junk", "always")), "site"),
                           (("release", "always\0x"), "mode"),
                           (("release", "always", 0, "ENOMEM\0x"), "errno")):
            with pytest.raises(ValueError, match=rf"inject: {what} .*NUL"):
                h.inject(*args)
        assert h.faults["release"]["mode"] == "off"


def test_a_name_that_is_not_utf8_gives_the_library_error():
    """An option name or fault site with a lone surrogate raised
    UnicodeDecodeError (the message quoting it could not be decoded) or
    UnicodeEncodeError instead of the error naming it."""
    with pytest.raises(heaplab.UnknownOption, match="unknown option"):
        heaplab.Heap(**{"warm_pages\udcff": 1})
    with heaplab.Heap() as h:
        with pytest.raises(heaplab.InvalidArgument, match="site"):
            h.inject("release\udcff", "always")
        with pytest.raises(heaplab.InvalidArgument, match="mode"):
            h.inject("release", "\udcffalways")


# ---- integers that are not int, booleans that are not bool ---------------------------------

class Index:
    """An integer type that is not int: what operator.index takes (numpy's are)."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def test_integers_of_other_types_are_taken_as_integers():
    """h.alloc(np.int64(8)), r[np.int64(0)], Heap(warm_pages=np.int64(5)):
    'size must be an int, not int64' -- integer types with __index__ are
    integers to range() and list indexing, and were refused here."""
    h = heaplab.Heap(warm_pages=Index(5))
    try:
        assert h.options["warm_pages"] == 5
        r = h.alloc(Index(8), refs=Index(2))
        r[Index(1)] = r
        assert r[Index(-1)] == r and r.size == 8
        assert r.read(Index(2), Index(3)) == b"\0" * 3
        h.collect(cycles=Index(2))
        h.inject("release", "first", Index(1), errno=Index(12))
        assert h.faults["release"]["errno"] == "ENOMEM"
        with h.conservative_region(Index(2)) as region:
            region[Index(0)] = Index(7)
            assert region.words() == [7, 0]
        with pytest.raises(ValueError, match="size must be >= 0"):
            h.alloc(Index(-1))
    finally:
        h.close()


def test_numpy_scalars_are_numbers_and_numpy_booleans_are_booleans():
    np = pytest.importorskip("numpy")
    h = heaplab.Heap(warm_pages=np.int64(5), page_release=np.bool_(False))
    try:
        assert h.options["warm_pages"] == 5 and h.options["page_release"] is False
        r = h.alloc(np.uint16(8), refs=np.int8(2))
        r[np.int64(0)] = r
        h.collect(major=np.bool_(True))
        assert h.churn(np.float32(0.001), np.int64(64), np.uint32(1024)).allocations > 0
        # what each refuses names numpy's type: 'got a bool' for np.bool_ was
        # no help beside Python's bool
        with pytest.raises(TypeError, match="numpy.bool"):
            h.alloc(np.bool_(True))
        with pytest.raises(TypeError, match="numpy.float64"):
            h.alloc(np.float64(8))
        with pytest.raises(TypeError, match="warm_pages"):
            heaplab.Heap(warm_pages=np.float32(2))
        # a numpy number has a buffer: write(np.int64(5)) wrote its 8 bytes
        for number in (np.int64(5), np.float32(1), np.bool_(True)):
            with pytest.raises(TypeError, match="bytes-like"):
                r.write(number)
        r.write(np.frombuffer(b"abc", dtype=np.uint8))
        assert r.read(0, 3) == b"abc"
    finally:
        h.close()


def test_boolean_flags_refuse_other_values():
    """events(clear='no') cleared the ring (any truthy value did),
    collect(major=1.0) forced a major sweep."""
    with heaplab.Heap() as h:
        h.collect()
        for clear in ("no", 0, None, 1.0):
            with pytest.raises(TypeError, match="clear must be True or False"):
                h.events(clear=clear)
        assert h.events(clear=False), "a refused call consumed the events"
        for major in (1.0, 0, 1, "yes"):
            with pytest.raises(TypeError, match="major must be None, True or False"):
                h.collect(major=major)


# ---- finalizers of the garbage a heap is part of --------------------------------------------

def test_a_finalizer_that_uses_a_heap_collected_with_it():
    """cffi runs the heap owner's destructor in the finalize phase of a
    garbage collection, in no order with the other finalizers of the same
    garbage: a __del__ of an object that held the heap (or a Sampler) ran
    after its C object was freed -- 'objects need a collected heap (this one
    is manual)' read from freed memory, then 'corrupted double-linked list'
    (abort) from a plain gc.collect().  Such a call now raises HeapClosed
    (the sampler's 'stopped')."""
    p = run_python("""
        import gc, heaplab
        outcomes = {}
        class Holder:
            def __init__(self, h, s):
                self.me = self               # a cycle: only gc.collect() frees it
                self.h, self.s, self.r = h, s, h.alloc(16, refs=1)
            def __del__(self):
                for name, call in (("alloc", lambda: self.h.alloc(8)),
                                   ("fill", lambda: self.h.fill(1 << 20, 64)),
                                   ("read", lambda: self.r.read()),
                                   ("stats", lambda: self.h.stats()),
                                   ("summary", lambda: self.s.summary())):
                    try:
                        call()
                        out = "ok"
                    except heaplab.Error as e:
                        out = type(e).__name__
                    outcomes.setdefault(name, set()).add(out)
        def make():
            Holder(heaplab.Heap(), heaplab.Sampler(0.01))   # made before the holder
        for i in range(30):
            make()
            gc.collect()
        print(sorted((k, sorted(v)) for k, v in outcomes.items()))
    """)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    outcomes = dict(eval(p.stdout))
    assert set(outcomes) == {"alloc", "fill", "read", "stats", "summary"}, p.stdout
    for name, seen in outcomes.items():
        assert set(seen) <= {"ok", "HeapClosed", "StaleRef", "Error"}, (name, seen)
    assert "HeapClosed" in outcomes["alloc"], p.stdout   # the case that read freed memory
