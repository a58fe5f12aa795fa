"""Mutator threads from Python against the background collector: several
seconds, no lost object (checksums), no deadlock."""
import threading
import time

import heaplab


def test_four_threads_against_the_background_collector():
    h = heaplab.Heap(collector="background", gc_trigger_bytes="1m", gc_trigger_min_bytes="256k",
                     warm_pages=4)
    errors = []
    deadline = time.monotonic() + 3.0

    def mutator(t):
        try:
            root = h.alloc(0, refs=64)
            expect = [None] * 64
            i = 0
            while time.monotonic() < deadline:
                payload = bytes([(t * 31 + i) & 0xFF]) * (16 + i % 300)
                o = h.alloc(len(payload), refs=1)
                o.write(payload)
                root[i % 64] = o
                expect[i % 64] = payload
                o.release()
                if i % 50 == 0:
                    g = h.fill(256 << 10, 64)    # a bulk phase in C (GIL released)
                    g.release()
                if i % 17 == 0:
                    s = (i * 7) % 64
                    if expect[s] is not None:
                        assert root[s].read() == expect[s], f"thread {t} slot {s} corrupted"
                i += 1
            for s, payload in enumerate(expect):
                if payload is not None:
                    assert root[s].read() == payload
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=mutator, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a mutator thread is stuck (deadlock?)"
    assert not errors, errors
    s = h.stats()
    assert s.collector_wakeups >= 3, "the background collector did not run"
    h.collect(cycles=2, major=True)
    h.check()
    h.close()   # stops the collector thread
