"""E2 major-sweep classification -- DESIGN.md section 6, seed 000's review
round on the quiet-cycle test (com.bench.MajorSweepMix).

Protocol: about 120 MB of small survivors sitting in partially live pages
(a 240 MB fill keeping every other object), then seconds of heavy 64 KiB
large-path churn that drives the cycles (background collector, 100 ms
between cycles); count major sweeps against cycles.  Then go quiet: the
survivors die and no one allocates.

Arms:   small_only  quiet_counts_large=False  the seed's defect: the quiet test
                    reads small-path bytes only, so large churn looks quiet
        both_paths  quiet_counts_large=True   the fix: both paths count (the
                                              default: this arm sets nothing)

Asserted effect:
  both        the fill keeps about half its bytes live (stride 2), on pages
              with free slots (at most 85% full);
  small_only  most churn cycles are major sweeps (>= 80%), each one walking
              every partial page;
  both_paths  few are (<= 20%: the 16-cycle backstop);
  both        once quiet, a major sweep runs within 3 cycles and the
              survivors' pages go back (heap residency falls to the warm
              cache plus 5%).

Seed figures: 36 major sweeps in 38 cycles with the defect, 2 in 39 fixed.
"""
import os
import sys

# An arm's process loads this file by path: protocol.py sits beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402

import heaplab  # noqa: E402
from heaplab.harness import Experiment, SEED_POLICIES  # noqa: E402

# HEAPLAB_E2_FILL_MIB, HEAPLAB_E2_CHURN_S (protocol.py): read when an arm runs
PROTOCOL = (protocol.E2_FILL_MIB, protocol.E2_CHURN_S)

# every arm: the background collector, and the seeds' policies
E2 = Experiment("E2", "major-sweep classification", seed={
    "small_only": "36 of 38 cycles", "both_paths": "2 of 39 cycles"},
    options=dict(collector="background", min_cycle_interval_ms=100, **SEED_POLICIES),
    protocol=PROTOCOL)


@E2.arm("small_only", quiet_counts_large=False)
@E2.arm("both_paths")  # the defaults: quiet_counts_large=True
def major_sweep(rec, **options):
    fill = int(protocol.E2_FILL_MIB.value() * 2**20)
    churn_s = protocol.E2_CHURN_S.value()
    h = heaplab.Heap(**options)
    with rec.phase("survivors", heap=h) as ph:
        survivors = h.fill(fill, 256, stride=2)
        h.collect(major=True)        # every page swept once: partially live now
        s = h.stats()
        ph.note("partial_pages", s.partial_pool_pages)
        ph.note("live_mib", s.small_live_bytes / 2**20)
        ph.note("partial_mib", s.partial_pool_pages * h.options["page_size"] / 2**20)
        ph.note("checksum", list(survivors.checksum()))
    with rec.phase("churn", heap=h) as ph:
        s0 = h.stats()
        res = h.churn(churn_s, 64 << 10, 4 << 20)
        s1 = h.stats()
        ph.note("cycles", s1.cycles - s0.cycles)
        ph.note("major_sweeps", s1.major_sweeps - s0.major_sweeps)
        ph.note("major_quiet", s1.major_quiet - s0.major_quiet)
        ph.note("major_backstop", s1.major_backstop - s0.major_backstop)
        ph.note("major_swept_pages", s1.major_swept_pages - s0.major_swept_pages)
        ph.note("gc_ms", (s1.gc_ns - s0.gc_ns) / 1e6)
        ph.note("churned_mib", res.allocated_bytes / 2**20)
        ph.note("checksum", list(survivors.checksum()))
    with rec.phase("quiet", heap=h) as ph:
        ph.mark("survivors die")
        survivors.release()
        s0 = h.stats()
        cycles_to_major = None
        for i in range(1, 4):
            h.collect()
            if h.stats().major_sweeps > s0.major_sweeps:
                cycles_to_major = i
                break
        ph.note("cycles_to_major", cycles_to_major)
        for _ in range(8):           # let the trims release the emptied pages
            before = h.stats().released_pages
            h.collect()
            if h.stats().released_pages == before:
                break
    rec.note("warm_bytes", h.options["warm_pages"] * h.options["page_size"])
    h.close()


def test_e2_major_sweep(lab):
    res = E2.run()
    lab.record(res)
    # the fill the arms ran with (the protocol's, or the environment's)
    FILL = int(res["small_only"].data["params"]["protocol"]["HEAPLAB_E2_FILL_MIB"] * 2**20)
    for arm in ("small_only", "both_paths"):
        churn = res[arm].phase("churn")
        assert churn.note("checksum") == res[arm].phase("survivors").note("checksum"), \
            f"{arm}: survivors changed during the churn"
        surv = res[arm].phase("survivors")
        assert surv.note("partial_pages") > 1000
        # stride=2 keeps half the fill (272-byte slots for 256-byte objects:
        # 53% of FILL), on pages that still have free slots (the cycles
        # during the fill hand the dead slots to later objects: 65-75% full)
        live, partial = surv.note("live_mib"), surv.note("partial_mib")
        assert 0.4 <= live * 2**20 / FILL <= 0.6, \
            f"{arm}: {live:.0f} MiB live of a {FILL / 2**20:.0f} MiB fill with stride 2"
        assert live / partial <= 0.85, \
            f"{arm}: {live:.0f} MiB live on {partial:.0f} MiB of partial pages: no free slots"

    def share(arm):
        c = res[arm].phase("churn")
        return c.note("major_sweeps"), c.note("cycles")

    bad_major, bad_cycles = share("small_only")
    good_major, good_cycles = share("both_paths")
    lab.effect("E2", "major sweeps", f"{bad_major} of {bad_cycles} cycles", ">= 80%",
               arm="small_only", phase="churn", seed="36 of 38",
               ok=bad_major >= 0.8 * bad_cycles)
    lab.effect("E2", "major sweeps", f"{good_major} of {good_cycles} cycles", "<= 20%",
               arm="both_paths", phase="churn", seed="2 of 39",
               ok=good_major <= 0.2 * good_cycles)
    assert bad_cycles >= 10 and good_cycles >= 10, "the churn did not drive enough cycles"
    assert bad_major >= 0.8 * bad_cycles
    assert good_major <= 0.2 * good_cycles

    for arm in ("small_only", "both_paths"):
        q = res[arm].phase("quiet")
        warm = res[arm].notes["warm_bytes"]
        n = q.note("cycles_to_major")
        lab.effect("E2", "quiet: major sweep after", f"{n} cycle(s); resident "
                   f"{q['resident_after'] / 2**20:.1f} MiB", "<= 3 cycles; pages returned",
                   arm=arm, phase="quiet", ok=n is not None and
                   q["resident_after"] <= warm + 0.05 * q["resident_before"])
        assert n is not None and n <= 3, f"{arm}: no major sweep within 3 quiet cycles"
        assert q["resident_after"] <= warm + 0.05 * q["resident_before"], \
            f"{arm}: the survivors' pages were not returned"
