-- The launcher's heaplab.client module, as E8's page_floor.lua uses it.
local c = require "heaplab.client"
local heaplab = c.allocator() == "heaplab"
assert(c.allocator() == "heaplab" or c.allocator() == "libc", c.allocator())
local fp = c.footprint()
assert(fp.rss > 0 and fp.phys_footprint > 0 and fp.lazyfree >= 0, "footprint")
if heaplab then
  local before = c.stats()
  local t = {}
  for i = 1, 100000 do t[i] = { i } end
  local after = c.stats()
  assert(after.manual_mallocs - before.manual_mallocs >= 100000, "mallocs counted")
  assert(c.options().page_size == 65536 and c.options().page_release == true, "options")
  assert(c.resident_bytes() > 0 and c.vma_count() >= 1, "residency")
  t = nil
  collectgarbage()
  assert(c.trim() == true)
else
  assert(c.stats() == nil and c.options() == nil and c.resident_bytes() == nil, "no heap on libc")
end
do
  local s <close> = c.sampler(0.0005)
  s:mark()
  local big = string.rep("x", 8 << 20)
  local m = s:summary()
  assert(m.samples >= 1 and m.max_phys > 0 and m.mark_ns > 0, "sampler summary")
  assert(#s:series() >= 1 and #s:series()[1] == 4, "sampler series")
  assert(#big == 8 << 20)
end
do
  -- the capacity asked for bounds the stored series: 64 samples in 16 places
  local s <close> = c.sampler(0.0001, 16)
  local t0 = c.now()
  while s:summary().samples < 64 and c.now() - t0 < 5 do end
  local m = s:summary()
  assert(m.samples >= 64 and m.stored <= 16 and #s:series() == m.stored,
         "a sampler of capacity 16 stored " .. m.stored .. " of " .. m.samples)
end
local ok, err = pcall(c.sampler, 50)
assert(not ok and err:find("interval_s 50", 1, true) and err:find("[0.0001, 10]", 1, true),
       "a bad interval is refused, in the library's words: " .. tostring(err))
-- an integral float beyond the 64-bit integers is a capacity out of range,
-- named, as in the module -- not Lua's "number has no integer representation"
-- -- with hl_sampler_open's range, as the module says it ("(beyond the 64-bit
-- integers)" named none, session 44)
for _, cap in ipairs{ 1e300, -2^63 * 2 } do
  ok, err = pcall(c.sampler, 0.01, cap)
  assert(not ok and err:find("sampler: capacity " .. tostring(cap)
                             .. " out of range [16, 16777216]", 1, true),
         "capacity " .. tostring(cap) .. ": " .. tostring(err))
end
-- a string is no number, as in the module's heaplab.sampler: "0.01" and a capacity
-- "16" were taken (luaL_optnumber's conversion), true said "bad argument #1"
for _, case in ipairs{ { { "0.01" }, "interval_s must be a number, got '0.01'" },
                       { { true }, "interval_s must be a number, got true" },
                       { { 0.01, "16" }, "capacity must be an integer, got '16'" },
                       { { 0.01, 1.5 }, "capacity must be an integer, got 1.5" },
                       -- shown as the module shows a value (lhl_shown.h, one function:
                       -- the client's own copy said "-nan" and "a userdata"; session 44)
                       { { 0.01, 0/0 }, "capacity must be an integer, got nan" },
                       { { io.stdout }, "interval_s must be a number, got a FILE*" } } do
  ok, err = pcall(c.sampler, table.unpack(case[1], 1, 2))
  assert(not ok and err:find("heaplab.client.sampler: " .. case[2], 1, true),
         "sampler(" .. tostring(case[1][1]) .. ", " .. tostring(case[1][2]) .. "): " .. tostring(err))
end
local s = c.sampler()
s:stop()
ok, err = pcall(s.mark, s)
assert(not ok and err:find("stopped"), "a stopped sampler says so")
do
  -- a finalizer that stops the sampler while s:series() builds its tables
  -- (any allocation may run one) made the next read use the freed sampler:
  -- SIGSEGV.  Now the call says it was stopped.
  local s = c.sampler(0.0001, 4096)
  local t0 = c.now()
  while s:summary().stored < 600 and c.now() - t0 < 5 do end
  assert(s:summary().stored >= 600, "samples to read")
  collectgarbage("incremental", 1, 1000, 0)
  collectgarbage("stop")
  for _ = 1, 50 do setmetatable({}, { __gc = function() s:stop() end }) end
  collectgarbage("restart")
  local ok, err = pcall(s.series, s)
  collectgarbage("generational")
  assert(not ok and tostring(err):find("stopped"), "series of a sampler stopped by a finalizer: "
         .. tostring(err))
end
do
  -- samplers dropped without s:stop(): Lua's collector is told what one
  -- costs, so their __gc stops them; before, 8 bytes each to the collector
  -- left all 200 threads running (reading the thread count allocates, so
  -- only every 50)
  local function threads()
    local f = assert(io.open("/proc/self/status"))
    local st = f:read("a")
    f:close()
    return tonumber(st:match("Threads:%s*(%d+)"))
  end
  collectgarbage()
  collectgarbage()
  local base, most = threads(), 0
  for i = 1, 200 do
    local s = c.sampler(10) -- (idle threads: a count, not a load)
    if i % 50 == 0 then most = math.max(most, threads() - base) end
  end
  collectgarbage()
  collectgarbage()
  assert(most <= 8, "dropped samplers' threads still running: " .. most .. " of 200")
end
do
  -- a sampler is one by what the module made, not by its metatable: another
  -- userdata given it (debug.setmetatable) was read as one -- f:mark() and
  -- its __gc ran hl_sampler_* on a FILE *: SIGSEGV (the Lua hunt, session 36)
  local mt = getmetatable(c.sampler(10))
  local f = io.tmpfile()
  local file_mt = getmetatable(f)
  debug.setmetatable(f, mt)
  for _, m in ipairs{ "mark", "reset", "summary", "series", "stop" } do
    local ok, err = pcall(f[m], f)
    assert(not ok and err:find("bad argument #1", 1, true) and err:find("heaplab.client.sampler", 1, true),
           m .. " of a file with the sampler's metatable: " .. tostring(err))
  end
  local ok, err = pcall(f.mark)
  assert(not ok and err:find("heaplab.client.sampler expected, got no value", 1, true), tostring(err))
  mt.__gc(f)
  mt.__close(f)
  mt.__gc(42)
  debug.setmetatable(f, file_mt)
  f:close()
  -- the metatable in the registry replaced (42 made the next c.sampler() set a
  -- number as a metatable: SIGSEGV; {} or a look-alike gave samplers no methods
  -- and no __gc): made again, and a sampler works and is finalized
  local reg = debug.getregistry()
  for _, v in ipairs{ 42, {}, { __name = "heaplab.client.sampler" } } do
    reg["heaplab.client.sampler"] = v
    local s = c.sampler(10)
    s:mark()
    assert(s:summary().interval_us == 10000000, "a sampler after the registry's entry was replaced")
    s:stop()
    assert(not pcall(s.mark, s), "stopped")
  end
  -- a new sampler steps Lua's collector, but not one the program stopped:
  -- that step ran the collector and its finalizers anyway
  collectgarbage()
  collectgarbage("stop")
  local ran = false
  setmetatable({}, { __gc = function() ran = true end })
  for _ = 1, 4 do c.sampler(10, 1 << 24):stop() end
  collectgarbage("restart")
  assert(not ran, "a finalizer ran while the program had stopped the collector")
  collectgarbage()
  assert(ran, "the finalizer runs once the collector does")
end
assert(c.report():find('"allocator": "' .. c.allocator() .. '"', 1, true), "report")
assert(c.peak_rss() > 0 and c.now() > 0)
print("ok")
