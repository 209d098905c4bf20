-- What the reliability trials (spec/reliability/*_spec.lua) share: how many
-- trials to run, the record of each trial's outcome that `make reliability`
-- prints as a table, runners started in the background and killed, stopped
-- or waited for, the trees the trials run, and the checks (each returns the
-- problems it found, so spec/reliability/controls_spec.lua can show that
-- every one of them fails on a state that is wrong).
--
-- Counts: the short form by default (inside `make test`); RELIABILITY=full
-- gives the issue's counts; RELIABILITY_<NAME>=N sets one (NAME as passed to
-- count(), upper case, '-' as '_'). RELIABILITY_RESULTS=FILE gets one line
-- per trial: "GROUP<TAB>pass|fail|known<TAB>detail".
local h = require('support.helpers')
local json = require('json')

local M = {}

M.full = os.getenv('RELIABILITY') == 'full'

function M.count(name, short, full)
  local v = tonumber(os.getenv('RELIABILITY_' .. name:upper():gsub('%-', '_')) or '')
  if v then return math.floor(v) end
  return M.full and full or short
end

math.randomseed(os.time() + tonumber(h.unique(), 16))

-- ---- results ----------------------------------------------------------------

local function record_result(group, status, detail)
  local f = os.getenv('RELIABILITY_RESULTS')
  if not f or f == '' then return end
  local fh = assert(io.open(f, 'a'))
  fh:write(string.format('%s\t%s\t%s\n', group, status, (tostring(detail or '')):gsub('[\t\n]', ' ')))
  fh:close()
end

-- A failure that is a known bug someone is fixing: trial() records it as
-- "known", and makes the case pending in the short form (so `make test`
-- shows it without failing) and failed in the full form.
function M.known(msg) error({ known = msg }, 0) end

-- note(text): a line for the trial's record (what it saw), kept with its
-- outcome in the results file.
local notes = {}
function M.note(text) notes[#notes + 1] = text end

-- bind(it, pending): busted's functions live in the spec file's own
-- environment; a spec file hands them over once, before its first trial
-- (pending as a closure, so that it is looked up while the case runs:
-- busted swaps in the one a running case may call).
local busted_it, busted_pending
function M.bind(it_fn, pending_fn) busted_it, busted_pending = it_fn, pending_fn end

-- trial(group, title, fn): one `it` whose outcome is recorded for the table.
function M.trial(group, title, fn)
  assert(busted_it, 'trials.bind(it, pending) first')
  busted_it(title, function()
    notes = {}
    local ok, err = pcall(fn)
    local detail = table.concat(notes, '; ')
    if ok then
      record_result(group, 'pass', detail)
      return
    end
    if type(err) == 'table' and err.known then
      record_result(group, 'known', err.known .. (detail ~= '' and ' [' .. detail .. ']' or ''))
      if M.full then error('KNOWN BUG: ' .. err.known, 0) end
      busted_pending('KNOWN BUG (being fixed): ' .. err.known)
      return
    end
    local msg = type(err) == 'table' and (err.message or json.encode(err)) or tostring(err)
    record_result(group, 'fail', msg:sub(1, 300) .. (detail ~= '' and ' [' .. detail .. ']' or ''))
    error(err, 0)
  end)
end

-- check(problems, what): fails the trial listing the problems, if any.
function M.check(problems, what)
  if #problems > 0 then
    error(string.format('%s: %d problem(s):\n  %s', what, #problems, table.concat(problems, '\n  ')), 0)
  end
end

-- ---- the cluster ------------------------------------------------------------

M.kubectl_bin = h.root .. '/build/testenv/bin/kubectl'

-- cluster(kubeconfig): kubectl and the runner against one apiserver.
function M.cluster(kubeconfig)
  local c = { kubeconfig = kubeconfig, namespaces = {} }
  function c.kubectl(args)
    return h.run(string.format('%s --kubeconfig %s %s', h.q(M.kubectl_bin), h.q(kubeconfig), args))
  end
  function c.json(args)
    return json.decode(h.must(c.kubectl(args .. ' -o json'), 'kubectl ' .. args).out)
  end
  function c.new_ns(prefix)
    local ns = string.format('%s-%s', prefix, h.unique())
    h.must(c.kubectl('create namespace ' .. ns), 'create namespace')
    c.namespaces[#c.namespaces + 1] = ns
    return ns
  end
  function c.cleanup()
    if #c.namespaces > 0 then
      c.kubectl('delete namespace --wait=false ' .. table.concat(c.namespaces, ' '))
    end
    c.namespaces = {}
  end
  -- An empty ledger, as an older chart made it: `run` is then an upgrade.
  function c.empty_ledger(ns)
    h.must(c.kubectl('create configmap cozystack-version -n ' .. ns), 'create the ledger')
  end
  -- The runner's command line (a shell string), kubeconfig in its env.
  function c.run_cmd(dir, ns, flags, kubeconfig_override)
    return string.format('env KUBECONFIG=%s %s run --dir %s --namespace %s %s',
      h.q(kubeconfig_override or kubeconfig), h.q(h.bin), h.q(dir), ns, flags or '')
  end
  return c
end

-- The shared apiserver of the run (tools/run-tests exports KUBECONFIG).
function M.default_cluster()
  h.need_cluster()
  return M.cluster(os.getenv('KUBECONFIG'))
end

-- ---- processes --------------------------------------------------------------

-- start(cmd): runs the shell command cmd (one simple command) in the
-- background; returns {dir=, pid=} (the pid of cmd itself: exec'd); its
-- stdout, stderr and exit code land in dir/out, dir/err, dir/rc.
function M.start(cmd)
  local d = h.tmpdir()
  -- from a file, so that no waiting shell carries cmd in its command line
  -- (orphans() looks for what is left by command line)
  h.write(d .. '/cmd', 'exec ' .. cmd .. '\n')
  assert(os.execute(string.format(
    'cd %s && ( sh ./cmd >out 2>err </dev/null & echo $! >pid; wait $!; echo $? >rc.tmp; mv rc.tmp rc ) ' ..
    '>/dev/null 2>&1 </dev/null &',
    h.q(d))))
  local pid
  for _ = 1, 200 do
    pid = h.slurp(d .. '/pid'):match('%d+')
    if pid then break end
    h.sleep(0.01)
  end
  assert(pid, 'the background command did not start: ' .. cmd)
  return { dir = d, pid = pid }
end

-- wait(p, secs): the exit code, or nil after secs.
function M.wait(p, secs)
  local deadline = M.now() + (secs or 120)
  repeat
    local rc = h.slurp(p.dir .. '/rc'):match('%d+')
    if rc then return tonumber(rc) end
    h.sleep(0.05)
  until M.now() > deadline
  return nil
end

function M.out(p) return h.slurp(p.dir .. '/out') end
function M.err(p) return h.slurp(p.dir .. '/err') end
function M.signal(p, sig) os.execute(string.format('kill -%s %s 2>/dev/null', sig, p.pid)) end

function M.now()
  local f = assert(io.open('/proc/uptime'))
  local s = f:read('l')
  f:close()
  return tonumber(s:match('^[%d.]+'))
end

-- stat(pid) -> state letter, parent pid; nil when pid is gone (it may go
-- between the open and the read: a nil read is "gone", not an error).
function M.stat(pid)
  local f = io.open('/proc/' .. pid .. '/stat')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  if not s then return nil end
  local state, ppid = s:match('%) (%a) (%d+)')
  return state, ppid
end

local function live(pid)
  local st = M.stat(pid)
  return st ~= nil and st ~= 'Z' and st ~= 'X'
end

-- children(pid): the pids of pid's live children (/proc), as a list.
function M.children(pid)
  local out = {}
  local s = h.slurp(string.format('/proc/%s/task/%s/children', pid, pid))
  for c in s:gmatch('%d+') do
    if live(c) then out[#out + 1] = c end
  end
  return out
end

-- orphans(marker): live processes whose command line contains marker (a
-- tree's unique directory: the runner and its Lua children carry it).
function M.orphans(marker)
  local out = {}
  local p = io.popen('ls /proc')
  for pid in p:lines() do
    if pid:match('^%d+$') and live(pid) then
      local cmd = h.slurp('/proc/' .. pid .. '/cmdline'):gsub('%z', ' ')
      if cmd:find(marker, 1, true) then out[#out + 1] = pid .. ' (' .. cmd:sub(1, 120) .. ')' end
    end
  end
  p:close()
  return out
end

-- ---- trees ------------------------------------------------------------------

local function write_tree(lines, scripts)
  local dir = h.tmpdir()
  assert(os.execute(string.format('mkdir -p %s/migrations/pre-apply %s/migrations/order.d %s/legacy-sh/lib',
    h.q(dir), h.q(dir), h.q(dir))))
  h.write(dir .. '/migrations/order.d/00001-v1.0.0', table.concat(lines, '\n') .. '\n')
  h.write(dir .. '/migrations/revoked', '')
  for slug, body in pairs(scripts) do
    h.write(dir .. '/migrations/pre-apply/' .. slug .. '.lua',
      '-- cozystack-migration: on-error=abort\n' .. body .. '\n')
  end
  return dir
end

-- sequence(ns, n, delay): n Lua migrations seq-01..seq-NN. Step k extends a
-- chain in ConfigMap `chain` (data sKK = s(K-1) .. '>K', so a step that runs
-- before its predecessor fails), applies ConfigMap obj-KK, and at its very
-- end creates an end marker (generateName end-KK-, label trial/end=KK): one
-- marker per execution that reached its end. kube.sleep(delay) between the
-- three widens the window a kill can land in. Safe to run twice.
function M.sequence(ns, n, delay)
  local lines, scripts = {}, {}
  for k = 1, n do
    local slug = string.format('seq-%02d', k)
    lines[#lines + 1] = slug
    scripts[slug] = string.format([[
local kube = require('kube')
local NS, K, DELAY = %q, %d, %s
kube.update('configmaps', 'chain', function(o)
  o.data = o.data or {}
  local prev = K == 1 and 'root' or o.data[string.format('s%%02d', K - 1)]
  assert(prev, 'step ' .. K .. ' ran before step ' .. (K - 1))
  o.data[string.format('s%%02d', K)] = prev .. '>' .. K
end, { namespace = NS })
kube.sleep(DELAY)
kube.apply('configmaps', { apiVersion = 'v1', kind = 'ConfigMap',
  metadata = { name = string.format('obj-%%02d', K), namespace = NS },
  data = { step = tostring(K), square = tostring(K * K) } })
kube.sleep(DELAY)
kube.create('configmaps', { metadata = { generateName = string.format('end-%%02d-', K),
  labels = { ['trial/end'] = string.format('%%02d', K) } } }, { namespace = NS })]], ns, k, tostring(delay))
  end
  return write_tree(lines, scripts)
end

-- The ConfigMap the sequence's first step needs.
function M.sequence_ns(c, prefix)
  local ns = c.new_ns(prefix)
  c.empty_ledger(ns)
  h.must(c.kubectl('create configmap chain -n ' .. ns), 'create chain')
  return ns
end

-- spans(ns, n, secs, prefix): n Lua migrations PREFIX-01.. that each take
-- the monotonic clock (CLOCK_MONOTONIC: one clock for every process on the
-- machine), sleep secs, take it again and create a span marker
-- (generateName span-, labels trial/span=<slug>, data from/to/slug).
function M.spans(ns, n, secs, prefix)
  local lines, scripts = {}, {}
  for k = 1, n do
    local slug = string.format('%s-%02d', prefix, k)
    lines[#lines + 1] = slug
    scripts[slug] = string.format([[
local kube = require('kube')
local core = require('kube.core')
local t0 = core.now()
kube.sleep(%s)
local t1 = core.now()
kube.create('configmaps', { metadata = { generateName = 'span-', labels = { ['trial/span'] = %q } },
  data = { slug = %q, from = string.format('%%.6f', t0), to = string.format('%%.6f', t1) } }, { namespace = %q })]],
      tostring(secs), slug, slug, ns)
  end
  return write_tree(lines, scripts)
end

-- ---- reading what happened ----------------------------------------------------

-- ledger(c, ns) -> {slug = {state=, attempts=, raw=}} or nil, problems.
-- Each value is parsed by jq (a parser that is not the engine's), so a
-- value the engine would misread is still caught.
function M.ledger(c, ns)
  local res = c.kubectl('get configmap cozystack-version -n ' .. ns .. ' -o json')
  if res.code ~= 0 then return nil, { 'no ledger: ' .. res.err } end
  local f = h.write(os.tmpname(), res.out)
  local program = [[(.data // {}) | to_entries[] | select(.key | startswith("m.")) ]] ..
    [[| "\(.key[2:])\t\(try (.value | fromjson | "\(.state)\t\(.attempts)") catch "UNPARSEABLE\t-")"]]
  local q = h.run(string.format('jq -r %s %s', h.q(program), h.q(f)))
  os.remove(f)
  local recs, problems = {}, {}
  if q.code ~= 0 then return nil, { 'jq: ' .. q.err } end
  local known = { ok = 1, failed = 1, legacy = 1, revoked = 1, ['skipped-fresh-install'] = 1, skipped = 1 }
  for line in q.out:gmatch('[^\n]+') do
    local slug, state, attempts = line:match('^([^\t]+)\t([^\t]+)\t([^\t]+)$')
    if not slug then
      problems[#problems + 1] = 'unreadable jq line ' .. line
    else
      recs[slug] = { state = state, attempts = tonumber(attempts) }
      if state == 'UNPARSEABLE' then
        problems[#problems + 1] = 'm.' .. slug .. ' does not parse as JSON'
      elseif not known[state] then
        problems[#problems + 1] = 'm.' .. slug .. ' has unknown state ' .. state
      end
    end
  end
  return recs, problems
end

-- labelled(c, ns, label) -> {value = count} over ConfigMaps carrying label.
function M.labelled(c, ns, label)
  local out = {}
  for _, o in ipairs(c.json('get configmaps -n ' .. ns .. ' -l ' .. label).items) do
    local v = o.metadata.labels[label]
    out[v] = (out[v] or 0) + 1
  end
  return out
end

-- Problems: an `ok` record of a sequence step without an end marker.
function M.ok_without_marker(recs, markers)
  local problems = {}
  for slug, r in pairs(recs or {}) do
    local k = slug:match('^seq%-(%d+)$')
    if r.state == 'ok' and k and not markers[k] then
      problems[#problems + 1] = slug .. ' is recorded ok but its end marker is missing'
    end
  end
  return problems
end

-- snapshot(c, ns): what the sequence leaves (chain and obj-* data), as text.
function M.snapshot(c, ns)
  local parts = {}
  for _, o in ipairs(c.json('get configmaps -n ' .. ns).items) do
    local n = o.metadata.name
    if n == 'chain' or n:match('^obj%-') then
      local keys = {}
      for k in pairs(o.data or {}) do keys[#keys + 1] = k end
      table.sort(keys)
      local kv = {}
      for _, k in ipairs(keys) do kv[#kv + 1] = k .. '=' .. o.data[k] end
      parts[#parts + 1] = n .. '{' .. table.concat(kv, ',') .. '}'
    end
  end
  table.sort(parts)
  return table.concat(parts, ' ')
end

-- clean_run(c, prefix, steps, delay, flags) -> snapshot, seconds: the
-- reference a crash or restart trial compares with: one clean run of the
-- sequence in a namespace of its own, what it leaves and how long it took.
function M.clean_run(c, prefix, steps, delay, flags)
  local ns = M.sequence_ns(c, prefix)
  local dir = M.sequence(ns, steps, delay)
  local t0 = M.now()
  h.must(h.run(c.run_cmd(dir, ns, flags)), 'the clean run')
  return M.snapshot(c, ns), M.now() - t0
end

-- span_list(c, ns) -> sorted {slug=, from=, to=}.
function M.span_list(c, ns)
  local out = {}
  for _, o in ipairs(c.json('get configmaps -n ' .. ns .. ' -l trial/span').items) do
    out[#out + 1] = { slug = o.data.slug, from = tonumber(o.data.from), to = tonumber(o.data.to) }
  end
  table.sort(out, function(a, b) return a.from < b.from end)
  return out
end

-- Problems: spans that overlap; slugs that ran other than exactly once.
function M.span_problems(spans, slugs)
  local problems, seen = {}, {}
  for i, s in ipairs(spans) do
    seen[s.slug] = (seen[s.slug] or 0) + 1
    local nxt = spans[i + 1]
    if nxt and nxt.from < s.to then
      problems[#problems + 1] = string.format('%s [%.3f, %.3f] overlaps %s [%.3f, %.3f]', s.slug, s.from, s.to,
        nxt.slug, nxt.from, nxt.to)
    end
  end
  for _, slug in ipairs(slugs or {}) do
    if (seen[slug] or 0) ~= 1 then
      problems[#problems + 1] = string.format('%s ran %d times', slug, seen[slug] or 0)
    end
  end
  return problems
end

return M
