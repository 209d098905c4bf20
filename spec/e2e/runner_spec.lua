-- The runner end to end against the real local kube-apiserver (tools/testenv):
-- `cozy-migrate run|plan|status` on migration trees built with
-- support.fixture, every effect checked with kubectl (the ledger ConfigMap,
-- the Lease, the Events, marker objects the migrations create) and with files
-- the shell migrations append to. The planner's rules themselves are pinned
-- on data in spec/plan_spec.lua; here we prove what reaches the cluster, what
-- does not, and in which order.
--
-- Every case has its own namespace, so its ledger and Lease are its own.
-- Lua migrations prove they ran by creating a ConfigMap `ran-<name>` (the
-- sandbox has no filesystem and no os.getenv, so the namespace is baked into
-- the script text); shell migrations append a line to a file.
local h = require('support.helpers')
local fixture = require('support.fixture')
local json = require('json')

local LEDGER = 'cozystack-version'
local LEASE = 'cozystack-version-lock'

local function must(res, what)
  assert.are.equal(0, res.code, (what or '') .. '\nstdout: ' .. tostring(res.out) .. '\nstderr: ' ..
    tostring(res.err))
  return res
end

local function has(s, sub) return s:find(sub, 1, true) ~= nil end

-- assert that s contains sub (plain text), showing s on failure
local function contains(s, sub, what)
  assert.is_true(has(s, sub), string.format('%s: expected to find %q in:\n%s', what or 'output', sub, s))
end

local function lacks(s, sub, what)
  assert.is_false(has(s, sub), string.format('%s: did not expect %q in:\n%s', what or 'output', sub, s))
end

local function one_line(s, what)
  local t = s:gsub('\n$', '')
  assert.is_true(t ~= '' and not t:find('\n'), string.format('%s: expected exactly one line, got:\n%s',
    what or 'stderr', s))
end

local function sleep(s) os.execute('sleep ' .. s) end

-- The binary by absolute path, for shell lines that cd elsewhere.
local function absolute(path)
  if path:sub(1, 1) == '/' then return path end
  local p = io.popen('pwd')
  local cwd = p:read('l')
  p:close()
  return cwd .. '/' .. path
end
local BIN, TESTENV = absolute(h.bin), absolute(h.testenv)

local counter = 0
local namespaces = {}
math.randomseed(os.time())
local stamp = string.format('%d%03d', os.time() % 100000, math.random(0, 999))

local function new_ns()
  counter = counter + 1
  local ns = string.format('rt-%d-%s', counter, stamp)
  must(h.kubectl('create namespace ' .. ns), 'create namespace')
  namespaces[#namespaces + 1] = ns
  return ns
end

local function kjson(args)
  return json.decode(must(h.kubectl(args .. ' -o json')).out)
end

-- The ledger ConfigMap, or nil when it does not exist.
local function get_ledger(ns)
  local r = h.kubectl(string.format('get configmap %s -n %s -o json', LEDGER, ns))
  if r.code ~= 0 then
    assert(has(r.err, 'NotFound') or has(r.err, 'not found'), r.err)
    return nil
  end
  return json.decode(r.out)
end

-- records(ns) -> {slug = decoded record (or the raw string when it is not
-- JSON)}, raw {slug = string}, the ConfigMap. nil when there is no ledger.
local function records(ns)
  local cm = get_ledger(ns)
  if not cm then return nil end
  local out, raw = {}, {}
  for k, v in pairs(cm.data or {}) do
    if k:sub(1, 2) == 'm.' then
      local ok, d = pcall(json.decode, v)
      out[k:sub(3)] = ok and d or v
      raw[k:sub(3)] = v
    end
  end
  return out, raw, cm
end

local function count(t)
  local n = 0
  for _ in pairs(t or {}) do n = n + 1 end
  return n
end

-- A ledger made the way an older chart made it: kubectl create (no
-- last-applied annotation), with data {key = string}.
local function make_ledger(ns, data)
  local obj = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = LEDGER, namespace = ns } }
  if data and next(data) then obj.data = data end
  local f = h.write(os.tmpname() .. '.json', json.encode(obj))
  must(h.kubectl('create -f ' .. f), 'create ledger')
  os.remove(f)
end

local function get_lease(ns)
  local r = h.kubectl(string.format('get lease %s -n %s -o json', LEASE, ns))
  if r.code ~= 0 then
    assert(has(r.err, 'NotFound') or has(r.err, 'not found'), r.err)
    return nil
  end
  return json.decode(r.out)
end

-- Names of the ConfigMaps the Lua migrations created (ran-*), as a set,
-- and how many start with each `ran-<name>-` (generateName markers).
local function markers(ns)
  local list = kjson('get configmaps -n ' .. ns)
  local set, gen = {}, {}
  for _, it in ipairs(list.items) do
    local n = it.metadata.name
    if n:sub(1, 4) == 'ran-' then
      set[n] = true
      local base = n:match('^ran%-(.+)%-[a-z0-9]+$')
      if base then gen[base] = (gen[base] or 0) + 1 end
    end
  end
  return set, gen
end

-- Lua body creating ConfigMap ran-<name> in ns.
local function lua_marker(ns, name)
  return string.format("require('kube').create('configmaps', {metadata={name=%q}}, {namespace=%q})",
    'ran-' .. name, ns)
end

-- Lua body creating a ConfigMap named ran-<name>-xxxxx (one per execution).
local function lua_gen_marker(ns, name)
  return string.format(
    "require('kube').create('configmaps', {metadata={generateName=%q}}, {namespace=%q})",
    'ran-' .. name .. '-', ns)
end

-- Shell body appending "<slug> <namespace>" to file.
local function sh_append(file)
  return string.format('echo "$MIGRATION_SLUG $NAMESPACE" >> %s', h.q(file))
end

local function lines_of(file)
  local out = {}
  for l in h.slurp(file):gmatch('[^\n]+') do out[#out + 1] = l end
  return out
end

local function run(dir, ns, ...)
  return h.cozy('run', '--dir', dir, '--namespace', ns, ...)
end

-- The shell command line of `cozy-migrate run` on dir and ns, with flags.
local function runner_cmd(dir, ns, flags)
  return string.format('%s run --dir %s --namespace %s %s', h.q(BIN), h.q(dir), ns, flags)
end

-- alongside(base, delay, second): starts the runner command `base` in the
-- background (output in o1/e1, pid in pid, exit code in r1), runs the shell
-- snippet `second` after `delay` seconds ($p is the first runner's pid),
-- waits for the first, and returns the directory holding those files.
local function alongside(base, delay, second)
  local out = h.tmpdir()
  h.run(string.format('cd %s && { %s >o1 2>e1 & p=$!; echo $p >pid; sleep %s; %s; wait $p; echo $? >r1; }',
    h.q(out), base, delay, second))
  return out
end

local function events(ns)
  return kjson('get events -n ' .. ns).items
end

-- pgrep -f for a command line; the pattern's first letter is bracketed so
-- the `sh -c` running pgrep does not match itself.
local function alive(pattern)
  local r = h.run('pgrep -f ' .. h.q('[' .. pattern:sub(1, 1) .. ']' .. pattern:sub(2)))
  return r.code == 0, r.out
end

-- Whether pid is a live process (a zombie does not count: PID 1 of the
-- test machine may not reap the orphans it inherits).
local function running(pid)
  local f = io.open('/proc/' .. pid .. '/stat')
  if not f then return false end
  local st = f:read('a'):match('%) (%a)')
  f:close()
  return st ~= nil and st ~= 'Z'
end

-- Waits up to secs for cond() to be true.
local function eventually(secs, cond)
  for _ = 1, secs * 10 do
    if cond() then return true end
    sleep(0.1)
  end
  return cond()
end

local function micro_time(t)
  return os.date('!%Y-%m-%dT%H:%M:%S.000000Z', t)
end

describe('#e2e the runner', function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at the testenv (tools/run-tests sets it)')
  end)

  teardown(function()
    for _, ns in ipairs(namespaces) do
      h.kubectl('delete namespace ' .. ns .. ' --wait=false')
    end
  end)

  -- 1 -----------------------------------------------------------------------
  it('on a fresh install creates a kept ledger recording every slug skipped-fresh-install and runs nothing', function()
    local ns = new_ns()
    local log = os.tmpname()
    os.remove(log)
    local dir = fixture.tree({
      batches = {
        { '00000-legacy', { 'old-one', 'old-gone retired' } },
        { '00001-v1.0.0', { 'alpha', 'bg', 'gamma retired', 'bad' } },
      },
      scripts = {
        ['old-one'] = { shell = true, body = sh_append(log) },
        alpha = { body = lua_marker(ns, 'alpha') },
        bg = { tier = 'background', body = lua_marker(ns, 'bg') },
        bad = { body = lua_marker(ns, 'bad') },
      },
      revoked = { 'bad' },
      legacy = { { 1, 'old-one' }, { 2, 'old-gone' } },
    })
    assert.is_nil(get_ledger(ns))
    local res = must(run(dir, ns))
    contains(res.out, 'fresh install: created the ledger ' .. ns .. '/' .. LEDGER ..
      ', recorded 6 migrations as skipped-fresh-install; nothing to run')
    local recs, _, cm = records(ns)
    assert.is_not_nil(cm, 'the ledger was not created')
    assert.are.equal('true', cm.metadata.labels['platform.cozystack.io/no-delete'])
    assert.are.equal('keep', cm.metadata.annotations['helm.sh/resource-policy'])
    assert.is_nil(cm.data.version, 'the runner must never write version')
    local want = {
      ['old-one'] = { '00000-legacy', 'pre-apply' }, ['old-gone'] = { '00000-legacy', 'pre-apply' },
      alpha = { '00001-v1.0.0', 'pre-apply' }, bg = { '00001-v1.0.0', 'background' },
      gamma = { '00001-v1.0.0', 'pre-apply' }, bad = { '00001-v1.0.0', 'pre-apply' },
    }
    assert.are.equal(6, count(recs))
    for slug, bt in pairs(want) do
      local r = recs[slug]
      assert.is_table(r, 'no record for ' .. slug)
      assert.are.equal('skipped-fresh-install', r.state, slug)
      assert.are.equal(bt[1], r.batch, slug)
      assert.are.equal(bt[2], r.tier, slug)
      assert.are.equal(0, r.attempts, slug)
    end
    assert.are.same({}, (markers(ns)))
    assert.is_nil(io.open(log), 'a shell migration ran')
    local evs = events(ns)
    assert.are.equal(1, #evs)
    assert.are.equal('LedgerCreated', evs[1].reason)
    assert.are.equal(cm.metadata.uid, evs[1].involvedObject.uid)

    -- A second run, of either tier, runs nothing and writes nothing.
    local rv = cm.metadata.resourceVersion
    res = must(run(dir, ns))
    contains(res.out, 'nothing to run for the pre-apply tier')
    lacks(res.out, 'running')
    res = must(run(dir, ns, '--tier', 'background'))
    contains(res.out, 'nothing to run for the background tier')
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    assert.are.same({}, (markers(ns)))
    assert.is_nil(io.open(log), 'a shell migration ran')
  end)

  -- 2 -----------------------------------------------------------------------
  it('seeds legacy records below the version per key, before the floor, and runs the rest in map order', function()
    local ns = new_ns()
    local log = os.tmpname()
    local dir = fixture.tree({
      batches = {
        { '00000-legacy', { 'l-one retired', 'l-two', 'l-three', 'l-four', 'l-five' } },
      },
      scripts = {
        ['l-two'] = { shell = true, body = sh_append(log) },
        ['l-three'] = { shell = true, body = sh_append(log) },
        ['l-four'] = { shell = true, body = sh_append(log) },
        ['l-five'] = { shell = true, body = sh_append(log) },
      },
      legacy = { { 1, 'l-one' }, { 2, 'l-two' }, { 3, 'l-three' }, { 4, 'l-four' }, { 5, 'l-five' } },
    })
    local pre = '{"state":"ok","at":"2020-01-01T00:00:00Z","attempts":7}'
    make_ledger(ns, { version = '4', ['m.l-three'] = pre })
    local res = must(run(dir, ns, { env = { MIGRATIONS_IMAGE = 'registry.example/cozy-migrate:v9' } }))
    -- l-one (retired: would trip the floor without its seed) and l-two
    contains(res.out, 'legacy: recorded 2 migrations below version 4 as legacy')
    local recs, raw, cm = records(ns)
    assert.are.equal('legacy', recs['l-one'].state)
    assert.are.equal('legacy', recs['l-two'].state)
    assert.are.equal('00000-legacy', recs['l-one'].batch)
    assert.are.equal(pre, raw['l-three'], 'a pre-existing record was rewritten')
    assert.are.equal('ok', recs['l-four'].state)
    assert.are.equal(1, recs['l-four'].attempts)
    assert.are.equal('ok', recs['l-five'].state)
    assert.are.equal('4', cm.data.version)
    -- the image is recorded, on seeds and on executions
    assert.are.equal('registry.example/cozy-migrate:v9', recs['l-one'].image)
    assert.are.equal('registry.example/cozy-migrate:v9', recs['l-four'].image)
    local seeded_ev
    for _, e in ipairs(events(ns)) do
      if e.reason == 'LegacySeeded' then seeded_ev = e end
    end
    assert.is_table(seeded_ev, 'no LegacySeeded event')
    contains(seeded_ev.message, '2 legacy migrations below version 4 recorded')
    -- map order (l-four before l-five), not alphabetical; nothing below 4 ran
    assert.are.same({ 'l-four ' .. ns, 'l-five ' .. ns }, lines_of(log))

    -- idempotent
    local rv = cm.metadata.resourceVersion
    res = must(run(dir, ns))
    lacks(res.out, 'legacy:')
    contains(res.out, 'nothing to run')
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    assert.are.same({ 'l-four ' .. ns, 'l-five ' .. ns }, lines_of(log))
    os.remove(log)
  end)

  -- 3 -----------------------------------------------------------------------
  it('refuses a cluster below the retention floor, naming the release, writing nothing', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = {
        { '00001-v1.0.0', { 'old-thing retired' } },
        { '00002-v1.1.0', { 'alpha' } },
      },
      scripts = { alpha = { body = lua_marker(ns, 'alpha') } },
    })
    make_ledger(ns, { ['m.other'] = '{"state":"ok"}' })
    local rv = get_ledger(ns).metadata.resourceVersion
    local res = run(dir, ns)
    assert.are.equal(4, res.code, res.err)
    contains(res.err, "no record of 'old-thing', retired in 00001-v1.0.0")
    contains(res.err, 'upgrade through v1.0.0 first')
    local recs, _, cm = records(ns)
    assert.are.equal(rv, cm.metadata.resourceVersion)
    assert.are.same({ 'other' }, (function()
      local k = {}
      for s in pairs(recs) do k[#k + 1] = s end
      return k
    end)())
    assert.are.same({}, (markers(ns)))
  end)

  -- 4 -----------------------------------------------------------------------
  it('records revoked only where no record exists and never runs a revoked slug', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'rev-ok', 'rev-new', 'alpha' } } },
      scripts = {
        ['rev-ok'] = { body = lua_marker(ns, 'rev-ok') },
        ['rev-new'] = { body = lua_marker(ns, 'rev-new') },
        alpha = { body = lua_marker(ns, 'alpha') },
      },
      revoked = { 'rev-ok', 'rev-new' },
    })
    local okrec = '{"state":"ok","at":"2021-01-01T00:00:00Z","attempts":1}'
    make_ledger(ns, { ['m.rev-ok'] = okrec })
    local res = must(run(dir, ns))
    contains(res.out, 'rev-new ... revoked, recorded')
    local recs, raw = records(ns)
    assert.are.equal(okrec, raw['rev-ok'])
    assert.are.equal('revoked', recs['rev-new'].state)
    assert.are.equal(0, recs['rev-new'].attempts)
    assert.are.equal('00001-v1.0.0', recs['rev-new'].batch)
    assert.are.equal('ok', recs.alpha.state)
    assert.are.same({ ['ran-alpha'] = true }, (markers(ns)))
    -- and again: nothing changes
    local rv = get_ledger(ns).metadata.resourceVersion
    res = must(run(dir, ns))
    contains(res.out, 'nothing to run')
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
  end)

  -- 5 -----------------------------------------------------------------------
  it('stops at an on-error=abort failure, records nothing for it, and attempts it again next time', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'first', 'boom', 'after' } } },
      scripts = {
        first = { body = lua_marker(ns, 'first') },
        boom = { on_error = 'abort', body = lua_gen_marker(ns, 'boom') .. "\nerror('boom exploded')" },
        after = { body = lua_marker(ns, 'after') },
      },
    })
    make_ledger(ns, {})
    local res = run(dir, ns)
    assert.are.equal(1, res.code, res.err)
    contains(res.out, 'boom ... FAILED (abort)')
    contains(res.out, 'boom exploded')
    contains(res.err, 'boom failed and its on-error is abort')
    local recs = records(ns)
    assert.are.equal('ok', recs.first.state)
    assert.is_nil(recs.boom)
    assert.is_nil(recs.after)
    local set, gen = markers(ns)
    assert.is_true(set['ran-first'])
    assert.is_nil(set['ran-after'])
    assert.are.equal(1, gen.boom)

    res = run(dir, ns)
    assert.are.equal(1, res.code, res.err)
    lacks(res.out, 'first ... running')
    contains(res.out, 'boom ... running')
    recs = records(ns)
    assert.is_nil(recs.boom)
    assert.is_nil(recs.after)
    assert.are.equal(1, recs.first.attempts)
    set, gen = markers(ns)
    assert.are.equal(2, gen.boom)
    assert.is_nil(set['ran-after'])
  end)

  -- 6 -----------------------------------------------------------------------
  it('records an on-error=warn failure with reason, message and output, and goes on', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'warny', 'later' } } },
      scripts = {
        warny = { on_error = 'warn', body = "for i = 1, 30 do print('line ' .. i) end\nerror('warned failure')" },
        later = { body = lua_marker(ns, 'later') },
      },
    })
    make_ledger(ns, {})
    local res = must(run(dir, ns))
    contains(res.out, 'warny ... FAILED (warn)')
    local r = records(ns).warny
    assert.are.equal('failed', r.state)
    assert.are.equal('ScriptError', r.reason)
    contains(r.message, 'warned failure', 'message')
    contains(r.output, 'line 30\n', 'output')
    contains(r.output, 'line 11\n', 'output')
    lacks(r.output, 'line 5\n', 'output (only the last lines)')
    assert.are.equal(1, r.attempts)
    assert.are.equal('pre-apply', r.tier)
    assert.are.equal(64, #r.sha256)
    local later = records(ns).later
    assert.are.equal('ok', later.state)
    assert.is_true(markers(ns)['ran-later'])
    -- a failed pre-apply warn migration is not retried
    res = must(run(dir, ns))
    contains(res.out, 'nothing to run')
    assert.are.equal(1, records(ns).warny.attempts)
  end)

  -- 7 -----------------------------------------------------------------------
  it('retries a failed background migration up to --max-attempts, then leaves it', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'pre', 'bg-fail', 'bg-ok' } } },
      scripts = {
        pre = { body = lua_marker(ns, 'pre') },
        ['bg-fail'] = { tier = 'background', on_error = 'warn',
          body = lua_gen_marker(ns, 'bg-fail') .. "\nerror('still broken')" },
        ['bg-ok'] = { tier = 'background', body = lua_gen_marker(ns, 'bg-ok') },
      },
    })
    make_ledger(ns, {})
    for i = 1, 3 do
      local res = must(run(dir, ns, '--tier', 'background'))
      contains(res.out, 'bg-fail ... FAILED (warn)')
      local r = records(ns)['bg-fail']
      assert.are.equal('failed', r.state)
      assert.are.equal(i, r.attempts)
      assert.are.equal('background', r.tier)
    end
    local res = must(run(dir, ns, '--tier', 'background'))
    contains(res.out, 'nothing to run for the background tier')
    assert.are.equal(3, records(ns)['bg-fail'].attempts)
    local _, gen = markers(ns)
    assert.are.equal(3, gen['bg-fail'])
    assert.are.equal(1, gen['bg-ok'])
    assert.are.equal(1, records(ns)['bg-ok'].attempts)

    -- a larger bound lets it run once more; a bound already reached does not
    res = must(run(dir, ns, '--tier', 'background', '--max-attempts', '4'))
    contains(res.out, 'bg-fail ... running (retry 4 of 4)')
    assert.are.equal(4, records(ns)['bg-fail'].attempts)
    res = must(run(dir, ns, '--tier', 'background', '--max-attempts', '4'))
    contains(res.out, 'nothing to run')
    res = must(run(dir, ns, '--tier', 'background', '--max-attempts', '2'))
    contains(res.out, 'nothing to run')
    assert.are.equal(4, records(ns)['bg-fail'].attempts)
    _, gen = markers(ns)
    assert.are.equal(4, gen['bg-fail'])
    -- the pre-apply tier was never touched by the background runs
    assert.is_nil(records(ns).pre)
    assert.is_nil(markers(ns)['ran-pre'])
  end)

  -- 8 -----------------------------------------------------------------------
  it('--only re-runs a recorded slug (also from env ONLY) and refuses revoked or absent slugs', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'rev', 'beta' } } },
      scripts = {
        alpha = { body = lua_gen_marker(ns, 'alpha') },
        rev = { body = lua_marker(ns, 'rev') },
        beta = { body = lua_gen_marker(ns, 'beta') },
      },
      revoked = { 'rev' },
    })
    make_ledger(ns, {})
    must(run(dir, ns))
    local first = records(ns)
    assert.are.equal(1, first.alpha.attempts)
    sleep(1.1) -- `at` has a one-second resolution
    local res = must(run(dir, ns, '--only', 'alpha'))
    contains(res.out, 'alpha ... running (re-run requested (--only), was ok)')
    lacks(res.out, 'beta')
    local recs = records(ns)
    assert.are.equal('ok', recs.alpha.state)
    assert.are.equal(2, recs.alpha.attempts)
    assert.are_not.equal(first.alpha.at, recs.alpha.at)
    assert.are.same(first.beta, recs.beta)
    must(h.cozy('run', '--dir', dir, '--namespace', ns, { env = { ONLY = 'alpha' } }))
    assert.are.equal(3, records(ns).alpha.attempts)
    local _, gen = markers(ns)
    assert.are.equal(3, gen.alpha)
    assert.are.equal(1, gen.beta)

    local rv = get_ledger(ns).metadata.resourceVersion
    res = run(dir, ns, '--only', 'rev')
    assert.are.equal(2, res.code, res.err)
    contains(res.err, '--only rev: the slug is revoked')
    res = run(dir, ns, '--only', 'nope')
    assert.are.equal(2, res.code, res.err)
    contains(res.err, '--only nope: no such migration in this image')
    res = h.cozy('run', '--dir', dir, '--namespace', ns, { env = { ONLY = 'rev' } })
    assert.are.equal(2, res.code, res.err)
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    assert.is_nil(markers(ns)['ran-rev'])
  end)

  -- 9 -----------------------------------------------------------------------
  describe('refuses an invalid tree with exit 3 before any script runs', function()
    -- Each case: a tree where `first` (which creates a marker) sits before
    -- the defect in the manifest, and what stderr must name.
    local cases = {
      { 'a script in no batch', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') }, stray = {} } }
      end, "pre-apply/stray.lua: slug 'stray' is in no batch" },
      { 'a batch entry neither shipped nor retired', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'ghost' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') } } }
      end, "order.d/00001-v1.0.0:2: 'ghost' is neither shipped nor retired" },
      { 'a slug in two batches', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'twice' } }, { '00002-v1.1.0', { 'twice' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') }, twice = {} } }
      end, "order.d/00002-v1.1.0:1: slug 'twice' is already listed at" },
      { 'a slug in two tiers', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'both' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') }, both = {} },
                 raw = { ['migrations/background/both.lua'] = '-- cozystack-migration: on-error=warn\n' } }
      end, "slug 'both' is shipped twice" },
      { 'a file name that is not a slug', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') } },
                 raw = { ['migrations/pre-apply/Bad_Name.lua'] = '-- cozystack-migration: on-error=warn\n' } }
      end, "pre-apply/Bad_Name.lua: 'Bad_Name' is not a valid slug" },
      { 'a header without on-error', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'noerr' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') },
                             noerr = { header = '-- cozystack-migration: timeout=5m' } } }
      end, 'noerr.lua: header has no on-error' },
      { 'an unknown header key', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'colour' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') },
                             colour = { header = '-- cozystack-migration: on-error=warn\n-- cozystack-migration: colour=blue' } } }
      end, "colour.lua:2: unknown header key 'colour'" },
      { 'timeout=abc', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'slowpoke' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') },
                             slowpoke = { shell = true, header = '# cozystack-migration: on-error=warn\n# cozystack-migration: timeout=abc' } } }
      end, 'slowpoke.sh:2: timeout=abc: not a duration' },
      { 'a malformed manifest line', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first', 'second extra words' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') }, second = {} } }
      end, 'order.d/00001-v1.0.0:2: malformed manifest line' },
      { 'a malformed legacy-map line', function(ns)
        return { batches = { { '00000-legacy', { 'first', 'old' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') }, old = { shell = true } },
                 raw = { ['legacy-sh/legacy-map'] = '1 first\nseven old\n' } }
      end, "legacy-sh/legacy-map:2: expected '<number> <slug>'" },
      { 'an unknown revoked slug', function(ns)
        return { batches = { { '00001-v1.0.0', { 'first' } } },
                 scripts = { first = { body = lua_marker(ns, 'first') } },
                 revoked = { '# comment', 'nobody' } }
      end, "migrations/revoked:2: revoked slug 'nobody' is in no batch" },
    }
    for _, case in ipairs(cases) do
      it('(' .. case[1] .. ')', function()
        local ns = new_ns()
        local dir = fixture.tree(case[2](ns))
        make_ledger(ns, {})
        local rv = get_ledger(ns).metadata.resourceVersion
        local res = run(dir, ns)
        assert.are.equal(3, res.code, res.out .. res.err)
        one_line(res.err)
        contains(res.err, case[3], 'stderr')
        assert.are.equal('', res.out)
        assert.are.same({}, (markers(ns)))
        assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
        assert.is_nil(get_lease(ns), 'the tree is validated before the lock is taken')
        -- plan refuses the same way
        res = h.cozy('plan', '--dir', dir, '--namespace', ns)
        assert.are.equal(3, res.code)
        contains(res.err, case[3], 'plan stderr')
      end)
    end
  end)

  -- 10 ----------------------------------------------------------------------
  it('reports an ok record whose checksum differs, without re-running or rewriting it', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
      scripts = { alpha = { body = lua_marker(ns, 'alpha') }, beta = { body = lua_marker(ns, 'beta') } },
    })
    local rec = '{"state":"ok","at":"2021-01-01T00:00:00Z","sha256":"' .. string.rep('deadbeef', 8) ..
      '","attempts":1}'
    make_ledger(ns, { ['m.alpha'] = rec })
    local res = must(run(dir, ns))
    contains(res.err, 'alpha: recorded sha256 deadbeefdead differs from the shipped script')
    lacks(res.out, 'alpha ... running')
    local recs, raw = records(ns)
    assert.are.equal(rec, raw.alpha)
    assert.are.equal('ok', recs.beta.state)
    assert.are.same({ ['ran-beta'] = true }, (markers(ns)))
    local st = json.decode(must(h.cozy('status', '--dir', dir, '--namespace', ns, '-o', 'json')).out)
    local sums = {}
    for _, e in ipairs(st) do sums[e.migration] = e.checksum end
    assert.are.same({ alpha = 'DIFFERS', beta = 'match' }, sums)
  end)

  -- 11 ----------------------------------------------------------------------
  describe('timeouts', function()
    it('kill a shell migration with its children at the header timeout, and a spinning Lua one', function()
      local ns = new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'sleeper', 'spin', 'after' } } },
        scripts = {
          sleeper = { shell = true, on_error = 'warn', timeout = '2s',
                      body = 'sleep 1000.4242 &\nsleep 1000.4243\necho never' },
          spin = { on_error = 'warn', timeout = '1s', body = 'while true do end' },
          after = { body = lua_marker(ns, 'after') },
        },
      })
      make_ledger(ns, {})
      local t0 = os.time()
      local res = must(run(dir, ns, '--grace', '1s'))
      assert.is_true(os.time() - t0 < 15, 'took ' .. (os.time() - t0) .. 's')
      local recs = records(ns)
      assert.are.equal('failed', recs.sleeper.state)
      assert.are.equal('Timeout', recs.sleeper.reason)
      contains(recs.sleeper.message, 'timed out after 2s', 'message')
      assert.is_true(recs.sleeper.duration_ms >= 1900, tostring(recs.sleeper.duration_ms))
      assert.are.equal('failed', recs.spin.state)
      assert.are.equal('Timeout', recs.spin.reason)
      contains(recs.spin.message, 'timed out after 1s', 'message')
      assert.are.equal('ok', recs.after.state)
      lacks(res.err, 'never')
      assert.is_true(eventually(1.5, function()
        return not alive('sleep 1000.4242') and not alive('sleep 1000.4243')
      end), 'a child of the timed-out migration survived: ' .. select(2, alive('sleep 1000.424')))
    end)

    it('--timeout overrides the header timeout', function()
      local ns = new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'slow' } } },
        scripts = { slow = { shell = true, on_error = 'warn', timeout = '10m', body = 'sleep 1000.4244' } },
      })
      make_ledger(ns, {})
      local t0 = os.time()
      must(run(dir, ns, '--timeout', '1s', '--grace', '1s'))
      assert.is_true(os.time() - t0 < 10)
      local r = records(ns).slow
      assert.are.equal('Timeout', r.reason)
      contains(r.message, 'timed out after 1s', 'message')
      assert.is_true(eventually(1.5, function() return not alive('sleep 1000.4244') end))
    end)
  end)

  -- 12 ----------------------------------------------------------------------
  it('records a crashing child as failed with reason Crashed', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'crasher', 'after' } } },
      scripts = {
        crasher = { shell = true, on_error = 'warn', body = 'echo about to crash\nkill -SEGV $$' },
        after = { body = lua_marker(ns, 'after') },
      },
    })
    make_ledger(ns, {})
    local res = must(run(dir, ns))
    contains(res.out, 'crasher ... FAILED (warn)')
    local r = records(ns).crasher
    assert.are.equal('failed', r.state)
    assert.are.equal('Crashed', r.reason)
    contains(r.message, 'SIGSEGV', 'message')
    contains(r.output, 'about to crash', 'output')
    assert.are.equal(1, r.attempts)
    assert.are.equal('ok', records(ns).after.state)
  end)

  -- 13 ----------------------------------------------------------------------
  describe('records survive the legacy `kubectl apply` of version', function()
    local function legacy_apply(ns, version)
      local k = h.q(h.testenv) .. ' kubectl'
      return must(h.run(string.format(
        '%s create configmap %s -n %s --from-literal=version=%s --dry-run=client -o yaml | %s apply -f-',
        k, LEDGER, ns, version, k)), 'legacy apply')
    end

    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = lua_marker(ns, 'alpha') }, beta = { on_error = 'warn', body = "error('x')" } },
      })
    end

    it('on a ledger first made by kubectl apply', function()
      local ns = new_ns()
      legacy_apply(ns, '4')
      assert.is_string(get_ledger(ns).metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'])
      must(run(tree(ns), ns))
      local before = records(ns)
      assert.are.equal(2, count(before))
      legacy_apply(ns, '5')
      legacy_apply(ns, '5')
      local after, _, cm = records(ns)
      assert.are.same(before, after)
      assert.are.equal('5', cm.data.version)
      lacks(cm.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'], 'm.alpha',
        'last-applied')
    end)

    it('on a ledger the runner created (fresh install)', function()
      local ns = new_ns()
      must(run(tree(ns), ns))
      local before = records(ns)
      assert.are.equal(2, count(before))
      legacy_apply(ns, '5')
      legacy_apply(ns, '5')
      local after, _, cm = records(ns)
      assert.are.same(before, after)
      assert.are.equal('5', cm.data.version)
      assert.are.equal('true', cm.metadata.labels['platform.cozystack.io/no-delete'])
      assert.are.equal('keep', cm.metadata.annotations['helm.sh/resource-policy'])
    end)
  end)

  -- 14 ----------------------------------------------------------------------
  describe('two runners on one namespace', function()
    it('never run migrations at the same time: the second waits for the lock', function()
      local ns = new_ns()
      local f = os.tmpname()
      local body = string.format(
        'echo "start $MIGRATION_SLUG $$ $(date +%%s.%%N)" >> %s\nsleep 1\necho "end $MIGRATION_SLUG $$ $(date +%%s.%%N)" >> %s',
        h.q(f), h.q(f))
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'slow-one', 'slow-two' } } },
        scripts = { ['slow-one'] = { shell = true, body = body }, ['slow-two'] = { shell = true, body = body } },
      })
      make_ledger(ns, {})
      local out = h.tmpdir()
      local cmd = runner_cmd(dir, ns, '--lock-timeout 60s')
      must(h.run(string.format(
        'cd %s && { ( %s >o1 2>e1; echo $? >r1 ) & ( %s >o2 2>e2; echo $? >r2 ) & wait; }',
        h.q(out), cmd, cmd)))
      local r1, r2 = h.slurp(out .. '/r1'), h.slurp(out .. '/r2')
      local all = h.slurp(out .. '/o1') .. h.slurp(out .. '/e1') .. h.slurp(out .. '/o2') .. h.slurp(out .. '/e2')
      assert.are.equal('0\n', r1, all)
      assert.are.equal('0\n', r2, all)
      -- (the loser logs "lease ... is held by X" or, when it lost the race
      -- to create the Lease, "lease ... is another runner created the lease
      -- first": see the report)
      contains(h.slurp(out .. '/e1') .. h.slurp(out .. '/e2'), '; waiting up to 60s', 'the waiting runner')
      -- each migration ran exactly once, and no two intervals overlap
      local ivs, last = {}, nil
      for _, l in ipairs(lines_of(f)) do
        local what, slug, _, t = l:match('^(%a+) (%S+) (%d+) ([%d.]+)$')
        assert(what, 'bad line ' .. l)
        if what == 'start' then
          assert.is_nil(last, 'overlap: ' .. h.slurp(f))
          last = { slug = slug, from = tonumber(t) }
        else
          assert.are.equal(last.slug, slug)
          last.to = tonumber(t)
          ivs[#ivs + 1] = last
          last = nil
        end
      end
      assert.are.equal(2, #ivs, h.slurp(f))
      assert.are.same({ 'slow-one', 'slow-two' }, { ivs[1].slug, ivs[2].slug })
      assert.is_true(ivs[1].to <= ivs[2].from)
      local recs = records(ns)
      assert.are.equal(1, recs['slow-one'].attempts)
      assert.are.equal(1, recs['slow-two'].attempts)
      os.remove(f)
    end)

    it('renew the lease while a long migration runs, so it never expires under it', function()
      local ns = new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'long' } } },
        scripts = { long = { shell = true, body = 'sleep 5' } },
      })
      make_ledger(ns, {})
      local base = runner_cmd(dir, ns, '--lease-duration 3s')
      -- the second runner tries at 3.5 s and 4.5 s: past the 3 s duration of
      -- the first acquisition, so only renewals keep it out
      local out = alongside(base, 3.5, base .. ' --lock-timeout 1s >o2 2>e2; echo $? >r2')
      assert.are.equal('0\n', h.slurp(out .. '/r1'), h.slurp(out .. '/e1'))
      assert.are.equal('5\n', h.slurp(out .. '/r2'), h.slurp(out .. '/e2'))
      lacks(h.slurp(out .. '/e2'), 'taking over')
      lacks(h.slurp(out .. '/e1'), 'lost the runner lock')
      assert.are.equal(1, records(ns).long.attempts)
    end)

    it('renew a short lease often enough (--lease-duration 1s)', function()
      local ns = new_ns()
      local f = os.tmpname()
      local body = string.format('echo "start $$" >> %s\nsleep 4\necho "end $$" >> %s', h.q(f), h.q(f))
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'long' } } },
        scripts = { long = { shell = true, body = body } },
      })
      make_ledger(ns, {})
      local base = runner_cmd(dir, ns, '--lease-duration 1s')
      -- a second runner tries every 0.1 s while the first one's migration runs
      local out = alongside(base, 0.3, 'for i in $(seq 25); do ' .. base ..
        ' --lock-timeout 0.1s >>o2 2>>e2; echo $? >>r2; sleep 0.1; done')
      local starts = select(2, h.slurp(f):gsub('start', ''))
      os.remove(f)
      local e2 = h.slurp(out .. '/e2')
      if starts > 1 or has(e2, 'taking over') then
        pending('bug: runner.c execute() renews the lease on a fixed 2 s tick (.tick_every = 2), ' ..
          'longer than a --lease-duration of 1 s or 2 s: the Lease expires while the migration runs ' ..
          'and a second runner takes it over and runs the same migration (ran ' .. starts .. ' times)')
      end
      assert.are.equal(1, starts)
      lacks(e2, 'taking over', 'the second runner')
      assert.are.equal('0\n', h.slurp(out .. '/r1'), h.slurp(out .. '/e1'))
      assert.are.equal(1, records(ns).long.attempts)
    end)

    it('do not record a migration that finished after the lock was taken from its runner', function()
      local ns = new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'long', 'next' } } },
        scripts = { long = { shell = true, body = 'sleep 3.5' }, ['next'] = { body = lua_marker(ns, 'next') } },
      })
      make_ledger(ns, {})
      local base = runner_cmd(dir, ns, '--lease-duration 3s')
      -- while `long` runs, someone else writes the Lease: the runner's next
      -- renewal (guarded by its resourceVersion) fails with a conflict
      local steal = string.format(
        '%s kubectl patch lease %s -n %s --type merge -p %s', h.q(TESTENV), LEASE, ns,
        h.q('{"spec":{"holderIdentity":"thief","leaseDurationSeconds":300}}'))
      local out = alongside(base, 1, steal .. ' >steal 2>&1')
      contains(h.slurp(out .. '/steal'), 'patched', 'kubectl patch')
      assert.are.equal('5\n', h.slurp(out .. '/r1'), h.slurp(out .. '/e1'))
      contains(h.slurp(out .. '/e1'), 'lost the runner lock while long ran; not recording it')
      local recs = records(ns)
      assert.is_nil(recs.long)
      assert.is_nil(recs['next'])
      assert.is_nil(markers(ns)['ran-next'])
      assert.are.equal('thief', get_lease(ns).spec.holderIdentity)
    end)

    it('exits 5 naming the holder when the lock is not free within --lock-timeout', function()
      local ns = new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'slow' } } },
        scripts = { slow = { shell = true, body = 'sleep 2' } },
      })
      make_ledger(ns, {})
      local base = runner_cmd(dir, ns, '')
      local out = alongside(base, 0.7, base .. ' --lock-timeout 1s >o2 2>e2; echo $? >r2')
      local pid = h.slurp(out .. '/pid'):match('%d+')
      assert.are.equal('0\n', h.slurp(out .. '/r1'), h.slurp(out .. '/e1'))
      assert.are.equal('5\n', h.slurp(out .. '/r2'), h.slurp(out .. '/e2'))
      local e2 = h.slurp(out .. '/e2')
      contains(e2, 'the runner lock ' .. ns .. '/' .. LEASE .. ' is held by ', 'stderr')
      contains(e2, '/' .. pid .. '/', 'stderr (the holder names the first runner)')
      lacks(h.slurp(out .. '/o2'), 'running')
      assert.are.equal(1, records(ns).slow.attempts)
    end)
  end)

  -- 15 ----------------------------------------------------------------------
  it('after kill -9 of the runner, the next run takes the expired lease over and re-runs the migration', function()
    local ns = new_ns()
    local f = os.tmpname()
    -- The first execution sleeps; the second (after the takeover) does not.
    local body = string.format([[
echo "start $$ $(date +%%s.%%N)" >> %s
if [ "$(grep -c start %s)" = 1 ]; then sleep 30.4245; fi
echo "end $$ $(date +%%s.%%N)" >> %s]], h.q(f), h.q(f), h.q(f))
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'sleepy' } } },
      scripts = { sleepy = { shell = true, body = body } },
    })
    make_ledger(ns, {})
    local base = runner_cmd(dir, ns, '--lease-duration 3s')
    local out = alongside(base, 1.5, 'kill -9 $p')
    assert.are.equal('137\n', h.slurp(out .. '/r1'))
    local first = lines_of(f)
    assert.are.equal(1, #first, h.slurp(f))
    local bash_pid = first[1]:match('^start (%d+)')
    -- The migration's shell died with its runner (PR_SET_PDEATHSIG) ...
    assert.is_true(eventually(1, function() return not running(bash_pid) end),
      'the killed runner\'s migration shell is still running')
    -- Its own children may outlive it (see the next case); they are ours
    -- to clean up, by pid.
    local _, pids = alive('sleep 30.4245')
    for p in pids:gmatch('%d+') do h.run('kill ' .. p) end
    assert.is_nil(get_ledger(ns).data, 'nothing recorded for the killed run')
    local lease = get_lease(ns)
    assert.is_not_nil(lease)
    assert.are_not.equal('', lease.spec.holderIdentity)

    local res = run(dir, ns, '--lock-timeout', '20s', '--lease-duration', '3s')
    assert.are.equal(0, res.code, res.err)
    contains(res.err, 'taking over the expired lease of ')
    local all = lines_of(f)
    assert.are.equal(3, #all, h.slurp(f))
    assert.matches('^start ', all[2])
    assert.matches('^end ', all[3])
    local r = records(ns).sleepy
    assert.are.equal('ok', r.state)
    assert.are.equal(1, r.attempts)
    assert.are.equal('', get_lease(ns).spec.holderIdentity or '')
    os.remove(f)
  end)

  it('after kill -9 of the runner, no process of its migration keeps running', function()
    local ns = new_ns()
    local f = os.tmpname()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'sleepy' } } },
      scripts = { sleepy = { shell = true,
        body = string.format('echo "start $$" >> %s\nsleep 30.4246\necho end >> %s', h.q(f), h.q(f)) } },
    })
    make_ledger(ns, {})
    local base = runner_cmd(dir, ns, '--lease-duration 3s')
    local out = alongside(base, 1, 'kill -9 $p')
    assert.are.equal('137\n', h.slurp(out .. '/r1'))
    local bash_pid = h.slurp(f):match('start (%d+)')
    assert.is_string(bash_pid, 'the migration did not start')
    assert.is_true(eventually(1, function() return not running(bash_pid) end),
      'the migration shell outlived its runner')
    local gone = eventually(1, function() return not alive('sleep 30.4246') end)
    local _, pids = alive('sleep 30.4246')
    for p in pids:gmatch('%d+') do h.run('kill ' .. p) end
    os.remove(f)
    if not gone then
      pending('bug: child.c run_child: PR_SET_PDEATHSIG kills only the direct child (bash); the ' ..
        'rest of the migration\'s process group (here `sleep 30.4246`) outlives a killed runner ' ..
        'and runs on while the next runner re-runs the migration')
    end
    assert.is_true(gone)
  end)

  -- 16 ----------------------------------------------------------------------
  describe("another holder's Lease", function()
    local function make_lease(ns, holder, duration, renew)
      local obj = {
        apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
        metadata = { name = LEASE, namespace = ns },
        spec = { holderIdentity = holder, leaseDurationSeconds = duration, renewTime = renew,
                 acquireTime = renew, leaseTransitions = 0 },
      }
      local f = h.write(os.tmpname() .. '.json', json.encode(obj))
      must(h.kubectl('create -f ' .. f), 'create lease')
      os.remove(f)
    end

    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha' } } },
        scripts = { alpha = { body = lua_marker(ns, 'alpha') } },
      })
    end

    it('is taken over once expired', function()
      local ns = new_ns()
      make_ledger(ns, {})
      make_lease(ns, 'ghost', 1, micro_time(os.time() - 60))
      local res = run(tree(ns), ns, '--lock-timeout', '5s')
      assert.are.equal(0, res.code, res.err)
      contains(res.err, 'lock: taking over the expired lease of ghost')
      assert.are.equal('ok', records(ns).alpha.state)
      local lease = get_lease(ns)
      assert.are.equal(1, lease.spec.leaseTransitions)
      assert.are.equal('', lease.spec.holderIdentity or '')
    end)

    it('makes run exit 5 naming the holder while it is fresh', function()
      local ns = new_ns()
      make_ledger(ns, {})
      local rv = get_ledger(ns).metadata.resourceVersion
      make_lease(ns, 'ghost', 300, micro_time(os.time()))
      local t0 = os.time()
      local res = run(tree(ns), ns, '--lock-timeout', '2s')
      assert.are.equal(5, res.code, res.err)
      assert.is_true(os.time() - t0 >= 1)
      contains(res.err, 'the runner lock ' .. ns .. '/' .. LEASE .. ' is held by ghost')
      assert.are.equal('', res.out)
      assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
      assert.are.same({}, (markers(ns)))
      assert.are.equal('ghost', get_lease(ns).spec.holderIdentity)
    end)
  end)

  -- 17 ----------------------------------------------------------------------
  describe('an untrustworthy ledger', function()
    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = lua_gen_marker(ns, 'alpha') }, beta = { body = lua_marker(ns, 'beta') } },
      })
    end

    for _, case in ipairs({
      { 'an unparseable record', '{not json', 'record m.alpha cannot be read (not JSON)' },
      { 'a record with an unknown state', '{"state":"done"}', "record m.alpha cannot be read (unknown state 'done')" },
    }) do
      it('reports ' .. case[1] .. ' by slug, leaves it alone, runs the rest, exits 7', function()
        local ns = new_ns()
        local dir = tree(ns)
        make_ledger(ns, { ['m.alpha'] = case[2] })
        local res = run(dir, ns)
        assert.are.equal(7, res.code, res.err)
        contains(res.err, case[3], 'stderr')
        contains(res.err, 're-run it with --only alpha', 'stderr')
        contains(res.err, 'the ledger holds records that cannot be read')
        lacks(res.out, 'alpha ... running')
        local recs, raw = records(ns)
        assert.are.equal(case[2], raw.alpha)
        assert.are.equal('ok', recs.beta.state)
        local set, gen = markers(ns)
        assert.is_nil(gen.alpha)
        assert.is_true(set['ran-beta'])
        -- status shows it as unknown
        local st = json.decode(must(h.cozy('status', '--dir', dir, '--namespace', ns, '-o', 'json')).out)
        assert.are.equal('unknown', st[1].state)
        assert.are.equal('alpha', st[1].migration)
      end)
    end

    it('lets an explicit --only re-run rewrite an unreadable record', function()
      local ns = new_ns()
      local dir = tree(ns)
      make_ledger(ns, { ['m.alpha'] = '{not json' })
      local res = run(dir, ns, '--only', 'alpha')
      contains(res.out, 'alpha ... ok')
      local r = records(ns).alpha
      assert.are.equal('ok', r.state)
      assert.are.equal(1, r.attempts)
      local _, gen = markers(ns)
      assert.are.equal(1, gen.alpha)
      assert.is_nil(records(ns).beta, '--only runs nothing else')
      -- nothing unreadable is left, so the repair exits 0
      assert.are.equal(0, res.code, res.err)
    end)

    it('refuses a version that is not an integer before anything runs (exit 7)', function()
      local ns = new_ns()
      local dir = tree(ns)
      make_ledger(ns, { version = 'abc' })
      local rv = get_ledger(ns).metadata.resourceVersion
      local res = run(dir, ns)
      assert.are.equal(7, res.code, res.err)
      one_line(res.err)
      contains(res.err, 'key \'version\' is "abc", not a non-negative integer')
      assert.are.equal('', res.out)
      local cm = get_ledger(ns)
      assert.are.equal(rv, cm.metadata.resourceVersion)
      assert.are.same({ version = 'abc' }, cm.data)
      assert.are.same({}, (markers(ns)))
      assert.are.equal('', get_lease(ns).spec.holderIdentity or '')
    end)
  end)

  -- 18 ----------------------------------------------------------------------
  it('in dry run sends Lua writes with dryRun, lists shell ones, records nothing, takes no lease', function()
    local ns = new_ns()
    local log = os.tmpname()
    os.remove(log)
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'lua-one', 'sh-one' } } },
      scripts = {
        ['lua-one'] = { body = string.format(
          "local c = require('kube').create('configmaps', {metadata={name='ran-lua-one'}}, {namespace=%q})\n" ..
          "print('server returned ' .. c.metadata.name .. ' uid=' .. tostring(c.metadata.uid))", ns) },
        ['sh-one'] = { shell = true, body = sh_append(log) },
      },
    })
    make_ledger(ns, { version = '1' })
    local rv = get_ledger(ns).metadata.resourceVersion
    local res = must(run(dir, ns, '--dry-run'))
    contains(res.out, 'lua-one ... ok (dry run)')
    contains(res.out, 'sh-one ... not dry-runnable (shell), not executed')
    contains(res.err, '[lua-one] server returned ran-lua-one uid=', 'the apiserver answered the create')
    assert.is_nil(markers(ns)['ran-lua-one'], 'a dry-run create persisted')
    assert.is_nil(io.open(log), 'the shell migration ran')
    local cm = get_ledger(ns)
    assert.are.equal(rv, cm.metadata.resourceVersion)
    assert.are.same({ version = '1' }, cm.data)
    assert.is_nil(get_lease(ns))
    assert.are.same({}, events(ns))

    -- DRY_RUN=1 in the environment does the same; and a fresh install in
    -- dry run creates no ledger
    res = must(h.cozy('run', '--dir', dir, '--namespace', ns, { env = { DRY_RUN = '1' } }))
    contains(res.out, 'lua-one ... ok (dry run)')
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    local ns2 = new_ns()
    res = must(run(dir, ns2, '--dry-run'))
    contains(res.out, 'fresh install: would create the ledger ' .. ns2 .. '/' .. LEDGER)
    assert.is_nil(get_ledger(ns2))
    assert.is_nil(get_lease(ns2))
  end)

  -- 19 ----------------------------------------------------------------------
  it('leaves MigrationSucceeded and MigrationFailed Events on the ledger', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'good', 'bad' } } },
      scripts = { good = {}, bad = { on_error = 'warn', body = "error('bad things')" } },
    })
    make_ledger(ns, {})
    local uid = get_ledger(ns).metadata.uid
    must(run(dir, ns))
    local by = {}
    for _, e in ipairs(events(ns)) do
      assert.are.equal('ConfigMap', e.involvedObject.kind)
      assert.are.equal(LEDGER, e.involvedObject.name)
      assert.are.equal(uid, e.involvedObject.uid)
      by[e.reason] = e
    end
    assert.is_table(by.MigrationSucceeded, 'no MigrationSucceeded event')
    assert.are.equal('Normal', by.MigrationSucceeded.type)
    contains(by.MigrationSucceeded.message, 'good (pre-apply, batch 00001-v1.0.0) succeeded')
    assert.is_table(by.MigrationFailed, 'no MigrationFailed event')
    assert.are.equal('Warning', by.MigrationFailed.type)
    contains(by.MigrationFailed.message, 'bad (pre-apply) failed, on-error=warn: ScriptError')
    contains(by.MigrationFailed.message, 'bad things')
  end)

  -- 20 ----------------------------------------------------------------------
  it('status -o json lists every slug; plan explains each step and writes nothing', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = {
        { '00001-v1.0.0', { 'alpha', 'beta', 'rev' } },
        { '00002-v1.1.0', { 'bg' } },
      },
      scripts = {
        alpha = { body = lua_marker(ns, 'alpha') },
        beta = { on_error = 'warn', body = "error('nope')" },
        rev = {},
        bg = { tier = 'background', body = lua_marker(ns, 'bg') },
      },
      revoked = { 'rev' },
    })
    make_ledger(ns, {})
    local rv = get_ledger(ns).metadata.resourceVersion
    local res = must(h.cozy('plan', '--dir', dir, '--namespace', ns))
    contains(res.out, '3 to run for the pre-apply tier:')
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +alpha +pending', res.out)
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +beta +pending', res.out)
    assert.matches('\nrevoke +pre%-apply +00001%-v1%.0%.0 +rev +revoked, no record', res.out)
    assert.matches('\nskip +background +00002%-v1%.1%.0 +bg +background tier', res.out)
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    assert.is_nil(get_lease(ns), 'plan takes no lock')
    assert.are.same({}, (markers(ns)))

    must(run(dir, ns))
    local st = json.decode(must(h.cozy('status', '--dir', dir, '--namespace', ns, '-o', 'json')).out)
    local by = {}
    for i, e in ipairs(st) do by[e.migration] = e; e.i = i end
    assert.are.same({ 'alpha', 'beta', 'rev', 'bg' }, { st[1].migration, st[2].migration, st[3].migration, st[4].migration })
    assert.are.same({ 'ok', 1, '00001-v1.0.0', 'pre-apply', 'match' },
      { by.alpha.state, by.alpha.attempts, by.alpha.batch, by.alpha.tier, by.alpha.checksum })
    assert.are.same({ 'failed', 1, '00001-v1.0.0', 'pre-apply', 'match', 'ScriptError' },
      { by.beta.state, by.beta.attempts, by.beta.batch, by.beta.tier, by.beta.checksum, by.beta.reason })
    assert.are.same({ 'revoked', 0, 'match' }, { by.rev.state, by.rev.attempts, by.rev.checksum })
    assert.are.same({ 'pending', 0, '00002-v1.1.0', 'background', '-' },
      { by.bg.state, by.bg.attempts, by.bg.batch, by.bg.tier, by.bg.checksum })

    rv = get_ledger(ns).metadata.resourceVersion
    res = must(h.cozy('plan', '--dir', dir, '--namespace', ns))
    contains(res.out, '0 to run for the pre-apply tier:')
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +alpha +recorded ok', res.out)
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +beta +recorded failed', res.out)
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +rev +revoked; recorded revoked', res.out)
    res = must(h.cozy('plan', '--dir', dir, '--namespace', ns, '--tier', 'background'))
    contains(res.out, '1 to run for the background tier:')
    assert.matches('\nrun +background +00002%-v1%.1%.0 +bg +pending', res.out)
    res = must(h.cozy('plan', '--dir', dir, '--namespace', ns, '--only', 'alpha'))
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +alpha +re%-run requested %(%-%-only%), was ok', res.out)
    assert.are.equal(rv, get_ledger(ns).metadata.resourceVersion)
    assert.are.same({ ['ran-alpha'] = true }, (markers(ns)))
  end)

  -- beyond the list ----------------------------------------------------------
  it('keeps migrations away from the ledger and the Lease, whatever --ledger names them', function()
    local ns = new_ns()
    local function try(what)
      return string.format([[
local kube = require('kube')
local ok, err = pcall(function() %s end)
assert(not ok, 'the write went through')
print('refused: ' .. tostring(kube.is_ledger_protected(err)))
error(err)]], what)
    end
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'patch-ledger', 'delete-lease', 'other-cm' } } },
      scripts = {
        ['patch-ledger'] = { on_error = 'warn', body = try(string.format(
          "kube.patch('configmaps', 'alt', {data={['m.evil']='x', version='99'}}, {namespace=%q})", ns)) },
        ['delete-lease'] = { on_error = 'warn', body = try(string.format(
          "kube.delete('leases', 'alt-lock', {namespace=%q})", ns)) },
        -- the default name is an ordinary ConfigMap when --ledger names another
        ['other-cm'] = { body = string.format(
          "require('kube').create('configmaps', {metadata={name='cozystack-version'}, data={x='y'}}, {namespace=%q})", ns) },
      },
    })
    local obj = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'alt', namespace = ns },
                  data = { version = '1' } }
    local f = h.write(os.tmpname() .. '.json', json.encode(obj))
    must(h.kubectl('create -f ' .. f))
    local res = must(run(dir, ns, '--ledger', 'alt', '--lease-duration', '60s'))
    contains(res.err, '[patch-ledger] refused: true')
    contains(res.err, '[delete-lease] refused: true')
    local cm = kjson('get configmap alt -n ' .. ns)
    assert.is_nil(cm.data['m.evil'])
    assert.are.equal('1', cm.data.version)
    local r1 = json.decode(cm.data['m.patch-ledger'])
    assert.are.equal('failed', r1.state)
    contains(r1.message, 'the ledger is written by the runner', 'message')
    assert.are.equal('failed', json.decode(cm.data['m.delete-lease']).state)
    assert.are.equal('ok', json.decode(cm.data['m.other-cm']).state)
    assert.are.equal('y', kjson('get configmap cozystack-version -n ' .. ns).data.x)
    local lease = kjson('get lease alt-lock -n ' .. ns)
    assert.are.equal('', lease.spec.holderIdentity or '')
    assert.is_nil(get_lease(ns))
  end)

  it('prints one JSON object per progress line with --log-format json', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
      scripts = { alpha = {}, beta = { on_error = 'warn', body = "error('x')" } },
    })
    make_ledger(ns, {})
    local res = must(run(dir, ns, '--log-format', 'json'))
    local got = {}
    for l in res.out:gmatch('[^\n]+') do
      local ok, j = pcall(json.decode, l)
      assert(ok and type(j) == 'table', 'not JSON: ' .. l)
      got[#got + 1] = { j.step, j.steps, j.tier, j.migration, j.outcome }
      assert.is_string(j.ts)
    end
    assert.are.same({
      { 1, 2, 'pre-apply', 'alpha', 'ok' },
      { 2, 2, 'pre-apply', 'beta', 'FAILED (warn)' },
    }, got)
  end)

  it('stores a long non-ASCII failure message as valid text (no cut UTF-8 sequence)', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'accents' } } },
      -- 2-byte characters after an even-length prefix: a cut after 1023
      -- bytes lands inside one
      scripts = { accents = { on_error = 'warn', body = "error('xy' .. string.rep('\u{e9}', 700), 0)" } },
    })
    make_ledger(ns, {})
    must(run(dir, ns))
    local _, raw = records(ns)
    local r = json.decode(raw.accents)
    assert.are.equal('failed', r.state)
    contains(r.message, 'xy\u{e9}\u{e9}', 'message')
    if has(raw.accents, '\u{fffd}') then
      pending('bug: a failure message longer than its buffer (child.c run_lua_child err[1024], ' ..
        'child_result.message[1024], record.message[1024]) is cut mid UTF-8 sequence; the ' ..
        'apiserver stores the stray byte as U+FFFD')
    end
    lacks(raw.accents, '\u{fffd}', 'record')
  end)

  it('warns when the ledger passes 80% of the 1 MiB object limit', function()
    local ns = new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'small' } } },
      scripts = { small = { body = lua_marker(ns, 'small') } },
    })
    -- an unrelated key already holding ~830 KiB: one more record crosses 80%
    make_ledger(ns, { padding = string.rep('x', 830 * 1024) })
    local res = must(run(dir, ns))
    contains(res.err, 'past 80% of the 1 MiB object limit', 'stderr')
    assert.are.equal('ok', records(ns).small.state)
    local ns2 = new_ns()
    local dir2 = fixture.tree({
      batches = { { '00001-v1.0.0', { 'small' } } },
      scripts = { small = { body = lua_marker(ns2, 'small') } },
    })
    make_ledger(ns2, {})
    lacks(must(run(dir2, ns2)).err, 'object limit', 'stderr of a small ledger')
  end)
end)
