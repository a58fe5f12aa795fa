-- __close: a to-be-closed object drops its root when its scope ends (no
-- waiting for Lua's GC), also when the scope ends by an error; a
-- to-be-closed heap is closed at the end of its scope.
local hl = require "heaplab"
local C = require "check"

describe("<close>", function()
local h
setup(function()
  collectgarbage("stop") -- only __close may release anything here
  h = assert(hl.heap{ warm_pages = 0 })
end)
teardown(function()
  collectgarbage("restart")
  h:close()
end)

it("releases an object at the end of its scope", function()
do
  local big <close> = h:alloc(1 << 20)
  C.eq(h:stats().handles, 1, "handles inside the scope")
end
C.eq(h:stats().handles, 0, "handles after the scope")
h:collect{ cycles = 1 }
C.eq(h:stats().large_objects, 0, "large objects after the next collection")

end)

it("releases a fill when its scope ends by an error", function()
local ok, err = pcall(function()
  local r <close> = h:fill(8 * C.MiB, 256)
  C.eq(h:stats().handles, 1, "handles while the fill is held")
  error("boom")
end)
C.ok(not ok and err:find("boom", 1, true), "the error propagated")
C.eq(h:stats().handles, 0, "the fill root was released by __close on the error path")
h:collect{ cycles = 2, major = true }
C.ok(h:stats().released_pages * 65536 >= 8 * C.MiB, "the fill's pages went back")

end)

it("is idempotent on a released object", function()
do
  local o <close> = h:alloc(16)
  o:release()
end

end)

it("closes a heap at the end of its scope", function()
local outer
do
  local h2 <close> = hl.heap{}
  outer = h2
  local r = h2:fill(4 * C.MiB, 64)
  C.ok(not h2:closed(), "open inside the scope")
end
C.ok(outer:closed(), "closed at the end of its scope")
C.raises({ "h:stats", "closed" }, outer.stats, outer)

end)

it("stops a sampler at the end of its scope", function()
local s_outer
do
  local s <close> = hl.sampler(0.001)
  s_outer = s
  s:mark()
end
C.raises({ "s:summary", "stopped" }, s_outer.summary, s_outer)

end)
end)
