"""The pages a major sweep splices in do not feed the adaptive trigger.

They are mostly dead by selection (that is why the sweep visits them): had
their survival counted, a sweep of mostly empty partial pages would read as
"low survival" and halve the trigger -- the seed's defect, where a workload's
5 cycles became 8.  The survival ratio reads only the pages retired since the
last cycle."""
import heaplab


def test_major_swept_pages_do_not_shrink_the_trigger():
    h = heaplab.Heap(page_release=False)
    try:
        r = h.fill(64 << 20, 248)            # 64 MiB of 256-byte slots: one group per page
        h.collect()                           # every page swept once: all live, partial now
        groups = len(r)
        assert groups >= 1000
        for i in range(groups):               # drop 15 of every 16 pages' objects
            if i % 16:
                r[i] = None
        h.events()                            # (the events so far)
        h.collect(major=True)                 # sweeps the partial pages, 6% live
        s = h.stats()
        events = h.events()
        assert s.major_swept_pages >= groups - 2, "the major sweep did not visit the partial pages"
        shrunk = [e for e in events if e.kind == "trigger_adapted" and e.new_bytes < e.old_bytes]
        assert shrunk == [], f"a major sweep's pages halved the trigger: {shrunk}"
        # the dropped pages were freed all the same
        assert s.small_live_bytes < (64 << 20) // 8
    finally:
        h.close()
