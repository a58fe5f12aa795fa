"""Ref ==, hash() and `with` on a Ref whose heap is gone (closed, or freed by
its destructor in a garbage collection), session 33: a released Ref, or one
of a closed heap, is equal only to itself and hashes as id(itself)."""
import gc

import pytest

import heaplab


def _in_a_finalizer(check):
    """check(a, b) run by a __del__ of garbage that holds the heap and two of
    its Refs: cffi may free the heap (its anchor's destructor) before it."""
    out = []

    class Holder:
        def __del__(self):
            try:
                out.append(check(self.a, self.b))
            except Exception as e:   # (an exception in __del__ is only printed)
                out.append(e)

    for _ in range(5):
        h = heaplab.Heap(reserve_bytes=64 << 20)
        k = Holder()
        k.h, k.a, k.b, k.me = h, h.alloc(8), h.alloc(8), k
        del h, k
        gc.collect()
    return out


def test_refs_compare_in_a_finalizer_of_the_heaps_garbage():
    # == read the flag `closed` (not yet set: the heap was freed by its
    # destructor) and called the heap: HeapClosed ("was finalized ...")
    out = _in_a_finalizer(lambda a, b: (a == b, a == a, a != b, a in [b]))
    assert out and all(r == (False, True, True, False) for r in out), out


def test_refs_hash_in_a_finalizer_of_the_heaps_garbage():
    # hash() raised HeapClosed there the same way
    out = _in_a_finalizer(lambda a, b: (hash(a) == id(a), hash(b) == id(b)))
    assert out and all(r == (True, True) for r in out), out


def test_a_close_between_the_check_and_the_call(monkeypatch):
    # a close() in another thread after == / hash() looked at the heap and
    # before their call: HeapClosed escaped from == and hash()
    h, h2 = heaplab.Heap(reserve_bytes=64 << 20), heaplab.Heap(reserve_bytes=64 << 20)
    a, b, c = h.alloc(8), h.alloc(8), h2.alloc(8)
    call = heaplab.Heap._call

    def closed_meanwhile(self, fn, *args):
        self.close()
        return call(self, fn, *args)

    monkeypatch.setattr(heaplab.Heap, "_call", closed_meanwhile)
    assert (a == b) is False
    assert h.closed and a == a and a != b
    assert hash(c) == id(c)
    assert h2.closed and hash(c) == id(c)


def test_with_a_ref_of_a_closed_heap_raises_heapclosed():
    # `with ref:` entered a Ref of a closed heap, where `with heap:` and
    # `with region:` raise HeapClosed
    h = heaplab.Heap(reserve_bytes=64 << 20)
    r, region = h.alloc(8), h.conservative_region(1)
    with r as same:
        assert same is r
    r = h.alloc(8)
    h.close()
    with pytest.raises(heaplab.HeapClosed, match="the heap is closed"):
        with h:
            pass
    with pytest.raises(heaplab.HeapClosed):
        with region:
            pass
    with pytest.raises(heaplab.HeapClosed, match="the heap is closed"):
        with r:
            pass
    r.release()
    with pytest.raises(heaplab.StaleRef):
        with r:
            pass
