"""Heap.conservative_region (E7): a root region scanned conservatively, from
Python.  A word holding an object's address keeps the object and what it
refers to; an interior address keeps it with conservative_interior (the
default) and not without; random words keep nothing; scrubbing or removing
the region lets go.  Lifetimes: remove() is idempotent, a region that dies
unregisters itself, a closed heap makes the region refuse (HeapClosed), a
region cannot be copied or pickled; bad input raises a clear error."""
import copy
import gc
import pickle
import random
import sys
import threading

import pytest

import heaplab

MiB = 1 << 20

COLLECTORS = [
    pytest.param({}, id="default"),
    pytest.param({"generational": True}, id="generational"),
    pytest.param({"collector": "background"}, id="background"),
    pytest.param({"mark_threads": 2}, id="mark_threads=2"),
]


def live(h):
    s = h.stats()
    return s.small_live_bytes + s.large_live_bytes


def collect(h):
    h.collect(major=True)
    return h.stats()


@pytest.mark.parametrize("opts", COLLECTORS)
def test_a_stale_word_keeps_a_structure_until_scrubbed(opts):
    with heaplab.Heap(verify=True, **opts) as h:
        region = h.conservative_region(32)
        r = h.fill(4 * MiB, 256)
        region[17] = r
        objects = r.checksum()[1]     # the objects and the fill's index
        r.release()
        s = collect(h)
        assert s.small_live_bytes >= 4 * MiB, "the stale word did not keep the structure"
        assert s.marked_objects == objects   # (the checksum counts the root too)
        h.check()                     # (verify: every free slot still poisoned)
        region.scrub()
        assert region.words() == [0] * 32
        s = collect(h)
        assert live(h) == 0 and s.marked_objects == 0, "scrubbed, something stayed"
        r = h.fill(4 * MiB, 256)
        region[0] = r
        r.release()
        assert collect(h).marked_objects == objects
        region.remove()
        collect(h)
        assert live(h) == 0


@pytest.mark.parametrize("interior", [True, False])
@pytest.mark.parametrize("size", [64, 256 << 10], ids=["small", "large"])
def test_interior_words_follow_the_option(interior, size):
    with heaplab.Heap(conservative_interior=interior, verify=True) as h:
        region = h.conservative_region(4)
        o = h.alloc(size, refs=1)
        child = h.alloc(32)
        o[0] = child
        region[0] = o.address + size - 1   # the payload's last byte: interior
        child.release()
        assert o.large == (size > 1024)
        o.release()
        s = collect(h)
        assert s.marked_objects == (2 if interior else 0), s.marked_objects
        region[1] = 0


def test_object_address_is_what_a_ref_stores():
    with heaplab.Heap(conservative_interior=False) as h:
        region = h.conservative_region(2)
        o = h.alloc(48)
        region[1] = o
        assert region[1] == region[-1] == o._object()
        assert region[1] != o.address   # (the payload is 8 bytes further)
        o.release()
        assert collect(h).marked_objects == 1
        region[1] = None
        assert region[1] == 0
        assert collect(h).marked_objects == 0


def test_random_words_keep_nothing():
    rnd = random.Random(7)
    with heaplab.Heap() as h:
        base, size = h.range()
        r = h.fill(8 * MiB, 256)
        region = h.conservative_region(100_000)
        words = [rnd.getrandbits(64) for _ in range(len(region))]
        region.write(words)
        assert region.words() == words
        r.release()
        s = collect(h)
        inside = sum(base <= w < base + size for w in words)
        if inside == 0:   # (p ~ 2e-4 that one lands in the reservation at all)
            assert s.marked_objects == 0 and live(h) == 0


def test_words_inside_the_heap_keep_what_they_hit():
    """Words at the start of known objects keep exactly those objects."""
    with heaplab.Heap() as h:
        objs = [h.alloc(100) for _ in range(50)]
        region = h.conservative_region(50)
        region.write(objs[::2], start=5)
        for o in objs:
            o.release()
        s = collect(h)
        assert s.marked_objects == 25


def test_write_is_all_or_nothing():
    with heaplab.Heap() as h:
        region = h.conservative_region(4)
        region.write([1, 2, 3, 4])
        with pytest.raises(IndexError, match="do not fit"):
            region.write([9, 9], start=3)
        with pytest.raises(TypeError):
            region.write([5, "x"])
        with pytest.raises(ValueError):
            region.write([5, -1])
        assert region.words() == [1, 2, 3, 4] == list(region)


def test_bad_input_is_a_clear_error():
    with heaplab.Heap() as h, heaplab.Heap() as other:
        region = h.conservative_region(8)
        with pytest.raises(IndexError, match="out of range"):
            region[8] = 1
        with pytest.raises(IndexError, match="out of range"):
            region[-9]
        with pytest.raises(TypeError, match="index must be an int"):
            region["0"] = 1
        with pytest.raises(TypeError, match="index must be an int"):
            region[True]
        with pytest.raises(TypeError, match="not float"):
            region[0] = 1.0
        with pytest.raises(TypeError, match="not bool"):
            region[0] = True
        with pytest.raises(heaplab.InvalidArgument, match="unsigned 64-bit"):
            region[0] = 1 << 64
        with pytest.raises(ValueError, match="unsigned 64-bit"):
            region[0] = -1
        with pytest.raises(heaplab.InvalidArgument, match="own heap"):
            region[0] = other.alloc(8)
        gone = h.alloc(8)
        gone.release()
        with pytest.raises(heaplab.StaleRef):
            region[0] = gone
        with pytest.raises(heaplab.InvalidArgument, match=">= 1"):
            h.conservative_region(0)
        # (one bound, negative or zero: -1 said ">= 0", and 0 was refused)
        with pytest.raises(ValueError, match=r"words must be >= 1, got -1"):
            h.conservative_region(-1)
        with pytest.raises(TypeError, match="must be an int"):
            h.conservative_region(2.0)
        # larger than the heap's reservation: refused before its words are
        # allocated (2^33 asked calloc for 64 GiB; h42left, session 42)
        res = h.stats().reserved_bytes
        for n in (1 << 62, 1 << 33, res // 8 + 1):
            with pytest.raises(heaplab.InvalidArgument) as e:
                h.conservative_region(n)
            assert str(e.value) == (f"conservative_region: a region of {n} words is larger than "
                                    f"the heap's reservation ({res} bytes, reserve_bytes: "
                                    f"{res // 8} words at most)")
        with heaplab.Heap(reserve_bytes=1 << 20) as small:
            with pytest.raises(heaplab.InvalidArgument, match="131073 words is larger"):
                small.conservative_region((1 << 17) + 1)
            with small.conservative_region(1 << 17) as whole:   # (the reservation's words fit)
                assert len(whole) == 1 << 17
        with pytest.raises(TypeError, match="Heap.conservative_region"):
            heaplab.ConservativeRegion()
        region[7] = (1 << 64) - 1
        assert region[7] == (1 << 64) - 1
    with heaplab.Heap(mode="manual") as m:
        with pytest.raises(heaplab.ModeError, match="collected heap"):
            m.conservative_region(4)


def test_removed_and_closed_regions_refuse():
    h = heaplab.Heap()
    region = h.conservative_region(4)
    with region as same:
        assert same is region
        region[0] = 5
    assert region.removed
    region.remove()                      # idempotent
    with pytest.raises(heaplab.StaleRef, match="removed"):
        region[0]
    with pytest.raises(heaplab.StaleRef, match="removed"):
        region.scrub()
    # a store said 'word 0: its Ref was released' -- of an int 1, no Ref at all
    for store in (lambda: region.__setitem__(0, 1), lambda: region.write([1, 2])):
        with pytest.raises(heaplab.StaleRef, match=r"^this region was removed \(remove\(\)"):
            store()
    with pytest.raises(heaplab.StaleRef):
        with region:
            pass
    assert "removed" in repr(region)
    with pytest.raises(heaplab.StaleRef, match="removed"):
        len(region)                      # it said 4 (the Lua binding's #reg raises)
    kept = h.conservative_region(4)
    assert not kept.removed and len(kept) == 4
    h.close()
    assert kept.removed                  # it keeps nothing alive: as the Lua reg:removed()
    with pytest.raises(heaplab.HeapClosed):
        len(kept)
    for op in (lambda: kept[0], lambda: kept.__setitem__(0, 1), kept.scrub, kept.words,
               lambda: h.conservative_region(4)):
        with pytest.raises(heaplab.HeapClosed):
            op()
    assert "closed heap" in repr(kept)
    kept.remove()
    kept.remove()


def test_copy_and_pickle_are_refused():
    with heaplab.Heap() as h:
        region = h.conservative_region(2)
        with pytest.raises(TypeError, match="cannot be copied"):
            copy.copy(region)
        with pytest.raises(TypeError, match="cannot be copied"):
            copy.deepcopy(region)
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(region)


def test_a_region_that_dies_unregisters_itself():
    with heaplab.Heap() as h:
        region = h.conservative_region(4)
        r = h.fill(2 * MiB, 256)
        region[2] = r
        r.release()
        assert collect(h).small_live_bytes >= 2 * MiB
        del region
        gc.collect()
        assert collect(h).marked_objects == 0 and live(h) == 0


def test_heap_and_region_dropped_in_any_order():
    for order in range(3):
        h = heaplab.Heap()
        region = h.conservative_region(16)
        region[0] = h.alloc(16)
        if order == 0:
            del h
            gc.collect()
            region[1] = 1            # the region keeps its heap alive
            del region
        elif order == 1:
            del region
            del h
        else:
            cycle = [h, region]
            cycle.append(cycle)
            del h, region, cycle
        gc.collect()


def test_writes_beside_the_background_collector():
    """A thread rewrites the region while collections run on the collector's
    thread: the objects its words hold stay intact, nothing else stays."""
    with heaplab.Heap(collector="background", verify=True) as h:
        keep = [h.alloc(64) for _ in range(8)]
        for i, o in enumerate(keep):
            o.write(bytes([i]) * 64)
        region = h.conservative_region(64)
        stop = threading.Event()

        def writer():
            rnd = random.Random(3)
            while not stop.is_set():
                region.write([keep[rnd.randrange(8)] if k % 4 == 0 else rnd.getrandbits(64)
                              for k in range(64)])

        t = threading.Thread(target=writer)
        t.start()
        try:
            for _ in range(10):
                h.fill(MiB, 64).release()
                h.collect()
        finally:
            stop.set()
            t.join()
        for i, o in enumerate(keep):
            assert o.read() == bytes([i]) * 64
        h.check()
        region.scrub()
        for o in keep:
            o.release()
        assert collect(h).marked_objects == 0


def sparse_victim(h):
    """A 40-byte object alone on its 4 KiB page (85 slots of 48 bytes), with
    room for it on the half-empty pages after: compact=always moves it at
    the next collection unless something pins it."""
    objs = [h.alloc(40) for _ in range(85 * 4)]
    victim = objs[10]
    victim.write(b"victim payload 1234")
    for o in objs[:85]:
        if o is not victim:
            o.release()
    for o in objs[85::2]:
        o.release()
    return victim, objs[86::2]


def test_a_ref_stored_while_a_cycle_compacts_keeps_its_object():
    """region.write(values) read a Ref's address when it took the value and
    stored it after the iterable was done; region[i] = ref read it, let the
    GIL go, then stored.  A cycle in between (here the iterable's own
    collect(); the same for another thread's collect() or the background
    collector) moved the object, the word held its old address, and the
    object, its Ref released, was freed although the region "held" it.
    The addresses are now read in C with the heap held, as they are stored."""
    opts = dict(verify=True, compact="always", page_size=4096)
    with heaplab.Heap(**opts) as h:
        victim, others = sparse_victim(h)
        region = h.conservative_region(4)

        def values():
            yield victim
            h.collect()      # (compacts: the victim's page is all but empty)
            yield 0

        region.write(values())
        assert h.stats().evacuated_objects > 0, "the scenario compacted nothing"
        assert region[0] == victim._object(), "the word holds the object's old address"
        victim.release()
        h.collect()
        assert h.stats().small_live_bytes >= 48 * 128, "the object the word holds was freed"
        h.check()

    # region[i] = ref: a cycle between the read of the address and the store,
    # as another thread's would run there (a profile hook runs it)
    with heaplab.Heap(**opts) as h:
        victim, others = sparse_victim(h)
        region = h.conservative_region(4)
        fired = []

        def hook(frame, event, arg):
            if (event == "call" and not fired and frame.f_code.co_name == "_do"
                    and frame.f_globals.get("__name__") == "heaplab"):
                fired.append(1)
                h.collect()

        sys.setprofile(hook)
        try:
            region[1] = victim
        finally:
            sys.setprofile(None)
        assert fired and h.stats().evacuated_objects > 0, "the scenario compacted nothing"
        assert region[1] == victim._object(), "the word holds the object's old address"
        live = h.stats().small_live_bytes
        victim.release()
        h.collect()
        assert h.stats().small_live_bytes == live, "the object the word holds was freed"
        h.check()


def test_a_ref_released_before_its_word_is_stored_is_an_error():
    """A Ref's address is read as the words are stored, after the iterable is
    done: a Ref the iterable released after giving it is a clear error naming
    the word, and nothing is stored."""
    with heaplab.Heap(verify=True) as h:
        region = h.conservative_region(4)
        r = h.alloc(8)

        def values():
            yield 1
            yield r
            r.release()
            yield 2

        with pytest.raises(heaplab.StaleRef, match="word 2: its Ref was released"):
            region.write(values(), 1)
        assert region.words() == [0, 0, 0, 0]


CYCLES_BESIDE_MOVES = 300


def test_a_word_moved_within_the_region_beside_collections_is_kept():
    """A region is a stack: its words move.  Moving an object's address from
    the last word to the first (region[0] = region[-1]; region[-1] = None)
    while another thread collects lost the object whenever a mark read word
    0 before the first store and the last word after the second (the words
    are read in order, the stores ran beside the mark).  Stores now hold the
    heap, as every other heap call does: a mark sees the region before a
    store or after it."""
    words = 1 << 20
    with heaplab.Heap(verify=True) as h:
        region = h.conservative_region(words)
        r = h.alloc(40)
        r.write(b"m" * 40)
        region[words - 1] = r
        r.release()
        done = threading.Event()

        def collector():
            try:
                for _ in range(CYCLES_BESIDE_MOVES):
                    h.collect()
            finally:
                done.set()

        t = threading.Thread(target=collector)
        t.start()
        at = words - 1
        try:
            while not done.is_set():
                to = 0 if at else words - 1
                region[to] = region[at]
                region[at] = None
                at = to
        finally:
            done.set()
            t.join()
        h.collect()
        assert h.stats().small_live_bytes == 48, "the object the region holds was freed"
        assert region[at] and not region[words - 1 - at]
        h.check()


def test_a_closed_heaps_ref_stored_in_a_slot_says_its_heap_is_closed():
    # (it said "belongs to another heap": true, and not why it cannot be)
    with heaplab.Heap(reserve_bytes=64 << 20) as h:
        o = h.alloc(8, 1)
        other = heaplab.Heap(reserve_bytes=64 << 20)
        x = other.alloc(8)
        other.close()
        with pytest.raises(heaplab.HeapClosed, match="its heap is closed"):
            o[0] = x
        stranger = heaplab.Heap(reserve_bytes=64 << 20)
        try:
            with pytest.raises(heaplab.InvalidArgument, match="another heap"):
                o[0] = stranger.alloc(8)
        finally:
            stranger.close()
