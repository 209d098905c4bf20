-- The runner lock holds for the whole run, tried the ways it used to fail:
-- a runner paused between migrations and during a long one, its ledger write
-- throttled past the lease, its renewals failing, a renewal whose answer was
-- lost, and a migration that deletes the Lease. In each, a second runner is
-- waiting. Every migration is a shell script that logs its start, a beat
-- every 0.1 s and its end, with the pid of the runner that ran it; from that
-- log every trial proves three things:
--   * no two migrations' time spans overlap, whichever runner ran them;
--   * the runner that lost the lock exits 5 and records nothing more;
--   * every record was written by the runner whose run of that migration
--     finished last (a record names its runner: <host>/<pid>/<start>/<random>).
local h = require('support.helpers')
local fixture = require('support.fixture')
local runner = require('support.runner')
local proxy = require('support.proxy')
local json = require('json')

local LEASE = '2s' -- short, so takeovers happen within a trial

-- A shell migration that logs "start|beat|end RUNNER SLUG TIME" to log,
-- beats `beats` times 0.1 s apart, and runs the shell `before` first and
-- `after` last when given.
local function logged(log, beats, before, after)
  return string.format([[
log=%s
stamp() { echo "$1 ${RUNNER:-?} $MIGRATION_SLUG $(date +%%s.%%N)" >>"$log"; }
stamp start
%s
for _ in $(seq %d); do sleep 0.1; stamp beat; done
stamp end
%s
]], h.q(log), before or '', beats, after or '')
end

-- tree(slugs, log, {beats=, before=, after=}) -> dir: shell migrations in
-- one batch; each option maps a slug to its value.
local function tree(slugs, log, o)
  o = o or {}
  local scripts = {}
  for _, s in ipairs(slugs) do
    scripts[s] = { shell = true,
      body = logged(log, (o.beats or {})[s] or 2, (o.before or {})[s], (o.after or {})[s]) }
  end
  return fixture.tree({ batches = { { '00001-v1', slugs } }, scripts = scripts })
end

local function wait_until(cond, secs, what)
  assert.is_true(h.eventually(secs, cond), 'timed out waiting for ' .. what)
end

-- start(name, dir, ns, flags) launches `RUNNER=<its pid> cozy-migrate run`
-- in the background; files under dir: <name>.pid .out .err .rc
local function start(name, dir, ns, flags)
  local f = dir .. '/' .. name
  assert(os.execute(string.format(
    "(sh -c 'RUNNER=$$; export RUNNER; exec %s run --pass-env RUNNER --dir %s --namespace %s --lease-duration %s %s' >%s 2>%s & " ..
    "echo $! >%s; wait $!; echo $? >%s) >/dev/null 2>&1 &",
    h.q(h.bin), h.q(dir), h.q(ns), LEASE, flags or '', h.q(f .. '.out'), h.q(f .. '.err'), h.q(f .. '.pid'),
    h.q(f .. '.rc'))))
  local r = { name = name, f = f }
  wait_until(function()
    r.pid = h.slurp(f .. '.pid'):match('%d+')
    return r.pid ~= nil
  end, 5, name .. ' to start')
  return r
end

local function finish(r, secs)
  wait_until(function() return h.slurp(r.f .. '.rc') ~= '' end, secs or 60, r.name .. ' to end')
  r.rc = tonumber(h.slurp(r.f .. '.rc'):match('%d+'))
  r.out, r.err = h.slurp(r.f .. '.out'), h.slurp(r.f .. '.err')
  return r
end

-- The spans of the log: {runner=, slug=, from=, to=, ended=}. A span that
-- never ended (its process was killed) lasted until at most a beat after its
-- last line.
local function spans(log)
  local by, out = {}, {}
  for kind, who, slug, t in h.slurp(log):gmatch('(%a+) (%S+) (%S+) ([%d.]+)\n') do
    t = tonumber(t)
    local key = who .. ' ' .. slug
    local s = by[key]
    if kind == 'start' or not s then
      s = { runner = who, slug = slug, from = t, to = t + 0.15, ended = false }
      by[key] = s
      out[#out + 1] = s
    end
    if kind == 'beat' then s.to = t + 0.15 end
    if kind == 'end' then s.to, s.ended = t, true end
  end
  table.sort(out, function(a, b) return a.from < b.from end)
  return out
end

local function describe_spans(sp)
  local t = {}
  for _, s in ipairs(sp) do
    t[#t + 1] = string.format('%s %s %.3f-%.3f%s', s.runner, s.slug, s.from, s.to, s.ended and '' or ' (killed)')
  end
  return table.concat(t, '\n')
end

local function assert_no_overlap(sp)
  for i = 1, #sp do
    for j = i + 1, #sp do
      assert.is_true(sp[i].to <= sp[j].from or sp[j].to <= sp[i].from,
        'spans overlap:\n' .. describe_spans(sp))
    end
  end
end

-- Every slug is recorded ok, by the runner whose run of it ended last.
local function assert_records(ns, slugs, sp)
  local recs = runner.records(ns)
  for _, slug in ipairs(slugs) do
    local r = recs[slug]
    assert.is_table(r, slug .. ' is not recorded')
    assert.are.equal('ok', r.state, slug)
    local last
    for _, s in ipairs(sp) do if s.slug == slug and s.ended then last = s end end
    assert.is_table(last, slug .. ' never ended:\n' .. describe_spans(sp))
    local pid = r.runner:match('^[^/]*/(%d+)/')
    assert.are.equal(last.runner, pid, slug .. ' was recorded by another runner than the one that ran it last:\n' ..
      describe_spans(sp) .. '\nrecord: ' .. json.encode(r))
  end
end

local SLUGS = { 'm1', 'm2', 'm3', 'm4', 'm5' }

-- What every trial proves: no two spans overlap, and every migration is
-- recorded by the runner whose run of it ended last; after a takeover, also
-- that runner b finished the run and runner a lost the lock (exit 5).
local function assert_history(ns, log)
  local sp = spans(log)
  assert_no_overlap(sp)
  assert_records(ns, SLUGS, sp)
end

local function assert_takeover(ns, log, a, b)
  assert.are.equal(0, b.rc, b.err)
  assert.are.equal(5, a.rc, a.err)
  assert_history(ns, log)
end

-- A trial's namespace (its ledger empty) and a scratch directory, with the
-- path of the log its migrations write.
local function case()
  local ns, dir = runner.new_ns(), h.tmpdir()
  runner.make_ledger(ns, {})
  return ns, dir, dir .. '/log'
end

local function signal(r, sig) assert(os.execute('kill -' .. sig .. ' ' .. r.pid)) end

local function wait_file(path, what)
  wait_until(function() return h.run('test -e ' .. h.q(path)).code == 0 end, 30, what)
end

-- wait_log(log, pattern, what [, r]): r is the runner whose stderr the
-- failure quotes.
local function wait_log(log, pattern, what, r)
  local ok = h.eventually(30, function() return h.slurp(log):find(pattern) ~= nil end)
  assert.is_true(ok, 'timed out waiting for ' .. what .. (r and ('; ' .. r.name .. ' said:\n' ..
    h.slurp(r.f .. '.err'):sub(-800)) or ''))
end

describe('#e2e the runner lock, tried with a second runner waiting', function()
  local p
  setup(function()
    h.need_cluster()
    p = proxy.start('')
  end)
  teardown(function()
    proxy.stop(p)
    runner.delete_namespaces()
  end)


  it('stops a runner paused between two migrations: on SIGCONT it finds the lock gone', function()
    local ns, dir, log = case()
    local mark = dir .. '/m2-done'
    -- m2 leaves a mark as it ends: the spec pauses the runner right then
    local t = tree(SLUGS, log, { after = { m2 = 'touch ' .. h.q(mark) } })
    local a = start('a', t, ns)
    wait_file(mark, 'm2 to end')
    signal(a, 'STOP')
    local b = finish(start('b', t, ns, '--lock-timeout 60s'))
    signal(a, 'CONT')
    finish(a)
    assert_takeover(ns, log, a, b)
    h.contains(a.err, 'lost the runner lock')
  end)

  it('stops a runner paused during a long migration: its migration dies with the lease', function()
    local ns, _, log = case()
    local t = tree(SLUGS, log, { beats = { m2 = 60 } })
    local a = start('a', t, ns)
    wait_log(log, 'start %d+ m2', 'm2 to start')
    signal(a, 'STOP')
    local b = finish(start('b', t, ns, '--lock-timeout 60s'), 90)
    signal(a, 'CONT')
    finish(a)
    assert_takeover(ns, log, a, b)
    assert.is_false(h.alive(t .. '/legacy-sh/m2.sh'), 'a process of m2 still runs')
  end)

  it('gives up a ledger write throttled past the lease, and records nothing more', function()
    local ns, _, log = case()
    local t = tree(SLUGS, log)
    -- the first PATCH gives the ledger its label and keep annotation, the
    -- second records m1; m2's record is the one throttled
    proxy.faults(p, { string.format('method=PATCH,path=/api/v1/namespaces/%s/configmaps/cozystack-version,' ..
      'action=429,retry-after=5,skip=2', ns) })
    local a = start('a', t, ns, '--kubeconfig ' .. h.q(p.kubeconfig))
    wait_log(log, 'end %d+ m2', 'm2 to end')
    local b = finish(start('b', t, ns, '--lock-timeout 60s'))
    finish(a)
    assert_takeover(ns, log, a, b)
    assert.are_not.equal(a.pid, runner.records(ns).m2.runner:match('^[^/]*/(%d+)/'))
  end)

  it('stops a runner whose renewals fail, before the lease lapses for the others', function()
    local ns, _, log = case()
    local t = tree(SLUGS, log, { beats = { m1 = 40 } })
    -- The renewals fail from the moment m1 runs: had they failed from the
    -- start, a runner slower than a quarter lease to reach m1 (a loaded
    -- machine) would rightly stop before m1, and the trial try nothing.
    proxy.faults(p, {})
    local a = start('a', t, ns, '--kubeconfig ' .. h.q(p.kubeconfig) .. ' --retry-for 1s')
    wait_log(log, 'start %d+ m1', 'm1 to start', a)
    proxy.faults(p, { string.format('method=PATCH,path=/apis/coordination.k8s.io/v1/namespaces/%s/leases,action=503', ns) })
    local b = finish(start('b', t, ns, '--lock-timeout 60s'), 90)
    finish(a)
    assert_takeover(ns, log, a, b)
  end)

  it('keeps the lock through a renewal whose answer was lost', function()
    local ns, _, log = case()
    local t = tree(SLUGS, log, { beats = { m1 = 15 } })
    proxy.faults(p, { string.format(
      'method=PATCH,path=/apis/coordination.k8s.io/v1/namespaces/%s/leases,action=reset-after,count=1', ns) })
    local a = finish(start('a', t, ns, '--kubeconfig ' .. h.q(p.kubeconfig)))
    assert.are.equal(0, a.rc, a.err)
    local c = proxy.counts(p)
    local key = string.format('PATCH /apis/coordination.k8s.io/v1/namespaces/%s/leases/%s', ns, runner.LEASE)
    assert.is_true((c.faulted[key] or 0) >= 1, 'a renewal answer was dropped: ' .. json.encode(c))
    assert_history(ns, log)
  end)

  it('creates the Lease through a 503, retried like any request safe to repeat', function()
    local ns, _, log = case()
    local t = tree({ 'm1' }, log)
    proxy.faults(p, { string.format('method=POST,path=/apis/coordination.k8s.io/v1/namespaces/%s/leases,' ..
      'action=503,count=1', ns), string.format('method=POST,path=/apis/coordination.k8s.io/v1/namespaces/%s/leases,' ..
      'action=reset-after,count=1', ns) })
    local a = finish(start('a', t, ns, '--kubeconfig ' .. h.q(p.kubeconfig)))
    assert.are.equal(0, a.rc, a.err)
    assert_records(ns, { 'm1' }, spans(log))
  end)

  it('stops when a migration deletes the Lease, and lets the next runner in only after', function()
    local ns, dir, log = case()
    local once = dir .. '/deleted'
    -- someone else deletes it while m2 runs (not the script: a confined
    -- script reaches the cluster through its gateway only, which would
    -- refuse: LedgerProtected)
    local mark = string.format('[ -e %s ] || touch %s', h.q(once), h.q(once))
    local t = tree(SLUGS, log, { beats = { m2 = 20 }, before = { m2 = mark } })
    local a = start('a', t, ns)
    wait_file(once, 'm2 to start')
    h.must(h.kubectl('delete lease --all -n ' .. ns .. ' --wait=false'), 'delete the Lease')
    local b = finish(start('b', t, ns, '--lock-timeout 60s'), 90)
    finish(a)
    assert.are.equal(5, a.rc, a.err)
    h.contains(a.err, 'deleted while held')
    assert.are.equal(0, b.rc, b.err)
    assert_history(ns, log)
  end)
end)
