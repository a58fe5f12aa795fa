"""E5 VMA fragmentation -- DESIGN.md section 6, seed 001 (bmalloc/libpas).

bmalloc paired every decommit with madvise(MADV_DONTDUMP) and every commit
with MADV_DODUMP.  Both change VM_DONTDUMP on a sub-range of the reservation,
which splits the VMA, and VMAs whose flags differ never merge back: a heap
released and reused at page granularity shreds its reservation into one VMA
per page.  heaplab keeps that pairing as dump_toggle=true (the control) and
never changes per-VMA flags on a sub-range by default.

Protocol: a stretch of heap in 64 KiB pages (exactly `pages` pages of
248-byte objects, 256-byte slots), page_release on, warm cache 0 so every
empty page is released.  Then four rounds of
  release: drop a scattered set of pages (round 1: every other page; later
           rounds: the pages the previous round reused, which sit between
           live ones) and collect (major), so each goes back as its own run;
  reuse:   fill half as many pages as are released, which restores that many
           released pages (the oldest first);
counting the heap's VMAs after each release and each reuse, and the time the
trims spent advising (trim_ns).

Arms:   off / on        dump_toggle false / true over 512 pages (32 MiB)
        off_1g / on_1g  the same over 16384 pages (1 GiB)

Asserted effect:
  off     the heap is 1 VMA after every release and every reuse, both sizes;
  on      after every release >= 400 VMAs over 32 MiB, >= 10,000 over 1 GiB
          (each scattered released page is a VMA of its own between two
          others); and still hundreds / thousands after the reuses.
  both    every live object intact (checksum) -- the toggle costs VMAs, not
          data.
Reported: VMAs per round, trim time per arm, syscalls per released page.

Seed figures: 32 MB reservation, 64 KB chunks, four scavenger rounds:
512 VMAs with the toggle vs 1 without; a multi-GB JS heap reaches tens of
thousands.
"""
import time

import heaplab
from heaplab.harness import Experiment, SEED_POLICIES

PAGE = 64 << 10
OBJ = 248                 # + the 8-byte header = a 256-byte slot
PER_PAGE = PAGE // 256    # objects per page
ROUNDS = 4
SMALL, LARGE = 512, 16384  # pages: 32 MiB and 1 GiB

E5 = Experiment("E5", "VMA fragmentation", seed={
    "on": "512 VMAs (32 MB, 64 KB chunks, 4 rounds); tens of thousands for multi-GB heaps",
    "off": "1 VMA",
}, options=SEED_POLICIES)


@E5.arm("on_1g", params={"pages": LARGE}, dump_toggle=True)
@E5.arm("off_1g", params={"pages": LARGE})  # the default: dump_toggle=False
@E5.arm("on", params={"pages": SMALL}, dump_toggle=True)
@E5.arm("off", params={"pages": SMALL})
def fragment(rec, pages, **options):
    h = heaplab.Heap(warm_pages=0, warm_demand_trims=0, release_per_sweep=1 << 20, **options)
    with rec.phase("fill", heap=h) as ph:
        root = h.fill(pages * PER_PAGE * OBJ, OBJ)
        h.collect()
        ph.note("data_pages", len(root))
        ph.note("heap_pages", h.stats().total_pages)
    # the odd pages of the first fill stay live throughout; every refill stays
    # rooted here, only its pages' objects are dropped the round after
    roots = [root]
    to_drop = [(root, i) for i in range(0, len(root), 2)]
    for rnd in range(1, ROUNDS + 1):
        with rec.phase(f"round{rnd}", heap=h) as ph:
            s0 = h.stats()
            for r, i in to_drop:
                r[i] = None
            h.collect(major=True)         # dropped pages are partial: a major sweep empties them
            s1 = h.stats()
            ph.note("released", s1.released_pages - s0.released_pages)
            ph.note("released_pool", s1.released_pool_pages)
            ph.note("vmas_after_release", h.vma_count())
            ph.note("trim_ns", s1.trim_ns - s0.trim_ns)
            ph.note("release_syscalls", s1.syscalls - s0.syscalls)
            reuse = s1.released_pool_pages // 2
            t0 = time.monotonic_ns()
            refill = h.fill(reuse * PER_PAGE * OBJ, OBJ)
            ph.note("reuse_ns", time.monotonic_ns() - t0)
            s2 = h.stats()
            ph.note("reused", s2.reused_pages - s1.reused_pages)
            ph.note("fresh", s2.fresh_pages - s1.fresh_pages)
            ph.note("vmas_after_reuse", h.vma_count())
            roots.append(refill)
            to_drop = [(refill, i) for i in range(len(refill))]
    with rec.phase("verify", heap=h) as ph:
        ph.note("checksums", [list(r.checksum()) for r in roots])
        s = h.stats()
        ph.note("trim_ns", s.trim_ns)
        ph.note("trims", s.trims)
        ph.note("released_pages", s.released_pages)
        ph.note("syscalls", s.syscalls)
    h.close()


def test_e5_vma_fragmentation(lab):
    res = E5.run()
    lab.record(res)
    rounds = [f"round{k}" for k in range(1, ROUNDS + 1)]

    def vmas(arm, key):
        return [res[arm].phase(p).note(key) for p in rounds]

    for arm, pages, floor in (("on", SMALL, 400), ("on_1g", LARGE, 10_000)):
        off = "off" if pages == SMALL else "off_1g"
        rel_on, reuse_on = vmas(arm, "vmas_after_release"), vmas(arm, "vmas_after_reuse")
        rel_off, reuse_off = vmas(off, "vmas_after_release"), vmas(off, "vmas_after_reuse")
        size = "32 MiB" if pages == SMALL else "1 GiB"
        lab.effect("E5", f"VMAs after each release ({size})", "/".join(map(str, rel_on)),
                   f">= {floor} each", arm=arm, phase="round4",
                   seed="512" if pages == SMALL else "tens of thousands",
                   ok=min(rel_on) >= floor)
        lab.effect("E5", f"VMAs after each reuse ({size})", "/".join(map(str, reuse_on)),
                   f">= {floor // 4} each", arm=arm, phase="round4",
                   ok=min(reuse_on) >= floor // 4)
        lab.effect("E5", f"VMAs after every release and reuse ({size})",
                   "/".join(map(str, rel_off + reuse_off)), "1 each", arm=off, phase="round4",
                   seed="1", ok=set(rel_off + reuse_off) == {1})
        assert set(rel_off + reuse_off) == {1}, f"{off}: the heap split: {rel_off} {reuse_off}"
        assert min(rel_on) >= floor, f"{arm}: only {rel_on} VMAs after the releases"
        assert min(reuse_on) >= floor // 4, f"{arm}: only {reuse_on} VMAs after the reuses"
        # the toggle costs VMAs, never data
        assert (res[arm].phase("verify").note("checksums")
                == res[off].phase("verify").note("checksums")), f"{arm}: live objects differ"

    # the time the trims spent advising, what they asked the kernel for, and
    # the time the reuses took (restore -- MADV_DODUMP when toggled -- plus
    # refilling the pages)
    for arm in ("off", "on", "off_1g", "on_1g"):
        v = res[arm].phase("verify")
        per_page_us = v.note("trim_ns") / 1e3 / v.note("released_pages")
        calls = sum(res[arm].phase(p).note("release_syscalls") for p in rounds)
        rel = sum(res[arm].phase(p).note("released") for p in rounds)
        reuse_ms = sum(res[arm].phase(p).note("reuse_ns") for p in rounds) / 1e6
        reused = sum(res[arm].phase(p).note("reused") for p in rounds)
        lab.effect("E5", "trim / reuse time", f"trims {v.note('trim_ns') / 1e6:.1f} ms for {rel} "
                   f"pages ({per_page_us:.1f} us/page, {calls / rel:.2f} syscalls/page); "
                   f"reuses {reuse_ms:.0f} ms for {reused} pages", "reported", arm=arm,
                   phase="verify")
    for small, big in (("off", "on"), ("off_1g", "on_1g")):
        a, b = res[small].phase("verify"), res[big].phase("verify")
        lab.effect("E5", "trim time on/off", f"{b.note('trim_ns') / a.note('trim_ns'):.2f}x",
                   "reported", arm=big, phase="verify")
