"""E7 stale conservative roots -- DESIGN.md section 6 (optional there, required
by issue 19), seed 000's "stale root words": ParparVM scans thread stacks
conservatively, so a dead slot still holding the address of a dropped ring
kept 192 MB resident until the next phase's frames overwrote it.

Protocol: a 64 MiB structure (fill: 256-byte objects under a small index
tree and a root) is built and used; while in use its address passes through
a conservatively scanned region of 512 words (a 4 KiB "stack frame",
Heap.conservative_region).  The structure is dropped (its last Ref
released) and the heap collected until settled (collect, trim); then the
region is scrubbed and the heap collected until settled again.

Arms:   precise       no word in the region: precise roots only (the control)
        stale         the root's address left in the region (a stale word)
        interior      a word pointing into the root (its 6th slot), with
                      conservative_interior on (the default)
        interior_off  the same interior word, conservative_interior off
        noise         misidentification costs (warm_pages=0, so the heap's
                      residency is exactly the pages holding live objects):
                        random     1,000,000 random 64-bit words
                        exact      64 words at the starts of 64 leaf objects on
                                   64 different pages (words that look like
                                   heap addresses because they are)
                        range      64 words uniformly random over the carved
                                   part of the reservation

Asserted effect:
  precise       the drop returns >= 97% of the structure's footprint (warm cache aside);
  stale         the drop returns <= 5% (the word keeps it: live bytes >= 64 MiB);
                the scrub then returns >= 97%;
  interior      as stale (every object kept, >= 64 MiB; the scrub returns >= 97% and
                keeps nothing); interior_off: the drop returns >= 97% (the word keeps nothing);
  noise random  keeps no object when no word falls inside the reservation (the
                number that do is recorded: ~2^-29 per word for the default 32 GiB reservation);
        exact   keeps exactly the 64 objects, and exactly their 64 pages stay resident
                (4 MiB pinned by 17 KiB of objects: the page-granularity cost);
        range   keeps at least one object and pins at most 2 pages per word (the page
                a word hits and, when it hits an index node, the page that node indexes);
                the objects, bytes and pages kept are reported.
"""
import os
import random
import sys

# An arm's process loads this file by path: protocol.py sits beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402

import heaplab  # noqa: E402
from heaplab.harness import (Experiment, PhaseRecord, arm_option,  # noqa: E402
                             collect_until_settled, percent)

# HEAPLAB_E7_STRUCT_MIB (protocol.py): read when an arm runs
PROTOCOL = (protocol.E7_STRUCT_MIB,)
SIZE = 256
FRAME_WORDS = 512          # the region the structure's address passes through
SLOT = 137                 # where in it the word is left
RANDOM_WORDS = 1_000_000
HEAP_WORDS = 64

E7 = Experiment("E7", "stale conservative roots", seed={
    "stale": "192 MB stayed resident until the next phase overwrote the stack words",
    "precise": "released once the words were gone: 262,720 KB -> 114,800 KB",
}, protocol=PROTOCOL)


def struct_bytes():
    return int(protocol.E7_STRUCT_MIB.value() * 2**20)


def kept(h):
    """What the last mark kept: (objects, live bytes)."""
    s = h.stats()
    return s.marked_objects, s.small_live_bytes + s.large_live_bytes


@E7.arm("precise", params={"word": None})
@E7.arm("stale", params={"word": "exact"})
@E7.arm("interior", params={"word": "interior"})
@E7.arm("interior_off", params={"word": "interior"}, conservative_interior=False)
def stale_roots(rec, word=None, **options):
    h = heaplab.Heap(**options)
    frame = h.conservative_region(FRAME_WORDS)
    with rec.phase("build", heap=h):
        s = h.fill(struct_bytes(), SIZE)
        h.collect()
    with rec.phase("use", heap=h) as ph:
        ph.note("objects", s.checksum()[1])
        if word is not None:
            frame[SLOT] = s                     # the root's address, as a frame holds it
            if word == "interior":
                frame[SLOT] += 8 + 5 * 8        # past the header, into the 6th slot
        ph.note("word", frame[SLOT])
    with rec.phase("drop", heap=h) as ph:
        ph.mark("drop")
        s.release()
        ph.note("cycles", collect_until_settled(h, trim=True))
        ph.note("kept_objects", kept(h)[0])
        ph.note("kept_bytes", kept(h)[1])
    with rec.phase("scrub", heap=h) as ph:
        ph.mark("scrub")
        frame.scrub()
        ph.note("cycles", collect_until_settled(h, trim=True))
        ph.note("kept_objects", kept(h)[0])
        ph.note("kept_bytes", kept(h)[1])
    rec.note("warm_bytes", h.options["warm_pages"] * h.options["page_size"])
    frame.remove()
    h.close()


def leaves_on_distinct_pages(root, n, rnd):
    """n leaf objects of a fill, each on a different page (a root slot is one
    page's index: a small tree whose leaves are that page's objects)."""
    out = []
    for i in rnd.sample(range(len(root)), n):
        node = root[i]
        while len(node):
            nxt = node[rnd.randrange(len(node))]
            node = node if nxt is None else nxt
        out.append(node)
    return out


@E7.arm("noise", warm_pages=0)
def misidentification(rec, **options):
    h = heaplab.Heap(**options)
    rnd = random.Random(7)
    base, reserved = h.range()
    page = h.options["page_size"]
    rec.note("page_size", page)
    start = h.resident_bytes()

    def settle(ph, region):
        t0 = h.stats().mark_ns
        cycles = collect_until_settled(h, trim=True)
        ph.note("cycles", cycles)
        ph.note("mark_ms_per_cycle", (h.stats().mark_ns - t0) / cycles / 1e6)
        objects, live = kept(h)
        ph.note("kept_objects", objects)
        ph.note("kept_bytes", live)
        ph.note("pinned_bytes", h.resident_bytes() - start)
        region.remove()
        collect_until_settled(h, trim=True)

    with rec.phase("random", heap=h) as ph:
        s = h.fill(struct_bytes(), SIZE)
        region = h.conservative_region(RANDOM_WORDS)
        words = [rnd.getrandbits(64) for _ in range(RANDOM_WORDS)]
        region.write(words)
        ph.note("words", RANDOM_WORDS)
        ph.note("inside_reservation", sum(base <= w < base + reserved for w in words))
        del words
        ph.mark("drop")
        s.release()
        settle(ph, region)
    with rec.phase("exact", heap=h) as ph:
        s = h.fill(struct_bytes(), SIZE)
        region = h.conservative_region(8192)         # a 64 KiB stack
        leaves = leaves_on_distinct_pages(s, HEAP_WORDS, rnd)
        for k, leaf in enumerate(leaves):
            region[k * (8192 // HEAP_WORDS)] = leaf
            leaf.release()
        addrs = [w for w in region.words() if w]
        ph.note("words", len(addrs))
        ph.note("pages_hit", len({(a - base) // page for a in addrs}))
        ph.mark("drop")
        s.release()
        settle(ph, region)
    with rec.phase("range", heap=h) as ph:
        s = h.fill(struct_bytes(), SIZE)
        carved = h.stats().total_pages * page
        region = h.conservative_region(8192)
        words = [base + rnd.randrange(carved) // 8 * 8 for _ in range(HEAP_WORDS)]
        region.write(words, start=100)
        ph.note("words", HEAP_WORDS)
        ph.note("carved_bytes", carved)
        ph.note("pages_hit", len({(a - base) // page for a in words}))
        ph.mark("drop")
        s.release()
        settle(ph, region)
    h.close()


def pct(x):
    return percent(x)


MiB = 1 << 20


def fractions(arm, warm):
    """(cost, share of it the drop returned, share the scrub returned)."""
    cost = arm.phase("build").growth
    dropped = arm.phase("drop").returned / (cost - warm)
    scrubbed = arm.phase("scrub").returned / (cost - warm)
    return cost, dropped, scrubbed


NOISE_KINDS = ("random", "exact", "range")


def python_arm_name(data):
    """The arm's name as this file declares it: a Lua arm's JSON names it
    'lua-<arm>' (experiments/lua/harness.lua), the sweep's record too."""
    arm = str(data.get("arm", ""))
    return arm[len("lua-"):] if arm.startswith("lua-") else arm


def arm_effects(data):
    """E7's effect for ONE arm (heaplab run / compare; the Lua arms' records
    too): the share of the structure's footprint the drop returned and the
    scrub returned (warm cache aside); for the noise arm the bytes each kind
    of word pinned -- the kinds it ran (the Lua noise arm has no range
    phase).  A record with neither the noise phases nor build, drop and
    scrub is a ValueError naming what it lacks."""
    recs = {r["phase"]: r for r in data["records"]}
    noise = [k for k in NOISE_KINDS if k in recs]
    if noise:
        return [{"effect": f"{k}_pinned", "value": recs[k]["notes"]["pinned_bytes"] / MiB,
                 "unit": "MiB", "threshold": None, "passed": None}
                for k in noise if "pinned_bytes" in (recs[k].get("notes") or {})]
    missing = [p for p in ("build", "drop", "scrub") if p not in recs]
    if missing:
        raise ValueError(f"E7 arm {data.get('arm')!r} has no phase {', '.join(missing)} "
                         f"(phases: {list(recs)}): not a stale-root arm nor a noise arm")
    warm = (data.get("notes") or {}).get("warm_bytes", 0)
    # the harness's derived figures (derived_figures, PhaseRecord): a phase
    # that was not marked is a ValueError saying so (it was phys_before -
    # phys_after here, a figure heaplab report did not give)
    cost = PhaseRecord(recs["build"]).growth

    def returned(r):
        return PhaseRecord(r).returned / (cost - warm)
    # an interior word keeps the structure only while conservative_interior
    # is on -- as the arm's heap had it (a sweep's --set/--env included);
    # the Lua arms are named lua-<arm> (lua-stale was judged as precise)
    arm = python_arm_name(data)
    kept_word = arm == "stale" or (
        arm in ("interior", "interior_off") and bool(arm_option(data, "conservative_interior")))
    d, s = returned(recs["drop"]), returned(recs["scrub"])
    return [
        {"effect": "drop_returned_fraction", "value": d, "unit": "fraction",
         "threshold": 0.05 if kept_word else 0.97, "direction": "<=" if kept_word else ">=",
         "passed": d <= 0.05 if kept_word else d >= 0.97},
        {"effect": "scrub_returned_fraction", "value": s, "unit": "fraction",
         "threshold": 0.97 if kept_word else None, "direction": ">=",
         "passed": s >= 0.97 if kept_word else None},
    ]


def test_e7_stale_roots(lab):
    res = E7.run()
    lab.record(res)
    # the size the arms ran with (the protocol's, or the environment's)
    STRUCT = int(res["precise"].data["params"]["protocol"]["HEAPLAB_E7_STRUCT_MIB"] * 2**20)
    warm = res["precise"].notes["warm_bytes"]
    figs = {a: fractions(res[a], warm) for a in ("precise", "stale", "interior", "interior_off")}
    cost, p_drop, _ = figs["precise"]
    _, s_drop, s_scrub = figs["stale"]
    _, i_drop, i_scrub = figs["interior"]
    _, o_drop, _ = figs["interior_off"]
    sres = res["stale"]
    stale_kept = sres.phase("drop").note("kept_bytes")
    s_all = sres.phase("drop").note("kept_objects") == sres.phase("use").note("objects")
    s_scrub_kept = sres.phase("scrub").note("kept_bytes")
    lab.effect("E7", "returned at drop", pct(p_drop), ">= 97% (warm cache aside)", arm="precise",
               phase="drop", seed="released once no word held it", ok=p_drop >= 0.97)
    lab.effect("E7", "returned at drop", f"{pct(s_drop)}, {stale_kept / MiB:.1f} MiB kept"
               f"{'' if s_all else ' (not every object)'}",
               f"<= 5%, every object kept (>= {STRUCT / MiB:g} MiB)", arm="stale", phase="drop",
               seed="192 MB stayed resident", ok=s_drop <= 0.05 and stale_kept >= STRUCT and s_all)
    lab.effect("E7", "returned at scrub", f"{pct(s_scrub)}, {s_scrub_kept} bytes kept",
               ">= 97%, 0 kept", arm="stale", phase="scrub", seed="came back once overwritten",
               ok=s_scrub >= 0.97 and s_scrub_kept == 0)
    # the interior arm, as stale: the word keeps every object (>= the
    # structure's bytes) until the scrub, which then keeps nothing
    ires = res["interior"]
    i_kept = ires.phase("drop").note("kept_bytes")
    i_all = ires.phase("drop").note("kept_objects") == ires.phase("use").note("objects")
    i_scrub_kept = ires.phase("scrub").note("kept_bytes")
    lab.effect("E7", "interior word", f"drop {pct(i_drop)}, {i_kept / MiB:.1f} MiB kept"
               f"{'' if i_all else ' (not every object)'}; scrub {pct(i_scrub)}, "
               f"{i_scrub_kept} bytes kept", "as stale: <= 5%, all kept; >= 97%, 0 kept",
               arm="interior", phase="scrub",
               ok=(i_drop <= 0.05 and i_kept >= STRUCT and i_all and i_scrub >= 0.97
                   and i_scrub_kept == 0))
    lab.effect("E7", "interior, option off", pct(o_drop), ">= 97% at drop", arm="interior_off",
               phase="drop", ok=o_drop >= 0.97)

    noise = res["noise"]
    page = noise.notes["page_size"]
    rnd, exact, rng = (noise.phase(k)["notes"] for k in ("random", "exact", "range"))
    rnd_ok = rnd["inside_reservation"] > 0 or (rnd["kept_objects"] == 0 and rnd["kept_bytes"] == 0)
    lab.effect("E7", "random words kept",
               f"{rnd['kept_objects']} objects, {rnd['pinned_bytes'] // 1024} KiB pinned",
               f"0 ({rnd['inside_reservation']} of 1M in the reservation)", arm="noise",
               phase="random", ok=rnd_ok)
    exact_ok = (exact["kept_objects"] == HEAP_WORDS and exact["pages_hit"] == HEAP_WORDS
                and exact["pinned_bytes"] == exact["pages_hit"] * page)
    lab.effect("E7", f"{HEAP_WORDS} object words kept",
               f"{exact['kept_objects']} objects on {exact['pages_hit']} pages, "
               f"{exact['kept_bytes'] / 1024:.1f} KiB live pin {exact['pinned_bytes'] / MiB:.1f} MiB",
               f"{HEAP_WORDS} objects, their pages", arm="noise", phase="exact", ok=exact_ok)
    rng_ok = rng["kept_objects"] >= 1 and rng["pinned_bytes"] <= 2 * HEAP_WORDS * page
    lab.effect("E7", f"{HEAP_WORDS} heap-range words kept",
               f"{rng['kept_objects']} obj, {rng['kept_bytes'] / 1024:.1f} KiB, "
               f"{rng['pinned_bytes'] / MiB:.1f} MiB pinned", "<= 2 pages a word", arm="noise",
               phase="range", ok=rng_ok)

    assert p_drop >= 0.97, f"precise: only {pct(p_drop)} of {cost / MiB:.1f} MiB came back"
    assert s_drop <= 0.05, f"stale: the drop returned {pct(s_drop)}: the word kept nothing?"
    assert stale_kept >= STRUCT, f"stale: the word kept only {stale_kept / MiB:.1f} MiB"
    assert s_all, "the stale word kept part of the structure"
    assert s_scrub >= 0.97, f"stale: scrubbed, only {pct(s_scrub)} came back"
    assert s_scrub_kept == 0, f"stale: scrubbed, {s_scrub_kept} bytes still kept"
    assert i_drop <= 0.05 and i_scrub >= 0.97, (
        f"interior: drop {pct(i_drop)}, scrub {pct(i_scrub)}")
    assert i_kept >= STRUCT, f"interior: the word kept only {i_kept / MiB:.1f} MiB"
    assert i_all, "the interior word kept part of the structure"
    assert i_scrub_kept == 0, f"interior: scrubbed, {i_scrub_kept} bytes still kept"
    assert o_drop >= 0.97, f"interior_off: an interior word kept the structure ({pct(o_drop)})"
    assert rnd_ok, f"random words kept {rnd['kept_objects']} objects"
    assert exact["kept_objects"] == HEAP_WORDS, exact
    assert exact["pages_hit"] == HEAP_WORDS, exact
    assert exact["pinned_bytes"] == exact["pages_hit"] * page, exact
    assert rng["kept_objects"] >= 1, rng
    assert rng["pinned_bytes"] <= 2 * HEAP_WORDS * page, rng
