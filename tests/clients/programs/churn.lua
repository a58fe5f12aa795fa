-- churn.lua: rounds of building a structure of small tables and strings,
-- checking it, dropping it and collecting, so pages empty, go back to the OS
-- and are wanted again by the next round.  Prints one digest per round:
-- the output depends on the program alone, never on the allocator.
-- usage: churn.lua [rounds [MiB per round]]   (default 6 rounds of 24 MiB)
local rounds = tonumber(arg[1]) or 6
local mib = tonumber(arg[2]) or 24

local function build(n, seed)
  local root = {}
  for i = 1, n do
    local k = (i * 7919 + seed) % 1000003
    root[i] = { id = k, name = "item-" .. k .. "-" .. seed, tags = { k % 7, k % 11, k % 13 } }
  end
  return root
end

local function digest(root)
  local h = 0
  for i = 1, #root do
    local o = root[i]
    h = (h * 31 + o.id + #o.name + o.tags[1] + o.tags[2] * 3 + o.tags[3] * 5) % 4294967311
  end
  return h
end

-- about 240 bytes per item on a 64-bit Lua 5.4
local per_round = math.floor(mib * 1024 * 1024 / 240)
local keep = {}
for r = 1, rounds do
  local t = build(per_round, r)
  keep[#keep + 1] = t[r]          -- a few survivors across rounds
  print(string.format("round %d: %d items, digest %d", r, #t, digest(t)))
  t = nil
  collectgarbage("collect")
  collectgarbage("collect")
end
local h = 0
for _, o in ipairs(keep) do h = h + o.id end
print("survivors", #keep, h)
