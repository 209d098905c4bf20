-- `cozy-migrate dispatch`, the background tier's reconcile, against the real
-- local kube-apiserver: the index ConfigMap made by `cozy-migrate index`,
-- the ledger, and the Jobs the dispatcher creates. The testenv runs no Job
-- controller, so a spec plays it: it sets a Job's status (Complete, Failed)
-- through the status subresource, and runs the Job's runner itself where a
-- record is needed. Each case has a namespace of its own.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, lacks = h.contains, h.lacks
local IMAGE = 'reg.example/platform-migrate@sha256:' .. string.rep('5e', 32)

-- The release: two background slugs (warn, then abort), one revoked
-- background slug, one pre-apply slug.
local function release(ns, opts)
  opts = opts or {}
  return fixture.tree({
    batches = { { '00001-v1.0.0', { 'up-one', 'bg-first', 'bg-old', 'bg-second', 'bg-third' } } },
    scripts = {
      ['up-one'] = { body = runner.lua_marker(ns, 'up-one') },
      ['bg-first'] = { tier = 'background', on_error = opts.first_on_error or 'warn', timeout = '2m',
        body = runner.lua_gen_marker(ns, 'bg-first') },
      ['bg-old'] = { tier = 'background', on_error = 'warn', body = 'error("revoked: never runs")' },
      ['bg-second'] = { tier = 'background', on_error = 'warn', body = runner.lua_gen_marker(ns, 'bg-second') },
      ['bg-third'] = { tier = 'background', on_error = 'warn', body = runner.lua_gen_marker(ns, 'bg-third') },
    },
    revoked = { 'bg-old' },
  })
end

-- The index ConfigMap, as the chart renders it (the policy keys and a Job
-- template among its data when given).
local function put_index(dir, ns, data)
  local cm = h.must(h.cozy('index', '--dir', dir, '-o', 'configmap', '--namespace', ns, '--image', IMAGE)).out
  local f = h.write(os.tmpname() .. '.yaml', cm)
  h.must(h.kubectl('apply -f ' .. h.q(f)))
  if data then
    h.must(h.kubectl(string.format('patch configmap cozystack-migrations-index -n %s --type=merge -p %s', ns,
      h.q(json.encode({ data = data })))))
  end
end

local function dispatch(ns, ...) return h.cozy('dispatch', '--namespace', ns, ...) end

local function jobs(ns)
  local out = {}
  for _, j in ipairs(h.kubectl_json('get jobs -n ' .. ns).items) do out[j.metadata.name] = j end
  return out
end

local function names(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local function utc(offset)
  return os.date('!%Y-%m-%dT%H:%M:%SZ', os.time() + (offset or 0))
end

-- Plays the Job controller: the Job ended, failed or complete, at now+offset.
local function finish(ns, name, failed, offset)
  local t = utc(offset)
  local status
  if failed then
    status = { startTime = t, failed = 1, conditions = {
      { type = 'FailureTarget', status = 'True', lastTransitionTime = t, reason = 'BackoffLimitExceeded', message = 'failed' },
      { type = 'Failed', status = 'True', lastTransitionTime = t, reason = 'BackoffLimitExceeded', message = 'failed' } } }
  else
    status = { startTime = t, completionTime = t, succeeded = 1, conditions = {
      { type = 'SuccessCriteriaMet', status = 'True', lastTransitionTime = t, reason = 'CompletionsReached', message = 'done' },
      { type = 'Complete', status = 'True', lastTransitionTime = t, reason = 'CompletionsReached', message = 'done' } } }
  end
  h.must(h.kubectl(string.format('patch job %s -n %s --subresource=status --type=merge -p %s', name, ns,
    h.q(json.encode({ status = status })))))
end

local function record(ns, slug, r)
  h.must(h.kubectl(string.format('patch configmap cozystack-version -n %s --type=merge -p %s', ns,
    h.q(json.encode({ data = { ['m.' .. slug] = json.encode(r) } })))))
end

local function failed_record(attempts, at)
  return { state = 'failed', at = at or utc(), attempts = attempts, tier = 'background', reason = 'ScriptError',
    message = 'the widget backend is unreachable', batch = '00001-v1.0.0' }
end

local function env_of(job)
  local env = {}
  for _, e in ipairs(job.spec.template.spec.containers[1].env) do env[e.name] = e.value or e.valueFrom end
  return env
end

local function events(ns, reason)
  local out = {}
  for _, e in ipairs(runner.events(ns)) do if e.reason == reason then out[#out + 1] = e end end
  return out
end

describe('#e2e cozy-migrate dispatch', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('refuses without an index (exit 3) and does nothing before the ledger exists', function()
    local ns = runner.new_ns()
    local res = dispatch(ns)
    assert.are.equal(3, res.code)
    contains(res.err, 'no index ' .. ns .. '/cozystack-migrations-index')
    put_index(release(ns), ns)
    res = h.must(dispatch(ns))
    contains(res.out, 'there is no ledger ' .. ns .. '/cozystack-version yet')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('does nothing when nothing is pending, and writes nothing to the ledger', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns)
    local ok = { state = 'ok', at = utc(), attempts = 1, tier = 'background' }
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = ok, ['bg-second'] = ok, ['bg-third'] = ok }))
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = h.must(dispatch(ns))
    h.one_line(res.out, 'stdout')
    contains(res.out, 'dispatch: nothing to do: no background migration is pending (3 recorded')
    assert.are.same({}, names(jobs(ns)))
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
  end)

  it('creates one Job for the first pending slug in manifest order, from the index and the chart template, with an Event, never the revoked one', function()
    local ns = runner.new_ns()
    local template = {
      apiVersion = 'batch/v1', kind = 'Job',
      spec = { backoffLimit = 3, activeDeadlineSeconds = 360, ttlSecondsAfterFinished = 600,
        template = { spec = { serviceAccountName = 'cozystack-migrations-jobs', restartPolicy = 'Never',
          containers = { { name = 'migrate', image = 'overridden:v0', args = { '--tier', 'background', '--lock-timeout', '300s' },
            env = { { name = 'CLUSTER_DOMAIN', value = 'cozy.local' }, { name = 'ONLY', value = 'stale' } },
            terminationMessagePolicy = 'FallbackToLogsOnError' } } } } } }
    put_index(release(ns), ns, { ['job.json'] = json.encode(template) })
    runner.make_ledger(ns, {})
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = h.must(dispatch(ns))
    h.one_line(res.out, 'stdout')
    contains(res.out, 'created Job mig-bg-first-1 for background migration bg-first (attempt 1 of 3): no record')
    local all = jobs(ns)
    assert.are.same({ 'mig-bg-first-1' }, names(all))
    local job = all['mig-bg-first-1']
    local c = job.spec.template.spec.containers[1]
    assert.are.equal(IMAGE, c.image)
    local env = env_of(job)
    assert.are.equal('bg-first', env.ONLY)
    assert.are.equal(IMAGE, env.MIGRATIONS_IMAGE)
    assert.are.equal('cozy.local', env.CLUSTER_DOMAIN)
    assert.are.equal('cozystack-migrations-jobs', job.spec.template.spec.serviceAccountName)
    -- the template's deadline (the lock wait and a margin) plus the slug's timeout and the grace
    assert.are.equal(360 + 120 + 10, job.spec.activeDeadlineSeconds)
    assert.are.equal(600, job.spec.ttlSecondsAfterFinished)
    assert.are.equal(0, job.spec.backoffLimit, 'retries are the dispatcher\'s')
    assert.are.equal('bg-first', job.metadata.labels['platform.cozystack.io/migration'])
    assert.are.equal('0', job.metadata.annotations['platform.cozystack.io/attempts-before'])
    local ev = events(ns, 'MigrationDispatched')
    assert.are.equal(1, #ev)
    assert.are.equal('mig-bg-first-1', ev[1].involvedObject.name)
    assert.are.equal(job.metadata.uid, ev[1].involvedObject.uid)
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion, 'the dispatcher wrote the ledger')
  end)

  it('does nothing while one of its Jobs runs, and goes on in manifest order once it ended and was recorded', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    h.must(dispatch(ns))
    local res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do: Job mig-bg-first-1 is running background migration bg-first')
    assert.are.same({ 'mig-bg-first-1' }, names(jobs(ns)))
    -- status shows the tier as the dispatcher sees it
    local st = h.must(h.cozy('status', '--dir', dir, '--namespace', ns)).out
    assert.matches('bg%-first%s+running in Job mig%-bg%-first%-1 %(attempt 1 of 3%)', st)
    assert.matches('bg%-second%s+pending: attempt 1 of 3 once Job mig%-bg%-first%-1 ends', st)
    assert.matches('bg%-third%s+pending %(after bg%-second%)', st)
    -- what the Job does: the runner with the Job's ONLY records it
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-first', MIGRATIONS_IMAGE = IMAGE } }))
    finish(ns, 'mig-bg-first-1', false)
    res = h.must(dispatch(ns))
    contains(res.out, 'created Job mig-bg-second-1 for background migration bg-second')
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-second' } }))
    finish(ns, 'mig-bg-second-1', false)
    h.must(dispatch(ns))
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-third' } }))
    finish(ns, 'mig-bg-third-1', false)
    res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do: no background migration is pending (3 recorded')
    assert.are.same({ 'mig-bg-first-1', 'mig-bg-second-1', 'mig-bg-third-1' }, names(jobs(ns)))
    local recs = runner.records(ns)
    for _, s in ipairs({ 'bg-first', 'bg-second', 'bg-third' }) do assert.are.equal('ok', recs[s].state, s) end
    assert.is_nil(recs['bg-old'], 'the revoked slug was run')
  end)

  it('waits for the retry backoff after a failed attempt, skipping to the next slug of a warn one, and doubles it', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '1m' })
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(1) }))
    local res = h.must(dispatch(ns))
    contains(res.out, 'created Job mig-bg-second-1 for background migration bg-second')
    local st = runner.status(release(ns), ns)
    local first
    for _, r in ipairs(st) do if r.migration == 'bg-first' then first = r end end
    contains(first.background, 'failed 1 of 3 attempts (ScriptError), retried after 30s; next attempt after')
    -- once the backoff passed, the retry is attempt 2
    local ns2 = runner.new_ns()
    put_index(release(ns2), ns2, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '1m' })
    runner.make_ledger(ns2, fixture.ledger({ ['bg-first'] = failed_record(1, utc(-31)) }))
    res = h.must(dispatch(ns2))
    contains(res.out, 'created Job mig-bg-first-2 for background migration bg-first (attempt 2 of 3): failed 1 of 3 attempts (ScriptError), retried after 30s')
    assert.are.equal('1', jobs(ns2)['mig-bg-first-2'].metadata.annotations['platform.cozystack.io/attempts-before'])
    -- after the second failed attempt the wait doubles: 31 s is not enough, 61 s is
    local ns3 = runner.new_ns()
    put_index(release(ns3), ns3, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '5m' })
    runner.make_ledger(ns3, fixture.ledger({ ['bg-first'] = failed_record(2, utc(-31)),
      ['bg-second'] = { state = 'ok', at = utc(), attempts = 1 }, ['bg-third'] = { state = 'ok', at = utc(), attempts = 1 } }))
    res = h.must(dispatch(ns3))
    contains(res.out, 'nothing to do: no background migration is pending')
    contains(res.out, 'bg-first waits until')
    record(ns3, 'bg-first', failed_record(2, utc(-61)))
    res = h.must(dispatch(ns3))
    contains(res.out, 'created Job mig-bg-first-3 for background migration bg-first (attempt 3 of 3)')
  end)

  it('lets a failed on-error=abort slug waiting for its backoff hold the slugs after it', function()
    local ns = runner.new_ns()
    put_index(release(ns, { first_on_error = 'abort' }), ns)
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(1) }))
    local res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do: no background migration is pending')
    assert.are.same({}, names(jobs(ns)))
    local st = runner.status(release(ns, { first_on_error = 'abort' }), ns)
    for _, r in ipairs(st) do
      if r.migration == 'bg-second' then contains(r.background, 'held: bg-first before it waits (on-error=abort)') end
    end
  end)

  it('stops at the retry bound: no more Jobs, one MigrationAttemptsExhausted Event, and status says so', function()
    local ns = runner.new_ns()
    local ok = { state = 'ok', at = utc(), attempts = 1 }
    put_index(release(ns), ns, { ['max-attempts'] = '3', ['retry-backoff'] = '1s' })
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(3, utc(-3600)), ['bg-second'] = ok, ['bg-third'] = ok }))
    local res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do: no background migration is pending (2 recorded, 0 waiting for a retry, 1 past their 3 attempts')
    contains(res.err, 'background migration bg-first failed 3 of 3 attempts')
    h.must(dispatch(ns))
    assert.are.same({}, names(jobs(ns)))
    local ev = events(ns, 'MigrationAttemptsExhausted')
    assert.are.equal(1, #ev, 'said once')
    assert.are.equal('cozystack-version', ev[1].involvedObject.name)
    contains(ev[1].message, 'the widget backend is unreachable')
    local st = h.must(h.cozy('status', '--dir', release(ns), '--namespace', ns))
    contains(st.out, "failed 3 of 3 attempts (ScriptError): not retried; 'run --only bg-first' or 'skip bg-first' settles it")
    -- a higher bound in the index lets it go on
    put_index(release(ns), ns, { ['max-attempts'] = '4', ['retry-backoff'] = '1s' })
    res = h.must(dispatch(ns))
    contains(res.out, 'created Job mig-bg-first-4 for background migration bg-first (attempt 4 of 4)')
  end)

  it('retries a Job that failed without a record after the backoff, and one that ended without a record (yielded) at once', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns, { ['retry-backoff'] = '30s' })
    local ok = { state = 'ok', at = utc(), attempts = 1 }
    runner.make_ledger(ns, fixture.ledger({ ['bg-second'] = ok, ['bg-third'] = ok }))
    h.must(dispatch(ns))
    finish(ns, 'mig-bg-first-1', true)             -- failed, nothing recorded (a crash, an image pull)
    local res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do')
    contains(res.out, 'bg-first waits until')
    local st = h.must(h.cozy('status', '--dir', release(ns), '--namespace', ns))
    contains(st.out, 'its Job mig-bg-first-1 failed without recording it (1 so), retried after 30s')
    -- once the backoff passed (the Job ended 31 s ago), the same attempt again, in a Job of its own name
    local ns2 = runner.new_ns()
    put_index(release(ns2), ns2, { ['retry-backoff'] = '30s' })
    runner.make_ledger(ns2, fixture.ledger({ ['bg-second'] = ok, ['bg-third'] = ok }))
    h.must(dispatch(ns2))
    finish(ns2, 'mig-bg-first-1', true, -31)
    res = h.must(dispatch(ns2))
    contains(res.out, 'created Job mig-bg-first-1-1 for background migration bg-first (attempt 1 of 3): its Job mig-bg-first-1 failed without recording it')
    -- a Job that completed without a record handed the lock to the upgrade: the next dispatch goes on at once
    finish(ns2, 'mig-bg-first-1-1', false)
    res = h.must(dispatch(ns2))
    contains(res.out, 'created Job mig-bg-first-1-2 for background migration bg-first (attempt 1 of 3)')
    contains(res.out, 'it yielded the lock to the upgrade')
  end)

  it('leaves the tier alone while the upgrade holds the runner lock', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns)
    runner.make_ledger(ns, {})
    local now = os.date('!%Y-%m-%dT%H:%M:%S.000000Z')
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns, annotations = { ['platform.cozystack.io/holder-tier'] = 'pre-apply' } },
      spec = { holderIdentity = 'hook-pod/1/1/ab', leaseDurationSeconds = 90, renewTime = now } })
    local res = h.must(dispatch(ns))
    contains(res.out, 'nothing to do: the upgrade holds the runner lock ' .. ns .. '/cozystack-version-lock (pre-apply runner hook-pod/1/1/ab); bg-first goes next time')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('refuses a ledger it cannot trust (exit 7) and dispatches nothing', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns)
    runner.make_ledger(ns, { ['m.bg-second'] = 'not json' })
    local res = dispatch(ns)
    assert.are.equal(7, res.code)
    contains(res.err, 'm.bg-second cannot be read')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('makes one Job when two dispatches run at once', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns)
    runner.make_ledger(ns, {})
    local cmd = string.format('%s dispatch --namespace %s', h.q(h.bin), ns)
    local out = runner.together(cmd, cmd)
    assert.are.equal('0\n', out.r1, out.e1)
    assert.are.equal('0\n', out.r2, out.e2)
    assert.are.same({ 'mig-bg-first-1' }, names(jobs(ns)))
    contains(out.o1 .. out.o2, 'created Job mig-bg-first-1')
  end)

  it('says what it would create with --dry-run, creating nothing', function()
    local ns = runner.new_ns()
    put_index(release(ns), ns)
    runner.make_ledger(ns, {})
    local res = h.must(dispatch(ns, '--dry-run'))
    contains(res.out, 'would create Job mig-bg-first-1 for background migration bg-first')
    assert.are.same({}, names(jobs(ns)))
    lacks(res.out, 'created Job')
  end)
end)
