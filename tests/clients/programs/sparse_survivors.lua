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
local ok, client = pcall(require, "heaplab.client")
if not ok then client = nil end

local arm = arg[1] or "unnamed"
local every = math.tointeger(tonumber(arg[2] or "100"))
local objects = math.tointeger(tonumber(arg[3] or "1500000"))
local heaplab = client ~= nil and client.allocator() == "heaplab"

-- ---- a tiny JSON writer (numbers, strings, booleans, tables) ----
-- NULL stands for JSON null (a Lua table cannot hold nil); a table is an
-- array when it has [1] or is marked ARRAY, an object otherwise.
local NULL = setmetatable({}, { __name = "null" })
local ARRAY = { __name = "array" }
local function orNull(x) if x == nil then return NULL end return x end

local function encode(v, out)
  local t = type(v)
  if v == NULL then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "number" then
    if math.type(v) == "integer" then out[#out + 1] = string.format("%d", v)
    elseif v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    else out[#out + 1] = string.format("%.17g", v) end
  elseif t == "string" then
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
    end) .. '"'
  elseif t == "table" and (v[1] ~= nil or getmetatable(v) == ARRAY) then
    out[#out + 1] = "["
    for i = 1, #v do
      if i > 1 then out[#out + 1] = "," end
      encode(v[i], out)
    end
    out[#out + 1] = "]"
  elseif t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      encode(k, out)
      out[#out + 1] = ":"
      encode(v[k], out)
    end
    out[#out + 1] = "}"
  else
    error("cannot encode a " .. t)
  end
  return out
end

local function json(v) return table.concat(encode(v, {})) end

-- ---- footprint: the launcher's module, or /proc on a stock interpreter ----
local function footprint()
  if client then return client.footprint() end
  local out = { rss = 0, anonymous = 0, lazyfree = 0, swap = 0 }
  for line in io.lines("/proc/self/smaps_rollup") do
    local key, kb = line:match("^(%w+):%s+(%d+) kB")
    if key and out[key:lower()] then out[key:lower()] = tonumber(kb) * 1024 end
  end
  out.phys_footprint = out.anonymous + out.swap
  return out
end
local function now() return client and client.now() or os.clock() end

-- ---- the recorder: phases in the harness's record format ----
local sampler = client and client.sampler(0.002)
local t0 = now()
local records = {}

local function phase(name, body)
  if sampler then sampler:reset() end
  local f = footprint()
  local rec = {
    experiment = "E10", arm = arm, phase = name, index = #records,
    t_start_s = now() - t0,
    phys_before = f.phys_footprint, rss_before = f.rss, lazyfree_before = f.lazyfree,
    anonymous_before = f.anonymous,
    resident_before = orNull(client and client.resident_bytes()),
  }
  local notes, marked = {}, false
  local ph = {
    mark = function(label)
      if sampler then sampler:mark() end
      marked = true
      notes.mark = label or "event"
    end,
    note = function(k, v) notes[k] = v end,
  }
  body(ph)
  f = footprint()
  local t1 = now()
  rec.t_end_s = t1 - t0
  rec.duration_s = t1 - t0 - rec.t_start_s
  rec.phys_after, rec.rss_after = f.phys_footprint, f.rss
  rec.lazyfree_after, rec.anonymous_after = f.lazyfree, f.anonymous
  rec.resident_after = orNull(client and client.resident_bytes())
  rec.vmas_after = orNull(client and client.vma_count())
  if sampler then
    local s = sampler:summary()
    rec.phys_peak, rec.phys_low, rec.rss_peak = s.max_phys, s.min_phys, s.max_rss
    rec.phys_low_after_mark = marked and s.min_phys_after_mark or NULL
    rec.samples = s.samples
  else -- no sampler: the reading after the phase, which ends with a full collection
    rec.phys_peak = math.max(rec.phys_before, f.phys_footprint)
    rec.phys_low = math.min(rec.phys_before, f.phys_footprint)
    rec.rss_peak = math.max(rec.rss_before, f.rss)
    rec.phys_low_after_mark = marked and f.phys_footprint or NULL
    rec.samples = 2
  end
  rec.notes = notes
  if heaplab then rec.stats = client.stats() end
  records[#records + 1] = rec
end

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

local series = setmetatable({}, ARRAY)
if sampler then
  for _, x in ipairs(sampler:series()) do
    series[#series + 1] = { x[1] / 1e9 - t0, x[2], x[3], x[4] }
  end
  sampler:stop()
end
io.write(json({
  experiment = "E10", title = "sparse survivors on a real interpreter", arm = arm,
  options = orNull(client and client.options()),
  params = { language = "lua", every = every, objects = objects },
  error = NULL, records = records,
  notes = { allocator = client and client.allocator() or "stock", language = "lua",
            interpreter = _VERSION },
  series = series,
}))
io.write("\n")
