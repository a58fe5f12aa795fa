-- The README's commands, run as a user would: the one-liner prints a
-- positive number of released pages, and the REPL command opens lua5.4 with
-- heaplab loaded.  LUA_CPATH is this build's module directory (README:
-- LUA_CPATH="build/bindings/lua/?.so;;" from the source root after make).
local C = require "check"

describe("the README's commands", function()
local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"
local cpath = os.getenv("LUA_CPATH")
C.ok(cpath and cpath:find("?.so", 1, true), "LUA_CPATH points at the module: " .. tostring(cpath))
local dir = cpath:match("^([^;]*)%?%.so")

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function run(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  return out, ok, how, code
end

local env = "LUA_CPATH=" .. sh_quote(dir .. "?.so;;") .. " "

it("the one-liner prints a positive number of released pages", function()
local one_liner = [[local hl = require "heaplab"; local h = hl.heap{}; local r = h:fill(128 << 20, 256); r:release(); h:collect{cycles = 2}; print(h:stats().released_pages)]]
local out, ok, how, code = run(env .. sh_quote(lua) .. " -e " .. sh_quote(one_liner))
C.ok(ok, ("the one-liner exited %s %s"):format(tostring(how), tostring(code)))
local n = tonumber(out:match("^%s*(%d+)%s*$"))
C.ok(n and n > 0, "the one-liner printed a positive number, got: " .. out)
-- 128 MiB is 2048 pages of 64 KiB; two cycles release at least one trim's
-- budget (release_per_sweep = 1024) of them
C.ok(n >= 1024, "released pages: " .. n)
end)

it("the REPL command opens lua5.4 with heaplab loaded", function()

local repl = env .. sh_quote(lua) .. " -i -e 'heaplab = require \"heaplab\"' 2>&1 <<'EOF'\n"
  .. "h = heaplab.heap{}\nprint(h)\nprint(h:alloc(16, 2))\nos.exit(0)\nEOF"
local out, ok = run(repl)
C.ok(ok, "the REPL exited cleanly")
C.ok(out:find("heaplab.heap(collected)", 1, true), "the REPL printed the heap summary: " .. out)
C.ok(out:find("heaplab.object(size=16, refs=2)", 1, true), "the REPL printed an object: " .. out)
end)
end)
