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

it("the REPL sessions of docs/lua.md print what the doc shows", function()
-- 'Open a REPL' and 'What the REPL shows' are one session on one heap: each
-- '> ' line is run as lua.c runs it (as an expression first), its results
-- printed; a heap's line and 'true' must be the doc's, an event its kind and
-- cycle (the time differs).  The doc picked h:events()[3] as trigger_adapted
-- after a mark event had come before it (the Lua hunt, session 31).
local here = debug.getinfo(1, "S").source:match("^@(.*)tests/lua/[^/]*$") or "./"
local f = assert(io.open(here .. "docs/lua.md"))
local doc = f:read("a")
f:close()
local function block(title)
  local from = assert(doc:find("\n## " .. title .. "\n", 1, true), title)
  local body = doc:match("\n```\n(>.-)\n```", from)
  return assert(body, "a REPL block under " .. title)
end
local steps = {} -- { cmd, { expected lines } }
for _, title in ipairs{ "Open a REPL", "What the REPL shows" } do
  for line in (block(title) .. "\n"):gmatch("(.-)\n") do
    local cmd = line:match("^> (.*)$")
    if cmd then steps[#steps + 1] = { cmd, {} }
    else table.insert(steps[#steps][2], line) end
  end
end
C.ok(#steps >= 8, "steps read from the doc: " .. #steps)
local env = setmetatable({ heaplab = require "heaplab" }, { __index = _G })
local events_checked = 0
for _, step in ipairs(steps) do
  local cmd, want = step[1], step[2]
  local out = {}
  local saved = print
  env.print = function(...)
    local t = table.pack(...)
    for i = 1, t.n do t[i] = tostring(t[i]) end
    out[#out + 1] = table.concat(t, "\t", 1, t.n)
  end
  local chunk = load("return " .. cmd, "=doc", "t", env) or assert(load(cmd, "=doc", "t", env))
  local res = table.pack(chunk())
  if res.n > 0 then
    for i = 1, res.n do res[i] = tostring(res[i]) end
    out[#out + 1] = table.concat(res, "\t", 1, res.n)
  end
  env.print = saved
  local got = {}
  for line in (table.concat(out, "\n") .. "\n"):gmatch("(.-)\n") do got[#got + 1] = line end
  for i, w in ipairs(want) do
    local g = got[i] or "(nothing)"
    if w:find("^heaplab%.heap%(") or w == "true" then
      C.eq(g, w, "line " .. i .. " after > " .. cmd)
    elseif w:find("^heaplab%.event: ") then
      local head = w:match("^(heaplab%.event: [%w_]+ %(cycle %d+),")
      C.eq(g:sub(1, #head), head, "the event after > " .. cmd)
      events_checked = events_checked + 1
    end
  end
end
C.ok(events_checked > 0, "no event checked")
env.h:close()
end)
end)
