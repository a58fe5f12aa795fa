-- h:conservative_region (E7) from Lua: a word holding an object's address
-- keeps the object and what it refers to; an interior address keeps it with
-- conservative_interior (the default) and not without; integers that point
-- nowhere keep nothing; scrubbing, removing or Lua's GC of the region lets go.
-- A closed heap makes the region refuse; bad input is a Lua error naming it.
local hl = require "heaplab"
local C = require "check"

local MiB = C.MiB

local function collect(h)
  assert(h:collect{ major = true })
  return assert(h:stats())
end

describe("a conservative region", function()

for _, opts in ipairs{ {}, { generational = true }, { collector = "background" },
                       { mark_threads = 2 } } do
  local name = next(opts) or "default"
  it("keeps a structure by one stale word until scrubbed (" .. name .. ")", function()
    opts.verify = true
    local h <close> = hl.heap(opts)
    local reg = h:conservative_region(16)
    local r = assert(h:fill(4 * MiB, 256))
    local _, objects = assert(r:checksum())
    reg[9] = r
    C.eq(reg[9] ~= 0, true, "the word holds the address")
    r:release()
    local s = collect(h)
    C.ok(s.small_live_bytes >= 4 * MiB, "the stale word kept " .. s.small_live_bytes .. " bytes")
    C.eq(s.marked_objects, objects, "objects the mark kept")
    C.eq(reg:scrub(), reg, "scrub returns the region")
    s = collect(h)
    C.eq(s.marked_objects, 0, "objects kept after the scrub")
    C.eq(s.small_live_bytes + s.large_live_bytes, 0, "live bytes after the scrub")
    C.ok(h:check())
  end)
end

for _, interior in ipairs{ true, false } do
  for _, size in ipairs{ 64, 256 << 10 } do
    it(("follows conservative_interior = %s for a %d-byte object"):format(interior, size),
       function()
      local h <close> = hl.heap{ conservative_interior = interior }
      local reg = h:conservative_region(2)
      local o = h:alloc(size, 1)
      o[1] = h:alloc(16)
      reg[2] = o:address() + size - 1 -- the payload's last byte
      o:release()
      collectgarbage("collect")         -- (the handle o[1] made, too)
      C.eq(collect(h).marked_objects, interior and 2 or 0, "objects kept")
    end)
  end
end

it("keeps nothing by words that point nowhere", function()
  local h <close> = hl.heap{}
  local base, bytes = h:range()
  local r = assert(h:fill(4 * MiB, 256))
  local reg = h:conservative_region(50000)
  local words, inside = {}, 0
  local rnd = 0x2545F4914F6CDD1D
  for i = 1, #reg do
    rnd = rnd ~ (rnd << 13); rnd = rnd ~ (rnd >> 7); rnd = rnd ~ (rnd << 17)
    words[i] = rnd
    if math.ult(rnd - base, bytes) then inside = inside + 1 end
  end
  reg:write(words)
  C.eq(reg:words()[77], words[77], "a word read back")
  r:release()
  local s = collect(h)
  if inside == 0 then C.eq(s.marked_objects, 0, "objects kept by random words") end
end)

it("keeps exactly the objects its words point at", function()
  local h <close> = hl.heap{}
  local reg = h:conservative_region(20)
  local objs = {}
  for i = 1, 10 do objs[i] = h:alloc(100) end
  reg:write({ objs[2], objs[4], 0, objs[6] }, 3)
  for i = 1, 10 do objs[i]:release() end
  C.eq(collect(h).marked_objects, 3, "objects kept")
end)

it("is removed by remove(), <close> and Lua's GC", function()
  local h <close> = hl.heap{}
  local r = assert(h:fill(2 * MiB, 256))
  do
    local reg <close> = h:conservative_region(4)
    reg[1] = r
    C.eq(h, reg:heap(), "reg:heap()")
  end
  local reg = h:conservative_region(4)
  reg[1] = r
  r:release()
  collectgarbage("collect")
  C.ok(collect(h).small_live_bytes >= 2 * MiB, "kept by the second region")
  reg:remove()
  reg:remove()
  C.ok(reg:removed(), "removed")
  C.eq(tostring(reg), "heaplab.region (removed)", "tostring")
  C.raises({ "reg[i]", "removed" }, function() return reg[1] end)
  C.raises({ "reg:scrub", "removed" }, function() reg:scrub() end)
  C.eq(collect(h).marked_objects, 0, "nothing kept once removed")
  local gone = h:conservative_region(4)
  local o = h:alloc(64)
  gone[1] = o
  o:release()
  gone = nil
  C.lua_gc()
  C.eq(collect(h).marked_objects, 0, "nothing kept once the region was collected")
end)

it("refuses to be used once its heap is closed, and is collected safely", function()
  local h = hl.heap{}
  local reg = h:conservative_region(4)
  reg[1] = h:alloc(8)
  h:close()
  C.raises({ "reg[i] = v", "heap is closed" }, function() reg[1] = 1 end)
  C.raises({ "reg[i]", "heap is closed" }, function() return reg[1] end)
  C.raises({ "reg:words", "heap is closed" }, function() return reg:words() end)
  C.raises({ "h:conservative_region", "closed" }, function() return h:conservative_region(2) end)
  C.eq(tostring(reg), "heaplab.region (heap closed)", "tostring")
  reg:remove()
  -- the heap and a region dropped together, in either order
  for _ = 1, 20 do
    local hh = hl.heap{}
    local rr = hh:conservative_region(8)
    rr[1] = hh:alloc(8)
  end
  C.lua_gc()
end)

it("write() from a table whose __index removes the region or closes the heap raises", function()
  -- reg:write reads the values with their metamethods; one that removes the
  -- region stored into freed (NULL) words, one that closed the heap read its
  -- handles from freed memory (SIGSEGV / ASan use-after-free)
  local h = hl.heap{}
  local reg = h:conservative_region(8)
  local vals = setmetatable({}, { __len = function() return 3 end,
    __index = function(_, i) if i == 2 then reg:remove() end; return i end })
  C.raises({ "reg:write", "the region was removed" }, reg.write, reg, vals)
  reg = h:conservative_region(8)
  local o = h:alloc(16)
  vals = setmetatable({}, { __len = function() return 3 end,
    __index = function(_, i) if i == 2 then h:close() end; return o end })
  C.raises({ "reg:write", "heap is closed" }, reg.write, reg, vals)
  -- and what a well-behaved proxy gives is stored
  h = hl.heap{}
  reg = h:conservative_region(4)
  reg:write(setmetatable({}, { __len = function() return 2 end,
                               __index = function(_, i) return i * 10 end }), 2)
  C.eq(table.concat(reg:words(), ","), "0,10,20,0", "words written through __index")
  h:close()
end)

it("raises on bad input, naming it", function()
  local h <close> = hl.heap{}
  local other <close> = hl.heap{}
  local reg = h:conservative_region(4)
  C.raises({ "word index 5 out of range [1, 4]" }, function() reg[5] = 1 end)
  C.raises({ "word index 0 out of range" }, function() return reg[0] end)
  C.raises({ "word index must be an integer", "1.5" }, function() return reg[1.5] end)
  C.raises({ "a word is an integer, an object or nil", "1.5" }, function() reg[1] = 1.5 end)
  C.raises({ "a word is an integer, an object or nil", "table" }, function() reg[1] = {} end)
  C.raises({ "another heap" }, function() reg[1] = other:alloc(8) end)
  local released = h:alloc(8)
  released:release()
  C.raises({ "was released" }, function() reg[1] = released end)
  C.raises({ "cannot set field 'x'" }, function() reg.x = 1 end)
  C.raises({ "no method 'nope'" }, function() return reg.nope end)
  C.raises({ "reg:write", "do not fit" }, function() reg:write({ 1, 2 }, 4) end)
  C.raises({ "reg:write", "a word is an integer" }, function() reg:write({ 1, "x" }) end)
  C.eq(reg[1], 0, "nothing stored by a failed write")
  C.raises({ "values must be a table" }, function() reg:write(5) end)
  C.raises({ "words must be >= 1" }, function() h:conservative_region(0) end)
  C.raises({ "words must be an integer" }, function() h:conservative_region("8") end)
  C.raises({ "expected a heaplab region" }, function() reg.scrub(h) end)
  local m <close> = hl.heap{ mode = "manual" }
  C.raises({ "collected heap", "EMODE" }, function() m:conservative_region(2) end)
  -- a region larger than the heap's reservation is refused before its words
  -- are allocated (2^33 asked calloc for 64 GiB: ENOMEM here, a region each
  -- mark scanned where memory is overcommitted; h42left, session 42)
  for _, n in ipairs{ 1 << 62, 1 << 33, h:stats().reserved_bytes // 8 + 1 } do
    C.raises({ "h:conservative_region: a region of " .. n .. " words is larger than the "
               .. "heap's reservation (" .. h:stats().reserved_bytes .. " bytes, reserve_bytes: "
               .. h:stats().reserved_bytes // 8 .. " words at most) (EINVAL)" },
             function() h:conservative_region(n) end)
  end
  local small <close> = hl.heap{ reserve_bytes = 1 << 20 }
  C.raises({ "a region of 131073 words is larger than the heap's reservation (1048576 bytes" },
           function() small:conservative_region((1 << 17) + 1) end)
  local whole <close> = small:conservative_region(1 << 17) -- (the reservation's words fit)
  C.eq(#whole, 1 << 17, "a region as large as the reservation")
  reg[4] = -1
  C.eq(reg[4], -1, "all 64 bits of a word")
end)

it("stores an object's address as it is now, after a values table's own collect", function()
  -- reg:write read each object's address as it took the value and stored the
  -- words at the end: a collection the table's __index ran in between (or
  -- the background collector's) moved the object, the word held its old
  -- address, and the object, released, was freed with the region "holding"
  -- it.  The addresses are now read with the heap held, as they are stored.
  local h <close> = hl.heap{ verify = true, compact = "always", page_size = 4096 }
  local a = {}
  for i = 1, 85 * 4 do a[i] = h:alloc(40) end -- 85 slots of 48 bytes a page
  local victim = a[11]
  for i = 1, 85 do if i ~= 11 then a[i]:release() end end
  for i = 86, 85 * 4, 2 do a[i]:release() end -- room for it after
  local reg = h:conservative_region(4)
  local values = setmetatable({ victim }, {
    __len = function() return 2 end,
    __index = function() assert(h:collect()); return 0 end })
  reg:write(values)
  C.ok(h:stats().evacuated_objects > 0, "the scenario compacted nothing")
  C.eq(reg[1], victim:address() - 8, "the word holds the object's start")
  local live = h:stats().small_live_bytes
  victim:release()
  assert(h:collect())
  C.eq(h:stats().small_live_bytes, live, "live bytes: the object the word holds was freed")
  C.ok(h:check())
end)

it("refuses an object released before its word is stored, and stores nothing", function()
  local h <close> = hl.heap{ verify = true }
  local reg = h:conservative_region(3)
  local o = h:alloc(8)
  local values = setmetatable({ 7, o }, {
    __len = function() return 3 end,
    __index = function() o:release(); return 0 end })
  C.raises({ "reg:write", "word 2: its object was released" }, function() reg:write(values) end)
  C.eq(reg[1] + reg[2] + reg[3], 0, "nothing stored")
end)

end)
