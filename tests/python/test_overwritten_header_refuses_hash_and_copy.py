"""A Ref whose object's header was overwritten (an overflow of the object
before it) is refused by hash() and copy.copy() -- Ref.dup -- with
heaplab.CheckFailed, as by ==, .size and read(): hl_ref_identity and
hl_ref_dup read the object without the header check the other handle calls
make, so the hash was the damaged object's address and the copy a second
root to it (session 31)."""
import copy
import ctypes

import pytest

import heaplab


@pytest.mark.parametrize("verify", [False, True])
def test_a_damaged_header_is_refused_by_hash_and_copy(verify):
    with heaplab.Heap(verify=verify, reserve_bytes=64 << 20) as h:
        a = h.alloc(40, 1)
        b = h.alloc(40, 1)
        b_header = b._object()
        assert b_header > a.address
        # a's payload overflowed by one word: b's header
        ctypes.memset(a.address, 0x41, b_header - a.address + 8)
        with pytest.raises(heaplab.CheckFailed, match="does not fit"):
            b == a
        with pytest.raises(heaplab.CheckFailed, match="does not fit"):
            hash(b)
        with pytest.raises(heaplab.CheckFailed, match="does not fit"):
            copy.copy(b)
        with pytest.raises(heaplab.CheckFailed, match="does not fit"):
            b.dup()
        assert a.read(0, 8) == b"A" * 8       # a itself is sound
        hash(a)
        a.dup().release()
