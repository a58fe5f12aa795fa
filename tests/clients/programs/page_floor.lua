-- page_floor.lua -- E8 page floor inside a real Lua interpreter (heaplab-lua).
--
-- Protocol (the shape of E1, on Lua's own objects): build about 192 MiB of
-- small tables and strings, hold them through a full collection, drop them
-- and collect fully (the lowest footprint after the drop is the floor), then
-- allocate a set of large buffers (strings of 16 MiB, every byte written).
-- The arm is chosen from outside -- HEAPLAB_ALLOCATOR and HEAPLAB_* options
-- in the environment -- and named on the command line.  Prints one arm
-- record in the harness's JSON format (docs/harness.md) on stdout, nothing
-- else.
--
-- usage: heaplab-lua page_floor.lua ARM [MiB]   (default 192)
local client = require "heaplab.client"

local arm = arg[1] or "unnamed"
local MiB = 1024 * 1024
local target = (tonumber(arg[2]) or 192) * MiB
local buffer_bytes = 16 * MiB

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

-- ---- the recorder: phases in the harness's record format ----
local sampler = client.sampler(0.002)
local t0 = client.now()
local records = {}
local heaplab = client.allocator() == "heaplab"

local function phase(name, body)
  sampler:reset()
  local f = client.footprint()
  local rec = {
    experiment = "E8", arm = arm, phase = name, index = #records,
    t_start_s = client.now() - t0,
    phys_before = f.phys_footprint, rss_before = f.rss, lazyfree_before = f.lazyfree,
    anonymous_before = f.anonymous, resident_before = orNull(client.resident_bytes()),
  }
  local notes, marked = {}, false
  local ph = {
    mark = function(label)
      sampler:mark()
      marked = true
      notes.mark = label or "event"
      notes.mark_s = client.now() - t0
    end,
    note = function(k, v) notes[k] = v end,
  }
  body(ph)
  local s = sampler:summary()
  f = client.footprint()
  local t1 = client.now()
  rec.t_end_s = t1 - t0
  rec.duration_s = t1 - t0 - rec.t_start_s
  rec.phys_after, rec.rss_after = f.phys_footprint, f.rss
  rec.lazyfree_after, rec.anonymous_after = f.lazyfree, f.anonymous
  rec.resident_after = orNull(client.resident_bytes())
  rec.vmas_after = orNull(client.vma_count())
  rec.phys_peak, rec.phys_low, rec.rss_peak = s.max_phys, s.min_phys, s.max_rss
  rec.phys_low_after_mark = marked and s.min_phys_after_mark or NULL
  rec.samples = s.samples
  rec.notes = notes
  if heaplab then rec.stats = client.stats() end
  records[#records + 1] = rec
end

-- ---- the workload ----
-- One item: a table with an array part of three small strings and a
-- number, about 300 bytes in all (measured); items hang from a tree of 32-slot tables
-- so no single array is large (everything stays on the small path).
local function make_item(i)
  local s = tostring(i)
  return { "name-" .. s, "value-" .. s .. "-" .. (i * 7), "k" .. (i % 977), i }
end

local ITEM_BYTES = 300
local function build(bytes)
  local n = bytes // ITEM_BYTES
  local root, leaf = {}, nil
  local leaves = {}
  for i = 1, n do
    if not leaf or #leaf == 32 then
      leaf = {}
      leaves[#leaves + 1] = leaf
    end
    leaf[#leaf + 1] = make_item(i)
  end
  -- group the leaves 32 to a node, so no table's array part exceeds 32 slots
  local level = leaves
  while #level > 32 do
    local up, node = {}, nil
    for _, x in ipairs(level) do
      if not node or #node == 32 then
        node = {}
        up[#up + 1] = node
      end
      node[#node + 1] = x
    end
    level = up
  end
  root.nodes = level
  root.count = n
  return root
end

local function checksum(t)
  local sum, count = 0, 0
  local function walk(x)
    if type(x[4]) == "number" then
      sum = (sum + x[4] + #x[1] + #x[2]) % 4294967311
      count = count + 1
      return
    end
    for _, y in ipairs(x) do walk(y) end
  end
  for _, node in ipairs(t.nodes) do walk(node) end
  return sum, count
end

local held
phase("build", function()
  held = build(target)
end)

phase("hold", function(ph)
  collectgarbage("collect")
  local sum, count = checksum(held)
  ph.note("checksum", sum)
  ph.note("items", count)
end)

phase("drop", function(ph)
  ph.mark("drop")
  held = nil
  collectgarbage("collect")
  collectgarbage("collect")
end)

local buffers = {}
phase("buffers", function(ph)
  for i = 1, target // buffer_bytes do
    -- string.rep writes every byte of the new string
    buffers[i] = string.rep(string.char(65 + i % 26), buffer_bytes)
  end
  ph.note("buffers", #buffers)
end)

local series = setmetatable({}, ARRAY)
for _, x in ipairs(sampler:series()) do
  series[#series + 1] = { x[1] / 1e9 - t0, x[2], x[3], x[4] }
end
sampler:stop()
io.write(json({
  experiment = "E8", title = "page floor on a real interpreter", arm = arm,
  options = orNull(client.options()), params = { language = "lua", target_bytes = target },
  pid = tonumber(client.report():match('"pid": (%d+)')), error = NULL, records = records,
  notes = { allocator = client.allocator(), language = "lua",
            warm_bytes = heaplab and client.options().warm_pages * client.options().page_size or 0 },
  series = series,
}))
io.write("\n")
