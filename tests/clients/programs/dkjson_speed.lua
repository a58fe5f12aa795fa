-- dkjson_speed.lua: the dkjson speed test shipped by Debian's lua-dkjson
-- (/usr/share/doc/lua-dkjson/examples/speedtest.lua), run unchanged except
-- for its iteration count, then the results of one decode and one encode
-- so runs on different allocators can be compared.
-- usage: dkjson_speed.lua [iterations]   (the original does 100000)
local iterations = math.tointeger(tonumber(arg[1] or "100000"))
assert(iterations and iterations > 0, "iterations: expected a positive integer")
local path = os.getenv("DKJSON_SPEEDTEST") or "/usr/share/doc/lua-dkjson/examples/speedtest.lua"
local f = assert(io.open(path, "rb"))
local src = f:read("a")
f:close()
local n
src, n = src:gsub("for i = 1,100000 do", "for i = 1," .. iterations .. " do")
assert(n == 2, "speedtest.lua: expected its two loops of 100000 iterations, found " .. n)
assert(load(src, "@" .. path))("dkjson")   -- prints Decoding: / Encoding: timings

local json = require "dkjson"
local doc = json.decode('{"a": [1, 2.5, "x\\u00e9", true, null], "b": {"c": {}}}')
print("decoded", doc.a[1], doc.a[2], doc.a[3], doc.a[4], doc.a[5], next(doc.b.c))
print("encoded", json.encode({ list = { 1, 2, 3 }, name = "heaplab" }, { keyorder = { "list", "name" } }))
