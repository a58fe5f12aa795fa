-- client_record.lua -- the phase recorder the Lua client programs share
-- (page_floor.lua, sparse_survivors.lua): one arm's records in the
-- harness's JSON format (docs/harness.md), written on stdout.  On heaplab-lua
-- it reads the launcher's heaplab.client module (footprint, sampler, stats);
-- on a stock lua5.4 there is none, and the footprint is read from
-- /proc/self/smaps_rollup before and after each phase (no sampler: a phase
-- that must show its lowest footprint ends with a full collection).
--
-- A program loads it from its own folder:
--   local R = dofile((arg[0]:match("^(.*/)") or "") .. "client_record.lua")
local ok, client = pcall(require, "heaplab.client")
if not ok then client = nil end

local R = { client = client }
R.heaplab = client ~= nil and client.allocator() == "heaplab"

-- ---- a tiny JSON writer (numbers, strings, booleans, tables) ----
-- NULL stands for JSON null (a Lua table cannot hold nil); a table is an
-- array when it has [1] or is marked ARRAY, an object otherwise.
local NULL = setmetatable({}, { __name = "null" })
local ARRAY = { __name = "array" }
R.NULL, R.ARRAY = NULL, ARRAY
local function orNull(x) if x == nil then return NULL end return x end
R.orNull = orNull

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

function R.json(v) return table.concat(encode(v, {})) end

-- ---- footprint and clock: the launcher's module, or /proc on a stock interpreter ----
function R.footprint()
  if client then return client.footprint() end
  local out = { rss = 0, anonymous = 0, lazyfree = 0, swap = 0 }
  for line in io.lines("/proc/self/smaps_rollup") do
    local key, kb = line:match("^(%w+):%s+(%d+) kB")
    if key and out[key:lower()] then out[key:lower()] = tonumber(kb) * 1024 end
  end
  out.phys_footprint = out.anonymous + out.swap
  return out
end
function R.now() return client and client.now() or os.clock() end

-- client.NAME(), or null on a stock interpreter
local function from_client(name)
  if client then return orNull(client[name]()) end
  return NULL
end

-- ---- the recorder: phases in the harness's record format ----
function R.recorder(experiment, arm)
  local sampler = client and client.sampler(0.002)
  local t0 = R.now()
  local records = {}
  local rec = { records = records, t0 = t0 }

  function rec.phase(name, body)
    if sampler then sampler:reset() end
    local f = R.footprint()
    local r = {
      experiment = experiment, arm = arm, phase = name, index = #records,
      t_start_s = R.now() - t0,
      phys_before = f.phys_footprint, rss_before = f.rss, lazyfree_before = f.lazyfree,
      anonymous_before = f.anonymous, resident_before = from_client("resident_bytes"),
    }
    local notes, marked = {}, false
    local ph = {
      mark = function(label)
        if sampler then sampler:mark() end
        marked = true
        notes.mark = label or "event"
        notes.mark_s = R.now() - t0
      end,
      note = function(k, v) notes[k] = v end,
    }
    body(ph)
    f = R.footprint()
    local t1 = R.now()
    r.t_end_s = t1 - t0
    r.duration_s = t1 - t0 - r.t_start_s
    r.phys_after, r.rss_after = f.phys_footprint, f.rss
    r.lazyfree_after, r.anonymous_after = f.lazyfree, f.anonymous
    r.resident_after = from_client("resident_bytes")
    r.vmas_after = from_client("vma_count")
    if sampler then
      local s = sampler:summary()
      r.phys_peak, r.phys_low, r.rss_peak = s.max_phys, s.min_phys, s.max_rss
      r.phys_low_after_mark = marked and s.min_phys_after_mark or NULL
      r.samples = s.samples
    else -- no sampler: the reading after the phase, which ends with a full collection
      r.phys_peak = math.max(r.phys_before, f.phys_footprint)
      r.phys_low = math.min(r.phys_before, f.phys_footprint)
      r.rss_peak = math.max(r.rss_before, f.rss)
      r.phys_low_after_mark = marked and f.phys_footprint or NULL
      r.samples = 2
    end
    r.notes = notes
    if R.heaplab then r.stats = client.stats() end
    records[#records + 1] = r
  end

  -- Print the arm's document: the records, the sampler's series and NOTES
  -- beside the allocator and the language.
  function rec.write(title, params, notes)
    local series = setmetatable({}, ARRAY)
    if sampler then
      for _, x in ipairs(sampler:series()) do
        series[#series + 1] = { x[1] / 1e9 - t0, x[2], x[3], x[4] }
      end
      sampler:stop()
    end
    params.language = "lua"
    notes.language = "lua"
    notes.allocator = client and client.allocator() or "stock"
    io.write(R.json({
      experiment = experiment, title = title, arm = arm,
      options = from_client("options"), params = params,
      pid = client and tonumber(client.report():match('"pid": (%d+)')) or NULL,
      error = NULL, records = records, notes = notes, series = series,
    }))
    io.write("\n")
  end

  return rec
end

return R
