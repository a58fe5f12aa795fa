"""Write the seed corpus of the fuzz targets (fuzz/corpus/<target>/).

    python3 fuzz/seeds.py

Deterministic: the same files every time.  fuzz_heap's seeds are programs of
random operations on heaps of every kind (the first bytes choose the heap,
see configure() in fuzz_heap.c); fuzz_options' seeds are one well-formed call
of each parser.  libFuzzer mutates from these; what it finds goes to the
build directory's corpus, not here.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(data))


def heap_seeds():
    rng = random.Random(16)
    # (name, b0, b1, b4): mode / generational / collector / release bits,
    # page size and small_max, manual verify
    kinds = [
        ("collected", 0x00, 0x0A, 0x01),
        ("collected_4k_pages", 0x00, 0x04, 0x01),
        ("generational", 0x02, 0x0B, 0x01),
        ("generational_full_sweep", 0x82, 0x18, 0x01),
        ("background", 0x04, 0x0A, 0x01),
        ("generational_background", 0x06, 0x2A, 0x01),
        ("no_release_dump_toggle", 0x18, 0x0A, 0x01),
        ("advice_free_lifo", 0x60, 0x4A, 0x01),
        ("manual", 0x01, 0x0A, 0x03),
        ("manual_4k", 0x01, 0x04, 0x02),
        ("manual_tcache", 0x01, 0x0A, 0x63),
        ("manual_dump_toggle", 0x11, 0x0A, 0x03),
    ]
    for name, b0, b1, b4 in kinds:
        for k in range(2):
            body = [rng.randrange(256) for _ in range(700)]
            head = [b0, b1, rng.randrange(256), rng.randrange(256), b4, rng.randrange(256), 0]
            write("fuzz_heap", f"{name}_{k}", head + body)
    # with option strings: warm_pages=3, then "verify=0" (which the harness
    # puts back on for collected heaps)
    head = [0x00, 0x0A, 0, 2, 1, 0, 2]
    write("fuzz_heap", "option_strings",
          head + [12, 1, ord("3")] + [0, 1, ord("0")] + [rng.randrange(256) for _ in range(300)])

    # the extension (a byte of 0xc0 or more for the option strings' count,
    # then three configuration bytes, see configure()): compaction, sub-page
    # release, root regions, hl_thin; a random generator of its own, so the
    # seeds above stay what they were
    rng = random.Random(17)
    # (name, b0, b1, b7, b8, b9): compact / compact_live_pct / interior /
    # large_pacing; subpage_release / thp / mark_threads / ...; large_map_bytes
    ext = [
        ("ext_compact_sparse", 0x00, 0x0A, 0x11, 0x08, 0x00),
        ("ext_compact_always_subpage", 0x00, 0x0A, 0x02, 0x01, 0x02),
        ("ext_generational_compact", 0x02, 0x0B, 0x03, 0x10, 0x03),
        ("ext_background_compact_no_interior", 0x04, 0x0A, 0x42, 0x08, 0x00),
    ]
    for name, b0, b1, b7, b8, b9 in ext:
        for k in range(2):
            body = [rng.randrange(256) for _ in range(700)]
            head = [b0, b1, rng.randrange(256), rng.randrange(256), 0x01, rng.randrange(256), 0xC0,
                    b7, b8, b9]
            write("fuzz_heap", f"{name}_{k}", head + body)

    # the API extension (b9 of 0x80 or more, then b10: heap_limit_bytes; an
    # operation byte of 0xf0 or more is one of op_api's): samplers,
    # interrupts, hl_vma_count, the refusal hook; a random generator of its
    # own, and one operation byte in eight made an API one
    rng = random.Random(18)
    # (name, b0, b1, b4, b7, b8, b9, b10)
    api = [
        ("api_collected", 0x00, 0x0A, 0x01, 0x00, 0x08, 0x80, 0x00),
        ("api_generational_background", 0x06, 0x2A, 0x01, 0x00, 0x08, 0x80, 0x00),
        ("api_compact_dump_toggle_limit", 0x10, 0x0A, 0x01, 0x02, 0x00, 0x80, 0x03),
        ("api_manual_limit", 0x01, 0x0A, 0x03, 0x00, 0x00, 0x80, 0x02),
        ("api_manual_tcache_limit", 0x01, 0x0A, 0x63, 0x00, 0x00, 0x80, 0x03),
    ]
    for name, b0, b1, b4, b7, b8, b9, b10 in api:
        for k in range(2):
            body = [0xF0 | rng.randrange(16) if rng.randrange(8) == 0 else rng.randrange(256)
                    for _ in range(700)]
            head = [b0, b1, rng.randrange(256), rng.randrange(256) & 0x7F, b4, rng.randrange(256),
                    0xC0, b7, b8, b9, b10]
            write("fuzz_heap", f"{name}_{k}", head + body)

    # root regions removed (hl_roots_remove) and added again with their stale
    # words (op_region: a how byte with bits 0 and 5-7 set); one operation in
    # four a region's, a third of those a removal or an addition, the rest
    # allocations and collections; a random generator of its own
    rng = random.Random(40)
    region_ops = [0x1D, 0x3D, 0x5D, 0x7D, 0x9D, 0xBD, 0xDD]
    # (name, b0, b1, b7, b8): b7 compaction, b8 sub-page release / mark threads
    regions = [
        ("regions_out_and_back_compact", 0x00, 0x0A, 0x02, 0x00),
        ("regions_out_and_back_generational", 0x02, 0x04, 0x40, 0x08),
    ]
    for name, b0, b1, b7, b8 in regions:
        body = []
        while len(body) < 500:
            r = rng.random()
            if r < 0.25:
                how = rng.randrange(256) | (0xE1 if rng.randrange(3) == 0 else 0)
                body += [rng.choice(region_ops), rng.randrange(256), how, rng.randrange(256)]
            elif r < 0.55:
                body += [rng.choice([0x00, 0x10, 0x01, 0x11])] + [rng.randrange(256) for _ in range(4)]
            elif r < 0.65:
                body += [rng.choice([0x09, 0x19]), rng.randrange(256)]
            else:
                body.append(rng.randrange(0xF0))
        head = [b0, b1, rng.randrange(256), rng.randrange(256) & 0x7F, 0x01, rng.randrange(256),
                0xC0, b7, b8, 0x00]
        write("fuzz_heap", name, head + body[:500])

    # faults by name, the size limits, the effective options and the wait
    # hook (b9 bit 6: an operation byte of 0xcf, collected, or 0xdf, manual,
    # is op_fapi's); restore armed by name (first / always / every, errno
    # EIO) among allocations and trims, the wait hook's drills on the
    # background collector with large_pacing; a random generator of its own
    rng = random.Random(41)
    # how bytes (op_fapi: how % 6, then its bits): inject by name (0x00,
    # 0x13, 0x60, 0x31: the errno NULL, a name, decimal, "+n"), refused
    # (0x02, 0x44), the limits (0x03; 0x51, 0x75: the raw path; 0x33, 0x51,
    # 0x75: at the bounds under heap_limit_bytes), options (0x04), the wait
    # hook (0x05, 0x47: set; 0x11, 0x23: each hook in turn; 0x35: changed by
    # another thread)
    hows = [0x00, 0x13, 0x60, 0x31, 0x02, 0x44, 0x03, 0x51, 0x75, 0x33, 0x04, 0x05, 0x47,
            0x11, 0x23, 0x35]
    # restore armed by name: site 4 (restore), first / always / every
    restore_a = [0x16, 0x28, 0x31]
    # (name, b0, b1, b4, b7, b8, b9, b10)
    fapi = [
        ("fapi_collected_limit", 0x00, 0x0A, 0x01, 0x00, 0x08, 0xC0, 0x03),
        ("fapi_background_pacing", 0x04, 0x0A, 0x01, 0x00, 0x08, 0xC0, 0x00),
        ("fapi_generational_background", 0x06, 0x2A, 0x01, 0x02, 0x08, 0xC0, 0x02),
        ("fapi_subpage_restore", 0x00, 0x0A, 0x01, 0x00, 0x01, 0xC0, 0x00),
        ("fapi_manual", 0x01, 0x0A, 0x03, 0x00, 0x00, 0xC0, 0x02),
        ("fapi_manual_tcache", 0x01, 0x0A, 0x63, 0x00, 0x00, 0xC0, 0x00),
    ]
    for name, b0, b1, b4, b7, b8, b9, b10 in fapi:
        fop = 0xDF if b0 & 1 else 0xCF
        body = []
        while len(body) < 600:
            r = rng.random()
            if r < 0.15:
                body += [fop, rng.choice(hows), rng.randrange(256), rng.randrange(256),
                         rng.randrange(256), rng.randrange(256)]
            elif r < 0.2:
                body += [fop, 0x60, rng.choice(restore_a), 1 + rng.randrange(8), 2, 0]
            elif r < 0.25:
                body += [0x0A]  # trim
            else:
                body.append(rng.randrange(0xF0))
        head = [b0, b1, rng.randrange(256), rng.randrange(256) & 0x7F, b4, rng.randrange(256),
                0xC0, b7, b8, b9, b10]
        write("fuzz_heap", name, head + body[:600])
    # pacing_max_wait_ms=1 and min_cycle_interval_ms=2 (two option strings:
    # 0xC2): paced waits that time out, the wait hook's drills among them;
    # and thp with 3 MiB asked (2 MiB reserved: hl_heap_options' reserve_bytes)
    head = [0x04, 0x0A, rng.randrange(256), rng.randrange(256) & 0x7F, 0x01, rng.randrange(256),
            0xC2, 0x00, 0x08, 0xC0, 0x00, 43, 1, ord("1"), 46, 1, ord("2")]
    body = []
    while len(body) < 500:
        if rng.random() < 0.2:
            body += [0xCF, rng.choice([0x11, 0x23, 0x35]), rng.randrange(256), rng.randrange(256),
                     rng.randrange(256), rng.randrange(256)]
        else:
            body.append(rng.randrange(0xF0))
    write("fuzz_heap", "fapi_background_wait_timeouts", head + body[:500])
    head = [0x00, 0x0A, rng.randrange(256), 0x02, 0x01, rng.randrange(256), 0xC0, 0x00, 0x02,
            0xC0, 0x00]
    body = []
    while len(body) < 300:
        if rng.random() < 0.15:
            body += [0xCF, rng.choice(hows), rng.randrange(256), rng.randrange(256),
                     rng.randrange(256), rng.randrange(256)]
        else:
            body.append(rng.randrange(0xF0))
    write("fuzz_heap", "fapi_thp_reserve", head + body[:300])


def i64(v):
    return list(struct.pack(">q", v * 4))  # the harness reads (v >> 2) % 4096 - 16 for tag 0


def options_seeds():
    s = lambda t: [len(t)] + list(t.encode())
    # set_value: option index, type, ival, string
    write("fuzz_options", "set_value_bytes", [0, 3, 2] + i64(0) + s("64k"))
    write("fuzz_options", "set_value_enum", [0, 0, 2] + i64(0) + s("manual"))
    write("fuzz_options", "set_value_bool", [0, 4, 0] + i64(1) + s(""))
    write("fuzz_options", "set_value_int", [0, 5, 1] + i64(100) + s(""))
    write("fuzz_options", "set_value_nul", [0, 3, 2] + i64(0) + s("16\x00junk"))
    write("fuzz_options", "set_unknown", [1, 0xe5] + s("warm_page") + [2] + i64(0) + s("1"))
    write("fuzz_options", "set_cstring_hex", [1, 25, 2] + i64(0) + s("0x100000"))
    write("fuzz_options", "set_octal_looking", [1, 5, 2] + i64(0) + s("010"))
    # environment: n, (index, value)..., skip mask
    write("fuzz_options", "env_two", [2, 1, 5] + s("4k") + [4] + s("off") + [0])
    write("fuzz_options", "env_skip", [2, 1, 3] + s("1m") + [5] + s("junk") + [2])
    # inject_named: site, mode, N, errno
    write("fuzz_options", "inject_named", [3, 1, 1] + i64(3) + [1])
    write("fuzz_options", "inject_named_every", [3, 2, 3] + i64(0) + [5])
    # HEAPLAB_FAULT_<SITE> specs
    write("fuzz_options", "fault_env_spec", [4, 1, 1, 1, 2] + i64(12) + [3])
    write("fuzz_options", "fault_env_raw", [4, 6, 0] + s("first:12abc"))
    write("fuzz_options", "fault_env_fields", [4, 1, 0] + s("always:5:6:7"))


if __name__ == "__main__":
    heap_seeds()
    options_seeds()
