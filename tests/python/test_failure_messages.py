"""A failed operation's message names the call that failed, once, and what
ran out (the hostile Lua run's findings, helper msgs)."""
import pytest

import heaplab


def test_bulk_calls_stopped_by_the_heap_limit_name_themselves():
    # "alloc: heap_limit_bytes ..." leaked from the allocation sequence into
    # fill's and churn's messages
    with heaplab.Heap(heap_limit_bytes="4m") as h:
        with pytest.raises(heaplab.OutOfMemory, match=r"^fill: heap_limit_bytes 4194304 reached"):
            h.fill(64 << 20, 64)
        with pytest.raises(heaplab.OutOfMemory, match=r"^churn: heap_limit_bytes 4194304 reached"):
            h.churn(600, 64, 8 << 20)  # the limit stops it, not the clock (0.05 s ran out first on a loaded machine)


def test_churn_past_the_reservation_names_itself():
    with heaplab.Heap(reserve_bytes="1m", warm_pages=0) as h:
        with pytest.raises(heaplab.OutOfMemory, match=r"^churn: the reservation of 1048576 bytes is exhausted \(reserve_bytes\)$"):
            h.churn(600, 64, 8 << 20)  # the limit stops it, not the clock (0.05 s ran out first on a loaded machine)
