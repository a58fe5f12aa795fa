-- The API of DESIGN.md section 2 (Lua), each call once, with its results
-- checked against what the heap reports.
local hl = require "heaplab"
local C = require "check"

describe("the API round trip", function()
  local h, o, a, d

  setup(function()
    h = assert(hl.heap{ page_size = "16k", warm_pages = 8, page_release = true,
                        reuse_failed_order = "lifo" })
  end)
  teardown(function() h:close() end)

  it("reads the module's declarations from C", function()
    local opts = hl.options()
    C.eq(opts.warm_pages.default, 64, "warm_pages default")
    C.eq(opts.warm_pages.kind, "int", "warm_pages kind")
    C.eq(opts.page_release.default, true, "page_release default")
    C.eq(opts.release_advice.choices[2], "free", "release_advice choices")
    C.eq(opts.page_size.max, 1 << 20, "page_size max")
    C.ok(#hl.stat_names() > 40, "stat names")
    C.eq(hl.fault_sites()[5], "restore", "fault site 5")
    C.ok(type(hl.version) == "string", "version")
    C.eq(hl._VERSION, "heaplab " .. hl.version, "_VERSION")
    local fp = assert(hl.footprint())
    C.ok(fp.phys_footprint > 0 and fp.rss > 0, "footprint")
  end)

  it("takes options as strings with suffixes, booleans and integers", function()
    local eff = assert(h:options())
    C.eq(eff.page_size, 16384, "page_size")
    C.eq(eff.warm_pages, 8, "warm_pages")
    C.eq(eff.reuse_failed_order, "lifo", "reuse_failed_order")
    C.ok(tostring(h):find("^heaplab%.heap%(collected%)"), "summary line: " .. tostring(h))
  end)

  it("reads an options table as Lua code does: __index and __pairs honoured", function()
    -- (the hostile Lua run: a proxy's options were read raw, silently ignored)
    local defaults = { warm_pages = 3, sweep = "full" }
    local t = setmetatable({ page_release = false }, { __index = defaults })
    local o1 = assert(hl.heap(t))
    local got = o1:options()
    C.eq(got.warm_pages, 3, "warm_pages through __index")
    C.eq(got.sweep, "full", "sweep through __index")
    C.eq(got.page_release, false, "the table's own page_release")
    o1:close()
    local hidden = { warm_pages = 5, nope = 1 }
    local proxy = setmetatable({}, { __pairs = function() return next, hidden, nil end })
    C.raises({ "heaplab.heap", "unknown option 'nope'" }, hl.heap, proxy)
    hidden.nope = nil
    local o2 = assert(hl.heap(proxy))
    C.eq(o2:options().warm_pages, 5, "warm_pages through __pairs")
    -- h:collect's table too; a metamethod closing the heap is seen
    C.eq(o2:collect(setmetatable({}, { __index = { cycles = 2, major = true } })), true,
         "h:collect through __index")
    C.eq(o2:stats().cycles, 2, "cycles read through __index")
    C.raises({ "h:collect", "closed" }, o2.collect, o2,
             setmetatable({}, { __index = function() o2:close() end }))
    -- the table passed is not changed
    C.eq(rawget(t, "warm_pages"), nil, "the options table was written")
  end)

  it("makes objects with sizes, 1-based slots, equality, dup and payload bytes", function()
    o = assert(h:alloc(256, 2))
    C.eq(#o, 2, "#o")
    C.eq(o:size(), 256, "o:size()")
    C.eq(o:refs(), 2, "o:refs()")
    C.eq(o[1], nil, "a new slot is empty")
    a = assert(h:alloc(16))
    o[1] = a
    C.ok(o[1] == a, "o[1] is a")
    C.ok(o[2] ~= a, "o[2] is not a")
    o[2] = o -- a cycle
    C.ok(o[2] == o, "o[2] is o")
    d = assert(o:dup())
    C.ok(d == o and rawequal(d, d) and not rawequal(d, o), "dup is a second handle to o")
    C.ok(rawequal(o:write("hello", 10), o), "o:write returns the object")
    C.eq(o:read(10, 5), "hello", "o:read")
    C.eq(#o:read(), 256, "o:read() whole payload")
    C.ok(o:address() > 0, "address")
    C.ok(tostring(o):find("size=256, refs=2", 1, true), "tostring(o): " .. tostring(o))
    local _, n = assert(o:checksum())
    C.eq(n, 2, "checksum covers o and a")
  end)

  it("fills, collects, and reports stats and events", function()
    local r = assert(h:fill(8 * C.MiB, 128))
    local sum1, n1 = r:checksum()
    C.ok(n1 >= 8 * C.MiB // 128, "fill objects: " .. n1)
    C.ok(#r > 0, "the fill root has one slot per page")
    C.eq(h:collect{ cycles = 1 }, true, "h:collect returns true")
    C.eq(select(1, r:checksum()), sum1, "a collection keeps the fill")
    r:release()
    C.ok(r:released(), "released")
    assert(h:collect{ cycles = 2, major = true })
    C.lua_gc() -- the roots o[1] and o[2] made above are garbage now
    local st = assert(h:stats())
    C.ok(st.cycles >= 3, "cycles")
    C.ok(st.released_pages > 0, "released pages")
    C.eq(st.handles, 3, "handles: o, a, d")
    local evs = assert(h:events())
    C.ok(#evs > 0, "events")
    local kinds = {}
    for _, e in ipairs(evs) do kinds[e.kind] = e end
    C.ok(kinds.cycle and kinds.cycle.duration_ns >= 0, "a cycle event with its fields")
    C.ok(kinds.trim and kinds.trim.released > 0, "a trim event")
    C.eq(#h:events(), 0, "events(clear=true) consumed them")
    C.ok(h:resident_bytes() >= 0, "resident bytes")
    C.eq(h:vma_count(), 1, "the reservation is one VMA")
    local base, bytes = h:range()
    C.ok(base > 0 and bytes > 0, "range")
    C.eq(h:trim(), true, "h:trim")
    C.eq(h:check(), true, "h:check")
    C.eq(h:memory_pressure(), true, "h:memory_pressure")
    C.eq(type(h:last_error()), "string", "h:last_error: the heap's last failure message")
  end)

  it("keeps every stride-th object of a fill", function()
    local rs = assert(h:fill(1 * C.MiB, 128, 0, 4))
    local _, ns = rs:checksum()
    local kept = (C.MiB // 128 + 3) // 4
    C.ok(ns >= kept and ns < kept + kept // 10,
         "stride 4 keeps a quarter: " .. ns .. " of " .. C.MiB // 128)
    rs:release()
  end)

  it("injects faults that fire and show in the stats", function()
    local r2 = assert(h:fill(2 * C.MiB, 128))
    r2:release()
    assert(h:collect{ cycles = 2, major = true })
    C.eq(h:inject("restore", "always", 0, "EIO"), true, "h:inject returns true")
    C.eq(h:faults().restore.mode, "always", "armed")
    C.eq(h:faults().restore.errno, "EIO", "errno")
    local r3 = assert(h:fill(2 * C.MiB, 128))
    C.ok(h:faults().restore.fired > 0, "the restore fault fired")
    C.ok(h:stats().restore_failed_pages > 0, "restore failures counted")
    assert(h:inject("restore", "off"))
    r3:release()
  end)

  it("reads every errno back by name, and none once disarmed", function()
    -- hl_errno_name knew eight names: 28 read back "E?" (the fault hunt,
    -- session 33); "off" recorded the default ENOMEM
    local f = assert(hl.heap{ reserve_bytes = "64m" })
    assert(f:inject("release", "first", 2, 28))
    C.eq(f:faults().release.errno, "ENOSPC", "errno 28 by name")
    assert(f:inject("dump", "always", 0, 4000))
    C.eq(f:faults().dump.errno, "E4000", "a number without a name")
    assert(f:inject("restore", "always", 0, "ENOENT"))
    C.eq(f:faults().restore.errno, "ENOENT", "any errno name arms")
    assert(f:inject("release", "off"))
    C.eq(f:faults().release.errno, 0, "disarmed: no errno, as never armed")
    C.eq(f:faults().release.errno, f:faults().meta.errno, "as a site never armed")
    f:close()
  end)

  it("churns", function()
    local c = assert(h:churn(0.05, 1024, 64 * 1024))
    C.ok(c.allocations > 0 and c.elapsed_ns > 0, "churn")
  end)

  it("runs a background collector thread that close stops", function()
    local bg = assert(hl.heap{ collector = "background", large_trigger_bytes = "1m" })
    local bc = assert(bg:churn(0.1, 16384, 1 << 20))
    C.ok(bc.allocations > 0 and bg:stats().cycles > 0, "background cycles: " .. bg:stats().cycles)
    C.eq(bg:close(), true, "h:close returns true")
  end)

  it("samples the footprint", function()
    local s = assert(hl.sampler(0.001))
    s:reset()
    s:mark()
    local summ = s:summary()
    C.ok(summ.samples >= 1 and summ.max_phys > 0 and summ.min_phys_after_mark > 0,
         "sampler summary")
    local series = s:series()
    C.ok(#series >= 1 and #series[1] == 4, "sampler series")
    C.ok(math.abs(series[1][1] - hl.clock_ns()) < 60e9, "series on CLOCK_MONOTONIC")
    C.ok(tostring(s):find("heaplab.sampler", 1, true), "tostring(s)")
    s:stop()
    s:stop()
  end)

  it("returns every sample of a series longer than one read (1024)", function()
    local s = assert(hl.sampler(0.0001, 4096))
    local deadline = hl.clock_ns() + 30e9
    while s:summary().samples < 1100 and hl.clock_ns() < deadline do end
    local n = s:summary().samples
    C.ok(n >= 1100, "1100 samples within 30 s: " .. n)
    local series = s:series()
    C.ok(#series >= n, #series .. " samples in the series, the summary counted " .. n)
    C.ok(series[1025][1] >= series[1024][1], "the 1025th sample after the 1024th")
    C.ok(s:series(1025)[1][1] >= series[1025][1], "s:series(1025)'s first is sample 1025 or later")
    s:stop()
  end)

  it("refuses handles on a manual-mode heap with a clear error", function()
    local m = assert(hl.heap{ mode = "manual" })
    C.raises({ "h:alloc", "EMODE" }, m.alloc, m, 16)
    C.raises({ "h:collect", "EMODE" }, m.collect, m)
    -- it returned true and did nothing (the C API hunt, session 33)
    C.raises({ "h:memory_pressure", "EMODE" }, m.memory_pressure, m)
    m:close()
  end)

  -- o[i] = x goes through the write barrier, so a young object whose only
  -- reference is an old one survives the minor cycles allocation runs
  it("keeps young objects referenced from old ones (generational)", function()
    local g = assert(hl.heap{ generational = true, young_bytes = "64k", verify = true })
    local old = g:alloc(0, 4)
    assert(g:collect()) -- old is old now
    for i = 1, 4 do
      local kid = g:alloc(16)
      kid:write(string.rep(string.char(64 + i), 16))
      old[i] = kid
      kid:release()
      for _ = 1, 2000 do g:alloc(48):release() end -- minor cycles run in here
    end
    local gs = g:stats()
    C.ok(gs.minor_cycles >= 4 and gs.verify_failures == 0,
         "generational: minor cycles, no verify failure")
    for i = 1, 4 do
      C.eq(old[i]:read(), string.rep(string.char(64 + i), 16), "generational: kid " .. i)
    end
    g:close()
  end)

  it("huge pages: the thp option, its stats, events and the footprint's anon_huge", function()
    local opt = hl.options().thp
    C.eq(table.concat(opt.choices, "|"), "never|madvise|populate", "thp choices")
    local f0 = assert(hl.footprint())
    C.ok(f0.anon_huge >= 0 and f0.anon_huge <= f0.anonymous, "anon_huge")
    local hh <close> = assert(hl.heap{ thp = "madvise", warm_pages = 0, warm_demand_trims = 0,
                                       release_per_sweep = 1 << 20 })
    C.eq(hh:options().thp, "madvise", "thp read back")
    local r = assert(hh:fill(16 * C.MiB, 256))
    local st = assert(hh:stats())
    if st.thp_enabled == 1 then
      C.ok(assert(hl.footprint()).anon_huge - f0.anon_huge >= 12 * C.MiB, "huge pages back the fill")
    else
      C.ok(st.thp_errno ~= 0, "thp unavailable: thp_errno says why")
    end
    for i = 1, #r, 2 do r[i] = nil end -- every other page's objects: chunks released in part
    hh:events()
    assert(hh:collect{ cycles = 2, major = true })
    st = assert(hh:stats())
    local splits = 0
    for _, e in ipairs(assert(hh:events())) do
      if e.kind == "thp_split" then
        splits = splits + 1
        C.ok(e.released_pages >= 1 and e.pages_in_use >= 1, "thp_split fields")
      end
    end
    C.ok(st.thp_splits >= 4 and splits == st.thp_splits, "splits " .. st.thp_splits .. ", events " .. splits)
    r:release()
    assert(hh:collect{ cycles = 2, major = true })
    C.ok(assert(hh:stats()).thp_chunks_released >= 6, "whole chunks released")
    C.eq(hh:check(), true, "check")
  end)

  it("knows its pid", function()
    C.eq(hl.pid(), hl.pid(), "pid")
  end)
end)
