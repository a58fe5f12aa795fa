-- Lua handles are roots (hl_ref), not addresses: when a collection moves
-- their objects (compact = "sparse"/"always"), every handle -- and every
-- object reached through slots -- keeps its contents and its slots, `==`
-- still tells the same object, `o:address()` says where it is now, and
-- checksums do not change however many times it moves.  Sub-page release on
-- too, verify on (the heap checks itself every cycle).
local hl = require "heaplab"
local C = require "check"

describe("handles across compaction", function()
  it("follow their objects through any number of moves", function()
    local h = assert(hl.heap{ compact = "always", subpage_release = true, verify = true,
                              page_size = "16k", warm_pages = 0 })
    local keep = {}
    for i = 1, 400 do
      local o = assert(h:alloc(40, 1))
      assert(o:write(string.pack("<i8", i)))
      for _ = 1, 20 do assert(h:alloc(40, 1)):release() end -- garbage: sparse pages
      if #keep > 0 then keep[#keep][1] = o end                 -- a list through slot 1
      keep[#keep + 1] = o
    end
    local first = keep[1]:dup()
    local sum0, n0 = assert(keep[1]:checksum())
    C.eq(n0, 400, "objects in the list")
    local before = keep[200]:address()
    for round = 1, 4 do
      for _ = 1, 2000 do assert(h:alloc(40, 1)):release() end
      assert(h:collect{ major = true })
      for i, o in ipairs(keep) do
        C.eq(string.unpack("<i8", assert(o:read(0, 8))), i, ("object %d, round %d"):format(i, round))
        if i < #keep then C.ok(o[1] == keep[i + 1], ("slot of object %d"):format(i)) end
      end
      local sum, n = assert(keep[1]:checksum())
      C.eq(sum, sum0, "checksum, round " .. round)
      C.eq(n, n0, "objects, round " .. round)
      C.ok(first == keep[1], "a second handle to the same object is equal")
    end
    local s = assert(h:stats())
    C.ok(s.evacuated_objects > 0 and s.compactions > 0, "objects moved: " .. s.evacuated_objects)
    C.ok(keep[200]:address() ~= before, "object 200 did not move")
    C.eq(s.verify_failures, 0, "verify failures")
    assert(h:check())
    h:close()
  end)

  it("keep one o:id() per object: a seen table keyed by it matches after moves", function()
    -- each handle is its own table key and o:address() changes when the object
    -- moves, so a graph walk's seen table never matched (the Lua hunt, session 31)
    local h = assert(hl.heap{ compact = "always", page_size = "16k", warm_pages = 0 })
    local ring = {}
    for i = 1, 200 do
      ring[i] = assert(h:alloc(40, 1))
      for _ = 1, 20 do assert(h:alloc(40, 1)):release() end -- garbage: sparse pages
    end
    for i = 1, #ring do ring[i][1] = ring[i % #ring + 1] end -- a cycle through slot 1
    local a, b = ring[1], ring[#ring][1]                      -- two handles to one object
    C.ok(a == b and rawequal(a, b) == false, "two distinct handles to one object")
    local ids, addr = {}, {}
    for i, o in ipairs(ring) do ids[i], addr[i] = o:id(), o:address() end
    C.eq(a:id(), b:id(), "two handles, one id")
    C.eq(math.type(a:id()), "integer", "an integer")
    local seen0 = { [a:id()] = true }
    for _ = 1, 2000 do assert(h:alloc(40, 1)):release() end
    assert(h:collect{ major = true })
    local moved = 0
    for i, o in ipairs(ring) do
      C.eq(o:id(), ids[i], "id of object " .. i .. " after the collection")
      if o:address() ~= addr[i] then moved = moved + 1 end
    end
    C.ok(moved > 0, "no object moved: the test proves nothing")
    C.ok(seen0[b:id()], "seen[a:id()] matches b:id() after the moves")
    -- a walk of the cycle by id stops where it started
    local seen, n, o = {}, 0, a:dup()
    while not seen[o:id()] do
      seen[o:id()] = true
      n = n + 1
      o = o[1]
    end
    C.eq(n, #ring, "objects seen by the walk")
    C.eq(o:id(), a:id(), "the walk ends at the first object")
    C.raises({ "o:id", "released" }, function() local d = a:dup(); d:release(); return d:id() end)
    h:close()
    C.raises({ "o:id", "closed" }, a.id, a)
  end)
end)
