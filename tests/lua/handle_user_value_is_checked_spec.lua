-- A handle's or region's user value is checked to be its heap before it is
-- read as one: debug.setuservalue can put anything there.  Using the handle
-- is then a Lua error saying so; its __gc, __close and release never crash and
-- never free what a heap may still scan.  (Before: SIGSEGV, or a made-up
-- "belongs to another heap (EFOREIGN)" from reading io.stdout as a heap.)
local hl = require "heaplab"
local C = require "check"

local NOT_HEAP = "user value is not its heap"

describe("an object whose user value is not its heap", function()
  it("is a Lua error naming the problem, for every method", function()
    local h = assert(hl.heap{})
    local o = assert(h:alloc(16, 1))
    local other = assert(h:alloc(8))
    for _, uv in ipairs{ other, io.stdout, "a string", 42 } do
      debug.setuservalue(o, uv, 1)
      local shown = uv == other and "a heaplab.object" or uv == io.stdout and "a FILE*"
                    or uv == 42 and "it is 42" or "'a string'"
      C.raises({ "o:size", NOT_HEAP, shown, "debug.setuservalue" }, o.size, o)
      C.raises({ "o:read", NOT_HEAP }, o.read, o)
      C.raises({ "o:write", NOT_HEAP }, o.write, o, "x")
      C.raises({ "o:checksum", NOT_HEAP }, o.checksum, o)
      C.raises({ "o:dup", NOT_HEAP }, o.dup, o)
      C.raises({ "o[i]", NOT_HEAP }, function() return o[1] end)
      C.raises({ "o[i] = v", NOT_HEAP }, function() o[1] = other end)
      C.raises({ "#o", NOT_HEAP }, function() return #o end)
      local err = C.raises({ NOT_HEAP }, o.size, o)
      C.ok(not err:find("EFOREIGN", 1, true), "no made-up EFOREIGN: " .. err)
      C.eq(tostring(o), "heaplab.object (its user value is not its heap)", "tostring(o)")
      C.eq(o == other, false, "o == other")
    end
    -- put back, the handle works again: nothing was damaged
    debug.setuservalue(o, h, 1)
    C.eq(o:size(), 16, "o:size() with its heap back")
    C.eq(h:check(), true, "h:check()")
    h:close()
  end)

  it("is finalized without a crash: the root stays until its heap goes", function()
    local h = assert(hl.heap{})
    local other = assert(h:alloc(8)) -- (an object read as a heap crashed)
    local before = h:stats().handles
    for i = 1, 20 do
      local o = assert(h:alloc(8))
      debug.setuservalue(o, i % 2 == 0 and io.stdout or other, 1)
      if i % 4 == 1 then o:release() end -- release, then __gc: no crash either
    end
    C.lua_gc()
    -- the heap holding the roots is unknown to those handles: the roots stay
    C.eq(h:stats().handles, before + 20, "roots held after the handles' __gc")
    C.eq(h:check(), true, "h:check()")
    do
      local o <close> = assert(h:alloc(8))
      debug.setuservalue(o, 7, 1)
    end
    h:close() -- frees those roots with the heap
  end)

  it("with another heap there: that heap refuses the handle (it names its heap)", function()
    local h, g = assert(hl.heap{}), assert(hl.heap{})
    local o = assert(h:alloc(8))
    local keep = assert(g:alloc(8))
    debug.setuservalue(o, g, 1)
    C.raises({ "o:size", "belongs to another heap", "EFOREIGN" }, o.size, o)
    local handles = g:stats().handles
    o:release()
    C.eq(g:stats().handles, handles, "the other heap's roots untouched by o:release()")
    C.eq(keep:size(), 8, "the other heap's handle")
    C.eq(g:check(), true, "g:check()")
    C.eq(h:check(), true, "h:check()")
    g:close()
    h:close()
  end)
end)

describe("a region whose user value is not its heap", function()
  it("is a Lua error naming the problem, for every method", function()
    local h = assert(hl.heap{})
    local g = assert(hl.heap{})
    local reg = assert(h:conservative_region(4))
    local o = assert(h:alloc(8))
    for _, uv in ipairs{ o, io.stdout, g, false } do
      debug.setuservalue(reg, uv, 1)
      C.raises({ "reg[i]", NOT_HEAP, "debug.setuservalue" }, function() return reg[1] end)
      C.raises({ "reg[i] = v", NOT_HEAP }, function() reg[1] = 5 end)
      C.raises({ "reg:words", NOT_HEAP }, reg.words, reg)
      C.raises({ "reg:write", NOT_HEAP }, reg.write, reg, { 1 })
      C.raises({ "reg:scrub", NOT_HEAP }, reg.scrub, reg)
      C.eq(tostring(reg), "heaplab.region (its user value is not its heap)", "tostring(reg)")
    end
    debug.setuservalue(reg, h, 1)
    reg[1] = 5
    C.eq(reg[1], 5, "reg[1] with its heap back")
    reg:remove()
    g:close()
    h:close()
  end)

  it("is finalized by its own heap: the words unregistered, then freed", function()
    local h = assert(hl.heap{})
    local g = assert(hl.heap{})
    local o = assert(h:alloc(64))
    local other = assert(h:alloc(8))
    local held = h:stats().small_live_bytes
    for _, uv in ipairs{ g, io.stdout, other, {} } do
      local reg = assert(h:conservative_region(2))
      reg[1] = o
      debug.setuservalue(reg, uv, 1)
      reg = nil
      C.lua_gc() -- its __gc: before, another heap there freed words h still scanned
    end
    do
      local reg <close> = assert(h:conservative_region(1))
      reg[1] = o
      debug.setuservalue(reg, g, 1)
    end
    o:release()
    -- no region holds the object any more: the words were unregistered from
    -- h (a leaked region would keep it; ASan's leak check would see words
    -- never freed, and a use after free the words freed but scanned)
    assert(h:collect{ cycles = 2, major = true })
    C.eq(h:check(), true, "h:check()")
    C.ok(h:stats().small_live_bytes < held, "the object no region holds is reclaimed: "
         .. h:stats().small_live_bytes .. " live bytes of " .. held)
    C.eq(other:size(), 8, "the other object")
    C.eq(g:check(), true, "g:check()")
    g:close()
    h:close()
  end)

  it("keeps its heap alive whatever its user value", function()
    local regs = {}
    for i = 1, 8 do
      local h = assert(hl.heap{})
      local o = assert(h:alloc(16))
      regs[i] = assert(h:conservative_region(1))
      regs[i][1] = o
      debug.setuservalue(regs[i], i % 2 == 0 and io.stdout or {}, 1)
    end -- nothing else refers to those heaps now
    C.lua_gc()
    for i = 1, 8 do
      C.raises({ "reg[i]", NOT_HEAP }, function() return regs[i][1] end)
      if i % 2 == 0 then regs[i]:remove() end
    end
    regs = nil
    C.lua_gc() -- the regions, then their heaps: no crash, nothing leaked (ASan)
  end)
end)
