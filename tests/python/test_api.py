"""The whole Python API surface of DESIGN.md section 2, against the real library."""
import re
import threading
import time

import pytest

import heaplab


def test_module_level_declarations_come_from_c():
    opts = heaplab.options()
    assert opts["page_size"]["default"] == 65536
    assert opts["reuse_failed_order"]["choices"] == ["fifo", "lifo"]
    assert opts["page_release"]["default"] is True
    assert "released_pages" in heaplab.stat_names()
    assert "restore" in heaplab.fault_sites() and "sticky" in heaplab.fault_modes()
    assert heaplab.MAX_REFS == 1 << 24 and heaplab.MAX_SIZE == 1 << 40


def test_footprint():
    f = heaplab.footprint()
    assert isinstance(f, heaplab.Footprint)
    assert f.rss > 0 and f.phys_footprint == f.anonymous + f.swap


def test_options_and_repr():
    with heaplab.Heap(warm_pages=8, reuse_failed_order="lifo", page_release=False,
                      reserve_bytes="1g") as h:
        o = h.options
        assert o["warm_pages"] == 8 and o["reuse_failed_order"] == "lifo"
        assert o["page_release"] is False and o["reserve_bytes"] == 1 << 30
        assert o["page_size"] == 65536
        assert "collected" in repr(h)
    assert "closed" in repr(h)


def _repr_pages(h):
    """repr(h)'s pages and its parts by state: {name: count}."""
    m = re.search(r"pages=(\d+) \(([^)]*)\)", repr(h))
    assert m, repr(h)
    return int(m.group(1)), {k: int(v) for k, v in (p.split("=") for p in m.group(2).split())}


def test_repr_counts_every_page():
    # the pages by state add up to the total: the repr said pages=144 free=0
    # released=0 while 139 were retired (and 5 owned)
    pools = dict(owned="owned_pages", retired="retired_pool_pages", partial="partial_pool_pages",
                 free="free_pool_pages", released="released_pool_pages",
                 reuse_failed="reuse_failed_pool_pages", in_flight="in_flight_pages")

    def check(h):
        total, parts = _repr_pages(h)
        s = h.stats()
        assert total == s.total_pages and sum(parts.values()) == total, repr(h)
        for name, stat in pools.items():
            if name in ("reuse_failed", "in_flight") and not getattr(s, stat):
                assert name not in parts, repr(h)
            else:
                assert parts[name] == getattr(s, stat), (name, repr(h))
        return s

    with heaplab.Heap(warm_pages=0) as h:
        r = h.fill(4 << 20, 256)
        assert check(h).retired_pool_pages > 0
        r.release()
        h.collect(cycles=2)
        h.trim()
        assert check(h).released_pool_pages > 0
        h.inject("restore", "always", errno="EIO")
        r = h.fill(4 << 20, 256)
        assert check(h).reuse_failed_pool_pages > 0
        r.release()


def test_environment_overrides_defaults_not_arguments(monkeypatch):
    monkeypatch.setenv("HEAPLAB_WARM_PAGES", "3")
    with heaplab.Heap() as h:
        assert h.options["warm_pages"] == 3
    with heaplab.Heap(warm_pages=5) as h:
        assert h.options["warm_pages"] == 5
    monkeypatch.setenv("HEAPLAB_WARM_PAGES", "lots")
    with pytest.raises(ValueError, match="HEAPLAB_WARM_PAGES"):
        heaplab.Heap()


def test_alloc_slots_and_payload(heap):
    o = heap.alloc(100, refs=3)
    assert len(o) == 3 and o.size == 100 and o.address > 0 and not o.large
    assert list(o) == [None, None, None]
    child = heap.alloc(8)
    o[0] = child
    o[-1] = child
    assert o[0] == child and o[2] == child and o[1] is None
    o.write(b"hello", offset=10)
    assert o.read(10, 5) == b"hello"
    o[2] = None
    assert o[2] is None
    big = heap.alloc(1 << 20, refs=1)
    assert big.large and big.size == 1 << 20
    assert "size=100" in repr(o)


def test_fill_groups_objects_by_page(heap):
    r = heap.fill(4 << 20, 256)
    pages = len(r)
    assert pages >= (4 << 20) // 65536
    total, n = r.checksum()
    assert n > (4 << 20) // 256
    r[0] = None                      # drop the first page's objects
    heap.collect(major=True)
    assert r.checksum()[1] < n
    assert heap.stats().free_pool_pages + heap.stats().released_pool_pages >= 1


def test_roots_keep_objects_and_dropping_the_last_makes_them_collectable(heap):
    a = heap.alloc(64, refs=1)
    a.write(b"x" * 64)
    b = a.dup()
    a.release()
    heap.collect(cycles=2, major=True)
    assert b.read() == b"x" * 64           # a second root kept it
    live = heap.stats().small_live_bytes
    b.release()
    heap.collect(major=True)
    assert heap.stats().small_live_bytes < live


def test_slots_keep_targets_alive(heap):
    parent = heap.alloc(0, refs=1)
    child = heap.alloc(32)
    child.write(b"k" * 32)
    parent[0] = child
    del child
    heap.collect(cycles=3, major=True)
    assert parent[0].read() == b"k" * 32


def test_generational_heap_keeps_young_children_of_old_objects():
    """Slot stores from Python go through the write barrier: a young object
    whose only reference is in an old one survives the minor cycles that
    allocation runs, and those cycles free the young garbage."""
    with heaplab.Heap(generational=True, young_bytes="64k", verify=True) as h:
        old = h.alloc(0, refs=8)
        h.collect()  # old is old now
        for i in range(8):
            kid = h.alloc(16)
            kid.write(bytes([i]) * 16)
            old[i] = kid
            del kid
            for _ in range(2000):  # garbage: minor cycles run in here
                h.alloc(48).release()
        s = h.stats()
        assert s.minor_cycles >= 8 and s.verify_failures == 0
        assert s.objects_freed >= 15000
        assert [old[i].read() for i in range(8)] == [bytes([i]) * 16 for i in range(8)]
        assert any(e.minor for e in h.events() if e.kind == "cycle")


def test_del_and_context_manager_release_roots(heap):
    before = heap.stats().handles
    with heap.alloc(8) as r:
        assert heap.stats().handles == before + 1
    assert r.released and heap.stats().handles == before
    r2 = heap.alloc(8)
    del r2
    assert heap.stats().handles == before


def test_collect_and_stats(heap):
    r = heap.fill(8 << 20, 128)
    r.release()
    heap.collect(cycles=3)
    s = heap.stats()
    assert s.cycles >= 3 and s.major_sweeps >= 1 and s.objects_freed > 0
    d = s.as_dict()
    assert set(d) == set(heaplab.stat_names())
    assert d["cycles"] == s.cycles
    with pytest.raises(AttributeError):
        s.nope
    with pytest.raises(AttributeError):
        s.cycles = 3


def test_events_are_structured_and_consumed(heap):
    heap.events()                      # drop the creation event
    r = heap.fill(8 << 20, 256)
    r.release()
    heap.collect(cycles=2)
    ev = heap.events()
    kinds = {e.kind for e in ev}
    assert {"cycle", "trim"} <= kinds
    trim = [e for e in ev if e.kind == "trim"][0]
    assert trim.released >= 0 and "calls" in trim.as_dict()
    assert heap.events() == []         # consumed
    heap.collect()
    assert heap.events(clear=False) and heap.events(clear=False)


def test_resident_bytes_and_vma_count(heap):
    r = heap.fill(16 << 20, 256)
    assert heap.resident_bytes() >= 16 << 20
    assert heap.vma_count() == 1
    base, size = heap.range()
    assert base > 0 and size >= 1 << 30
    r.release()
    heap.collect(cycles=3)
    assert heap.resident_bytes() <= heap.options["warm_pages"] * 65536 + (1 << 20)


def test_inject_and_faults(heap):
    heap.inject("restore", "always", errno="EIO")
    f = heap.faults
    assert f["restore"]["mode"] == "always" and f["restore"]["errno"] == "EIO"
    heap.inject("release", "first", 3, errno=12)
    assert heap.faults["release"]["n"] == 3 and heap.faults["release"]["errno"] == "ENOMEM"
    r = heap.fill(8 << 20, 256)
    r.release()
    heap.collect(cycles=3)
    assert heap.faults["release"]["fired"] >= 1
    assert heap.stats().faults_fired >= 1
    heap.inject("release", "off")
    assert heap.faults["release"]["mode"] == "off"


def test_trim_check_and_pressure(heap):
    heap.check()
    heap.memory_pressure()
    heap.collect()
    assert heap.stats().major_pressure == 1
    heap.trim()


def test_churn_returns_what_it_did(heap):
    res = heap.churn(0.2, 4096, 1 << 20)
    assert isinstance(res, heaplab.ChurnResult)
    assert res.allocations > 0 and res.allocated_bytes == res.allocations * 4096
    assert res.elapsed_ns >= 0.2e9
    slow = heap.churn(0.2, 4096, 1 << 20, rate_bytes_per_s=4 << 20)
    assert slow.allocated_bytes <= 1.3 * 0.2 * (4 << 20) + 4096


def test_close_is_idempotent_and_invalidates(heap):
    r = heap.alloc(8, refs=1)
    heap.close()
    heap.close()
    assert heap.closed
    with pytest.raises(heaplab.HeapClosed):
        heap.alloc(8)
    with pytest.raises(heaplab.HeapClosed):
        r[0]
    with pytest.raises(heaplab.Error):
        r.size
    r.release()                         # a no-op now, not an error
    with pytest.raises(heaplab.HeapClosed):
        with heap:
            pass


def test_bulk_calls_release_the_gil(heap):
    """A C bulk call runs while another Python thread keeps running."""
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    before = ticks
    heap.churn(0.5, 256, 1 << 20)
    during = ticks - before
    stop.set()
    t.join()
    # with the GIL held for 0.5 s the other thread could not have counted
    assert during > 10000


def test_sampler_records_peak_and_low_after_mark():
    with heaplab.Sampler(interval_s=0.001) as s:
        h = heaplab.Heap()
        r = h.fill(64 << 20, 256)
        s.mark()
        r.release()
        h.collect(cycles=4)
        summ = s.summary()
        assert summ["max_phys"] - summ["min_phys_after_mark"] >= 50 << 20
        series = s.series()
        assert len(series) >= 2 and series[0][0] <= series[-1][0]
        h.close()


def test_recorder_set_interval_keeps_the_earlier_series():
    """An arm that changes its sampling interval (E6 at the map limit) keeps
    what the first sampler recorded: the series starts at the arm's start."""
    from heaplab.harness import Recorder
    rec = Recorder("T", "arm", interval_s=0.001)
    first = rec.series()
    assert first, "a sampler takes a sample when it starts"
    rec.set_interval(0.1)
    later = rec.series()
    assert later[:len(first)] == first and len(later) > len(first)
    assert later[0][0] == first[0][0] and all(a[0] <= b[0] for a, b in zip(later, later[1:]))
    rec.sampler.stop()


def test_huge_pages_option_stats_footprint_and_events():
    """thp (issue 19): the option's choices, the footprint's AnonHugePages,
    the chunk counters and the thp_split event, from Python."""
    opt = heaplab.options()["thp"]
    assert opt["choices"] == ["never", "madvise", "populate"]
    assert opt["default"] in opt["choices"] and "measured" in opt["description"]
    for name in ("thp_enabled", "thp_errno", "thp_chunks_released", "thp_splits",
                 "thp_subpage_splits", "thp_populated_chunks", "thp_populate_refused"):
        assert name in heaplab.stat_names()
    f0 = heaplab.footprint()
    assert 0 <= f0.anon_huge <= f0.anonymous
    with heaplab.Heap(thp="madvise", warm_pages=0, warm_demand_trims=0,
                      release_per_sweep=1 << 20) as h:
        assert h.options["thp"] == "madvise"
        r = h.fill(32 << 20, 256)
        st = h.stats()
        assert st.thp_disabled == 0
        if st.thp_enabled:
            assert heaplab.footprint().anon_huge - f0.anon_huge >= 24 << 20
        else:
            assert st.thp_errno != 0
        for i in range(0, len(r), 2):   # every other page's objects: chunks released in part
            r[i] = None
        h.events()
        h.collect(cycles=2, major=True)
        st = h.stats()
        splits = [e for e in h.events() if e.kind == "thp_split"]
        assert st.thp_splits >= 8 and len(splits) == st.thp_splits
        assert all(e.fields["released_pages"] >= 1 and e.fields["pages_in_use"] >= 1
                   and e.fields["released_bytes"] == e.fields["released_pages"] << 16
                   for e in splits)
        assert st.thp_subpage_splits == 0
        assert st.thp_chunks_released == 0
        r.release()
        h.collect(cycles=2, major=True)
        assert h.stats().thp_chunks_released >= 14
        h.check()
    # sub-page release inside huge chunks splits them too: counted and told
    with heaplab.Heap(thp="madvise", subpage_release=True, warm_pages=0,
                      warm_demand_trims=0) as h:
        r = h.fill(8 << 20, 248, stride=64)   # four live objects a page, none empty
        h.events()
        h.collect(cycles=2, major=True)
        st = h.stats()
        splits = [e for e in h.events() if e.kind == "thp_split"]
        assert st.subpage_released_bytes >= 4 << 20 and st.released_pages == 0
        assert st.thp_splits >= 4 and st.thp_subpage_splits == st.thp_splits == len(splits)
        assert all(e.fields["released_pages"] == 0 and e.fields["released_bytes"] >= 4096
                   for e in splits)
        assert sum(e.fields["released_bytes"] for e in splits) == st.subpage_released_bytes
        h.check()
    with heaplab.Heap(thp="never") as h:
        st = h.stats()
        assert st.thp_disabled == 1 and st.thp_enabled == 0


def test_a_ref_of_a_closed_heap_is_released():
    """Ref.released says whether the Ref roots anything any more: after its
    heap's close() it does not (it said False; the Lua binding's o:released()
    says true, session 28's cross-binding fix)."""
    h = heaplab.Heap()
    r = h.alloc(8)
    assert not r.released
    h.close()
    assert r.released
    with pytest.raises(heaplab.HeapClosed):
        r.read()
