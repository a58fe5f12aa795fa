-- The default collector tenures dense pages (tenure_full_marks): later full
-- marks skip them, and only the write barrier (every o[i] = v goes through
-- it) remembers a tenured object that was given a young child.  Through the
-- Lua module: objects rooted back to back are tenured by the cycles
-- allocation runs; then young children are stored into them from plain code
-- and from __gc metamethods (Lua's finalizers, run by collectgarbage() and by
-- Lua's own steps in the middle of the heap's methods), including an object
-- only the finalised table kept, hung into a tenured slot ("resurrected").
-- Every stored child survives the full marks that skip the tenured pages, and
-- the verifier (verify = true) finds no store the barrier missed.
local hl = require "heaplab"
local C = require "check"

local OPTS = { verify = true, page_size = 4096, small_max = 1024, warm_pages = 2,
               gc_trigger_bytes = "256k", gc_trigger_min_bytes = "64k",
               gc_trigger_max_bytes = "1m", tenure_full_marks = 3, full_growth_ratio = 1000 }

local function pay(i, n) return string.rep(string.pack("<i8", i), n // 8 + 1):sub(1, n) end

describe("tenured objects", function()
local h
setup(function() h = assert(hl.heap(OPTS)) end)
teardown(function() collectgarbage("restart") h:close() end)

it("keep the children stored into them, from code and from __gc", function()
  local old = {}
  for i = 1, 600 do old[i] = h:alloc(40, 3):write(pay(i, 40)) end
  local function garbage(n) for _ = 1, n do h:alloc(200):release() end end
  for _ = 1, 5 do garbage(3000) end
  C.ok(h:stats().tenured_pages > 0, "the batch's pages are tenured")

  local want, id = {}, 1000
  local function hang(i, k, obj, tag)       -- obj (with one child) into old[i][k]
    old[i][k] = obj
    want[i * 4 + k] = tag
  end
  local function young(tag)
    local c = h:alloc(24, 1):write(pay(tag, 24))
    local g = h:alloc(16):write(pay(tag + 1, 16))
    c[1] = g
    g:release()
    return c
  end
  -- a table whose __gc hangs the object only it keeps into a tenured slot,
  -- and a young child into another
  local function holder(i, k)
    id = id + 4
    local me = id
    local kept = { ref = young(me) }
    setmetatable(kept, { __gc = function(self)
      hang(i, k, self.ref, me)
      self.ref:release()
      local c = young(me + 2)
      hang((i % 600) + 1, k, c, me + 2)
      c:release()
    end })
  end
  collectgarbage("stop")
  for i = 1, 600, 3 do holder(i, (i % 3) + 1) end
  collectgarbage("restart")
  for step = 1, 300 do
    id = id + 4
    local c = young(id)
    hang((step * 7) % 600 + 1, step % 3 + 1, c, id)
    c:release()
    if step % 25 == 0 then holder(step, 1) collectgarbage("step", 0) end
    if step % 10 == 0 then garbage(1500) end
  end
  C.lua_gc()
  for _ = 1, 6 do garbage(3000) end
  local s = h:stats()
  C.ok(s.tenured_pages > 0 and s.remembered_pages_scanned > 0,
       "full marks skipped tenured pages and traced the remembered ones")
  C.eq(s.verify_failures, 0, "no store missed the barrier")
  local n = 0
  for key, tag in pairs(want) do
    local c = old[key // 4][key % 4]
    C.ok(c and c:read() == pay(tag, 24), "object " .. tag .. " intact")
    local g = c[1]
    C.ok(g and g:read() == pay(tag + 1, 16), "child of object " .. tag .. " intact")
    c:release()
    g:release()
    n = n + 1
  end
  C.ok(n > 300, "the stored objects were checked")
  for i = 1, 600 do C.eq(old[i]:read(), pay(i, 40), "tenured object " .. i) end
  C.ok(h:check())
  h:collect()                                -- a whole mark: untenures, and still all there
  C.eq(h:stats().tenured_pages, 0, "collect() untenures")
  C.eq(h:stats().verify_failures, 0, "and its verify is clean")
end)
end)
