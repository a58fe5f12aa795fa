"""E3 large-path pacing -- DESIGN.md section 6, seed 000's
LegacyArrayPacingIntegrationTest (the legacy path had a trigger, no throttle).

Protocol: a 4 MiB live ring of 16 KiB objects (large path) churned for 2.5 s
at full speed, at 2048 MiB/s and at 512 MiB/s; background collector with
200 ms between cycles (the seed's pacing).  Growth is the peak phys_footprint
during the churn above its start.

Arms:   off_*  large_pacing=False  the seed's legacy path: a cycle is only
                                   scheduled, the mutator never waits
        on_*   large_pacing=True   the allocating thread waits (bounded) for
                                   the cycle it asked for

Asserted effect:
  off at full speed  grows at least 8x the live set;
  on at every rate   peak growth stays within 2 x (live + large_trigger_bytes).

Seed figures: 1.49-2.36 GB of growth against a 4 MB live set (1.8 GB at
2048 MB/s).
"""
import os
import sys

# An arm's process loads this file by path: protocol.py sits beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402

import heaplab  # noqa: E402
from heaplab.harness import Experiment, SEED_POLICIES  # noqa: E402


LIVE = 4 << 20
SIZE = 16 << 10
# HEAPLAB_E3_SECONDS (protocol.py): read when an arm runs
PROTOCOL = (protocol.E3_SECONDS,)
RATES = {"full": None, "2048": 2048 << 20, "512": 512 << 20}

# every arm: the background collector paced as the seed's, and the seeds' policies
E3 = Experiment("E3", "large-path pacing", seed={
    "off_full": "1.49-2.36 GB growth", "off_2048": "1.8 GB growth"},
    options=dict(collector="background", min_cycle_interval_ms=200, **SEED_POLICIES),
    protocol=PROTOCOL)


def churn_arm(rec, rate, **options):
    h = heaplab.Heap(**options)
    with rec.phase("churn", heap=h) as ph:
        r = h.churn(protocol.E3_SECONDS.value(), SIZE, LIVE, rate_bytes_per_s=rate)
        s = h.stats()
        ph.note("allocated_mib", r.allocated_bytes / 2**20)
        ph.note("rate_mib_s", r.allocated_bytes / 2**20 / (r.elapsed_ns / 1e9))
        ph.note("cycles", r.cycles)
        ph.note("pacing_waits", r.pacing_waits)
        ph.note("pacing_wait_ms", r.pacing_wait_ns / 1e6)
        ph.note("pacing_timeouts", s.pacing_timeouts)
        ph.note("peak_large_live", r.peak_large_live_bytes)
    rec.note("large_trigger_bytes", h.options["large_trigger_bytes"])
    h.close()


for _name, _rate in RATES.items():
    E3.add_arm(f"off_{_name}", churn_arm, params={"rate": _rate}, large_pacing=False)
    E3.add_arm(f"on_{_name}", churn_arm, params={"rate": _rate})  # large_pacing=True


def test_e3_large_pacing(lab):
    res = E3.run()
    lab.record(res)
    MiB = 2**20
    for name, arm in res.items():
        c = arm.phase("churn")
        growth = c.peak_growth
        trigger = arm.notes["large_trigger_bytes"]
        bound = 2 * (LIVE + trigger)
        if name == "off_full":
            ok = growth >= 8 * LIVE
            lab.effect("E3", "growth", f"{growth / MiB:.0f} MiB ({c.note('rate_mib_s'):.0f} MiB/s)",
                       f">= 8 x live = {8 * LIVE / MiB:.0f} MiB", arm=name, phase="churn",
                       seed=E3.seed.get(name, ""), ok=ok)
            assert ok, f"{name}: unpaced growth only {growth / MiB:.1f} MiB"
        elif name.startswith("on_"):
            ok = growth <= bound
            lab.effect("E3", "growth", f"{growth / MiB:.0f} MiB ({c.note('rate_mib_s'):.0f} MiB/s, "
                       f"{c.note('pacing_waits')} waits)", f"<= {bound / MiB:.0f} MiB", arm=name,
                       phase="churn", ok=ok)
            assert ok, f"{name}: paced growth {growth / MiB:.1f} MiB > {bound / MiB:.0f} MiB"
        else:
            lab.effect("E3", "growth", f"{growth / MiB:.0f} MiB ({c.note('rate_mib_s'):.0f} MiB/s)",
                       "reported", arm=name, phase="churn", seed=E3.seed.get(name, ""))
