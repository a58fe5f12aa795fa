-- Closing a heap invalidates its handles safely: using them (or the heap) is
-- a Lua error, releasing them is a no-op, and Lua's GC of either afterwards
-- does nothing.  Conversely a heap stays alive while any handle does.
local hl = require "heaplab"
local C = require "check"

describe("a closed heap", function()
local o, h, child

it("stays alive while any of its handles does", function()
local function make_object()
  local h = hl.heap{}
  local o = h:alloc(32, 2)
  o[1] = h:alloc(8)
  return o -- the heap userdata is reachable only through o
end
o = make_object()
C.lua_gc()
C.eq(#o, 2, "#o after the heap variable went out of scope")
C.ok(o[1] ~= nil, "slot 1 survived")
h = o:heap()
C.ok(not h:closed(), "the heap is open")
h:collect{ cycles = 2 }
C.ok(o[1] ~= nil, "slot 1 survived a heap collection")

end)

it("refuses to be used, and so do its handles", function()
child = o[1]
h:close()
C.ok(h:closed(), "h:closed() after close")
C.ok(tostring(h):find("closed", 1, true), "tostring of a closed heap: " .. tostring(h))
C.ok(tostring(o):find("heap closed", 1, true), "tostring of its object: " .. tostring(o))
local uses = {
  { "h:alloc", function() return h:alloc(16) end },
  { "h:fill", function() return h:fill(1024, 16) end },
  { "h:collect", function() h:collect() end },
  { "h:stats", function() return h:stats() end },
  { "h:events", function() return h:events() end },
  { "h:resident_bytes", function() return h:resident_bytes() end },
  { "h:vma_count", function() return h:vma_count() end },
  { "h:inject", function() h:inject("restore", "always") end },
  { "h:trim", function() h:trim() end },
  { "h:check", function() h:check() end },
  { "h:options", function() return h:options() end },
  { "#o", function() return #o end },
  { "o[i]", function() return o[1] end },
  { "o[i] = v", function() o[2] = nil end },
  { "o:size", function() return o:size() end },
  { "o:checksum", function() return o:checksum() end },
  { "o:dup", function() return o:dup() end },
  { "o:read", function() return child:read() end },
}
for _, u in ipairs(uses) do
  C.raises({ u[1], "closed" }, u[2])
end
end)

it("is closed again, and its handles released, as no-ops", function()
child:release()
o:release()
o:release()
h:close()
h:close()
o, child = nil, nil
C.lua_gc() -- finalizers of a closed heap's handles: nothing to do
end)

-- released()/removed() and #: what every other use says (the Lua hunt of
-- session 28: #reg gave its word count after h:close() and reg:remove()
-- while reg[i] raised; o:released() was false for a closed heap's handle)
it("says its handles released and its regions removed, and # raises", function()
local h4 = hl.heap{}
local o4, reg = h4:alloc(8, 2), h4:conservative_region(4)
local gone = h4:conservative_region(2)
C.eq(o4:released(), false, "o:released() while open")
C.eq(reg:removed(), false, "reg:removed() while open")
C.eq(#reg, 4, "#reg while open")
gone:remove()
C.eq(gone:removed(), true, "reg:removed() after reg:remove()")
C.raises({ "#reg", "the region was removed" }, function() return #gone end)
h4:close()
C.eq(o4:released(), true, "o:released() after h:close()")
C.eq(reg:removed(), true, "reg:removed() after h:close()")
C.raises({ "#reg", "the region's heap is closed" }, function() return #reg end)
C.raises({ "reg[i]", "the region's heap is closed" }, function() return reg[1] end)
C.raises({ "o:refs", "the object's heap is closed" }, o4.refs, o4)
C.raises({ "#o", "closed" }, function() return #o4 end)
reg:remove() -- (frees the words; idempotent)
C.eq(reg:removed(), true, "reg:removed() after both")
end)

-- finalisation order must not matter
it("lets Lua collect it with many handles, all at once", function()
do
  local h2 = hl.heap{}
  local objs = {}
  for i = 1, 100 do objs[i] = h2:alloc(i, 1) end
  for i = 2, 100 do objs[i][1] = objs[i - 1] end
  C.eq(h2:stats().handles, 100, "handles")
  objs[100]:heap():close()
end
C.lua_gc()
end)

it("is freed by Lua's GC with its handles when never closed, in any order", function()
do
  local h3 = hl.heap{}
  local r = h3:fill(4 * C.MiB, 128)
  local x = r[1]
end
C.lua_gc()
end)
end)
