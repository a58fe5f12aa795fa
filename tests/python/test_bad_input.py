"""Bad input raises the documented exception with a message naming what was
wrong; nothing crashes and no live object is harmed."""
import pytest

import heaplab


@pytest.fixture(scope="module")
def env():
    h = heaplab.Heap(verify=True)
    other = heaplab.Heap()
    keep = h.alloc(64, refs=2)
    keep.write(b"\x5a" * 64)
    foreign = other.alloc(8, refs=1)
    released = h.alloc(8)
    released.release()
    yield h, keep, foreign, released
    # the live object survived every bad call
    h.collect(cycles=2, major=True)
    assert keep.read() == b"\x5a" * 64
    h.check()
    h.close()
    other.close()


OPTION_CASES = [
    (dict(no_such_option=1), TypeError, "no_such_option"),
    (dict(warm_pages=-1), ValueError, r"warm_pages.*\[0, 1048576\]"),
    (dict(warm_pages=1 << 70), ValueError, r"warm_pages: '1180591620717411303424' is out of range"),
    (dict(warm_pages=10 ** 100), ValueError, "warm_pages: .* is out of range"),
    (dict(warm_pages="many"), ValueError, "warm_pages: 'many' is not a whole number"),
    # junk is not called "out of range" (the hostile Lua run); every kind of option
    (dict(warm_pages="12x"), ValueError, "warm_pages: '12x' is not a whole number"),
    (dict(warm_pages=""), ValueError, "warm_pages: the value is empty"),
    (dict(warm_pages="99999999999999999999999"), ValueError,
     "warm_pages: '99999999999999999999999' is out of range"),
    (dict(gc_live_ratio="1.5"), ValueError, "gc_live_ratio: '1.5' is not a whole number"),
    (dict(quiet_bytes="64x"), ValueError, "quiet_bytes: '64x' is not a byte size"),
    (dict(quiet_bytes=" "), ValueError, "quiet_bytes: the value is empty"),
    (dict(verify=""), ValueError, "verify: the value is empty"),
    (dict(warm_pages=1.5), TypeError, "warm_pages"),
    (dict(warm_pages=True), TypeError, "warm_pages"),
    (dict(page_release=2), TypeError, "page_release"),
    (dict(page_release="maybe"), ValueError, "page_release: 'maybe' is not a boolean"),
    (dict(reuse_failed_order="random"), ValueError, r"'random' is not one of fifo\|lifo"),
    (dict(reuse_failed_order=1), TypeError, "reuse_failed_order"),
    # an integer past 64 bits is as much the wrong type for a bool or an enum
    # as 5 is (it was a ValueError quoting the number as a string)
    (dict(mode=2 ** 64), TypeError, "mode: .*got the integer 18446744073709551616$"),
    (dict(page_release=2 ** 64), TypeError, "page_release: .*got the integer 18446744073709551616$"),
    (dict(compact=-2 ** 63 - 1), TypeError, "compact: .*got the integer -9223372036854775809$"),
    (dict(thp="always"), ValueError, r"thp.*never\|madvise\|populate"),
    (dict(thp=True), TypeError, "thp"),
    (dict(page_size=65536 + 4096), ValueError, "power of two"),
    (dict(page_size=1024), ValueError, "page_size"),
    (dict(small_max=8192, page_size=16384), ValueError, "small_max"),
    (dict(syscall_retry_max=-2), ValueError, "syscall_retry_max"),
    (dict(gc_trigger_min_bytes=1 << 30, gc_trigger_max_bytes=1 << 20), ValueError,
     "gc_trigger_min_bytes"),
    (dict(reserve_bytes="12q"), ValueError, "reserve_bytes: '12q' is not a byte size"),
    # the nursery's floor above its ceiling (it was clamped without a word), on
    # a generational heap, the one that has a nursery
    (dict(generational=True, young_min_bytes="8m", young_bytes="1m"), ValueError,
     r"young_min_bytes: 8388608 exceeds young_bytes 1048576; expected bytes in \[65536, "),
    # options each in range that cannot go together (hl_options_validate)
    (dict(page_size="256k", reserve_bytes="3m"), ValueError,
     "reserve_bytes: 3145728 is below 16 pages of page_size 262144"),
    (dict(subpage_release=True, page_release=False), ValueError,
     "subpage_release: needs page_release"),
    (dict(subpage_release=True, dump_toggle=True), ValueError,
     "subpage_release: cannot be combined with dump_toggle"),
    (dict(mode="manual", compact="sparse"), ValueError, "compact: needs mode=collected"),
    (dict(mode="manual", generational=True), ValueError, "generational: needs mode=collected"),
    (dict(mode="manual", collector="background"), ValueError,
     "collector: background needs mode=collected"),
]


@pytest.mark.parametrize("kwargs,exc,msg", OPTION_CASES)
def test_bad_options(kwargs, exc, msg):
    with pytest.raises(exc, match=msg) as info:
        heaplab.Heap(**kwargs)
    if any(isinstance(v, str) for v in kwargs.values()) and "out of range" not in msg:
        assert "out of range" not in str(info.value)  # junk is not a number out of range


@pytest.mark.parametrize("value,says", [("abc", "'abc' is not a whole number"),
                                        ("12x", "'12x' is not a whole number"),
                                        ("", "the value is empty")])
def test_bad_environment_value_says_what_it_is(monkeypatch, value, says):
    monkeypatch.setenv("HEAPLAB_WARM_PAGES", value)
    with pytest.raises(ValueError, match=f"HEAPLAB_WARM_PAGES={value}: option warm_pages: {says}"):
        heaplab.Heap()


def test_manual_heap_ignores_the_collectors_switches_from_the_environment(monkeypatch):
    # (HEAPLAB_GENERATIONAL=1 exported made every manual heap impossible:
    # "option generational: needs mode=collected"); set explicitly, refused
    monkeypatch.setenv("HEAPLAB_GENERATIONAL", "1")
    monkeypatch.setenv("HEAPLAB_COLLECTOR", "background")
    monkeypatch.setenv("HEAPLAB_COMPACT", "sparse")
    with heaplab.Heap(mode="manual") as h:
        o = h.options
        assert (o["mode"], o["generational"], o["collector"], o["compact"]) == \
            ("manual", False, "sync", "never"), o
    with heaplab.Heap() as h:  # a collected heap takes them
        assert h.options["generational"] and h.options["collector"] == "background"
    with pytest.raises(ValueError, match="generational: needs mode=collected"):
        heaplab.Heap(mode="manual", generational=True)
    monkeypatch.setenv("HEAPLAB_MODE", "manual")  # the mode from the environment too
    with heaplab.Heap() as h:
        assert h.options["mode"] == "manual" and not h.options["generational"]


def test_manual_heap_ignores_every_collected_only_option_from_the_environment(monkeypatch):
    """The review of session 33: the core ignored three collector switches,
    the launchers five, the harness six; HEAPLAB_YOUNG_MIN_BYTES=64m made
    Heap(mode='manual') raise "option young_min_bytes: ... exceeds
    young_bytes".  Now every option the table marks collected_only."""
    table = heaplab.options()
    collected = {k for k, v in table.items() if v["collected_only"]}
    assert {"generational", "collector", "compact", "gc_trigger_bytes", "gc_trigger_min_bytes",
            "gc_trigger_max_bytes", "young_bytes", "young_min_bytes", "young_survival_factor",
            "full_growth_ratio", "gc_growth_ratio", "tenure_full_marks", "min_cycle_interval_ms",
            "pacing_max_wait_ms", "pacing_give_up_cycles"} <= collected, collected
    assert not collected & {"mode", "heap_limit_bytes", "page_release", "subpage_release",
                            "verify", "tcache_blocks", "page_size", "reserve_bytes"}, collected
    assert all(isinstance(v["collected_only"], bool) for v in table.values())
    monkeypatch.setenv("HEAPLAB_YOUNG_MIN_BYTES", "64m")  # the reviewer's repro
    with heaplab.Heap(mode="manual") as h:
        assert h.options["young_min_bytes"] == table["young_min_bytes"]["default"]
    for name in sorted(collected):  # each, to a value other than its default
        spec = table[name]
        if spec["kind"] == "enum":
            value = spec["choices"][-1] if spec["default"] != spec["choices"][-1] \
                else spec["choices"][0]
        elif spec["kind"] == "bool":
            value = not spec["default"]
        else:
            value = spec["max"] if spec["default"] != spec["max"] else spec["min"]
        monkeypatch.setenv("HEAPLAB_" + name.upper(), str(value).lower())
    with heaplab.Heap(mode="manual") as h:
        got = {k: h.options[k] for k in collected}
        assert got == {k: table[k]["default"] for k in got}, got


def test_an_environment_value_a_cross_check_refuses_is_named(monkeypatch):
    """With HEAPLAB_YOUNG_MIN_BYTES=8m exported, Heap(young_bytes='1m')
    failed "option young_min_bytes: 8388608 exceeds young_bytes 1048576",
    never naming the variable (the review of session 33) -- and on a heap
    that has no nursery at all (not generational)."""
    monkeypatch.setenv("HEAPLAB_YOUNG_MIN_BYTES", "8m")
    with heaplab.Heap(young_bytes="1m") as h:  # not generational: no nursery
        assert h.options["young_bytes"] == 1 << 20
    with pytest.raises(ValueError, match=r"^environment HEAPLAB_YOUNG_MIN_BYTES=8m: option "
                       r"young_min_bytes: 8388608 exceeds young_bytes 1048576"):
        heaplab.Heap(generational=True, young_bytes="1m")
    with pytest.raises(ValueError, match=r"^option young_min_bytes: 16777216 exceeds young_bytes"):
        heaplab.Heap(generational=True, young_bytes="1m", young_min_bytes="16m")


def test_an_environment_small_max_a_page_cannot_hold_is_named(monkeypatch):
    """HEAPLAB_SMALL_MAX above page_size/4 (a page holds at least four
    objects) failed "option small_max: 4000 exceeds page_size/4 = 1024",
    naming no variable (the thirty-fourth note): the variable now, and
    HEAPLAB_PAGE_SIZE beside it when that came from the environment too; a
    small_max the caller passes beside an environment's page size names
    HEAPLAB_PAGE_SIZE.  Both the caller's: the caller's error, as before."""
    monkeypatch.setenv("HEAPLAB_SMALL_MAX", "4000")
    with pytest.raises(ValueError, match=r"^environment HEAPLAB_SMALL_MAX=4000: option small_max: "
                       r"4000 exceeds page_size/4 = 1024 \(a page must hold at least 4 objects\)$"):
        heaplab.Heap(page_size="4k")
    monkeypatch.setenv("HEAPLAB_PAGE_SIZE", "8k")
    with pytest.raises(ValueError, match=r"^environment HEAPLAB_SMALL_MAX=4000: option small_max: "
                       r"4000 exceeds page_size/4 = 2048 \(a page must hold at least 4 objects; "
                       r"HEAPLAB_PAGE_SIZE=8k\)$"):
        heaplab.Heap()
    with heaplab.Heap(page_size="64k") as h:  # the environment's 4000 fits 64 KiB pages
        assert h.options["small_max"] == 4000
    with pytest.raises(ValueError, match=r"^option small_max: 4000 exceeds page_size/4 = 1024"):
        heaplab.Heap(page_size="4k", small_max=4000)
    # the caller's small_max, the environment's page size: the variable named
    # is HEAPLAB_PAGE_SIZE (the review of session 35)
    monkeypatch.delenv("HEAPLAB_SMALL_MAX")
    monkeypatch.setenv("HEAPLAB_PAGE_SIZE", "4k")
    with pytest.raises(ValueError, match=r"^environment HEAPLAB_PAGE_SIZE=4k: option small_max: "
                       r"2048 exceeds page_size/4 = 1024 \(a page must hold at least 4 objects\)$"):
        heaplab.Heap(small_max=2048)


ENV_CROSS_CASES = [
    # (the environment, the call's options, the message): every cross-check of
    # hl_options_validate an environment value fails names the variable -- it
    # said the check's message alone, as if the caller had asked (h36opt)
    (dict(HEAPLAB_PAGE_SIZE="5k"), {},
     r"^environment HEAPLAB_PAGE_SIZE=5k: option page_size: 5120 is not a power of two$"),
    (dict(HEAPLAB_PAGE_SIZE="1m"), dict(reserve_bytes="8m"),
     r"^environment HEAPLAB_PAGE_SIZE=1m: option reserve_bytes: 8388608 is below 16 pages of "
     r"page_size 1048576$"),
    (dict(HEAPLAB_PAGE_SIZE="1m", HEAPLAB_RESERVE_BYTES="8m"), {},
     r"^environment HEAPLAB_RESERVE_BYTES=8m: option reserve_bytes: 8388608 is below 16 pages of "
     r"page_size 1048576 \(HEAPLAB_PAGE_SIZE=1m\)$"),
    (dict(HEAPLAB_SUBPAGE_RELEASE="1", HEAPLAB_PAGE_RELEASE="0"), {},
     r"^environment HEAPLAB_SUBPAGE_RELEASE=1: option subpage_release: needs page_release "
     r"\(sub-page release runs in the trim that page_release=false turns off; "
     r"HEAPLAB_PAGE_RELEASE=0\)$"),
    (dict(HEAPLAB_PAGE_RELEASE="0"), dict(subpage_release=True),
     r"^environment HEAPLAB_PAGE_RELEASE=0: option subpage_release: needs page_release \(sub-page "
     r"release runs in the trim that page_release=false turns off\)$"),
    (dict(HEAPLAB_DUMP_TOGGLE="1"), dict(subpage_release=True),
     r"^environment HEAPLAB_DUMP_TOGGLE=1: option subpage_release: cannot be combined with "
     r"dump_toggle \(.*per run\)$"),
    # a manual heap from the environment beside a collector's switch the call asks for
    (dict(HEAPLAB_MODE="manual"), dict(compact="sparse"),
     r"^environment HEAPLAB_MODE=manual: option compact: needs mode=collected \("),
    (dict(HEAPLAB_MODE="manual"), dict(generational=True),
     r"^environment HEAPLAB_MODE=manual: option generational: needs mode=collected \("),
    (dict(HEAPLAB_MODE="manual"), dict(collector="background"),
     r"^environment HEAPLAB_MODE=manual: option collector: background needs mode=collected \("),
    (dict(HEAPLAB_GC_TRIGGER_MAX_BYTES="64k"), {},
     r"^environment HEAPLAB_GC_TRIGGER_MAX_BYTES=64k: option gc_trigger_min_bytes: 4194304 exceeds "
     r"gc_trigger_max_bytes 65536$"),
    (dict(HEAPLAB_GC_TRIGGER_MIN_BYTES="1g"), {},
     r"^environment HEAPLAB_GC_TRIGGER_MIN_BYTES=1g: option gc_trigger_bytes: 25165824 is outside "
     r"\[gc_trigger_min_bytes 1073741824, gc_trigger_max_bytes 1073741824\]$"),
]


@pytest.mark.parametrize("env,kwargs,msg", ENV_CROSS_CASES)
def test_every_cross_check_an_environment_value_fails_names_it(monkeypatch, env, kwargs, msg):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=msg):
        heaplab.Heap(**kwargs)


def test_a_long_environment_value_is_shown_short_and_the_reason_is_whole(monkeypatch):
    """A value of 300 x's in HEAPLAB_PAGE_SIZE gave "environment
    HEAPLAB_PAGE_SIZE=xxx...x" and nothing else: the value was quoted whole
    and the binding's 256-byte buffer cut the reason off (session 37).  A
    value is shown as its first 60 bytes and its length, as the option's own
    message shows it; a cross-check naming two padded variables (blanks
    around a value are allowed) keeps its reason too."""
    monkeypatch.setenv("HEAPLAB_PAGE_SIZE", "x" * 300)
    with pytest.raises(ValueError) as e:
        heaplab.Heap()
    said = str(e.value)
    assert said.startswith("environment HEAPLAB_PAGE_SIZE=" + "x" * 60 + "... (300 bytes): "
                           "option page_size: "), said
    assert said.count("x") < 130 and said.endswith(")"), said
    monkeypatch.delenv("HEAPLAB_PAGE_SIZE")
    monkeypatch.setenv("HEAPLAB_SUBPAGE_RELEASE", " " * 150 + "1")
    monkeypatch.setenv("HEAPLAB_PAGE_RELEASE", "0" + " " * 150)
    with pytest.raises(ValueError, match=r"^environment HEAPLAB_SUBPAGE_RELEASE= {60}\.\.\. "
                       r"\(151 bytes\): option subpage_release: needs page_release \(sub-page "
                       r"release runs in the trim that page_release=false turns off; "
                       r"HEAPLAB_PAGE_RELEASE=0 {59}\.\.\. \(151 bytes\)\)$"):
        heaplab.Heap()


def test_a_cross_check_of_the_callers_own_values_names_no_variable(monkeypatch):
    """The environment is named only when it changed what the check refuses:
    a variable that gives the value the call had, or one a manual heap
    ignores, is not why the call's own options are refused."""
    monkeypatch.setenv("HEAPLAB_PAGE_RELEASE", "1")  # the default: changes nothing
    monkeypatch.setenv("HEAPLAB_DUMP_TOGGLE", "0")
    with pytest.raises(ValueError, match=r"^option subpage_release: needs page_release"):
        heaplab.Heap(subpage_release=True, page_release=False)
    monkeypatch.setenv("HEAPLAB_GC_TRIGGER_MIN_BYTES", "1g")  # ignored by a manual heap
    with pytest.raises(ValueError, match=r"^option compact: needs mode=collected"):
        heaplab.Heap(mode="manual", compact="sparse")
    monkeypatch.setenv("HEAPLAB_MODE", "collected")  # the default mode, from the environment
    with pytest.raises(ValueError, match=r"^option gc_trigger_min_bytes: 1073741824 exceeds "
                       r"gc_trigger_max_bytes 1048576$"):
        heaplab.Heap(gc_trigger_max_bytes="1m", gc_trigger_min_bytes="1g")


CALL_CASES = [
    ("alloc negative size", lambda h, k, f, r: h.alloc(-1), ValueError, "size"),
    ("alloc huge size", lambda h, k, f, r: h.alloc(1 << 41), ValueError, "size"),
    ("alloc 2^64 size", lambda h, k, f, r: h.alloc(1 << 64), ValueError, "size"),
    ("alloc float size", lambda h, k, f, r: h.alloc(1.5), TypeError, "size"),
    ("alloc str size", lambda h, k, f, r: h.alloc("8"), TypeError, "size"),
    ("alloc too many refs", lambda h, k, f, r: h.alloc(8, refs=(1 << 24) + 1), ValueError, "refs"),
    ("alloc negative refs", lambda h, k, f, r: h.alloc(8, refs=-1), ValueError, "refs"),
    ("slot index too big", lambda h, k, f, r: k[2], IndexError, "slot 2"),
    ("slot index too negative", lambda h, k, f, r: k[-3], IndexError, "slot -3"),
    # one slot in the singular (it said "an object with 1 slots")
    ("slot index of a 1-slot object", lambda h, k, f, r: h.alloc(8, refs=1)[1], IndexError,
     "for an object with 1 slot$"),
    ("slot index not int", lambda h, k, f, r: k["0"], TypeError, "slot index"),
    ("slot set out of range", lambda h, k, f, r: k.__setitem__(5, None), IndexError, "slot 5"),
    ("slot value not a Ref", lambda h, k, f, r: k.__setitem__(0, 42), TypeError, "Ref or None"),
    ("foreign Ref in a slot", lambda h, k, f, r: k.__setitem__(0, f), ValueError, "another heap"),
    ("released Ref in a slot", lambda h, k, f, r: k.__setitem__(0, r), heaplab.StaleRef, "released"),
    ("released Ref read", lambda h, k, f, r: r.size, heaplab.StaleRef, "released"),
    ("released Ref slot", lambda h, k, f, r: r[0], heaplab.StaleRef, "released"),
    ("read past payload", lambda h, k, f, r: k.read(60, 8), IndexError, "outside"),
    ("write past payload", lambda h, k, f, r: k.write(b"x" * 65), IndexError, "outside"),
    ("fill negative total", lambda h, k, f, r: h.fill(-1, 8), ValueError, "total_bytes"),
    ("fill too many objects", lambda h, k, f, r: h.fill(1 << 40, 0), ValueError, "2\\^31"),
    ("fill beyond the machine", lambda h, k, f, r: h.fill(1 << 40, 1 << 30), ValueError,
     "machine's memory"),
    ("alloc that cannot be satisfied", lambda h, k, f, r: h.alloc(1 << 40), MemoryError, "refused"),
    ("collect zero cycles", lambda h, k, f, r: h.collect(cycles=0), ValueError, "cycles"),
    ("collect bad major", lambda h, k, f, r: h.collect(major="yes"), TypeError, "major"),
    ("inject unknown site", lambda h, k, f, r: h.inject("nowhere", "always"), ValueError, "site"),
    ("inject unknown mode", lambda h, k, f, r: h.inject("release", "sometimes"), ValueError, "mode"),
    ("inject every 0", lambda h, k, f, r: h.inject("release", "every", 0), ValueError, "every"),
    ("inject bad errno", lambda h, k, f, r: h.inject("release", "always", errno="ENOPE"), ValueError,
     "errno"),
    ("inject negative sticky", lambda h, k, f, r: h.inject("restore", "sticky", -1), ValueError,
     "sticky"),
    ("churn negative duration", lambda h, k, f, r: h.churn(-1, 64, 1024), ValueError, "duration"),
    ("churn ring smaller than an object", lambda h, k, f, r: h.churn(0.01, 64, 8), ValueError,
     "live_bytes"),
    ("churn bad rate", lambda h, k, f, r: h.churn(0.01, 64, 1024, rate_bytes_per_s=-5), ValueError,
     "rate"),
]


@pytest.mark.parametrize("name,call,exc,msg", CALL_CASES, ids=[c[0] for c in CALL_CASES])
def test_bad_calls(env, name, call, exc, msg):
    h, keep, foreign, released = env
    with pytest.raises(exc, match=msg):
        call(h, keep, foreign, released)


def test_collect_names_its_range_for_a_count_beyond_64_bits(env):
    """collect(1 << 63) said "cycles 9223372036854775808 does not fit in 64
    bits" where collect(10**7) names the range C checks ("out of range [1,
    1000000]"): a count C's int64_t cannot hold is said as C says the rest."""
    h = env[0]
    with pytest.raises(heaplab.InvalidArgument) as big:
        h.collect(10 ** 7)
    assert str(big.value) == "collect: cycles 10000000 out of range [1, 1000000]", big.value
    for n in (1 << 63, -(1 << 63) - 1, 10 ** 30):
        with pytest.raises(heaplab.InvalidArgument) as info:
            h.collect(n)
        assert str(info.value) == f"collect: cycles {n} out of range [1, 1000000]", info.value
        assert info.value.code == "EINVAL", info.value.code
    h.collect(1)


def test_64_bit_arguments_beyond_their_type_name_the_range_c_checks(env):
    """h.alloc(1 << 64) said "size 18446744073709551616 does not fit in 64
    bits" where h.alloc(1 << 41) names C's maximum: an int the argument's 64-bit
    type cannot hold never reaches C, and the binding names the range C checks
    (C's limits: heaplab.h), or, where the type is all the bound, the type's
    range in Python's words -- as collect() does (session 44)."""
    h = env[0]
    ref = h.alloc(8)
    fill = h.fill(1024, 16)
    region = h.conservative_region(4)
    sampler = heaplab.Sampler(0.01, 16)
    words = h.stats().reserved_bytes // 8
    try:
        for beyond in (1 << 64, 10 ** 30):
            cases = [
                (lambda v: h.alloc(v), f"alloc: size {beyond} out of range [0, 1099511627776]"),
                (lambda v: h.alloc(8, v), f"alloc: refs {beyond} out of range [0, 16777216]"),
                (lambda v: h.fill(v, 16),
                 f"fill: total_bytes {beyond} out of range [0, 1099511627776]"),
                (lambda v: h.fill(1024, v), f"fill: size {beyond} out of range [0, 1099511627776]"),
                (lambda v: h.fill(1024, 16, v), f"fill: refs {beyond} out of range [0, 16777216]"),
                (lambda v: h.fill(1024, 16, 0, v),
                 f"fill: stride {beyond} out of range [1, 1000000]"),
                (lambda v: h.thin(fill, v), f"thin: every {beyond} out of range [1, 1000000000]"),
                (lambda v: h.churn(0.01, v, 1024),
                 f"churn: size {beyond} out of range [0, 1099511627776]"),
                (lambda v: h.churn(0.01, 16, v),
                 f"churn: live_bytes {beyond} out of range [0, 2**64-1]"),
                (lambda v: ref.read(v), f"read: offset {beyond} out of range [0, 8]"),
                (lambda v: ref.read(2, v), f"read: length {beyond} out of range [0, 6]"),
                (lambda v: ref.write(b"x", v), f"write: offset {beyond} out of range [0, 8]"),
                (lambda v: h.conservative_region(v),
                 f"conservative_region: words {beyond} out of range [1, {words}]"),
                (lambda v: region.write([], v), f"write: start {beyond} out of range [0, 4]"),
                (lambda v: sampler.series(v), f"series: start {beyond} out of range [0, 2**64-1]"),
            ]
            # the int64_t arguments, beyond either end
            for v in (beyond, -beyond):
                cases += [
                    (lambda v: h.inject("release", "every", v),
                     f"inject: n {v} out of range [1, 2**63-1]"),
                    (lambda v: h.inject("release", "sticky", v),
                     f"inject: n {v} out of range [0, 2**63-1]"),
                    (lambda v: h.inject("release", "always", v),
                     f"inject: n {v} out of range [-2**63, 2**63-1]"),
                    (lambda v: heaplab.Sampler(0.01, v),
                     f"sampler: capacity {v} out of range [16, 16777216]"),
                ]
            for call, said in cases:
                v = int(said.split(" ")[2])
                with pytest.raises(heaplab.InvalidArgument) as info:
                    call(v)
                assert str(info.value) == said, (str(info.value), said)
        # an unknown site or mode beside such an n is C's to name (nothing armed)
        for site, mode, said in (("release", "often", "unknown mode 'often'"),
                                 ("nowhere", "every", "unknown site 'nowhere'")):
            with pytest.raises(heaplab.InvalidArgument, match=said):
                h.inject(site, mode, 1 << 64)
        assert all(f["mode"] == "off" for f in h.faults.values()), h.faults
    finally:
        sampler.close()
        region.remove()


def test_error_code_is_the_c_errors_name(env, monkeypatch):
    """heaplab.Error's docstring: `code` is the C error name (and docs/lua.md
    gives Lua's errors the same).  InvalidArgument stands for EINVAL, EVALUE
    and EFOREIGN, and every one of them said "EINVAL"."""
    h, keep, foreign, released = env
    cases = [(lambda: heaplab.Heap(warm_pages=-1), "EVALUE"),
             (lambda: heaplab.Heap(thp="nope"), "EVALUE"),
             (lambda: keep.__setitem__(0, foreign), "EFOREIGN"),
             (lambda: h.alloc(-1), "EINVAL"),
             (lambda: heaplab.Heap(mode=7), "ETYPE"),
             (lambda: released.size, "ESTALE")]
    for call, code in cases:
        with pytest.raises(heaplab.Error) as info:
            call()
        assert info.value.code == code, (code, type(info.value).__name__, info.value)
    monkeypatch.setenv("HEAPLAB_FAULT_RESTORE", "bogus")
    with pytest.raises(heaplab.InvalidArgument) as info:
        heaplab.Heap()
    assert info.value.code == "EVALUE", info.value


def test_use_after_close_raises_heapclosed():
    h = heaplab.Heap()
    r = h.alloc(8, refs=1)
    h.close()
    for call in (lambda: h.alloc(8), lambda: h.fill(1024, 8), lambda: h.collect(),
                 lambda: h.stats(), lambda: h.events(), lambda: h.resident_bytes(),
                 lambda: h.vma_count(), lambda: h.inject("release", "off"), lambda: h.faults,
                 lambda: r[0], lambda: r.size, lambda: r.checksum()):
        with pytest.raises(heaplab.HeapClosed):
            call()
    assert issubclass(heaplab.HeapClosed, heaplab.Error)


def test_manual_heap_rejects_collected_calls():
    with heaplab.Heap(mode="manual") as h:
        with pytest.raises(heaplab.ModeError, match="collected"):
            h.alloc(8)
        with pytest.raises(heaplab.ModeError, match="manual heap"):
            h.collect()
        # in Python's names, as the Lua module says them in Lua's: the C
        # messages named hl_trim and hl_roots_add to a Python caller
        for call, said in ((h.collect, r"^collect: a manual heap has no collector \(use trim\(\)\)$"),
                           (h.memory_pressure, r"^memory_pressure: .* \(use trim\(\)\)$"),
                           (lambda: h.conservative_region(4),
                            r"^conservative_region: root regions need a collected heap$")):
            with pytest.raises(heaplab.ModeError, match=said) as e:
                call()
            assert "hl_" not in str(e.value), e.value
