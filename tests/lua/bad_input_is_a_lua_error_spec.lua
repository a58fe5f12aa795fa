-- Bad input is a Lua error, caught by pcall, whose message names the
-- function, the argument and what was wrong -- never a crash.
local hl = require "heaplab"
local C = require "check"

local h = assert(hl.heap{ warm_pages = 4 })
local other = assert(hl.heap{})
local o = assert(h:alloc(64, 2))
local foreign = assert(other:alloc(16))
local cases = 0

local function case(want, f, ...)
  C.raises(want, f, ...)
  cases = cases + 1
end

describe("bad input is a Lua error naming function, argument and fault", function()

it("heaplab.heap{...}: option names and ranges from the C declaration", function()
case({ "heaplab.heap", "warm_pages", "-1", "[0, 1048576]" }, hl.heap, { warm_pages = -1 })
case({ "heaplab.heap", "unknown option 'warm_page'" }, hl.heap, { warm_page = 64 })
case({ "heaplab.heap", "page_release", "maybe", "boolean" }, hl.heap, { page_release = "maybe" })
case({ "heaplab.heap", "warm_pages", "integer", "1.5" }, hl.heap, { warm_pages = 1.5 })
case({ "heaplab.heap", "release_advice", "as a string", "dontneed|free" }, hl.heap, { release_advice = 1 })
case({ "heaplab.heap", "reuse_failed_order", "sideways", "fifo|lifo" }, hl.heap, { reuse_failed_order = "sideways" })
case({ "heaplab.heap", "thp", "always", "never|madvise|populate" }, hl.heap, { thp = "always" })
case({ "heaplab.heap", "thp", "as a string" }, hl.heap, { thp = true })
case({ "heaplab.heap", "option names are strings", "1" }, hl.heap, { true })
case({ "heaplab.heap", "argument 1", "table of options", "'fast'" }, hl.heap, "fast")
case({ "heaplab.heap", "page_size", "power of two" }, hl.heap, { page_size = 12288 })
case({ "heaplab.heap", "small_max", "page_size/4" }, hl.heap, { page_size = "16k", small_max = 8192 })
-- options each in range that cannot go together (hl_options_validate)
case({ "heaplab.heap", "subpage_release", "needs page_release" }, hl.heap,
     { subpage_release = true, page_release = false })
case({ "heaplab.heap", "compact", "needs mode=collected" }, hl.heap, { mode = "manual", compact = "sparse" })
case({ "heaplab.heap", "generational", "needs mode=collected" }, hl.heap,
     { mode = "manual", generational = true })
case({ "heaplab.heap", "collector", "background needs mode=collected" }, hl.heap,
     { mode = "manual", collector = "background" })
-- the nursery's floor above its ceiling (it was clamped without a word), on a
-- generational heap, the one that has a nursery
case({ "heaplab.heap", "young_min_bytes", "8388608 exceeds young_bytes 1048576", "[65536," },
     hl.heap, { generational = true, young_min_bytes = "8m", young_bytes = "1m" })
case({ "heaplab.heap", "warm_pages", "integer", "a table" }, hl.heap, { warm_pages = {} })
case({ "heaplab.heap", "page_size", "bytes in" }, hl.heap, { page_size = "64q" })
-- C reads a name up to its first NUL: this one set warm_pages
case({ "heaplab.heap", "warm_pages...", "NUL" }, hl.heap, { ["warm_pages\0junk"] = 5 })

end)

it("heaplab.heap{...}: a string that is no value says what it is, not 'out of range'", function()
  -- (the hostile Lua run: HEAPLAB_WARM_PAGES=abc said "'abc' is out of range")
  local junk = {
    { "warm_pages", "abc", "'abc' is not a whole number" },
    { "warm_pages", "12x", "'12x' is not a whole number" },
    { "warm_pages", "", "the value is empty" },
    { "gc_live_ratio", "1.5", "'1.5' is not a whole number" },
    { "quiet_bytes", "64x", "'64x' is not a byte size" },
    { "verify", "maybe", "'maybe' is not a boolean" },
    { "sweep", "partial", "'partial' is not one of retired|full" },
  }
  for _, j in ipairs(junk) do
    local err = C.raises({ "heaplab.heap", "option " .. j[1] .. ": " .. j[3] }, hl.heap, { [j[1]] = j[2] })
    C.ok(not err:find("out of range", 1, true), "junk called out of range: " .. err)
  end
  C.raises({ "heaplab.heap", "'99999999999999999999999' is out of range" }, hl.heap,
           { warm_pages = "99999999999999999999999" })
  -- the same words for the environment variable
  local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
  local p = assert(io.popen("HEAPLAB_WARM_PAGES=abc '" .. lua .. "' -e 'print(pcall(require(\"heaplab\").heap))' 2>&1"))
  local out = p:read("a")
  p:close()
  C.ok(out:find("HEAPLAB_WARM_PAGES=abc: option warm_pages: 'abc' is not a whole number", 1, true),
       "HEAPLAB_WARM_PAGES=abc: " .. out)
end)

it("heaplab.heap{mode = 'manual'}: the collector's switches the environment gives are ignored", function()
  -- (HEAPLAB_GENERATIONAL=1 exported made every manual heap a Lua error:
  -- "option generational: needs mode=collected"); set explicitly, refused
  local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
  local code = [[local hl = require("heaplab")
local h = assert(hl.heap{ mode = "manual" })
local o = h:options()
print("manual", o.mode, o.generational, o.collector, o.compact)
h:close()
local g = assert(hl.heap{})
print("default", g:options().generational, g:options().collector)
g:close()
print("explicit", pcall(hl.heap, { mode = "manual", generational = true }))]]
  local p = assert(io.popen("HEAPLAB_GENERATIONAL=1 HEAPLAB_COLLECTOR=background HEAPLAB_COMPACT=sparse '"
                            .. lua .. "' -e '" .. code:gsub("'", "'\\''") .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  C.ok(out:find("manual\tmanual\tfalse\tsync\tnever", 1, true), "the manual heap: " .. out)
  C.ok(out:find("default\ttrue\tbackground", 1, true), "a collected heap takes them: " .. out)
  C.ok(out:find("explicit\tfalse\t[^\n]*generational: needs mode=collected"), "explicit: " .. out)
end)

it("heaplab.heap: a cross-check an environment value fails names the variable", function()
  -- (it said "option subpage_release: needs page_release ..." and "option
  -- compact: needs mode=collected ...", no variable: h36opt)
  local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
  local code = [[local hl = require("heaplab")
print("subpage", pcall(hl.heap, { page_release = false }))
print("mode", pcall(hl.heap, { compact = "sparse" }))]]
  local p = assert(io.popen("HEAPLAB_SUBPAGE_RELEASE=1 HEAPLAB_MODE=manual '"
                            .. lua .. "' -e '" .. code:gsub("'", "'\\''") .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  C.ok(out:find("subpage\tfalse\t[^\n]*environment HEAPLAB_SUBPAGE_RELEASE=1: option subpage_release: needs page_release"),
       "subpage_release: " .. out)
  C.ok(out:find("mode\tfalse\t[^\n]*environment HEAPLAB_MODE=manual: option compact: needs mode=collected"),
       "mode: " .. out)
end)

it("every collected-only option's variable is ignored by a manual heap; heaplab.options() says which", function()
  -- HEAPLAB_YOUNG_MIN_BYTES=64m made heaplab.heap{mode = "manual"} a Lua error (the
  -- review of session 33): the core ignored three switches, not every option only
  -- a collected heap reads
  local opts = hl.options()
  C.eq(opts.young_min_bytes.collected_only, true, "young_min_bytes")
  C.eq(opts.gc_trigger_bytes.collected_only, true, "gc_trigger_bytes")
  C.eq(opts.heap_limit_bytes.collected_only, false, "heap_limit_bytes")
  C.eq(opts.page_release.collected_only, false, "page_release")
  local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
  local code = [[local hl = require("heaplab")
local h = assert(hl.heap{ mode = "manual" })
print("manual", h:options().young_min_bytes)
h:close()
print("generational", pcall(hl.heap, { generational = true, young_bytes = "1m" }))]]
  local p = assert(io.popen("HEAPLAB_YOUNG_MIN_BYTES=8m '"
                            .. lua .. "' -e '" .. code:gsub("'", "'\\''") .. "' 2>&1"))
  local out = p:read("a")
  p:close()
  C.ok(out:find("manual\t4194304", 1, true), "the manual heap: " .. out)
  C.ok(out:find("generational\tfalse\t[^\n]*environment HEAPLAB_YOUNG_MIN_BYTES=8m: option young_min_bytes: 8388608 exceeds young_bytes 1048576"),
       "generational: " .. out)
end)

it("h:alloc / h:fill", function()
case({ "h:alloc", "size", ">= 0", "-1" }, h.alloc, h, -1)
case({ "h:alloc", "size", "integer", "'big'" }, h.alloc, h, "big")
case({ "h:alloc", "size", "integer", "nothing" }, h.alloc, h)
case({ "h:alloc", "refs", ">= 0", "-2" }, h.alloc, h, 16, -2)
case({ "h:alloc", "size", "exceeds the maximum", tostring(hl.MAX_SIZE) }, h.alloc, h, hl.MAX_SIZE + 1)
case({ "h:alloc", "refs", "exceeds the maximum" }, h.alloc, h, 16, hl.MAX_REFS + 1)
case({ "h:alloc", "size", "integer", "1.5" }, h.alloc, h, 1.5)
-- NaN is "nan", not printf's "-nan" of 0/0 (the C API hunt, session 33)
for _, call in ipairs{ { "h:alloc", h.alloc, h, 0/0 }, { "heaplab.heap", hl.heap, { warm_pages = 0/0 } },
                       { "h:alloc", h.alloc, h, -(0/0) },
                       -- and in the C library's own messages, where a number is a double
                       -- ("h:churn: duration_s -nan out of range": the Lua hunt, session 36)
                       { "h:churn", h.churn, h, 0/0, 64, 1024 },
                       { "h:churn", h.churn, h, 0.01, 64, 1024, 0/0 },
                       { "heaplab.sampler", hl.sampler, 0/0 } } do
  local err = C.raises({ call[1], "nan" }, table.unpack(call, 2))
  C.ok(not tostring(err):find("-nan", 1, true), "NaN shown as -nan: " .. tostring(err))
end
-- A float with an integral value beyond the 64-bit integers (1e300, 2^63) is an
-- integer too big, not "no integer": "h:alloc: size must be an integer, got
-- 1.0000000000000001e+300" where 2^62 exceeded the maximum (docs/lua.md: an
-- integral float is that integer; the hostile Lua round, h41lua, session 41)
local reg = assert(h:conservative_region(2))
-- (above them: the range the C call checks, as the Python binding names it for 2**64 --
-- "(beyond the 64-bit integers)" named none where 2^62 got the maximum; session 44)
local reserve_words = tostring(h:stats().reserved_bytes // 8)
for _, big in ipairs{ 1e300, 2^63, -1e300, -2^64 } do
  local shown = ("%.17g"):format(big)
  local function range(r, below) return big > 0 and "out of range " .. r or below or ">= " end
  for _, call in ipairs{
      { { "h:alloc", "size", range("[0, 1099511627776]") }, h.alloc, h, big },
      { { "h:alloc", "refs", range("[0, 16777216]") }, h.alloc, h, 16, big },
      { { "h:fill", "total_bytes", range("[0, 1099511627776]") }, h.fill, h, big, 256 },
      { { "h:fill", "size", range("[0, 1099511627776]") }, h.fill, h, 1024, big },
      { { "h:fill", "refs", range("[0, 16777216]") }, h.fill, h, 1024, 16, big },
      { { "h:fill", "stride", range("[1, 1000000]") }, h.fill, h, 1024, 16, 0, big },
      { { "h:churn", "size", range("[0, 1099511627776]") }, h.churn, h, 0.01, big, 1024 },
      { { "h:churn", "live_bytes", range("(beyond the 64-bit integers)") },
        h.churn, h, 0.01, 16, big },
      { { "h:thin", "every", range("[1, 1000000000]", ">= 1") }, h.thin, h, o, big },
      { { "o:read", "offset", range("[0, 64]", ">= 0") }, o.read, o, big },
      { { "o:read", "length", range("[0, 64]", ">= 0") }, o.read, o, 0, big },
      { { "o:write", "offset", range("[0, 64]", ">= 0") }, o.write, o, "x", big },
      -- (and named as hl_collect names 10^7: "(beyond the 64-bit integers)" named no range)
      { { "h:collect", "cycles", "out of range [1, 1000000] (EINVAL)" }, h.collect, h, big },
      { { "h:collect", "cycles", "out of range [1, 1000000] (EINVAL)" }, h.collect, h,
        { cycles = big } },
      -- (n: the range its mode takes, hl_fault_mode_min_arg's, either side)
      { { "h:inject", "n", "out of range [1, 2^63-1]" }, h.inject, h, "restore", "every", big },
      { { "h:inject", "n", "out of range [0, 2^63-1]" }, h.inject, h, "restore", "first", big },
      { { "h:inject", "n", "out of range [-2^63, 2^63-1]" },
        h.inject, h, "restore", "always", big },
      { { "h:inject", "errno", "out of range" }, h.inject, h, "restore", "every", 3, big },
      { { "heaplab.sampler", "capacity", "out of range [16, 16777216]" }, hl.sampler, 0.01, big },
      { { "h:conservative_region", "words", range("[1, " .. reserve_words .. "]", ">= 1") },
        h.conservative_region, h, big },
      { { "reg:write", "start", range("[1, 3]", ">= 1") }, reg.write, reg, { 1 }, big },
      { { "o[i]", "slot index", "out of range [1, 2]" }, function() return o[big] end },
      { { "o[i] = v", "slot index", "out of range [1, 2]" }, function() o[big] = nil end },
      { { "reg[i]", "word index", "out of range [1, 2]" }, function() return reg[big] end },
      { { "reg[i] = v", "word index", "out of range [1, 2]" }, function() reg[big] = 0 end } } do
    local err = C.raises(call[1], table.unpack(call, 2))
    C.ok(err:find(shown, 1, true), "the value as given: " .. err)
    C.ok(not err:find("must be an integer", 1, true), "an integer too big, not none: " .. err)
    cases = cases + 1
  end
end
-- (an unknown mode or site beside such an n: hl_inject_named names it, n never looked at)
case({ "h:inject", "unknown mode 'often'" }, h.inject, h, "restore", "often", 2^63)
case({ "h:inject", "unknown site 'nowhere'" }, h.inject, h, "nowhere", "every", 2^63)
for _, n in ipairs{ 1e300, 2^63, -1e300 } do
  local err = C.raises({ "reg:write", "#values", n > 0 and "out of range" or ">= 0",
                         ("%.17g"):format(n) },
                       reg.write, reg, setmetatable({}, { __len = function() return n end }))
  C.ok(not err:find("must be an integer", 1, true), "an integer too big, not none: " .. err)
  cases = cases + 1
end
-- and in an option (docs/lua.md: "here and in every method's integer argument"): out of
-- range as C says it of an integer that size, not "got the number 1e+300" (h42left)
for _, big in ipairs{ 2^63, -2^64, 1e300 } do
  local exact = ("%.0f"):format(big)
  local err = C.raises({ "heaplab.heap: option page_size: '" .. exact:sub(1, 40),
                         "is out of range; expected bytes in [4096, 1048576]" },
                       hl.heap, { page_size = big })
  C.ok(not err:find("got the number", 1, true), "an integer too big, not a number: " .. err)
  cases = cases + 1
end
-- but of a boolean or a choice no integer is a value: what the option expects, and the
-- integer, as 2^62 is said (and Python's 1 << 63) -- it said "'9223372036854775808' is
-- not a boolean", a string never written (session 43)
for _, big in ipairs{ 2^63, -2^64, 1e300 } do
  local exact = ("%.0f"):format(big)
  for _, o in ipairs{ { "page_release", "expected a boolean (true/false, 1/0, on/off, yes/no)" },
                      { "thp", "expected one of never|madvise|populate as a string" } } do
    local err = C.raises({ "heaplab.heap: option " .. o[1] .. ": " .. o[2],
                           "got the integer " .. exact:sub(1, 60) },
                         hl.heap, { [o[1]] = big })
    C.ok(not err:find("'", 1, true), "no string was given: " .. err)
    C.ok(#exact <= 60 or err:find(exact:sub(1, 60) .. "...", 1, true), "shortened: " .. err)
    cases = cases + 1
  end
end
reg:remove()
case({ "h:alloc", "self", "call it with ':'" }, h.alloc, 16)
case({ "h:fill", "total_bytes", ">= 0" }, h.fill, h, -5, 256)
case({ "h:fill", "size", "integer", "nothing" }, h.fill, h, 1 << 20)

end)

it("h:collect{...}", function()
case({ "h:collect", "cycles", "[1, 1000000]", "0" }, h.collect, h, { cycles = 0 })
case({ "h:collect", "major", "boolean", "'yes'" }, h.collect, h, { major = "yes" })
case({ "h:collect", "unknown field", "'cyclez'" }, h.collect, h, { cyclez = 2 })
case({ "h:collect", "table", "'all'" }, h.collect, h, "all")

end)

it("h:inject(site, mode, n, errno)", function()
case({ "h:inject", "unknown site 'nowhere'" }, h.inject, h, "nowhere", "always")
case({ "h:inject", "unknown mode 'sometimes'" }, h.inject, h, "restore", "sometimes")
case({ "h:inject", "unknown errno 'EWHAT'" }, h.inject, h, "restore", "always", 0, "EWHAT")
case({ "h:inject", "every needs N >= 1" }, h.inject, h, "restore", "every", 0, "EIO")
case({ "h:inject", "site 'release...'", "NUL" }, h.inject, h, "release\0junk", "always")
case({ "h:inject", "mode 'always...'", "NUL" }, h.inject, h, "release", "always\0x")
case({ "h:inject", "errno 'ENOMEM...'", "NUL" }, h.inject, h, "release", "always", 0, "ENOMEM\0x")
case({ "h:inject", "errno", "[1, 4095]", "-3" }, h.inject, h, "restore", "always", 0, -3)
case({ "h:inject", "site", "string", "nothing" }, h.inject, h)
-- (errno is a name or a number: "errno must be an integer, got true" said only half)
case({ "h:inject", "errno must be a name or an integer", "true" }, h.inject, h, "restore", "always", 0, true)
case({ "h:inject", "errno must be an integer", "1.5" }, h.inject, h, "restore", "always", 0, 1.5)

end)

it("other heap methods", function()
case({ "h:events", "clear", "boolean", "'yes'" }, h.events, h, "yes")
case({ "h:churn", "duration_s", "(0, 3600]", "-1" }, h.churn, h, -1, 64, 1 << 20)
case({ "h:churn", "size", "at least 1 byte" }, h.churn, h, 0.01, 0, 1 << 20)
case({ "h:churn", "live_bytes", "smaller than one object" }, h.churn, h, 0.01, 4096, 16)
case({ "heaplab.heap", "no method 'allco'" }, function() return h.allco end)
-- the list is the method table's own (three hand-written lists could drift from it)
case({ "heaplab.heap", "(methods: alloc, fill, thin, conservative_region, collect, stats, events, "
       .. "resident_bytes, vma_count, inject, faults, close, closed, trim, check, last_error, "
       .. "churn, memory_pressure, options, range)" }, function() return h.allco end)
case({ "heaplab.heap", "no field 1", "methods only" }, function() return h[1] end)
case({ "heaplab.heap", "cannot set field 'x'" }, function() h.x = 1 end)

end)

it("slots: 1-based, values are objects of the same heap or nil", function()
case({ "o[i]", "slot index 0", "[1, 2]" }, function() return o[0] end)
case({ "o[i]", "slot index 3", "[1, 2]" }, function() return o[3] end)
case({ "o[i]", "slot index", "integer", "1.5" }, function() return o[1.5] end)
case({ "o[i] = v", "slot index -1", "[1, 2]" }, function() o[-1] = nil end)
case({ "o[i]", "slot index 1", "no slots" }, function() return foreign[1] end)
case({ "o[i] = v", "cannot set field 'name'" }, function() o.name = "x" end)
case({ "o[i] = v", "v must be a heaplab object or nil", "42" }, function() o[1] = 42 end)
case({ "o[i] = v", "another heap" }, function() o[1] = foreign end)
do -- a closed heap's handle: said so (it was named another heap's)
  local shut = assert(hl.heap{ reserve_bytes = "64m" })
  local x = assert(shut:alloc(8))
  shut:close()
  case({ "o[i] = v", "v's heap is closed" }, function() o[1] = x end)
end
-- one bound for words, negative or zero (-1 said ">= 0", and 0 was refused)
case({ "h:conservative_region", "words must be >= 1, got -1" }, h.conservative_region, h, -1)
case({ "h:conservative_region", "words must be >= 1, got 0" }, h.conservative_region, h, 0)
case({ "heaplab.object", "no method 'sise'" }, function() return o.sise end)
case({ "o:read", "offset", "exceeds the maximum of 64" }, o.read, o, 65)
case({ "o:read", "length", "exceeds the maximum of 4" }, o.read, o, 60, 5)
case({ "o:write", "data", "string", "a table" }, o.write, o, {})
case({ "o:write", "do not fit a 64-byte payload" }, o.write, o, ("x"):rep(10), 60)
case({ "o:size", "self", "a heaplab.heap" }, o.size, h)

end)

it("released objects, a stopped sampler, bad sampler arguments", function()
local gone = h:alloc(16)
gone:release()
case({ "o:size", "released" }, gone.size, gone)
case({ "o[i] = v", "v was released" }, function() o[1] = gone end)
case({ "heaplab.sampler", "interval_s", "[0.0001, 10]", "0" }, hl.sampler, 0)
case({ "heaplab.sampler", "capacity", "[16, 16777216]" }, hl.sampler, 0.01, 8)
-- the call is named once ("heaplab.sampler: sampler: capacity ..." before)
for _, args in ipairs{ { 0 }, { 0.01, 8 } } do
  local err = C.raises({ "heaplab.sampler: " }, hl.sampler, table.unpack(args))
  C.ok(not err:find("heaplab.sampler: sampler:", 1, true), "the prefix twice: " .. err)
end
local s = hl.sampler(0.01)
-- a typo in a sampler's method was a silent nil (s:summray(): "attempt to
-- call a nil value"), where lua.md promises an error, as a heap's
case({ "heaplab.sampler", "no method 'summray'", "(methods: mark, reset, summary, series, stop)" },
     function() return s.summray end)
case({ "heaplab.sampler", "no field 1", "methods only" }, function() return s[1] end)
s:stop()
case({ "s:mark", "stopped" }, s.mark, s)

end)

it("a value given another kind's metatable is an error, and is still finalized as itself", function()
-- debug.setmetatable gives any userdata any metatable: the module took a
-- value for the kind its metatable named -- a heap read as a sampler
-- (SIGSEGV), a region's words freed as a heap, a sampler's 16 bytes read as
-- a heap's -- and a heap whose metatable was a copy of its own was refused
-- by its __gc and never freed
local s = hl.sampler(0.01, 16)
case({ "s:series", "start must be >= 1, got 0" }, s.series, s, 0)
local hh = hl.heap{ reserve_bytes = "64m" }
local g = hh:conservative_region(2)
local ob = hh:alloc(8)
local mt = {}
for _, v in ipairs{ s, hh, g, ob } do mt[#mt + 1] = debug.getmetatable(v) end
debug.setmetatable(hh, mt[1])         -- the heap as a sampler
case({ "s:summary", "expected a sampler as self", "got a heaplab.heap" }, hh.summary, hh)
case({ "s:stop", "expected a sampler as self", "got a heaplab.heap" }, hh.stop, hh)
debug.setmetatable(ob, mt[1])         -- a handle as a sampler
case({ "s:summary", "got a heaplab.object" }, ob.summary, ob)
debug.setmetatable(g, mt[2])          -- a region as a heap
case({ "h:closed", "expected a heap as self", "got a heaplab.region" }, g.closed, g)
case({ "h:close", "got a heaplab.region" }, g.close, g)
local file = io.tmpfile()               -- a userdata not of heaplab with a heap's metatable
local file_mt = debug.getmetatable(file)
debug.setmetatable(file, mt[2])
case({ "h:closed", "got a userdata (with the metatable of heaplab.heap)" }, file.closed, file)
C.ok(tostring(file):find("^a userdata %(with the metatable of heaplab.heap%): "), tostring(file))
debug.setmetatable(file, file_mt)
file:close()
debug.setmetatable(s, mt[2])          -- a sampler as a heap
case({ "h:events", "got a heaplab.sampler" }, s.events, s)
C.ok(tostring(s):find("heaplab.sampler (with the metatable of heaplab.heap)", 1, true), tostring(s))
-- each is still what it was: the metatables put back, everything works
debug.setmetatable(hh, mt[2]); debug.setmetatable(s, mt[1])
debug.setmetatable(g, mt[3]); debug.setmetatable(ob, mt[4])
C.eq(ob:size(), 8, "ob:size()")
g[1] = ob
C.eq(s:summary().samples >= 0, true, "s:summary()")
C.eq(hh:check(), true, "hh:check()")
-- dropped with swapped metatables, each is finalized as its own kind (the
-- __gc of every kind dispatches on what the value is); with a copy of its
-- own metatable a heap is freed too (it was refused: 'heaplab.heap
-- expected, got heaplab.heap', and leaked)
debug.setmetatable(hh, mt[1]); debug.setmetatable(s, mt[3])
debug.setmetatable(g, mt[4]); debug.setmetatable(ob, mt[2])
collectgarbage(); collectgarbage()
local before = C.status("VmSize")
local copies = {}
for i = 1, 3 do
  local h2 = hl.heap{ reserve_bytes = "64m" }
  local copy = {}
  for k, v in pairs(mt[2]) do copy[k] = v end
  debug.setmetatable(h2, copy)
  copies[i] = setmetatable({}, { __mode = "v" })
  copies[i][1] = h2
end
local seen = setmetatable({}, { __mode = "v" })
seen[1], seen[2], seen[3], seen[4] = hh, s, g, ob
hh, s, g, ob = nil, nil, nil, nil
collectgarbage(); collectgarbage()
C.eq(next(seen), nil, "every tampered value collected")
for i = 1, 3 do C.eq(copies[i][1], nil, "a heap with a copied metatable collected") end
-- and their C heaps freed: each held a 64 MiB reservation and a mark stack
-- (hundreds of MiB of address space), now gone
local after = C.status("VmSize")
C.ok(after < before + 16 * 1024, ("VmSize %d kB before the heaps, %d after: a heap leaked")
     :format(before, after))
end)

it("messages say it once, in Lua's names, in the right number", function()
-- the Lua hunt of session 31: each of these said something else before
local function exact(want, f, ...)
  local err = C.raises({ want }, f, ...)
  return err
end
-- h:thin: -1 said ">= 0", then 0 was refused as "at least 1": one message
exact("h:thin: every must be >= 1, got -1", h.thin, h, o, -1)
exact("h:thin: every must be >= 1, got 0", h.thin, h, o, 0)
-- a manual heap's C messages: no C names (hl_trim, hl_roots_add)
local m = assert(hl.heap{ mode = "manual" })
local err = exact("h:collect: a manual heap has no collector (use h:trim())", m.collect, m)
C.ok(not err:find("hl_"), err)
err = exact("h:conservative_region: root regions need a collected heap (EMODE)",
            m.conservative_region, m, 4)
C.ok(not err:find("hl_"), err)
m:close()
-- a sampler's field, as a heap's and an object's
local smp = assert(hl.sampler(0.05, 16))
exact("heaplab.sampler: cannot set field 'x' (a sampler has methods only)",
      function() smp.x = 1 end)
smp:stop()
-- a key that is no name, said by its type
exact("h:collect: its table's keys are the names cycles and major, got a table as a key",
      h.collect, h, { [{}] = 1 })
exact("h:collect: unknown field 'cyclse' in its table", h.collect, h, { cyclse = 1 })
exact("heaplab.heap: option names are strings, got 1 as a key", hl.heap, { true })
-- counts of one in the singular
local reg = assert(h:conservative_region(1))
exact("reg:write: 1 word from word 2 does not fit a region of 1 word", reg.write, reg, { 0 }, 2)
exact("reg:write: 2 words from word 1 do not fit a region of 1 word", reg.write, reg, { 0, 0 })
local one = assert(h:alloc(1))
exact("o:write: 1 byte at offset 1 does not fit a 1-byte payload", one.write, one, "x", 1)
exact("o:write: 2 bytes at offset 0 do not fit a 1-byte payload", one.write, one, "xy")
-- a __len that is no length: said by reg:write
exact("reg:write: #values must be >= 0 (its __len returned -1)", reg.write, reg,
      setmetatable({}, { __len = function() return -1 end }))
exact("reg:write: #values must be an integer (its __len returned 1.5)", reg.write, reg,
      setmetatable({}, { __len = function() return 1.5 end }))
exact("reg:write: #values must be an integer (its __len returned 'x')", reg.write, reg,
      setmetatable({}, { __len = function() return "x" end }))
reg:remove()
one:release()
-- an enum option's choice given as an option
exact([[heaplab.heap: unknown option 'background' ('background' is a choice of collector: ]]
      .. [[collector = "background")]], hl.heap, { background = true })
-- a metatable's __tostring called on a value that is no handle
exact("heaplab.heap: __tostring: expected a heaplab.heap, got 5", getmetatable(h).__tostring, 5)
exact("heaplab.object: __tostring: expected a heaplab.object, got a table",
      getmetatable(o).__tostring, {})
cases = cases + 1
end)

it("a number in a string is refused for every integer argument, errno too", function()
-- options take strings (C parses them, docs/lua.md); a method's integer
-- argument does not, as h:alloc("16") did not -- but h:inject's errno "5"
-- was passed to C, which read errno 5 (the Lua hunt, session 31)
case({ "h:alloc", "size must be an integer", "'16'" }, h.alloc, h, "16")
case({ "h:inject", "n must be an integer", "'3'" }, h.inject, h, "restore", "every", "3")
case({ "h:inject", "errno must be a name or an integer", "'5'" }, h.inject, h, "restore",
     "every", 3, "5")
case({ "h:inject", "errno", "' 0x5 '" }, h.inject, h, "restore", "every", 3, " 0x5 ")
case({ "no method '1'", "o[i] for slots" }, function() return o["1"] end)
case({ "heaplab.sampler", "capacity must be an integer" }, hl.sampler, 0.01, "16")
C.eq(h:inject("restore", "every", 3, 5), true, "errno 5 as an integer")
C.eq(h:faults().restore.errno, "EIO", "errno 5 is EIO")
C.eq(h:inject("restore", "every", 3, "EIO"), true, "errno by name")
C.eq(h:inject("restore", "off"), true, "disarmed")
local ok = assert(hl.heap{ warm_pages = "16" }) -- options: C parses the string
C.eq(ok:options().warm_pages, 16, "an option's string")
ok:close()
end)

it("nothing above damaged the heap", function()
o[1] = h:alloc(8)
C.eq(h:check(), true, "h:check()")
C.eq(#o, 2, "#o")
C.ok(cases >= 20, "at least 20 bad-input cases, got " .. cases)
other:close()
h:close()
end)
end)
