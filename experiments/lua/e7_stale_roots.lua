-- E7 stale conservative roots, in Lua -- DESIGN.md section 6 (issue 19); the
-- protocol of experiments/test_e7_stale_roots.py (seed 000's "stale root
-- words": ParparVM's conservative stack scan kept a dropped 192 MB ring
-- resident until later frames overwrote the dead slot).
--
-- Protocol: a 64 MiB structure (h:fill of 256-byte objects) is built and
-- used; while in use its root's address passes through a conservative region
-- of 512 words (h:conservative_region, a 4 KiB "stack frame").  The
-- structure is dropped (its handle released), the heap collected until
-- settled and trimmed; then the region is scrubbed and the heap collected
-- until settled again.
--
-- Arms (one per process: lua5.4 e7_stale_roots.lua precise|stale|noise):
--   precise  no word in the region: precise roots only (the control)
--   stale    the root's address left in the region
--   noise    misidentification (warm_pages = 0): 1,000,000 random 64-bit
--            words; then 64 words at the starts of 64 leaf objects on 64
--            different pages
--
-- Asserted effect (this script, per arm; it exits 1 if one does not hold):
--   precise  the drop returns >= 97% of the structure's footprint (warm cache aside)
--   stale    the drop returns <= 5% and the last mark kept >= 64 MiB;
--            the scrub returns >= 97%, and nothing is kept
--   noise    random words keep no object (unless one falls inside the
--            reservation: recorded); the 64 object words keep exactly 64
--            objects, and exactly their 64 pages stay resident
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local heaplab = require "heaplab"
local H = require "harness"

local STRUCT = 64 << 20
local SIZE = 256
local FRAME_WORDS, SLOT = 512, 138 -- (1-based: Python's word 137)
local RANDOM_WORDS, HEAP_WORDS = 1000000, 64

local function settle(h)
  local cycles = H.collect_until_settled(h)
  assert(h:trim())
  return cycles
end

local function kept(h)
  local s = assert(h:stats())
  return s.marked_objects, s.small_live_bytes + s.large_live_bytes
end

local function stale_roots(rec, options, params)
  local h = assert(heaplab.heap(options))
  local frame = assert(h:conservative_region(FRAME_WORDS))
  local s
  rec:phase("build", h, function()
    s = assert(h:fill(STRUCT, SIZE))
    assert(h:collect())
  end)
  rec:phase("use", h, function(ph)
    local _, objects = assert(s:checksum())
    ph:note("objects", objects)
    if params.word then frame[SLOT] = s end
    ph:note("word", frame[SLOT])
  end)
  for _, name in ipairs{ "drop", "scrub" } do
    rec:phase(name, h, function(ph)
      ph:mark(name)
      if name == "drop" then s:release() else frame:scrub() end
      ph:note("cycles", settle(h))
      local objects, bytes = kept(h)
      ph:note("kept_objects", objects)
      ph:note("kept_bytes", bytes)
    end)
  end
  local eff = assert(h:options())
  rec:note("warm_bytes", eff.warm_pages * eff.page_size)
  frame:remove()
  h:close()
end

-- n leaf objects of a fill on n different pages (a root slot is one page's
-- index: a small tree whose leaves are that page's objects)
local function leaves_on_distinct_pages(root, n)
  local slots, out = {}, {}
  for i = 1, #root do slots[i] = i end
  for k = 1, n do
    local j = math.random(k, #slots)
    slots[k], slots[j] = slots[j], slots[k]
    local node = root[slots[k]]
    while #node > 0 do
      local nxt = node[math.random(#node)]
      if nxt then node = nxt end
    end
    out[k] = node
  end
  return out
end

local function misidentification(rec, options)
  math.randomseed(7)
  local h = assert(heaplab.heap(options))
  local base, reserved = h:range()
  local page = assert(h:options()).page_size
  rec:note("page_size", page)
  local start = assert(h:resident_bytes())
  local function finish(ph, region)
    ph:note("cycles", settle(h))
    local objects, bytes = kept(h)
    ph:note("kept_objects", objects)
    ph:note("kept_bytes", bytes)
    ph:note("pinned_bytes", assert(h:resident_bytes()) - start)
    region:remove()
    settle(h)
  end
  rec:phase("random", h, function(ph)
    local s = assert(h:fill(STRUCT, SIZE))
    local region = assert(h:conservative_region(RANDOM_WORDS))
    local words, inside = {}, 0
    for i = 1, RANDOM_WORDS do
      local w = math.random(0) -- (all 64 bits random)
      words[i] = w
      if math.ult(w - base, reserved) then inside = inside + 1 end
    end
    region:write(words)
    words = nil
    ph:note("words", RANDOM_WORDS)
    ph:note("inside_reservation", inside)
    ph:mark("drop")
    s:release()
    finish(ph, region)
  end)
  collectgarbage("collect")
  rec:phase("exact", h, function(ph)
    local s = assert(h:fill(STRUCT, SIZE))
    local region = assert(h:conservative_region(8192))
    local leaves = leaves_on_distinct_pages(s, HEAP_WORDS)
    local pages = {}
    local n_pages = 0
    for k, leaf in ipairs(leaves) do
      local at = 1 + (k - 1) * (8192 // HEAP_WORDS)
      region[at] = leaf
      leaf:release()
      local p = (region[at] - base) // page
      if not pages[p] then pages[p], n_pages = true, n_pages + 1 end
    end
    collectgarbage("collect") -- (the handles the walk made)
    ph:note("words", #leaves)
    ph:note("pages_hit", n_pages)
    ph:mark("drop")
    s:release()
    finish(ph, region)
  end)
  h:close()
end

local function body(rec, options, params)
  if params.noise then return misidentification(rec, options) end
  return stale_roots(rec, options, params)
end

local function check(rec, arm)
  if arm == "noise" then
    local r, e = rec:get("random").notes, rec:get("exact").notes
    local page = rec.notes.page_size
    rec:expect("random words kept", ("%d objects, %d KiB pinned"):format(r.kept_objects,
               r.pinned_bytes // 1024), ("0 (%d of 1M in the reservation)"):format(
               r.inside_reservation), r.inside_reservation > 0 or
               (r.kept_objects == 0 and r.kept_bytes == 0), "random")
    rec:expect("64 object words kept", ("%.1f KiB live pin %s"):format(e.kept_bytes / 1024,
               H.mib(e.pinned_bytes)), "64 objects, their pages",
               e.kept_objects == HEAP_WORDS and e.pages_hit == HEAP_WORDS
               and e.pinned_bytes == e.pages_hit * page, "exact")
    return
  end
  local warm = rec.notes.warm_bytes
  local cost = H.growth(rec:get("build"))
  local drop, scrub = rec:get("drop"), rec:get("scrub")
  local d = H.returned(drop) / (cost - warm)
  local s = H.returned(scrub) / (cost - warm)
  rec:note("figures", { cost = cost, drop = d, scrub = s })
  if arm == "precise" then
    rec:expect("returned at drop", H.pct(d), ">= 97% (warm cache aside)", d >= 0.97, "drop",
               "released once no word held it")
  else
    local objects = rec:get("use").notes.objects
    rec:expect("returned at drop", ("%s, %s kept"):format(H.pct(d), H.mib(drop.notes.kept_bytes)),
               "<= 5%, >= 64 MiB kept", d <= 0.05 and drop.notes.kept_bytes >= STRUCT
               and drop.notes.kept_objects == objects, "drop", "192 MB stayed resident")
    rec:expect("returned at scrub", H.pct(s), ">= 97%", s >= 0.97 and scrub.notes.kept_bytes == 0,
               "scrub", "came back once overwritten")
  end
end

H.main{
  experiment = "E7", title = "stale conservative roots",
  seed = { stale = "192 MB stayed resident until the next phase overwrote the stack words",
           precise = "released once the words were gone: 262,720 KB -> 114,800 KB" },
  arms = {
    precise = { options = {}, params = {} },
    stale = { options = {}, params = { word = true } },
    noise = { options = { warm_pages = 0 }, params = { noise = true } },
  },
  body = body,
  check = check,
}
