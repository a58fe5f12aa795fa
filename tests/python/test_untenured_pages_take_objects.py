"""A page that was tenured takes objects again once a whole mark untenures it.

Tenured pages take no new objects (their holes, up to 1/8 of a page, wait).
A whole mark -- collect(), or every tenure_full_marks-th full mark --
untenures every page, but left them off their class's avail list, so their
holes took nothing until a major sweep swept the page: after a collect()
without a major sweep (major=False, or a cycle the policy did not make major)
allocation carved or took other pages while the holes of every page that had
been tenured stayed empty.  The same program with tenure_full_marks=0 (no
tenuring) fills the holes first: the control."""
import pytest

import heaplab

OPTIONS = dict(verify=True, page_size=4096, small_max=1024, warm_pages=2,
               gc_trigger_bytes="256k", gc_trigger_min_bytes="64k", gc_trigger_max_bytes="1m",
               full_growth_ratio=1000, gc_growth_ratio=0,
               quiet_bytes=0, major_backstop_cycles=0)   # no major sweep unless asked


def pages_taken_by_refill(tenure_full_marks, major):
    h = heaplab.Heap(tenure_full_marks=tenure_full_marks, **OPTIONS)
    try:
        objs = [h.alloc(40, refs=1) for _ in range(2000)]   # dense pages of one class
        holes = 0
        for i in range(0, 2000, 16):                         # 1/16 die: pages stay >= 7/8 live
            objs[i].release()
            holes += 1
        h.collect(major=True)                                # frees them: the holes
        for _ in range(8):                                   # cycles allocation runs tenure
            for _ in range(3000):
                h.alloc(200).release()
        tenured = h.stats().tenured_pages
        for _ in range(3000):                                # (not a quiet collection)
            h.alloc(200).release()
        h.collect(major=major)                               # a whole mark: untenures
        s0 = h.stats()
        assert s0.tenured_pages == 0 and s0.verify_failures == 0, s0
        refill = [h.alloc(40, refs=1) for _ in range(holes - 5)]
        s1 = h.stats()
        assert s1.verify_failures == 0
        h.check()
        del refill
        taken = (s1.fresh_pages - s0.fresh_pages) + (s0.free_pool_pages - s1.free_pool_pages)
        return tenured, s1.major_sweeps - s0.major_sweeps, taken
    finally:
        h.close()


@pytest.mark.parametrize("major", [False, None])
def test_holes_of_untenured_pages_are_filled_before_other_pages(major):
    tenured, majors, taken = pages_taken_by_refill(3, major)
    assert tenured > 0, "nothing was tenured: the test tests nothing"
    assert majors == 0
    assert taken == 0, (f"refilling fewer objects than the holes took {taken} pages "
                        f"after collect(major={major}) untenured {tenured} pages")


def test_control_without_tenuring_fills_the_holes():
    tenured, _, taken = pages_taken_by_refill(0, False)
    assert tenured == 0 and taken == 0
