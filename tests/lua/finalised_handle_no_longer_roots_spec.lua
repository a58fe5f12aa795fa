-- A handle that Lua's own collectgarbage() has finalised no longer roots its
-- object: the next heap collection reclaims it.  Control: a handle still
-- referenced from Lua keeps its object through the same collections.
local hl = require "heaplab"
local C = require "check"

describe("a handle finalised by Lua's GC", function()
local h
setup(function() h = assert(hl.heap{ warm_pages = 0 }) end)
teardown(function() collectgarbage("restart") h:close() end)

-- Lua's collector must not finalise anything before we ask it to, or the
-- "still rooted before collectgarbage()" half of a test could not fail.
it("no longer roots a large object", function()
collectgarbage("stop")
local keep = h:alloc(1 << 20)
do
  local dropped = h:alloc(1 << 20) -- no release(): only Lua's __gc can drop it
  C.ok(dropped:large(), "a 1 MiB object takes the large path")
end
h:collect{ cycles = 1 }
C.eq(h:stats().large_objects, 2, "large objects before Lua's GC (the dropped handle still roots)")
C.eq(h:stats().handles, 2, "handles before Lua's GC")

collectgarbage("restart")
C.lua_gc()
C.eq(h:stats().handles, 1, "handles after Lua's GC finalised the dropped one")
h:collect{ cycles = 1 }
C.eq(h:stats().large_objects, 1, "large objects after the next heap collection")
C.eq(#keep, 0, "the kept object is still usable")

end)

-- a fill (small objects on whole pages): its pages come back once Lua has
-- finalised the root and the heap has collected
it("no longer roots a fill, whose pages come back", function()
collectgarbage("stop")
local function fill_and_forget()
  local r = h:fill(16 * C.MiB, 256)
  return r:checksum()
end
local _, objects = fill_and_forget()
C.eq(objects > 16 * C.MiB // 256, true, "the fill holds every object")
h:collect{ cycles = 1, major = true }
local held = h:stats()
C.ok(held.small_live_bytes >= 16 * C.MiB, "still rooted before Lua's GC: " .. held.small_live_bytes)
C.eq(held.released_pages, 0, "nothing released while rooted")

collectgarbage("restart")
C.lua_gc()
h:collect{ cycles = 2, major = true }
local after = h:stats()
C.ok(after.small_live_bytes < C.MiB, "small live bytes after: " .. after.small_live_bytes)
C.ok(after.released_pages * 65536 >= 16 * C.MiB, "pages released: " .. after.released_pages)
C.ok(after.objects_freed >= objects, "objects freed: " .. after.objects_freed)

end)

-- a slot read makes a NEW root; once Lua finalises it, the slot is the only
-- path, and clearing the slot lets the object go
it("leaves a slot the only path to its object", function()
local parent = h:alloc(0, 1)
parent[1] = h:alloc(4096)
local child = parent[1]
C.ok(child == parent[1], "two handles to one object compare equal")
parent[1] = nil
child = nil
C.lua_gc()
local freed = h:stats().objects_freed
h:collect{ cycles = 1, major = true }
C.ok(h:stats().objects_freed > freed, "the child went with its last root")
C.eq(h:check(), true, "h:check()")
end)
end)
