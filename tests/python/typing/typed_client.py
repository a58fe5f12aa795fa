"""A small client of heaplab written with full type annotations.

tests/python/test_conventions.py runs `mypy --strict` on it against the
installed package: the public API must be typed well enough that a strictly
typed program type-checks (options included: Heap's keyword arguments come
from the generated HeapOptions TypedDict).  It also runs as a program.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import heaplab
from heaplab.harness import ArmResult, Experiment, Recorder


def build(h: heaplab.Heap, n: int) -> heaplab.Ref:
    root = h.alloc(64, refs=n)
    for i in range(n):
        root[i] = h.alloc(16 * (i + 1))
    child: Optional[heaplab.Ref] = root[0]
    assert child is not None and child.size == 16
    return root


def drop_and_collect(h: heaplab.Heap, r: heaplab.Ref) -> Tuple[int, int]:
    r.release()
    h.collect(cycles=2, major=True)
    s: heaplab.Stats = h.stats()
    return s.cycles, s.released_pages


def footprint_mib() -> float:
    f: heaplab.Footprint = heaplab.footprint()
    return f.phys_footprint / 2**20


def options() -> heaplab.HeapOptions:
    opts: heaplab.HeapOptions = {"page_release": True, "warm_pages": 0, "page_size": "64k",
                                 "release_advice": "dontneed", "collector": "sync"}
    return opts


def main() -> None:
    with heaplab.Heap(**options()) as h:
        root = build(h, 8)
        big = h.fill(8 << 20, 256)
        sums: Tuple[int, int] = big.checksum()
        big.release()
        cycles, released = drop_and_collect(h, root)
        events: List[heaplab.Event] = h.events()
        kinds: Dict[str, int] = {}
        for e in events:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        churn: heaplab.ChurnResult = h.churn(0.01, 1024, 1 << 20)
        resident: int = h.resident_bytes()
        try:
            heaplab.Heap(page_size=3)
        except heaplab.InvalidArgument as e:
            bad = str(e)
        print(f"objects {sums[1]}, cycles {cycles}, released {released}, "
              f"events {sorted(kinds)}, churned {churn.allocated_bytes} bytes, "
              f"resident {resident}, footprint {footprint_mib():.1f} MiB; {bad}")
    with heaplab.Sampler(interval_s=0.001) as s:
        s.mark()
        series: List[Tuple[int, int, int, int]] = s.series()
        assert isinstance(series, list)


def arm_result(data: Dict[str, object]) -> Optional[ArmResult]:
    return ArmResult(data) if "records" in data else None


E = Experiment("EX", "typed")


@E.arm("on", page_release=True)
def arm(rec: Recorder, **options: object) -> None:
    with rec.phase("nothing"):
        pass


if __name__ == "__main__":
    main()
