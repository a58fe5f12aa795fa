-- sparse_survivors.lua -- E10 sparse survivors inside a real Lua interpreter.
--
-- Protocol (issue 18, on Lua's own objects): build about 1.5 M small
-- strings (64-256 bytes each with their header, made in order), drop all but
-- every Nth and collect fully; the lowest footprint after the drop is the
-- floor.  Runs on heaplab-lua (the arm is chosen from outside:
-- HEAPLAB_SUBPAGE_RELEASE and other HEAPLAB_* options in the environment)
-- and on a stock lua5.4 (no heaplab.client module there: the footprint is
-- read from /proc/self/smaps_rollup after the collection, which frees
-- synchronously).  Prints one arm record in the harness's JSON format
-- (docs/harness.md) on stdout, nothing else.
--
-- usage: lua5.4 sparse_survivors.lua ARM N [OBJECTS]   (default 1500000)
local R = dofile((arg[0]:match("^(.*/)") or "") .. "client_record.lua")

local arm = arg[1] or "unnamed"
local every = math.tointeger(tonumber(arg[2] or "100"))
local objects = math.tointeger(tonumber(arg[3] or "1500000"))
local rec = R.recorder("E10", arm)
local phase = rec.phase

-- ---- the workload ----
-- A string of 57-249 bytes in all (a 24-byte header and its terminating
-- zero: 64-256-byte blocks), its content from i; the size from a hash of i,
-- so the survivors (every Nth) are of every size too.
local function make(i)
  local n = 32 + ((i * 2654435761) >> 7) % 4 * 64
  return string.rep(string.pack("<i8", i), n // 8)
end

local function checksum(t)
  local sum = 0
  for _, s in ipairs(t) do
    sum = (sum + string.unpack("<i8", s) * #s) % 2305843009213693951
  end
  return sum, #t
end

local items, survivors
phase("build", function()
  items = {}
  for i = 1, objects do items[i] = make(i - 1) end
end)

phase("hold", function(ph)
  collectgarbage("collect")
  local keep = {}
  for i = 1, #items, every do keep[#keep + 1] = items[i] end
  ph.note("checksum", { checksum(keep) })
end)

phase("drop", function(ph)
  ph.mark("drop")
  survivors = {}
  for i = 1, #items, every do survivors[#survivors + 1] = items[i] end
  items = nil
  collectgarbage("collect")
  collectgarbage("collect")
  ph.note("checksum", { checksum(survivors) })
  local bytes = 0
  for _, s in ipairs(survivors) do bytes = bytes + #s + 25 end
  ph.note("survivor_bytes", bytes)
end)

rec.write("sparse survivors on a real interpreter", { every = every, objects = objects },
          { interpreter = _VERSION })
