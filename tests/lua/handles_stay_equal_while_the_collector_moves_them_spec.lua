-- Two handles to one object are equal however the background collector's
-- compaction moves it meanwhile.  __eq read each handle's address in a call
-- of its own (hl_ref_info): a cycle that took the heap lock between the two
-- and moved the object made o == o:dup() false now and then (3 of 5.7
-- million comparisons in the hunter's 15 seconds: the moving collector
-- hunt, session 30).  hl_ref_same reads both under one hold of the lock.
--
-- Made likely: every round the object is left alone on its page (its page's
-- fillers released, new ones on another page with 4 free slots), so the next
-- cycle moves it; the garbage that triggers that cycle is allocated in small
-- steps with comparisons between them, so the collector takes the lock while
-- they run.  One move in ten or so failed the old comparison (8 runs of 8
-- failed within 120 moves); the spec runs until the object has moved 1000
-- times, and fails at the first unequal comparison.
local hl = require "heaplab"
local C = require "check"

describe("handles compared while the background collector compacts", function()
  it("stay equal when the object moves between the two reads", function()
    local h = assert(hl.heap{ compact = "always", page_size = "4k", warm_pages = 0,
                              collector = "background", gc_trigger_bytes = "64k",
                              gc_trigger_min_bytes = "64k", gc_trigger_max_bytes = "64k",
                              tenure_full_marks = 0, sweep = "full", major_sweep = "always" })
    local SIZE = 40
    local p1, p2 = assert(h:alloc(SIZE, 1)), assert(h:alloc(SIZE, 1))
    local per = 4096 // (p2:address() - p1:address()) -- slots of a page of the class
    p1:release()
    p2:release()
    local function fillers(n)
      local t = {}
      for i = 1, n do t[i] = assert(h:alloc(SIZE, 1)) end
      return t
    end
    local F = fillers(per)
    local a = assert(h:alloc(SIZE, 1))
    local b = a:dup()
    local checks, moves, rounds = 0, 0, 0
    local deadline = os.time() + 60
    while moves < 1000 and os.time() < deadline do
      rounds = rounds + 1
      -- new fillers on another page, 4 of its slots left for garbage; the
      -- old ones released: a is alone on its page, the next cycle moves it
      local F2 = fillers(per - 4)
      for _, o in ipairs(F) do o:release() end
      F = F2
      local before, c0 = a:address(), assert(h:stats()).cycles
      repeat
        for _ = 1, 50 do assert(h:alloc(SIZE, 1)):release() end
        for _ = 1, 500 do
          checks = checks + 1
          if not (a == b) then
            error(("a ~= a:dup() after %d comparisons (round %d, %d moves so far)"):format(
              checks, rounds, moves))
          end
        end
      until assert(h:stats()).cycles ~= c0
      if a:address() ~= before then moves = moves + 1 end
    end
    C.ok(moves >= 200, ("the object moved %d times in %d rounds only: the spec proves nothing")
      :format(moves, rounds))
    C.ok(a == b and b == a, "equal at the end")
    for _, o in ipairs(F) do o:release() end
    h:close()
  end)
end)
