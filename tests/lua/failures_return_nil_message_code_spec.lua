-- liolib's convention (docs/lua.md, "Errors"): when the operation itself
-- fails -- memory or the reservation exhausted, a system call refused, a
-- heap invariant broken -- a function returns nil, message, code; error()
-- is for bad arguments only.  Plus what the REPL shows of the module's
-- tables (__tostring) and its _VERSION.
local hl = require "heaplab"
local C = require "check"

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

describe("a failed operation", function()
  it("returns nil, message, code when the reservation is exhausted", function()
    local h = assert(hl.heap{ reserve_bytes = 1 << 20, warm_pages = 0 })
    local r, msg, code = h:fill(64 * C.MiB, 256)
    C.eq(r, nil, "h:fill's first result")
    C.eq(code, "ENOMEM", "h:fill's code")
    C.ok(msg:find("^h:fill: .*reservation.*%(ENOMEM%)$"), "h:fill's message: " .. msg)
    C.eq(h:collect{ cycles = 2, major = true }, true, "collecting what the failed fill made")
    local kept, n = {}, 0
    repeat
      local o, m, c = h:alloc(100)
      if o then
        n = n + 1
        kept[n] = o
      else
        C.eq(c, "ENOMEM", "h:alloc's code")
        C.ok(m:find("^h:alloc: ") and m:find("ENOMEM", 1, true), "h:alloc's message: " .. m)
      end
    until not o or n > 100000
    C.ok(n > 1000 and n < 100000, "small objects until the reservation ran out: " .. n)
    -- the heap is intact and usable after the failures
    C.eq(h:check(), true, "h:check() after the failures")
    for i = 1, n do kept[i]:release() end
    C.eq(h:collect{ cycles = 2, major = true }, true, "h:collect()")
    C.ok(h:alloc(100), "an allocation succeeds again after a collection")
    h:close()
  end)

  it("names the bulk call the heap limit or the reservation stopped, once", function()
    -- (the hostile Lua run: "h:fill: alloc: heap_limit_bytes ..." -- the
    -- allocation sequence's inner "alloc:" leaked into fill's and churn's)
    local h = assert(hl.heap{ heap_limit_bytes = "4m" })
    local r, msg, code = h:fill(64 * C.MiB, 64)
    C.eq(code, "ENOMEM", "h:fill's code")
    C.ok(msg:find("^h:fill: heap_limit_bytes 4194304 reached"), "h:fill's message: " .. msg)
    -- (a churn runs for a duration: a long one, so that the limit stops it
    -- however slow the machine -- 0.05 s ran out first under ASan on a
    -- loaded CI machine, and the churn returned success)
    r, msg, code = h:churn(600, 64, 8 * C.MiB)
    C.eq(code, "ENOMEM", "h:churn's code")
    C.ok(msg:find("^h:churn: heap_limit_bytes 4194304 reached"), "h:churn's message: " .. msg)
    h:close()
    h = assert(hl.heap{ reserve_bytes = "1m", warm_pages = 0 })
    r, msg = h:churn(600, 64, 8 * C.MiB)
    C.ok(msg:find("^h:churn: the reservation of 1048576 bytes is exhausted %(reserve_bytes%) %(ENOMEM%)$"), "h:churn's message: " .. msg)
    h:close()
  end)

  it("returns nil, message, code when a heap cannot be made", function()
    local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
    local code = [[local r, m, c = require("heaplab").heap{} print(r, c) print(m)]]
    local p = assert(io.popen("HEAPLAB_FAULT_RESERVE=always " .. sh_quote(lua) .. " -e "
                              .. sh_quote(code) .. " 2>&1"))
    local out = p:read("a")
    C.ok(p:close(), "the script ran: " .. out)
    -- (the fault is the environment's: the message names it, not the system)
    C.ok(out:find("^nil\tENOMEM\nheaplab%.heap: .*HEAPLAB_FAULT_RESERVE=always.*injected.*%(ENOMEM%)\n$"),
         "heaplab.heap under a refused reservation: " .. out)
  end)

  it("returns nil, message, code when a heap invariant is found broken", function()
    -- an object's header overwritten -- what a C library's overflow into
    -- the heap does; written here through /proc/self/mem, which a Lua
    -- program can open -- is ECHECK: h:check() and o:checksum() return it
    -- as a failure, they do not raise it (the mutation audit said "no Lua
    -- program can break an invariant of its heap": this one can)
    local h = assert(hl.heap{})
    local o = assert(h:alloc(32))
    C.eq(o:refs(), 0, "o:refs()")
    local at = o:address() - 8 -- the header {uint32 refs, uint32 size}: no slots
    local function poke(bytes)
      local f = assert(io.open("/proc/self/mem", "r+b"))
      assert(f:seek("set", at))
      assert(f:write(bytes))
      assert(f:close())
    end
    local mem = assert(io.open("/proc/self/mem", "rb"))
    assert(mem:seek("set", at))
    local header = mem:read(8)
    mem:close()
    C.eq(header, string.pack("<I4I4", 0, 32), "the header as the heap wrote it")
    poke(string.pack("<I4I4", 0xfffff, 0xffffff))
    local calls = {
      { "h:check", function() return h:check() end },
      { "o:checksum", function() return o:checksum() end },
      -- (o:read and o:write raised it: they read the header first)
      { "o:read", function() return o:read(0, 4) end },
      { "o:write", function() return o:write("abcd") end },
    }
    for _, c in ipairs(calls) do
      local res = table.pack(pcall(c[2]))
      C.ok(res[1], c[1] .. " raised: " .. tostring(res[2]))
      C.eq(res.n, 4, c[1] .. ": nil, message, code")
      C.eq(res[2], nil, c[1] .. "'s first result")
      C.eq(res[4], "ECHECK", c[1] .. "'s code")
      C.ok(res[3]:find("^" .. c[1] .. ": .*header refs 1048575 size 16777215 does not fit.*%(ECHECK%)$"),
           c[1] .. "'s message: " .. res[3])
    end
    -- the accessors, whose value goes straight into an expression, raise
    -- it (docs/lua.md's Errors): a nil there would fail later, elsewhere
    for _, c in ipairs({ { "o:size", function() return o:size() end },
                         { "#o", function() return #o end } }) do
      local ok, err = pcall(c[2])
      C.ok(not ok and tostring(err):find(c[1] .. ": .*%(ECHECK%)"), c[1] .. ": " .. tostring(err))
    end
    poke(header)
    C.eq(h:check(), true, "h:check() with the header put back")
    C.eq(o:read(0, 4), o:read(0, 4), "o:read with the header put back")
    h:close()
  end)

  it("is told apart from a bad argument, which raises", function()
    local h = assert(hl.heap{})
    C.raises({ "h:alloc", "size", ">= 0" }, h.alloc, h, -1)
    C.raises({ "heaplab.heap", "unknown option" }, hl.heap, { no_such_option = 1 })
    C.raises({ "h:inject", "every needs N >= 1", "EINVAL" }, h.inject, h, "restore", "every", 0)
    local m = assert(hl.heap{ mode = "manual" })
    C.raises({ "h:alloc", "EMODE" }, m.alloc, m, 16) -- the wrong kind of heap
    m:close()
    h:close()
    C.raises({ "h:stats", "closed" }, h.stats, h) -- like a closed file
  end)

  it("returns true, or the one value, on success (so assert(...) works)", function()
    local h = assert(hl.heap{ reserve_bytes = 1 << 20 })
    local r = assert(h:fill(1 << 16, 64))
    C.eq(select("#", h:collect()), 1, "h:collect() on success: one value")
    C.eq(select("#", h:fill(64 * C.MiB, 64)), 3, "h:fill() on failure: three values")
    local ok, err = pcall(function() return assert(h:fill(64 * C.MiB, 64)) end)
    C.ok(not ok and tostring(err):find("ENOMEM", 1, true), "assert of a failed fill: " .. tostring(err))
    r:release()
    h:close()
  end)

  it("returns true from every method with nothing to return", function()
    -- o:release(), reg:remove(), s:stop(), s:mark(), s:reset() returned
    -- nothing, so assert(reg:remove()) raised (the Lua hunt, session 31)
    local h = assert(hl.heap{})
    local o, reg = assert(h:alloc(16)), assert(h:conservative_region(4))
    local s = assert(hl.sampler(0.01, 16))
    local calls = {
      { "o:release()", function() return o:release() end },
      { "o:release() again", function() return o:release() end },
      { "reg:remove()", function() return reg:remove() end },
      { "reg:remove() again", function() return reg:remove() end },
      { "s:mark()", function() return s:mark() end },
      { "s:reset()", function() return s:reset() end },
      { "s:stop()", function() return s:stop() end },
      { "s:stop() again", function() return s:stop() end },
      { "h:close()", function() return h:close() end },
    }
    for _, c in ipairs(calls) do
      local res = table.pack(c[2]())
      C.eq(res.n, 1, c[1] .. ": values returned")
      C.eq(res[1], true, c[1])
    end
    local o2 = assert(hl.heap{}:alloc(8))
    C.eq(o2:release(), true, "o:release()")
    C.eq(assert(o2:release()), true, "assert(o:release())")
  end)
end)

describe("what the REPL shows", function()
  local h
  setup(function()
    h = assert(hl.heap{ warm_pages = 2 })
    local r = assert(h:fill(4 * C.MiB, 256))
    r:release()
    assert(h:collect{ cycles = 2, major = true })
  end)
  teardown(function() h:close() end)

  it("of stats: every counter by name, as the table holds it now", function()
    local st = assert(h:stats())
    local text = tostring(st)
    C.ok(text:find("^heaplab%.stats: cycles=" .. st.cycles .. " "), text)
    for _, name in ipairs(hl.stat_names()) do
      C.ok(text:find(" " .. name .. "=" .. st[name], 1, true), name .. " in " .. text)
    end
    for line in text:gmatch("[^\n]+") do C.ok(#line <= 100, "a line of " .. #line) end
    st.cycles = 12345
    C.ok(tostring(st):find("cycles=12345", 1, true), "a changed field shows its new value")
    -- still a plain table
    C.eq(getmetatable(st).__name, "heaplab.stats", "__name")
    local n = 0
    for _ in pairs(st) do n = n + 1 end
    C.eq(n, #hl.stat_names(), "pairs sees every counter")
  end)

  it("of the footprint: the six figures in MiB", function()
    local fp = assert(hl.footprint())
    local text = tostring(fp)
    C.ok(text:find("^heaplab%.footprint: phys_footprint [%d.]+ MiB, rss [%d.]+ MiB, anonymous "
                   .. "[%d.]+ MiB, lazyfree [%d.]+ MiB, swap [%d.]+ MiB, anon_huge [%d.]+ MiB$"),
         text)
    C.ok(fp.rss > 0, "fields as before")
  end)

  it("of events: one line per event with its kind's fields", function()
    local evs = assert(h:events(false))
    local text = tostring(evs)
    C.ok(text:find("^heaplab%.events: " .. #evs .. "\n  %[1%] heap_created %(cycle 0, time_ns %d+%):"
                   .. " reserved_bytes=%d+ page_size=65536"), text)
    C.ok(text:find("trim (cycle ", 1, true) and text:find(" released=", 1, true), text)
    local e = evs[1]
    C.ok(tostring(e):find("^heaplab%.event: heap_created %(cycle 0, time_ns " .. e.time_ns .. "%)"),
         tostring(e))
    C.eq(e.kind, "heap_created", "fields as before")
  end)

  it("of many events: the first and last twenty, and how many between", function()
    local many = {}
    local one = assert(h:events(false))[1]
    for i = 1, 100 do many[i] = one end
    setmetatable(many, getmetatable(assert(h:events(false))))
    local text = tostring(many)
    C.ok(text:find("\n  ... 60 more ...\n  [81] ", 1, true), text)
    C.ok(text:find("[100] heap_created", 1, true) and not text:find("[21] ", 1, true), text)
  end)

  it("of every other table the module returns: its fields, not table: 0x...", function()
    -- s:summary(), s:series(), h:options(), heaplab.options(), h:faults() and
    -- h:churn() printed "table: 0x..." (the Lua hunt, session 31)
    local s = assert(hl.sampler(0.001, 64))
    repeat local sm = assert(s:summary()) until sm.samples >= 2
    local shown = {
      { assert(s:summary()), "^heaplab%.summary: samples=%d+ min_phys=%d+ " },
      { s:series(), "^heaplab%.series: %d+\n  %[1%] t_ns=%d+ phys=%d+ rss=%d+ lazyfree=%d+\n" },
      { assert(h:options()), "^heaplab%.effective_options: .* warm_pages=2" },
      { hl.options(), "\n  warm_pages: kind=int default=64 min=0 max=%d+\n      description=\"" },
      { hl.options().sweep, "^heaplab%.option: kind=enum default=%w+ min=0 max=%d+ choices={" },
      { assert(h:faults()), "^heaplab%.faults:\n  any: mode=off n=0 errno=0 calls=0 fired=0\n" },
      { assert(h:faults()).restore, "^heaplab%.fault: mode=off n=0 errno=0 calls=%d+ fired=0$" },
      { assert(h:churn(0.001, 64, 4096)), "^heaplab%.churn: allocations=%d+ allocated_bytes=%d+ " },
    }
    s:stop()
    for i, c in ipairs(shown) do
      local text = tostring(c[1])
      C.ok(text:find(c[2]), ("table %d: %s"):format(i, text))
      for line in text:gmatch("[^\n]+") do
        C.ok(#line <= 100 or line:find("description="), "a line of " .. #line .. ": " .. line)
      end
    end
    -- h:faults(): every site has its five fields, errno 0 until one is set
    -- (Python's None); errno was left out, and f.errno was nil
    for site, f in pairs(assert(h:faults())) do
      for _, k in ipairs{ "mode", "n", "errno", "calls", "fired" } do
        C.ok(f[k] ~= nil, site .. " has " .. k)
      end
    end
    C.eq(assert(h:faults()).restore.errno, 0, "errno of a site never armed")
    assert(h:inject("restore", "every", 3, "EIO"))
    C.eq(assert(h:faults()).restore.errno, "EIO", "errno of an armed site")
    C.ok(tostring(assert(h:faults()).restore):find("mode=every n=3 errno=EIO", 1, true), "armed")
    assert(h:inject("restore", "off"))
  end)

  it("at any depth of the Lua stack (the text's pieces fit the stack)", function()
    -- __tostring of stats and events pushed up to 35 values where a C function
    -- is given 20: in a fresh coroutine some call depth ended its stack there
    -- and the pushes wrote past it (SIGSEGV at depths around 20)
    local xs = { assert(h:stats()), assert(h:events(false)), assert(hl.footprint()),
                 assert(h:events(false))[1], hl.options(), assert(h:faults()) }
    local function deep(n, x)
      if n == 0 then return tostring(x) end
      return (deep(n - 1, x))
    end
    for _, x in ipairs(xs) do
      local want = tostring(x)
      for d = 0, 60 do
        C.eq(coroutine.wrap(function() return deep(d, x) end)(), want, "tostring at depth " .. d)
      end
    end
  end)

  it("of a table that holds itself: <cycle>, not C stack overflow", function()
    -- every __tostring of the module calls its fields' tostring: a table of
    -- the module holding itself (or a program's table whose __tostring prints
    -- it back) recursed until "C stack overflow" (session 32)
    local function shows(t, want, what)
      local ok, text = pcall(tostring, t)
      C.ok(ok, what .. ": " .. tostring(text))
      C.ok(text:find(want, 1, true), what .. ": " .. text)
      return text
    end
    local o = assert(h:options())
    o.self = o
    shows(o, " self=<cycle>", "h:options() holding itself")
    local f = assert(h:faults())
    f.restore.back = f
    shows(f, "\n  restore: mode=off ", "h:faults() under a site")
    shows(f, " back=<cycle>", "h:faults() under a site")
    local s = assert(hl.sampler(0.001, 64))
    local sm = assert(s:summary())
    s:stop()
    sm.list = { 1, sm }
    shows(sm, " list={1, <cycle>}", "s:summary() in a list of its own")
    local st = assert(h:stats())
    st.cycles = st
    shows(st, "heaplab.stats: cycles=<cycle> ", "h:stats() as a counter")
    local ev = assert(h:events(false))
    ev[1].kind = ev
    shows(ev, "\n  [1] <cycle> (cycle ", "h:events() in its event")
    -- through a program's table whose __tostring prints the module's table
    local o2 = assert(h:options())
    o2.x = { setmetatable({}, { __tostring = function() return tostring(o2) end }) }
    shows(o2, " x={<cycle>}", "through a program's __tostring")
    -- a chain of distinct tables: bounded, not one level per table
    local chain = assert(h:options())
    for _ = 1, 500 do
      local n = assert(h:options())
      n.x = { chain }
      chain = n
    end
    local text = shows(chain, "<too deep>", "a chain of 500")
    C.ok(#text < 64 * 1024, "a chain of 500 is cut short: " .. #text .. " bytes")
    -- an error in a field's __tostring is raised, and the table shows after
    local bad = assert(h:options())
    bad.x = { setmetatable({}, { __tostring = function() error("boom") end }) }
    C.raises({ "boom" }, tostring, bad)
    bad.x = nil
    C.ok(not tostring(bad):find("<cycle>", 1, true), "shown again after an error")
    C.eq(select(2, pcall(tostring, o)):find(" self=<cycle>", 1, true) ~= nil, true, "o again")
  end)

  it("of the module: its _VERSION", function()
    C.ok(hl._VERSION:find("^heaplab %d+%.%d+%.%d+$"), hl._VERSION)
    C.eq(hl._VERSION, "heaplab " .. hl.version, "_VERSION and version agree")
  end)
end)
