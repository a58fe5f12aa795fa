-- harness.lua -- the experiment harness for experiments written in Lua.
--
-- The Lua twin of bindings/python/heaplab/harness.py (docs/harness.md): an
-- arm is a sequence of named phases run in ONE process; each phase records
-- phys_footprint, rss, lazyfree and the heap's residency before and after,
-- the peak during the phase and the lowest value after a marked event --
-- sampled by the C sampler thread (heaplab.sampler), because reclamation can
-- be asynchronous and a reading at a chosen instant is the wrong measurement.
--
-- A script runs one arm per process (`lua5.4 script.lua ARM`) and prints
-- exactly one arm JSON document on stdout, nothing else (stderr is never
-- parsed).  It exits non-zero when the arm raised an error or when one of
-- the effects it asserts (rec:expect) does not hold.
--
--   local H = require "harness"
--   H.main{
--     experiment = "E1", title = "page floor",
--     options = H.SEED_POLICIES,   -- every arm's, unless the arm sets its own
--     arms = { on = { options = { page_release = true } }, off = {...} },
--     body = function(rec, options, params) ... rec:phase("fill", h, function(ph) ... end) end,
--     check = function(rec, arm) rec:expect(...) end,
--   }
local heaplab = require "heaplab"

local H = {}
H.MiB = 1 << 20

-- The seeds' collector policies that E1-E6 study and that have since changed
-- default (heaplab.harness.SEED_POLICIES, docs/harness.md): the twins of
-- E1-E6 give them as their experiment's options.
H.SEED_POLICIES = { gc_growth_ratio = 0, tenure_full_marks = 0 }

---------------------------------------------------------------------------
-- JSON (encoding only: the arm's document)
---------------------------------------------------------------------------

-- json null inside tables (a Lua table cannot hold nil)
H.null = setmetatable({}, { __tostring = function() return "null" end, __name = "json.null" })

local array_mt = { __name = "json.array" }
-- Mark a table as a JSON array (so an empty one encodes as [] not {}).
function H.array(t) return setmetatable(t or {}, array_mt) end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function number(v)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  -- the shortest of %.15g / %.17g that reads back as the same double
  local s = ("%.15g"):format(v)
  if tonumber(s) ~= v then s = ("%.17g"):format(v) end
  return s
end

-- n when t's keys are exactly 1..n, else nil
local function sequence_length(t)
  local n = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 then return nil end
    n = n + 1
  end
  for i = 1, n do
    if t[i] == nil then return nil end
  end
  return n
end

local function encode(v, out, depth)
  if depth > 64 then error("json: nesting deeper than 64 (a cycle?)", 0) end
  local t = type(v)
  if v == nil or v == H.null then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif t == "number" then
    out[#out + 1] = number(v)
  elseif t == "string" then
    out[#out + 1] = quote(v)
  elseif t == "table" then
    local n = sequence_length(v)
    if getmetatable(v) == array_mt or (n and n > 0) then
      if not n then error("json: a table marked as an array has non-sequence keys", 0) end
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then
          error(("json: object keys must be strings, got %s %s"):format(type(k), tostring(k)), 0)
        end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = quote(k)
        out[#out + 1] = ":"
        encode(v[k], out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  else
    error("json: cannot encode a " .. t, 0)
  end
end

function H.json(v)
  local out = {}
  encode(v, out, 0)
  return table.concat(out)
end

---------------------------------------------------------------------------
-- Phases and the recorder
---------------------------------------------------------------------------

local Phase = {}
Phase.__index = Phase

-- key, once key and value are what the arm's JSON can hold (as the Python
-- harness's note() checks): a value that is not was found only when H.main
-- encoded the arm, and the whole arm's JSON was lost with it.
local function json_note(key, value)
  if type(key) ~= "string" then
    error(("note: the key must be a string, not %s %s"):format(type(key), tostring(key)), 3)
  end
  local ok, err = pcall(H.json, value)
  if not ok then
    error(("note '%s': the value must be JSON-encodable (numbers, strings, booleans, "
           .. "tables of them): %s"):format(key, err), 3)
  end
  return key
end

-- A phase record's status, the Python harness's (heaplab.harness.phase_status):
-- "ok", or "raised: " and the first line of the error (at most 200
-- characters) when the phase's function raised.
local function raised(err)
  local text = tostring(err):match("^%s*(.-)%s*$"):match("^[^\n]*")
  if text == "" then text = "error" end
  local n = utf8.len(text)
  if n and n > 200 then
    text = text:sub(1, utf8.offset(text, 198) - 1) .. "..."
  elseif not n and #text > 200 then
    text = text:sub(1, 197) .. "..."
  end
  return "raised: " .. text
end

-- Start the lowest-after-mark window now (e.g. just before a drop).
function Phase:mark(label)
  self.rec.sampler:mark()
  self.marked = true
  self.notes.mark = label or "event"
  self.notes.mark_s = (heaplab.clock_ns() - self.rec.t0) / 1e9
end

-- Attach a figure of the experiment's own.
function Phase:note(key, value) self.notes[json_note(key, value)] = value end

local Recorder = {}
Recorder.__index = Recorder

-- Seconds this thread has spent runnable but waiting for a CPU that other
-- processes held (/proc/thread-self/schedstat, second field; 0 where it
-- cannot be read).  A phase's duration less this is the time it ran or
-- slept by itself: what a spin or a stall lengthens and a loaded machine
-- (other engineers' builds on 2 cores) does not.
local function runqueue_wait_s()
  local f = io.open("/proc/thread-self/schedstat", "r")
  if not f then return 0 end
  local line = f:read("l") or ""
  f:close()
  local wait = line:match("^%d+%s+(%d+)")
  return wait and tonumber(wait) / 1e9 or 0
end
H.runqueue_wait_s = runqueue_wait_s

local function heap_figures(heap)
  if heap == nil or heap:closed() then return H.null, H.null end
  return assert(heap:resident_bytes()), assert(heap:vma_count())
end

-- Run fn(phase) as the named phase; its record is kept even if fn raises
-- (its status then says so and the error propagates and fails the arm).
-- Returns the record.  Phases do not nest: the arm's one sampler is reset
-- when a phase begins (an outer phase went on from the inner one's reset).
function Recorder:phase(name, heap, fn)
  -- its name is checked at the call, by the Python harness's rules (its
  -- _phase_name): a non-empty string.  rec:phase(nil), rec:phase(3) were
  -- taken, and the arm's JSON had a record with no phase name or a number.
  if type(name) ~= "string" then
    error(("a phase's name must be a string, not %s %s"):format(type(name), tostring(name)), 2)
  end
  if name == "" then error("a phase's name must not be empty", 2) end
  if self.in_phase ~= nil then
    error(("phase %q begun inside phase %q: phases do not nest (an arm has one sampler); "
      .. "end %q first"):format(name, self.in_phase, self.in_phase), 2)
  end
  local s = self.sampler
  s:reset()
  local f = assert(heaplab.footprint())
  local t0 = heaplab.clock_ns()
  local w0 = runqueue_wait_s()
  local res = heap_figures(heap)
  local ph = setmetatable({ rec = self, name = name, notes = {}, marked = false }, Phase)
  local r = {
    experiment = self.experiment, arm = self.arm, phase = name,
    index = #self.records, t_start_s = (t0 - self.t0) / 1e9,
    phys_before = f.phys_footprint, rss_before = f.rss, lazyfree_before = f.lazyfree,
    anonymous_before = f.anonymous, anon_huge_before = f.anon_huge, resident_before = res,
  }
  self.in_phase = name
  local ok, err = pcall(fn, ph)
  self.in_phase = nil
  local summ = s:summary()
  f = assert(heaplab.footprint())
  local t1 = heaplab.clock_ns()
  local res_after, vmas = heap_figures(heap)
  r.t_end_s = (t1 - self.t0) / 1e9
  r.duration_s = (t1 - t0) / 1e9
  r.waited_s = runqueue_wait_s() - w0 -- time spent waiting for a CPU (not in FIGURES)
  r.phys_after, r.rss_after, r.lazyfree_after = f.phys_footprint, f.rss, f.lazyfree
  r.anonymous_after, r.resident_after, r.vmas_after = f.anonymous, res_after, vmas
  r.anon_huge_after = f.anon_huge
  r.phys_peak, r.phys_low, r.rss_peak = summ.max_phys, summ.min_phys, summ.max_rss
  r.phys_low_after_mark = ph.marked and summ.min_phys_after_mark or H.null
  r.samples = summ.samples
  r.notes = ph.notes
  r.status = ok and "ok" or raised(err)
  if heap ~= nil and not heap:closed() then r.stats = heap:stats() end
  self.records[#self.records + 1] = r
  if not ok then error(err, 0) end
  return r
end

function Recorder:note(key, value) self.notes[json_note(key, value)] = value end

-- The record of a phase by name.
function Recorder:get(name)
  for _, r in ipairs(self.records) do
    if r.phase == name then return r end
  end
  error(("arm %s has no phase %q"):format(self.arm, name), 2)
end

-- State an asserted effect: what, our figure and the assertion as short
-- strings, ok as a boolean.  A failed effect makes the script exit 1; every
-- effect lands in the results table (pytest passes them to lab.effect).
function Recorder:expect(what, ours, asserted, ok, phase, seed)
  self.effects[#self.effects + 1] = {
    experiment = self.experiment, arm = self.arm, phase = phase or "", what = what,
    ours = ours, asserted = asserted, seed = seed or "", ok = ok and true or false,
  }
  if not ok then
    io.stderr:write(("%s/%s: %s: %s, asserted %s -- FAILED\n"):format(
      self.experiment, self.arm, what, ours, asserted))
  end
  return ok
end

-- State a reported figure, asserted by nothing (ok is null: the results
-- table shows "-", as a Python effect with ok=None): what, our figure and
-- why nothing is asserted (default "reported").
function Recorder:report(what, ours, why, phase, seed)
  self.effects[#self.effects + 1] = {
    experiment = self.experiment, arm = self.arm, phase = phase or "", what = what,
    ours = ours, asserted = why or "reported", seed = seed or "", ok = H.null,
  }
end

-- The arm's footprint series: { {t_s, phys, rss, lazyfree}, ... }
function Recorder:series()
  local out = H.array()
  for i, x in ipairs(self.sampler:series()) do
    out[i] = { (x[1] - self.t0) / 1e9, x[2], x[3], x[4] }
  end
  return out
end

function H.recorder(experiment, title, arm, interval_s)
  return setmetatable({
    experiment = experiment, title = title, arm = arm,
    records = H.array(), notes = {}, effects = H.array(),
    t0 = heaplab.clock_ns(), sampler = assert(heaplab.sampler(interval_s or 0.002)),
  }, Recorder)
end

---------------------------------------------------------------------------
-- Figures shared by the experiments
---------------------------------------------------------------------------

-- A fraction as the effects tables print it, as Python's percent(): '97.3%';
-- a share that rounds to zero is '0.0%' (it printed '-0.0%' for a drop that
-- gave back a few pages less than nothing), a NaN 'nan%'.
function H.pct(x)
  local v = 100 * x
  if v ~= v then return "nan%" end
  local s = ("%.1f"):format(v)
  if tonumber(s) == 0 then s = "0.0" end      -- (-0.0 too)
  return s .. "%"
end
function H.mib(x) return ("%.1f MiB"):format(x / H.MiB) end

-- The derived figures, as heaplab.harness.derived_figures defines them (the
-- Python twins' arm_effects read these records with it, heaplab report too).
-- Bytes a phase gave back: phys before minus the lowest after the mark -- an
-- error for a phase that was not marked (or saw no sample after its mark),
-- as PhaseRecord.returned is: it was phys before minus phys after there, a
-- figure the analysis and the sweep's returned_in_<phase> did not give.
function H.returned(r)
  local low = r.phys_low_after_mark
  if low == nil or low == H.null then
    error(("phase %s has no phys_returned (phys_before - phys_low_after_mark): the phase "
           .. "was not marked (ph:mark), or no sample came after its mark; growth is "
           .. "phys_after - phys_before"):format(tostring(r.phase)), 2)
  end
  return r.phys_before - low
end

function H.growth(r) return r.phys_after - r.phys_before end

-- Collect until a cycle releases nothing more -- never a fixed sleep.
function H.collect_until_settled(h, limit)
  limit = limit or 32
  local cycles = 0
  while cycles < limit do
    local before = assert(h:stats()).released_pages
    assert(h:collect())
    cycles = cycles + 1
    if cycles > 1 and assert(h:stats()).released_pages == before then break end
  end
  return cycles
end

---------------------------------------------------------------------------
-- The arm's process
---------------------------------------------------------------------------

local function copy(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

-- An arm's options: its own, and the experiment's (def.options) it does not
-- set -- what the body gets and the JSON records.
local function arm_options(def, arm)
  local out = copy(def.options)
  for k, v in pairs(arm.options or {}) do out[k] = v end
  return out
end

-- Run the arm named by arg[1]; print its JSON; exit 0 only if it completed
-- and every asserted effect holds.
function H.main(def)
  local arm_name = arg and arg[1]
  local arm = arm_name and def.arms[arm_name]
  if not arm then
    local names = {}
    for k in pairs(def.arms) do names[#names + 1] = k end
    table.sort(names)
    io.stderr:write(("usage: lua5.4 %s ARM   (arms: %s)\n"):format(arg and arg[0] or "script",
      table.concat(names, ", ")))
    os.exit(2)
  end
  -- the JSON's arm name says it ran in Lua, so Python's arms of the same
  -- experiment keep their own rows and files
  local rec = H.recorder(def.experiment, def.title, "lua-" .. arm_name, def.interval_s)
  local out = {
    experiment = def.experiment, title = def.title, arm = rec.arm, language = "lua",
    interpreter = _VERSION, options = arm_options(def, arm), params = copy(arm.params),
    pid = heaplab.pid(), error = H.null,
  }
  local ok, err = xpcall(def.body, debug.traceback, rec, arm_options(def, arm),
                         copy(arm.params))
  if ok and def.check then
    ok, err = xpcall(def.check, debug.traceback, rec, arm_name, arm)
  end
  if not ok then
    out.error = tostring(err)
    io.stderr:write(tostring(err), "\n")
  end
  out.records = rec.records
  out.notes = rec.notes
  out.effects = rec.effects
  out.seed = def.seed or {}
  out.series = rec:series()
  rec.sampler:stop()
  local encoded, text = pcall(H.json, out)
  if not encoded then
    -- something the arm gave (an effect's figure, its params) cannot be
    -- encoded: the arm's JSON is still written, that part as null (or []),
    -- and the arm fails saying so
    local why = ("cannot encode the arm's JSON: %s"):format(text)
    for k, v in pairs(out) do
      if not pcall(H.json, v) then
        local array = getmetatable(v) == array_mt
        why = why .. ("; %q written as %s"):format(k, array and "[]" or "null")
        out[k] = array and H.array() or H.null
      end
    end
    out.error = (out.error ~= H.null and out.error .. "\n" or "") .. why
    io.stderr:write(why, "\n")
    ok = false
    text = H.json(out)
  end
  io.stdout:write(text, "\n")
  io.stdout:flush()
  local failed = not ok
  for _, e in ipairs(rec.effects) do
    if e.ok == false then failed = true end
  end
  os.exit(failed and 1 or 0, true)
end

return H
