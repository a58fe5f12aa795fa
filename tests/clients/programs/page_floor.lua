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
local client = require "heaplab.client"   -- this program needs the launcher's module
local R = dofile((arg[0]:match("^(.*/)") or "") .. "client_record.lua")

local arm = arg[1] or "unnamed"
local MiB = 1024 * 1024
local target = (tonumber(arg[2]) or 192) * MiB
local buffer_bytes = 16 * MiB
local rec = R.recorder("E8", arm)
local phase = rec.phase

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

rec.write("page floor on a real interpreter", { target_bytes = target },
          { warm_bytes = R.heaplab and client.options().warm_pages * client.options().page_size or 0 })
