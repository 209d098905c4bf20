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
  -- (kubectl's directory on PATH: a confined shell executes only from the
  -- system's directories and its PATH's, host/proc/confine.h)
  function c.run_cmd(dir, ns, flags, kubeconfig_override)
    return string.format('env KUBECONFIG=%s PATH=%s %s run --dir %s --namespace %s %s',
      h.q(kubeconfig_override or kubeconfig), h.q(h.root .. '/build/testenv/bin:' .. (os.getenv('PATH') or '')),
      h.q(h.bin), h.q(dir), ns, flags or '')
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

-- lockwatch(pid): whether pid is a runner's Lease watcher (run/lockwatch.c:
-- a child of the runner for as long as it holds the lock, never a migration).
function M.lockwatch(pid)
  return h.slurp(string.format('/proc/%s/comm', pid)):match('^cozy%-lockwatch') ~= nil
end

-- children(pid): the pids of pid's live children (/proc), as a list, a
-- runner's Lease watcher left out (its children are then its migrations').
function M.children(pid)
  local out = {}
  local s = h.slurp(string.format('/proc/%s/task/%s/children', pid, pid))
  for c in s:gmatch('%d+') do
    if live(c) and not M.lockwatch(c) then out[#out + 1] = c end
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
local t0 = kube.now()
kube.sleep(%s)
local t1 = kube.now()
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

-- ---- faults of round two: signals, clocks, a deleted Lease or ledger ---------

-- pid1(cmd): cmd as PID 1 of a PID namespace of its own, as in the hook's
-- container (root: unshare --pid --fork; with hostname, a UTS namespace of
-- that name too). T.start(T.pid1(...)).pid is unshare's; its one child is
-- the PID 1 process (pid1_of).
function M.pid1(cmd, hostname)
  if hostname then
    return string.format('unshare --pid --fork --uts sh -c %s',
      h.q('hostname ' .. hostname .. ' && exec ' .. cmd))
  end
  return 'unshare --pid --fork ' .. cmd
end

-- pid1_of(p): the pid (in our namespace) of the PID 1 that p's unshare
-- forked, once it runs, or nil.
function M.pid1_of(p)
  local pid
  h.eventually(5, function()
    pid = M.children(p.pid)[1]
    return pid ~= nil
  end)
  return pid
end

M.skewclock = h.root .. '/build/skewclock.so'

-- skewed(cmd, secs): cmd with its wall clock (CLOCK_REALTIME, time(),
-- gettimeofday) secs seconds off (tools/skewclock, LD_PRELOAD); its
-- monotonic clock untouched.
function M.skewed(cmd, secs)
  assert(io.open(M.skewclock), M.skewclock .. ' is not built (make build/skewclock.so)')
  -- an ASan build refuses a preloaded library ahead of its runtime otherwise
  local asan = os.getenv('ASAN_OPTIONS')
  return string.format('env LD_PRELOAD=%s SKEWCLOCK_S=%d%s %s', h.q(M.skewclock), secs,
    asan and (' ASAN_OPTIONS=' .. h.q(asan .. ':verify_asan_link_order=0')) or '', cmd)
end

-- micro(t) -> seconds: a Lease MicroTime ("2026-01-02T03:04:05.123456Z").
function M.micro(t)
  local y, mo, d, hh, mm, ss, frac = (t or ''):match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.?(%d*)Z$')
  if not y then return nil end
  local days = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = 12 }) // 86400
  return days * 86400 + tonumber(hh) * 3600 + tonumber(mm) * 60 + tonumber(ss) +
    (frac ~= '' and tonumber('0.' .. frac) or 0)
end

function M.wall()
  local p = io.popen('date +%s.%N')
  local t = tonumber(p:read('l'))
  p:close()
  return t
end

-- beats(ns, slugs, log, {secs=, before=, after=}) -> dir: shell migrations
-- that log "start|beat|end RUNNER SLUG WALLTIME" to log (RUNNER: the pid of
-- the runner, passed as $RUNNER through --pass-env RUNNER), a beat every
-- 0.1 s for secs (default 1), with shell `before`/`after` per slug.
function M.beats(slugs, log, o)
  o = o or {}
  local scripts = {}
  for _, slug in ipairs(slugs) do
    scripts[slug] = { shell = true, body = string.format([[
log=%s
stamp() { echo "$1 ${RUNNER:-?} $MIGRATION_SLUG $(date +%%s.%%N)" >>"$log"; }
stamp start
%s
for _ in $(seq %d); do sleep 0.1; stamp beat; done
stamp end
%s]], h.q(log), (o.before or {})[slug] or '', math.floor((o.secs or 1) * 10), (o.after or {})[slug] or '') }
  end
  return require('support.fixture').tree({ batches = { { '00001-v1.0.0', slugs } }, scripts = scripts })
end

-- with_runner_pid(cmd) -> cmd (a runner's `env ... run ...` line) that
-- exports RUNNER=<the runner's pid> and passes it on to shell migrations.
function M.with_runner_pid(cmd)
  return string.format('sh -c %s', h.q('RUNNER=$$; export RUNNER; exec ' .. cmd .. ' --pass-env RUNNER'))
end

-- beat_spans(log) -> sorted {runner=, slug=, from=, to=, ended=}: a span
-- that never ended (killed) lasted until at most a beat after its last line:
-- its own cadence (the widest gap between its lines so far, as the machine's
-- load made it) and 20 ms, at most 0.15 s.
function M.beat_spans(log)
  local by, out = {}, {}
  local function pad(sp) return math.min(0.15, (sp.gap or 0.1) + 0.02) end
  for kind, who, slug, t in h.slurp(log):gmatch('(%a+) (%S+) (%S+) ([%d.]+)\n') do
    t = tonumber(t)
    local key = who .. ' ' .. slug
    local sp = by[key]
    if kind == 'start' or not sp then
      sp = { runner = who, slug = slug, from = t, last = t, ended = false }
      sp.to = t + pad(sp)
      by[key] = sp
      out[#out + 1] = sp
    end
    if kind == 'beat' then
      sp.gap = math.max(sp.gap or 0, t - sp.last)
      sp.last = t
      sp.to = t + pad(sp)
    end
    if kind == 'end' then sp.to, sp.ended = t, true end
  end
  for _, sp in ipairs(out) do sp.gap, sp.last = nil, nil end
  table.sort(out, function(a, b) return a.from < b.from end)
  return out
end

-- Problems: two spans that overlap, except that a span of runner `lost`
-- that began by wall time `lost_at` may run on until `grace_until` (the
-- migration in flight of a runner whose Lease was force-deleted at
-- lost_at: its next read-back stops it, and it is not recorded).
function M.overlaps(spans, lost, lost_at, grace_until)
  local problems = {}
  for i = 1, #spans do
    for j = i + 1, #spans do
      local a, b = spans[i], spans[j]
      if a.from < b.to and b.from < a.to then
        local excused = false
        for _, x in ipairs({ a, b }) do
          local y = x == a and b or a
          if lost and x.runner == lost and y.runner ~= lost and x.from <= lost_at and x.to <= grace_until then
            excused = true
          end
        end
        if not excused then
          problems[#problems + 1] = string.format('%s of %s [%.3f, %.3f] overlaps %s of %s [%.3f, %.3f]',
            a.slug, a.runner, a.from, a.to, b.slug, b.runner, b.from, b.to)
        end
      end
    end
  end
  return problems
end

-- Problems: spans of runner `who` that began after wall time t, or ran on
-- past t + slack (what a runner that lost its lock at t may not do).
function M.after_problems(spans, who, t, slack)
  local problems = {}
  for _, sp in ipairs(spans) do
    if sp.runner == who and sp.from > t then
      problems[#problems + 1] = string.format('%s started %.3fs after the lock was lost', sp.slug, sp.from - t)
    elseif sp.runner == who and sp.to > t + slack then
      problems[#problems + 1] = string.format('%s ran on %.3fs after the lock was lost', sp.slug, sp.to - t)
    end
  end
  return problems
end

-- Problems: a record written by a runner other than the one whose run of
-- that slug ended last (records: T.records; runner: the pid in the span).
function M.writer_problems(recs, spans)
  local problems = {}
  for slug, r in pairs(recs) do
    local last
    for _, sp in ipairs(spans) do if sp.slug == slug and sp.ended then last = sp end end
    local pid = type(r.runner) == 'string' and r.runner:match('^[^/]*/(%d+)/')
    if not last then
      problems[#problems + 1] = slug .. ' is recorded but no run of it ended'
    elseif pid ~= last.runner then
      problems[#problems + 1] = string.format('%s was recorded by runner %s, but runner %s ran it last',
        slug, tostring(pid), last.runner)
    end
  end
  return problems
end

-- records(c, ns) -> {slug = decoded record} (kubectl + the json module; the
-- values checked by T.ledger with jq first), or nil when there is no ledger.
function M.records(c, ns)
  local res = c.kubectl('get configmap cozystack-version -n ' .. ns .. ' -o json')
  if res.code ~= 0 then return nil end
  local out = {}
  for k, v in pairs(json.decode(res.out).data or {}) do
    if k:sub(1, 2) == 'm.' then
      local ok, r = pcall(json.decode, v)
      out[k:sub(3)] = ok and r or { state = 'UNPARSEABLE' }
    end
  end
  return out
end

-- lease(c, ns) -> the runner's Lease, or nil when there is none.
function M.lease(c, ns)
  local res = c.kubectl('get lease cozystack-version-lock -n ' .. ns .. ' -o json')
  if res.code ~= 0 then return nil end
  return json.decode(res.out)
end

-- Problems: a Lease a run left held, terminating or carrying our finalizer.
function M.release_problems(lease)
  if not lease then return {} end
  local problems = {}
  if (lease.spec.holderIdentity or '') ~= '' then
    problems[#problems + 1] = 'the Lease is still held by ' .. lease.spec.holderIdentity
  end
  if lease.metadata.deletionTimestamp then problems[#problems + 1] = 'the Lease is left terminating' end
  for _, f in ipairs(lease.metadata.finalizers or {}) do
    problems[#problems + 1] = 'the Lease keeps the finalizer ' .. f
  end
  return problems
end

-- Problems: a run stopped by sig that did not exit 128 + its number, or did
-- not say on one line which signal stopped it in which migration (slug nil:
-- between migrations).
function M.stop_problems(code, err, sig, slug)
  local nums = { TERM = 15, INT = 2, HUP = 1 }
  local problems = {}
  if code ~= 128 + nums[sig] then
    problems[#problems + 1] = string.format('exit %s, not %d', tostring(code), 128 + nums[sig])
  end
  local said = 0
  for line in (err or ''):gmatch('[^\n]+') do
    if line:find('stopped by SIG' .. sig, 1, true) and (not slug or line:find(' ' .. slug .. ' ', 1, true)) then
      said = said + 1
    end
  end
  if said ~= 1 then
    problems[#problems + 1] = string.format('%d lines say the run was stopped by SIG%s%s', said, sig,
      slug and (' in ' .. slug) or '')
  end
  return problems
end

-- Problems: a record skipped-fresh-install (in a cluster that ran before,
-- every one of them would be a lie: a migration that never ran, done).
function M.fresh_problems(recs)
  local problems = {}
  for slug, r in pairs(recs or {}) do
    if r.state == 'skipped-fresh-install' then
      problems[#problems + 1] = slug .. ' is recorded skipped-fresh-install'
    end
  end
  return problems
end

-- Problems: a migration that ran (its marker exists) without a record.
function M.unrecorded_problems(recs, markers)
  local problems = {}
  for slug in pairs(markers) do
    if not (recs or {})[slug] then problems[#problems + 1] = slug .. ' ran and is not recorded' end
  end
  return problems
end

return M
