"""E1 page floor -- DESIGN.md section 6, seed 000's BibopPageFloorIntegrationTest.

Protocol: fill 192 MiB of 256-byte objects, hold, drop, collect until settled;
then allocate a 192 MiB large-object set ("textures", every byte written), drop
it and allocate the identical set again.

Arms:   off   page_release=False   the seed's "before": empty pages stay resident
        on    page_release=True    empty pages beyond the warm cache go back
        huge  on, with thp=madvise the kernel backs the heap's 2 MiB chunks with
              transparent huge pages (AnonHugePages in the records); the trim
              releases whole chunks first and counts the huge pages it splits

Asserted effect:
  off  the drop returns at most 5% of the small-object footprint, and the
       textures cost full price on top of it;
  on   at least 97% of the dropped footprint comes back (the warm cache aside),
       and the peak during the first texture set is lower than off's by the
       same amount;
  huge the fill is backed by huge pages (AnonHugePages grows by at least 90%
       of the fill's footprint; where the kernel gives huge pages: stats
       thp_enabled), and still at least 97% comes back;
  both heap residency (mincore) tells the same story as phys_footprint, within
       2 percentage points;
  all  at least 90% of the textures' footprint comes back when they are
       dropped (the large path, page_release on or off: each texture is a
       mapping of its own, large_map_bytes).

Seed figures (16 KiB system pages, in-page headers): off held 269,504 KB,
textures cost 196,992 KB on top, peak 466,224 KB; on returned 66-68%
(287,824 KB peak), ~94% claimed for 4 KiB pages.
"""
import os
import sys

# An arm's process loads this file by path: protocol.py sits beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402

import heaplab  # noqa: E402
from heaplab.harness import (Experiment, PhaseRecord, arm_option,  # noqa: E402
                             collect_until_settled, derived_figures, percent, SEED_POLICIES)

# HEAPLAB_E1_FILL_MIB, HEAPLAB_E1_TEXTURES_MIB (protocol.py): read when an arm
# runs; each arm records the sizes it ran with (params["protocol"])
PROTOCOL = (protocol.E1_FILL_MIB, protocol.E1_TEXTURES_MIB)
TEXTURE_SIZE = 1 << 20

E1 = Experiment("E1", "page floor", seed={
    "off": "held 269,504 KB; textures +196,992 KB; peak 466,224 KB",
    "on": "66-68% returned (16 KiB pages); peak 287,824 KB",
}, options=SEED_POLICIES, protocol=PROTOCOL)


@E1.arm("huge", thp="madvise")
@E1.arm("on", thp="never")  # page_release=True, the default
@E1.arm("off", page_release=False, thp="never")
def page_floor(rec, **options):
    fill = int(protocol.E1_FILL_MIB.value() * 2**20)
    textures = int(protocol.E1_TEXTURES_MIB.value() * 2**20)
    h = heaplab.Heap(**options)
    with rec.phase("fill", heap=h):
        small = h.fill(fill, 256)
    with rec.phase("hold", heap=h) as ph:
        h.collect()
        ph.note("checksum", list(small.checksum()))
    with rec.phase("drop", heap=h) as ph:
        ph.mark("drop")
        small.release()
        ph.note("cycles", collect_until_settled(h))
    with rec.phase("textures", heap=h):
        tex = h.fill(textures, TEXTURE_SIZE)
    with rec.phase("texture_drop", heap=h) as ph:
        ph.mark("drop")
        tex.release()
        h.collect(cycles=2)
    with rec.phase("textures_again", heap=h):
        tex = h.fill(textures, TEXTURE_SIZE)
    rec.note("warm_bytes", h.options["warm_pages"] * h.options["page_size"])
    st = h.stats()
    rec.note("thp_enabled", st.thp_enabled)
    rec.note("thp_splits", st.thp_splits)
    rec.note("thp_chunks_released", st.thp_chunks_released)
    h.close()


def pct(x):
    return percent(x)


def arm_effects(data):
    """E1's effect for ONE arm, as numbers (heaplab run / compare; works on
    the Lua arms' records too): the share of the dropped small-object
    footprint that came back (warm cache aside for an arm that releases),
    and the peak during the first texture set above the arm's start.
    `passed` is judged against this file's thresholds: >= 97% for an arm
    whose pages are released, <= 5% for one whose are not -- page_release
    as the arm's heap had it (arm_option: the arm's options, else a sweep's
    --set/--env value, else the default)."""
    # growth and returned are the harness's derived figures (derived_figures,
    # PhaseRecord): a drop that was not marked is a ValueError saying so --
    # it was phys_before - phys_after here, a figure heaplab report and the
    # sweep's returned_in_drop did not give
    recs = {r["phase"]: PhaseRecord(r) for r in data["records"]}
    fill, drop, tex = recs["fill"], recs["drop"], recs["textures"]
    releases = bool(arm_option(data, "page_release"))
    warm = (data.get("notes") or {}).get("warm_bytes", 0) if releases else 0
    cost = fill.growth
    frac = drop.returned / (cost - warm)
    return [
        {"effect": "returned_fraction", "value": frac, "unit": "fraction",
         "threshold": 0.97 if releases else 0.05, "direction": ">=" if releases else "<=",
         "passed": frac >= 0.97 if releases else frac <= 0.05},
        {"effect": "texture_peak", "value": (tex["phys_peak"] - fill["phys_before"]) / 2**20,
         "unit": "MiB", "threshold": None, "passed": None},
    ]


def test_e1_page_floor(lab):
    res = E1.run()
    lab.record(res)
    off, on = res["off"], res["on"]
    # the sizes the arms ran with (the protocol's, or the environment's)
    sizes = off.data["params"]["protocol"]
    FILL = int(sizes["HEAPLAB_E1_FILL_MIB"] * 2**20)
    TEXTURES = int(sizes["HEAPLAB_E1_TEXTURES_MIB"] * 2**20)

    def figures(arm):
        fill, drop, tex = arm.phase("fill"), arm.phase("drop"), arm.phase("textures")
        warm = arm.notes["warm_bytes"] if arm is on else 0
        cost = fill.growth                      # the small objects' footprint
        returned = drop.returned                # phys before drop - lowest after
        frac = returned / (cost - warm)
        res_cost = derived_figures(fill)["resident_growth"]
        res_returned = -derived_figures(drop)["resident_growth"]
        res_frac = res_returned / (res_cost - warm)
        peak = tex["phys_peak"] - fill["phys_before"]   # peak above the arm's baseline
        return cost, returned, frac, res_frac, peak, tex.growth

    cost_on, ret_on, frac_on, res_on, peak_on, tex_on = figures(on)
    cost_off, ret_off, frac_off, res_off, peak_off, tex_off = figures(off)
    huge = res["huge"]
    warm_huge = huge.notes["warm_bytes"]
    fill_h, drop_h = huge.phase("fill"), huge.phase("drop")
    frac_huge = drop_h.returned / (fill_h.growth - warm_huge)
    huge_backed = fill_h["anon_huge_after"] - fill_h["anon_huge_before"]
    MiB = 1 << 20

    lab.effect("E1", "returned", pct(frac_on), ">= 97% (warm cache aside)", arm="on",
               phase="drop", seed="66-68%", ok=frac_on >= 0.97)
    lab.effect("E1", "returned", pct(frac_off), "<= 5%", arm="off", phase="drop",
               seed="~0%", ok=frac_off <= 0.05)
    lab.effect("E1", "textures cost", f"{tex_off / MiB:.1f} MiB on top", f">= 95% of {TEXTURES / MiB:g} MiB",
               arm="off", phase="textures", seed="196,992 KB", ok=tex_off >= 0.95 * TEXTURES)
    drop_in_peak = peak_off - peak_on
    lab.effect("E1", "peak lowered by", f"{drop_in_peak / MiB:.1f} MiB",
               f">= 97% of {ret_on / MiB:.1f} MiB returned", arm="on", phase="textures",
               seed="466,224 -> 287,824 KB", ok=drop_in_peak >= 0.97 * ret_on)
    lab.effect("E1", "mincore vs phys", f"{pct(res_on)} vs {pct(frac_on)}", "within 2 points",
               arm="on", phase="drop", ok=abs(res_on - frac_on) <= 0.02)

    # where the kernel gives no huge pages (its THP mode is never: thp_enabled
    # 0, thp_errno says why) the arm still runs, and the backing is reported
    thp_on = bool(huge.notes["thp_enabled"])
    lab.effect("E1", "huge pages back the fill", f"{huge_backed / MiB:.1f} of "
               f"{fill_h.growth / MiB:.1f} MiB", ">= 90%" if thp_on else "(kernel: no THP)",
               arm="huge", phase="fill", ok=huge_backed >= 0.9 * fill_h.growth if thp_on else None)
    lab.effect("E1", "returned", f"{pct(frac_huge)}: {huge.notes['thp_chunks_released']} chunks"
               f" whole, {huge.notes['thp_splits']} split", ">= 97% (warm cache aside)",
               arm="huge", phase="drop", ok=frac_huge >= 0.97)

    # every arm: the dead textures' memory goes back (the large path's blocks
    # are mappings of their own: large_map_bytes), whatever page_release says
    tex_back = {}
    for name in ("off", "on", "huge"):
        tex, tdrop = res[name].phase("textures"), res[name].phase("texture_drop")
        tex_back[name] = tdrop.returned / tex.growth
        lab.effect("E1", "textures returned", f"{pct(tex_back[name])} of {tex.growth / MiB:.1f} MiB",
                   ">= 90%", arm=name, phase="texture_drop", ok=tex_back[name] >= 0.9)

    assert frac_on >= 0.97, f"on: only {pct(frac_on)} of {cost_on / MiB:.1f} MiB came back"
    assert frac_off <= 0.05, f"off: {pct(frac_off)} came back with page_release off"
    assert tex_off >= 0.95 * TEXTURES, f"off: textures cost only {tex_off / MiB:.1f} MiB"
    assert drop_in_peak >= 0.97 * ret_on, (
        f"peak lowered by {drop_in_peak / MiB:.1f} MiB, returned {ret_on / MiB:.1f} MiB")
    assert drop_in_peak <= 1.03 * cost_on, "the peak dropped by more than the fill cost"
    assert abs(res_on - frac_on) <= 0.02, f"mincore {pct(res_on)} vs phys {pct(frac_on)}"
    assert abs(res_off - frac_off) <= 0.02, f"mincore {pct(res_off)} vs phys {pct(frac_off)}"
    assert not thp_on or huge_backed >= 0.9 * fill_h.growth, (
        f"huge: only {huge_backed / MiB:.1f} of {fill_h.growth / MiB:.1f} MiB in huge pages")
    assert frac_huge >= 0.97, f"huge: only {pct(frac_huge)} came back"
    for name, back in tex_back.items():
        assert back >= 0.9, f"{name}: only {pct(back)} of the dropped textures came back"
    # nothing lost while it was held
    assert on.phase("hold").note("checksum")[1] >= FILL // 256
