"""Defects a hostile user of the Python API found (session 11): errors that
named the wrong state, objects whose __init__ was skipped.  Each test failed
before its fix (the commit that added it says how that was checked)."""
import subprocess
import sys
import textwrap

import heaplab


def run_python(code, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


# ---- which state a Ref (or a region, a heap) is in --------------------------------------------

def test_errors_name_the_state_of_a_ref_and_its_heap():
    """Released by the program, heap closed by the program: each error says so."""
    h = heaplab.Heap()
    r = h.alloc(16)
    r.release()
    try:
        r.read()
        raise AssertionError("a released Ref was read")
    except heaplab.StaleRef as e:
        assert "was released" in str(e) and "finalized" not in str(e), e
    assert repr(r) == "<heaplab.Ref released>"
    kept = h.alloc(16)
    region = h.conservative_region(2)
    h.close()
    for call in (kept.read, lambda: region[0]):
        try:
            call()
            raise AssertionError("a Ref of a closed heap was read")
        except heaplab.HeapClosed as e:
            assert "is closed" in str(e) and "finalized" not in str(e), e
    assert repr(kept) == "<heaplab.Ref of a closed heap>"
    assert repr(region) == "<heaplab.ConservativeRegion of a closed heap>"


def test_a_ref_finalized_by_a_garbage_collection_is_not_called_released():
    """A finalizer (__del__) of garbage that holds a Ref, a region or their
    heap may run after cffi dropped their roots -- the Ref said 'this Ref was
    released' (and the region 'was removed', the heap 'is closed'): none of
    which the program did.  Each now says it was finalized by a garbage
    collection.  The three orders: the Ref and region made before the holder
    (their destructors run first), the heap before the holder and they after
    it (the heap's runs first), all after the holder (the holder's first)."""
    p = run_python("""
        import gc, heaplab
        seen = set()
        class Holder:
            def __init__(self):
                self.me = self               # a cycle: only gc.collect() frees it
            def __del__(self):
                for name, call in (("read", lambda: self.r.read()),
                                   ("region", lambda: self.g[0]),
                                   ("stats", lambda: self.h.stats()),
                                   ("summary", lambda: self.s.summary())):
                    try:
                        call()
                        out = "ok"
                    except heaplab.Error as e:
                        out = type(e).__name__ + ": " + str(e)
                    seen.add((name, out))
                seen.add(("repr", repr(self.r)))
                seen.add(("repr", repr(self.g)))
        def refs_first():
            h = heaplab.Heap(); s = heaplab.Sampler(0.01)
            r = h.alloc(16); g = h.conservative_region(2)
            k = Holder(); k.h, k.s, k.r, k.g = h, s, r, g
        def heap_first():
            h = heaplab.Heap(); s = heaplab.Sampler(0.01)
            k = Holder(); k.h, k.s = h, s
            k.r = h.alloc(16); k.g = h.conservative_region(2)
        def holder_first():
            k = Holder()
            k.h = heaplab.Heap(); k.s = heaplab.Sampler(0.01)
            k.r = k.h.alloc(16); k.g = k.h.conservative_region(2)
        for make in (refs_first, heap_first, holder_first):
            make()
            gc.collect()
        for s in sorted(seen):
            print(repr(s))
    """)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    seen = [eval(line) for line in p.stdout.splitlines()]
    errors = {out for name, out in seen if name != "repr" and out != "ok"}
    assert errors, p.stdout
    for out in errors:
        assert "finalized by a garbage collection" in out, p.stdout
        assert "released" not in out.split(":", 1)[1].replace("not released", ""), p.stdout
    assert ("read", "StaleRef: this Ref was finalized by a garbage collection: it is garbage, "
            "and its root was dropped before this finalizer of the same garbage used it (it "
            "was not released)") in seen, p.stdout
    assert any(n == "read" and o.startswith("HeapClosed: the heap was finalized") for n, o in seen)
    assert any(n == "region" and o.startswith("StaleRef: this region was finalized")
               for n, o in seen), p.stdout
    assert any(n == "summary" and o.startswith("Error: the sampler was finalized")
               for n, o in seen), p.stdout
    reprs = {out for name, out in seen if name == "repr"}
    assert "<heaplab.Ref finalized>" in reprs and "<heaplab.ConservativeRegion finalized>" in reprs
    assert not any("released" in o or "removed" in o or "closed" in o for o in reprs), reprs
