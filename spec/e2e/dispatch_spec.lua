-- `cozy-migrate dispatch`, the background tier's reconcile, against the real
-- local kube-apiserver: the index ConfigMap made by `cozy-migrate index`,
-- the ledger, and the Jobs the dispatcher creates, from its own tree
-- (--dir) and image (MIGRATIONS_IMAGE) and the release's Job template (env
-- MIGRATIONS_JOB_TEMPLATE). The testenv runs no Job controller, so a spec
-- plays it: it sets a Job's status (Complete, Failed, failed by its
-- podFailurePolicy) through the status subresource, and runs the Job's
-- runner itself where a record is needed. Each case has a namespace of its
-- own.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, lacks = h.contains, h.lacks
local IMAGE = 'reg.example/platform-migrate@sha256:' .. string.rep('5e', 32)
local LEDGER = runner.LEDGER

-- The name of this ledger's Job for "<slug>-<attempt>[-n]".
local function J(rest) return 'mig-' .. LEDGER .. '-' .. rest end

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

-- The index ConfigMap of the release in dir, as the chart renders it: the
-- file (naming no image: the chart's values name it) and the image key
-- (IMAGE), the policy keys given in data among its data.
local function put_index(dir, ns, data)
  local cm = h.must(h.cozy('index', '--dir', dir, '-o', 'configmap', '--namespace', ns)).out
  local f = h.write(os.tmpname() .. '.yaml', cm)
  h.must(h.kubectl('apply -f ' .. h.q(f)))
  local patch = { image = IMAGE }
  for k, v in pairs(data or {}) do patch[k] = v end
  h.must(h.kubectl(string.format('patch configmap cozystack-migrations-index -n %s --type=merge -p %s', ns,
    h.q(json.encode({ data = patch })))))
end

-- dispatch(dir, ns, flags... [, {env=}]): the dispatcher of the release in
-- dir, running as IMAGE.
local function dispatch(dir, ns, ...)
  local args = { ... }
  local opts = type(args[#args]) == 'table' and table.remove(args) or {}
  local env = { MIGRATIONS_IMAGE = IMAGE }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  args[#args + 1] = { env = env }
  return h.cozy('dispatch', '--namespace', ns, '--dir', dir, table.unpack(args))
end

local function jobs(ns)
  local out = {}
  for _, j in ipairs(h.kubectl_json('get jobs -n ' .. ns).items) do out[j.metadata.name] = j end
  return out
end

local names = h.keys

local function utc(offset)
  return os.date('!%Y-%m-%dT%H:%M:%SZ', os.time() + (offset or 0))
end

-- Plays the Job controller: the Job ended, failed or complete, at now+offset;
-- failed by its podFailurePolicy with exit code `final`.
local function finish(ns, name, failed, offset, final)
  local t = utc(offset)
  local status
  if final then
    local m = 'Container migrate for pod ' .. ns .. '/' .. name .. '-x failed with exit code ' .. final ..
      ' matching FailJob rule at index 0'
    status = { startTime = t, failed = 1, conditions = {
      { type = 'FailureTarget', status = 'True', lastTransitionTime = t, reason = 'PodFailurePolicy', message = m },
      { type = 'Failed', status = 'True', lastTransitionTime = t, reason = 'PodFailurePolicy', message = m } } }
  elseif failed then
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

-- A Job someone else made, from the spec's own hand: {name=, labels=,
-- owner=, suspend=}.
local function foreign_job(ns, o)
  local job = { apiVersion = 'batch/v1', kind = 'Job',
    metadata = { name = o.name, namespace = ns, labels = o.labels, ownerReferences = o.owner },
    spec = { suspend = o.suspend, backoffLimit = 0, template = { spec = { restartPolicy = 'Never',
      containers = { { name = 'x', image = 'busybox:1.36', command = { 'true' } } } } } } }
  h.kcreate(job)
end

describe('#e2e cozy-migrate dispatch', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('refuses without an index (exit 3) and does nothing before the ledger exists', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    local res = dispatch(dir, ns)
    assert.are.equal(3, res.code)
    contains(res.err, 'no index ' .. ns .. '/cozystack-migrations-index')
    put_index(dir, ns)
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'there is no ledger ' .. ns .. '/cozystack-version yet')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('refuses (exit 12) when the ledger was deleted where the Lease records it had one, as run does', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    -- a run marks the Lease with the ledger's uid
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { MIGRATIONS_IMAGE = IMAGE } }))
    h.must(h.kubectl('delete configmap cozystack-version -n ' .. ns))
    local ran = runner.run(dir, ns, '--tier', 'background')
    assert.are.equal(12, ran.code, ran.err)
    local res = dispatch(dir, ns)
    assert.are.equal(12, res.code, res.out .. res.err)
    contains(res.err, 'the ledger ' .. ns .. '/cozystack-version is absent, but the Lease')
    lacks(res.out, 'no ledger')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('needs the image it runs as (MIGRATIONS_IMAGE): without it, exit 2 and no Job', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local res = h.cozy('dispatch', '--namespace', ns, '--dir', dir)
    assert.are.equal(2, res.code, res.out .. res.err)
    contains(res.err, 'MIGRATIONS_IMAGE is not set')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('refuses an index naming another image than its own: one line, an Event, no Job (exit 9)', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    -- someone allowed to patch the index alone points it at another registry
    h.must(h.kubectl(string.format('patch configmap cozystack-migrations-index -n %s --type=merge -p %s', ns,
      h.q(json.encode({ data = { image = 'evil.example/migrate:v1' } })))))
    local res = dispatch(dir, ns)
    assert.are.equal(9, res.code, res.out .. res.err)
    h.one_line(res.err, 'stderr')
    contains(res.err, "the index names the image 'evil.example/migrate:v1', not the '" .. IMAGE .. "' this check runs for")
    contains(res.err, 'dispatch: nothing dispatched: the index ' .. ns .. '/cozystack-migrations-index differs')
    assert.are.same({}, names(jobs(ns)))
    local ev = events(ns, 'MigrationsIndexMismatch')
    assert.are.equal(1, #ev)
    assert.are.equal('cozystack-migrations-index', ev[1].involvedObject.name)
    contains(ev[1].message, 'evil.example/migrate:v1')
    -- said once for this version of the index
    assert.are.equal(9, dispatch(dir, ns).code)
    assert.are.equal(1, #events(ns, 'MigrationsIndexMismatch'))
    -- an index file naming one image and the key another is no index at all
    local cm = h.kubectl_json('get configmap cozystack-migrations-index -n ' .. ns)
    local ix = json.decode(cm.data['index.json'])
    ix.image = IMAGE
    cm.data['index.json'] = json.encode(ix)
    h.kapply(cm)
    res = dispatch(dir, ns)
    assert.are.equal(3, res.code, res.out .. res.err)
    contains(res.err, "key image names the image 'evil.example/migrate:v1', and its index.json")
    assert.are.same({}, names(jobs(ns)))
  end)

  it('never takes a Job spec from the index: a job.json in it is refused (exit 3), and no Job is made', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local evil = { apiVersion = 'batch/v1', kind = 'Job', spec = { template = { spec = { hostPID = true,
      serviceAccountName = 'cozystack-migrations-jobs', restartPolicy = 'Never',
      containers = { { name = 'migrate', image = 'evil.example/x:v1', securityContext = { privileged = true } } },
      volumes = { { name = 'root', hostPath = { path = '/' } } } } } } }
    h.must(h.kubectl(string.format('patch configmap cozystack-migrations-index -n %s --type=merge -p %s', ns,
      h.q(json.encode({ data = { ['job.json'] = json.encode(evil) } })))))
    local res = dispatch(dir, ns)
    assert.are.equal(3, res.code, res.out .. res.err)
    contains(res.err, "the ConfigMap's data: unknown key 'job.json'")
    assert.are.same({}, names(jobs(ns)))
  end)

  it('compares the live index whole with its own tree: a slug the image does not ship, another timeout, another order: exit 9 naming each, no Job', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local cm = h.kubectl_json('get configmap cozystack-migrations-index -n ' .. ns)
    local ix = json.decode(cm.data['index.json'])
    ix.background[1].timeout_s = 7200
    ix.background[2], ix.background[3] = ix.background[3], ix.background[2]
    table.insert(ix.background, { slug = 'bg-not-shipped', timeout_s = 60, on_error = 'warn', requires = json.array({}) })
    cm.data['index.json'] = json.encode(ix)
    h.kapply(cm)
    local res = dispatch(dir, ns)
    assert.are.equal(9, res.code, res.out .. res.err)
    contains(res.err, "background slug 'bg-not-shipped' is in the index but the tree (" .. dir .. ') does not ship it')
    contains(res.err, "background slug 'bg-first': timeout 7200s in the index, 120s in the tree")
    contains(res.err, 'the order differs')
    assert.are.same({}, names(jobs(ns)))
    local ev = events(ns, 'MigrationsIndexMismatch')
    assert.are.equal(1, #ev)
    contains(ev[1].message, 'bg-not-shipped')
    contains(ev[1].message, 'bg-first')
  end)

  it('reads the live index whole: a NUL byte and a second object in index.json is refused, naming the byte offset (exit 3)', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local cm = h.kubectl_json('get configmap cozystack-migrations-index -n ' .. ns)
    local text = cm.data['index.json']
    local extra = '{"version": 2, "image": null, "pre-apply": [], "background": [], "revoked": []}'
    -- a JSON patch keeps the \u0000 escape as it is sent
    local body = '{"data": {"index.json": ' .. json.encode(text):gsub('"$', '\\u0000' .. json.encode(extra):sub(2)) .. '}}'
    h.must(h.kubectl(string.format('patch configmap cozystack-migrations-index -n %s --type=merge -p %s', ns, h.q(body))))
    local res = dispatch(dir, ns)
    assert.are.equal(3, res.code, res.out .. res.err)
    contains(res.err, 'key index.json: a NUL byte at byte offset ' .. #text)
    -- a second object without the NUL
    cm = h.kubectl_json('get configmap cozystack-migrations-index -n ' .. ns)
    cm.data['index.json'] = text .. extra
    h.kapply(cm)
    res = dispatch(dir, ns)
    assert.are.equal(3, res.code, res.out .. res.err)
    contains(res.err, 'key index.json: a second object at byte offset ' .. #text)
    assert.are.same({}, names(jobs(ns)))
  end)

  it('does nothing when nothing is pending, and writes nothing to the ledger', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    local ok = { state = 'ok', at = utc(), attempts = 1, tier = 'background' }
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = ok, ['bg-second'] = ok, ['bg-third'] = ok }))
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = h.must(dispatch(dir, ns))
    h.one_line(res.out, 'stdout')
    contains(res.out, 'dispatch: nothing to do: no background migration is pending (3 recorded')
    assert.are.same({}, names(jobs(ns)))
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
  end)

  it('creates one Job for the first pending slug in manifest order, from its own image and the release\'s template, owned by the ledger, with an Event, never the revoked one', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    local template = {
      apiVersion = 'batch/v1', kind = 'Job',
      spec = { backoffLimit = 3, activeDeadlineSeconds = 360, ttlSecondsAfterFinished = 600,
        template = { spec = { serviceAccountName = 'cozystack-migrations-jobs', restartPolicy = 'Never',
          containers = { { name = 'migrate', image = 'overridden:v0', args = { '--tier', 'background', '--lock-timeout', '300s' },
            env = { { name = 'CLUSTER_DOMAIN', value = 'cozy.local' }, { name = 'ONLY', value = 'stale' },
              { name = 'MIGRATIONS_IMAGE', value = 'overridden:v0' } },
            terminationMessagePolicy = 'FallbackToLogsOnError' } } } } } }
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local ledger = runner.get_ledger(ns)
    local res = h.must(dispatch(dir, ns, { env = { MIGRATIONS_JOB_TEMPLATE = json.encode(template) } }))
    h.one_line(res.out, 'stdout')
    contains(res.out, 'created Job ' .. J('bg-first-1') .. ' for background migration bg-first (attempt 1 of 3): no record')
    local all = jobs(ns)
    assert.are.same({ J('bg-first-1') }, names(all))
    local job = all[J('bg-first-1')]
    local pod = job.spec.template.spec
    local c = pod.containers[1]
    assert.are.equal(IMAGE, c.image)
    assert.is_nil(c.command, 'the image\'s entrypoint')
    local env = env_of(job)
    assert.are.equal('bg-first', env.ONLY)
    assert.are.equal(IMAGE, env.MIGRATIONS_IMAGE)
    assert.are.equal('cozy.local', env.CLUSTER_DOMAIN)
    assert.are.equal('cozystack-migrations-jobs', pod.serviceAccountName)
    -- restricted Pod Security, whatever the template said
    assert.is_true(pod.securityContext.runAsNonRoot)
    assert.are.equal('RuntimeDefault', pod.securityContext.seccompProfile.type)
    assert.is_false(c.securityContext.allowPrivilegeEscalation)
    assert.are.same({ 'ALL' }, c.securityContext.capabilities.drop)
    -- the template's deadline (the lock wait and a margin) plus the slug's timeout and the grace
    assert.are.equal(360 + 120 + 10, job.spec.activeDeadlineSeconds)
    assert.are.equal(600, job.spec.ttlSecondsAfterFinished)
    assert.are.equal(0, job.spec.backoffLimit, 'retries are the dispatcher\'s')
    -- an exit no retry can change fails it at once
    local rule = job.spec.podFailurePolicy.rules[1]
    assert.are.equal('FailJob', rule.action)
    assert.are.same({ 2, 3, 4, 7, 9, 11, 12, 13, 14 }, rule.onExitCodes.values)
    -- owned by the ledger: an ownerReference with its uid, the uid in a label
    assert.are.same({ { apiVersion = 'v1', kind = 'ConfigMap', name = LEDGER, uid = ledger.metadata.uid,
      controller = true, blockOwnerDeletion = false } }, job.metadata.ownerReferences)
    assert.are.equal(ledger.metadata.uid, job.metadata.labels['platform.cozystack.io/ledger-uid'])
    assert.are.equal('bg-first', job.metadata.labels['platform.cozystack.io/migration'])
    assert.are.equal('0', job.metadata.annotations['platform.cozystack.io/attempts-before'])
    local ev = events(ns, 'MigrationDispatched')
    assert.are.equal(1, #ev)
    assert.are.equal(J('bg-first-1'), ev[1].involvedObject.name)
    assert.are.equal(job.metadata.uid, ev[1].involvedObject.uid)
    assert.are.equal(ledger.metadata.resourceVersion, runner.get_ledger(ns).metadata.resourceVersion,
      'the dispatcher wrote the ledger')
  end)

  it('refuses a template that would run anything but the engine: a host namespace, a hostPath, a command, a probe (exit 3, no Job)', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local function tmpl(mut)
      local t = { apiVersion = 'batch/v1', kind = 'Job', spec = { template = { spec = {
        serviceAccountName = 'cozystack-migrations-jobs', restartPolicy = 'Never',
        containers = { { name = 'migrate', image = 'x:v1', args = { '--tier', 'background' } } } } } } }
      mut(t.spec.template.spec, t.spec.template.spec.containers[1])
      return json.encode(t)
    end
    for why, mut in pairs({
      ['spec.template.spec.hostPID'] = function(p) p.hostPID = true end,
      ["volume 'root': only emptyDir volumes"] = function(p) p.volumes = { { name = 'root', hostPath = { path = '/' } } } end,
      ["the container's command"] = function(_, c) c.command = { '/bin/sh', '-c', 'id' } end,
      ["the container's livenessProbe"] = function(_, c) c.livenessProbe = { exec = { command = { 'sh' } } } end,
      ["'--dir' is not an argument"] = function(_, c) c.args = { '--dir', '/tmp' } end,
      ['spec.template.spec.initContainers'] = function(p) p.initContainers = { { name = 'i', image = 'x:v1' } } end,
      ["env 'SKIP' is not for a background Job"] = function(_, c) c.env = { { name = 'SKIP', value = 'bg-first' } } end,
      ["env PASS_ENV names 'HOME', which the template's env does not give a value"] = function(_, c)
        c.env = { { name = 'PASS_ENV', value = 'HOME' } } end,
      ["env PASS_ENV names 'FROM_NODE', which the template's env does not give a value"] = function(_, c)
        c.env = { { name = 'PASS_ENV', value = 'A_HATCH,FROM_NODE' }, { name = 'A_HATCH', value = '1' },
          { name = 'FROM_NODE', valueFrom = { fieldRef = { fieldPath = 'spec.nodeName' } } } } end,
    }) do
      local res = dispatch(dir, ns, { env = { MIGRATIONS_JOB_TEMPLATE = tmpl(mut) } })
      assert.are.equal(3, res.code, why .. ': ' .. res.out .. res.err)
      contains(res.err, why)
    end
    assert.are.same({}, names(jobs(ns)))
  end)

  it('passes the chart\'s values to shell migrations as the hook does: a PASS_ENV naming literal values of the template\'s env is kept in the Job', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local env = { { name = 'PASS_ENV', value = 'CLUSTER_DOMAIN,ETCD_ADOPT_SKIP_BACKUP' },
      { name = 'CLUSTER_DOMAIN', value = 'cozy.local' }, { name = 'ETCD_ADOPT_SKIP_BACKUP', value = '1' } }
    local t = { apiVersion = 'batch/v1', kind = 'Job', spec = { template = { spec = {
      serviceAccountName = 'cozystack-migrations-jobs', containers = { { name = 'migrate', image = 'x:v1', env = env } } } } } }
    local res = dispatch(dir, ns, { env = { MIGRATIONS_JOB_TEMPLATE = json.encode(t) } })
    assert.are.equal(0, res.code, res.out .. res.err)
    local got = {}
    for _, e in ipairs(jobs(ns)[J('bg-first-1')].spec.template.spec.containers[1].env) do got[e.name] = e.value end
    assert.are.equal('CLUSTER_DOMAIN,ETCD_ADOPT_SKIP_BACKUP', got.PASS_ENV)
    assert.are.equal('1', got.ETCD_ADOPT_SKIP_BACKUP)
    assert.are.equal('cozy.local', got.CLUSTER_DOMAIN)
  end)

  it('refuses a template whose pods Pod Security "restricted" would refuse, in one line naming the field (exit 3, no Job)', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local P, C = 'spec.template.spec.', 'spec.template.spec.containers[0].securityContext.'
    for field, mut in pairs({
      [P .. 'securityContext.runAsUser: 0'] = function(p) p.securityContext = { runAsUser = 0 } end,
      [P .. 'securityContext.runAsNonRoot: false'] = function(p) p.securityContext = { runAsNonRoot = false } end,
      [P .. 'securityContext.seccompProfile.type: Unconfined'] = function(p)
        p.securityContext = { seccompProfile = { type = 'Unconfined' } } end,
      [P .. 'securityContext.sysctls: kernel.msgmax'] = function(p)
        p.securityContext = { sysctls = { { name = 'kernel.msgmax', value = '65536' } } } end,
      [C .. 'runAsUser: 0'] = function(_, c) c.securityContext = { runAsUser = 0 } end,
      [C .. 'runAsNonRoot: false'] = function(_, c) c.securityContext = { runAsNonRoot = false } end,
      [C .. 'seccompProfile.type: Unconfined'] = function(_, c) c.securityContext = { seccompProfile = { type = 'Unconfined' } } end,
      [C .. 'allowPrivilegeEscalation: true'] = function(_, c) c.securityContext = { allowPrivilegeEscalation = true } end,
      [C .. 'procMount: Unmasked'] = function(_, c) c.securityContext = { procMount = 'Unmasked' } end,
      [C .. 'appArmorProfile.type: Unconfined'] = function(_, c) c.securityContext = { appArmorProfile = { type = 'Unconfined' } } end,
      [C .. 'seLinuxOptions.type: spc_t'] = function(_, c) c.securityContext = { seLinuxOptions = { type = 'spc_t' } } end,
      ['spec.template.spec.containers[0].ports: hostPort 8080'] = function(_, c)
        c.ports = { { containerPort = 8080, hostPort = 8080 } } end,
    }) do
      local t = { apiVersion = 'batch/v1', kind = 'Job', spec = { template = { spec = {
        serviceAccountName = 'cozystack-migrations-jobs', restartPolicy = 'Never',
        containers = { { name = 'migrate', image = 'x:v1', args = { '--tier', 'background' } } } } } } }
      mut(t.spec.template.spec, t.spec.template.spec.containers[1])
      local res = dispatch(dir, ns, { env = { MIGRATIONS_JOB_TEMPLATE = json.encode(t) } })
      assert.are.equal(3, res.code, field .. ': ' .. res.out .. res.err)
      contains(res.err, field)
      contains(res.err, 'Pod Security "restricted" forbids it')
      assert.is_nil(res.err:gsub('\n$', ''):find('\n'), 'one line: ' .. res.err)
    end
    assert.are.same({}, names(jobs(ns)))
  end)

  it('makes Jobs whose pods Pod Security "restricted" admits, by the apiserver\'s own admission', function()
    local ns = runner.new_ns()
    h.must(h.kubectl('label namespace ' .. ns .. ' pod-security.kubernetes.io/enforce=restricted'))
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    -- a template that says nothing of Pod Security: the dispatcher adds it
    local bare = { apiVersion = 'batch/v1', kind = 'Job', spec = { template = { spec = {
      serviceAccountName = 'cozystack-migrations-jobs', containers = { { name = 'migrate', image = 'x:v1' } } } } } }
    h.must(dispatch(dir, ns, { env = { MIGRATIONS_JOB_TEMPLATE = json.encode(bare) } }))
    local job = jobs(ns)[J('bg-first-1')]
    -- Pod Security enforces on pods: a Pod of the Job's template, created for real
    local pod = { apiVersion = 'v1', kind = 'Pod', metadata = { name = 'from-template', namespace = ns },
      spec = job.spec.template.spec }
    local res = h.kubectl('create -f ' .. h.q(h.write(os.tmpname() .. '.json', json.encode(pod))))
    assert.are.equal(0, res.code, res.err)
    -- and the check is live: the same pod without the seccomp profile is refused
    pod.metadata.name = 'without-seccomp'
    pod.spec.securityContext.seccompProfile = nil
    res = h.kubectl('create -f ' .. h.q(h.write(os.tmpname() .. '.json', json.encode(pod))))
    assert.are_not.equal(0, res.code)
    contains(res.err, 'violates PodSecurity "restricted:latest"')
    contains(res.err, 'seccompProfile')
  end)

  it('does nothing while one of its Jobs runs, and goes on in manifest order once it ended and was recorded', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    h.must(dispatch(dir, ns))
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: Job ' .. J('bg-first-1') .. ' is running background migration bg-first')
    assert.are.same({ J('bg-first-1') }, names(jobs(ns)))
    -- status shows the tier as the dispatcher sees it
    local st = h.must(h.cozy('status', '--dir', dir, '--namespace', ns)).out
    contains(st, 'running in Job ' .. J('bg-first-1') .. ' (attempt 1 of 3)')
    contains(st, 'pending: attempt 1 of 3 once Job ' .. J('bg-first-1') .. ' ends')
    assert.matches('bg%-third%s+pending %(after bg%-second%)', st)
    -- what the Job does: the runner with the Job's ONLY records it
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-first', MIGRATIONS_IMAGE = IMAGE } }))
    finish(ns, J('bg-first-1'), false)
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-second-1') .. ' for background migration bg-second')
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-second' } }))
    finish(ns, J('bg-second-1'), false)
    h.must(dispatch(dir, ns))
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-third' } }))
    finish(ns, J('bg-third-1'), false)
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: no background migration is pending (3 recorded')
    assert.are.same({ J('bg-first-1'), J('bg-second-1'), J('bg-third-1') }, names(jobs(ns)))
    local recs = runner.records(ns)
    for _, s in ipairs({ 'bg-first', 'bg-second', 'bg-third' }) do assert.are.equal('ok', recs[s].state, s) end
    assert.is_nil(recs['bg-old'], 'the revoked slug was run')
  end)

  it('is not stalled by a Job it did not make: one of its name, one with its labels, a suspended one; each reported once', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local uid = runner.get_ledger(ns).metadata.uid
    -- a foreign Job under the name it would use
    foreign_job(ns, { name = J('bg-first-1') })
    -- a suspended one carrying all its marks, the ownerReference included
    foreign_job(ns, { name = 'lookalike', suspend = true,
      labels = { ['platform.cozystack.io/dispatched-by'] = 'cozy-migrate', ['platform.cozystack.io/migration'] = 'bg-second',
        ['platform.cozystack.io/ledger-uid'] = uid },
      owner = { { apiVersion = 'v1', kind = 'ConfigMap', name = LEDGER, uid = uid, controller = true } } })
    -- one with its labels and no ownerReference
    foreign_job(ns, { name = 'labelled', labels = { ['platform.cozystack.io/dispatched-by'] = 'cozy-migrate',
      ['platform.cozystack.io/migration'] = 'bg-first', ['platform.cozystack.io/ledger-uid'] = uid } })
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-first-1-x1') .. ' for background migration bg-first (attempt 1 of 3)')
    contains(res.err, 'Job lookalike carries the background dispatcher\'s labels')
    contains(res.err, 'it is suspended')
    contains(res.err, 'Job labelled carries')
    contains(res.err, 'no ownerReference to the ledger')
    contains(res.err, 'Job ' .. J('bg-first-1') .. ' carries')
    local ev = events(ns, 'MigrationJobNotOurs')
    assert.are.equal(3, #ev)
    -- the next dispatch counts its own Job, and says nothing again
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: Job ' .. J('bg-first-1-x1') .. ' is running background migration bg-first')
    lacks(res.err, 'carries the background dispatcher')
    assert.are.equal(3, #events(ns, 'MigrationJobNotOurs'))
  end)

  it('keeps the Jobs of two ledgers in one namespace apart: names carry the ledger, neither counts the other\'s', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    runner.make_ledger(ns, {}, 'other-ledger')
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-first-1'))
    res = h.must(dispatch(dir, ns, '--ledger', 'other-ledger'))
    contains(res.out, 'created Job mig-other-ledger-bg-first-1 for background migration bg-first')
    assert.are.same({ J('bg-first-1'), 'mig-other-ledger-bg-first-1' }, names(jobs(ns)))
    res = h.must(dispatch(dir, ns, '--ledger', 'other-ledger'))
    contains(res.out, 'nothing to do: Job mig-other-ledger-bg-first-1 is running')
    lacks(res.err, 'carries the background dispatcher')
    assert.are.equal(0, #events(ns, 'MigrationJobNotOurs'))
  end)

  it('counts a slug whose Job failed on an exit no retry changes as exhausted at once: no endless re-dispatch', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns, { ['retry-backoff'] = '1s' })
    runner.make_ledger(ns, {})
    h.must(dispatch(dir, ns))
    -- the runner in the Job exited 13 (the ledger full): its podFailurePolicy failed the Job
    finish(ns, J('bg-first-1'), true, -60, 13)
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-second-1') .. ' for background migration bg-second')
    contains(res.err, 'background migration bg-first: its Job ' .. J('bg-first-1') .. ' failed on an exit no retry changes')
    contains(res.err, 'exit code 13')
    finish(ns, J('bg-second-1'), true, -60, 2)
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-third-1'))
    finish(ns, J('bg-third-1'), false)
    h.must(runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-third' } }))
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: no background migration is pending (1 recorded, 0 waiting for a retry, 2 past their 3 attempts')
    assert.are.same({ J('bg-first-1'), J('bg-second-1'), J('bg-third-1') }, names(jobs(ns)))
    -- one Event each, said once
    h.must(dispatch(dir, ns))
    assert.are.equal(2, #events(ns, 'MigrationAttemptsExhausted'))
    local st = h.must(h.cozy('status', '--dir', dir, '--namespace', ns)).out
    contains(st, 'its Job ' .. J('bg-first-1') .. ' failed on an exit no retry changes')
    -- once a person deleted that Job, the next dispatch tries again
    h.must(h.kubectl('delete job ' .. J('bg-first-1') .. ' -n ' .. ns))
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-first-1') .. ' for background migration bg-first (attempt 1 of 3)')
  end)

  it('waits for the retry backoff after a failed attempt, skipping to the next slug of a warn one, and doubles it', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '1m' })
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(1) }))
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-second-1') .. ' for background migration bg-second')
    local st = runner.status(dir, ns)
    local first
    for _, r in ipairs(st) do if r.migration == 'bg-first' then first = r end end
    contains(first.background, 'failed 1 of 3 attempts (ScriptError), retried after 30s; next attempt after')
    -- once the backoff passed, the retry is attempt 2
    local ns2 = runner.new_ns()
    local dir2 = release(ns2)
    put_index(dir2, ns2, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '1m' })
    runner.make_ledger(ns2, fixture.ledger({ ['bg-first'] = failed_record(1, utc(-31)) }))
    res = h.must(dispatch(dir2, ns2))
    contains(res.out, 'created Job ' .. J('bg-first-2') .. ' for background migration bg-first (attempt 2 of 3): failed 1 of 3 attempts (ScriptError), retried after 30s')
    assert.are.equal('1', jobs(ns2)[J('bg-first-2')].metadata.annotations['platform.cozystack.io/attempts-before'])
    -- after the second failed attempt the wait doubles: 31 s is not enough, 61 s is
    local ns3 = runner.new_ns()
    local dir3 = release(ns3)
    put_index(dir3, ns3, { ['retry-backoff'] = '30s', ['retry-backoff-max'] = '5m' })
    runner.make_ledger(ns3, fixture.ledger({ ['bg-first'] = failed_record(2, utc(-31)),
      ['bg-second'] = { state = 'ok', at = utc(), attempts = 1 }, ['bg-third'] = { state = 'ok', at = utc(), attempts = 1 } }))
    res = h.must(dispatch(dir3, ns3))
    contains(res.out, 'nothing to do: no background migration is pending')
    contains(res.out, 'bg-first waits until')
    record(ns3, 'bg-first', failed_record(2, utc(-61)))
    res = h.must(dispatch(dir3, ns3))
    contains(res.out, 'created Job ' .. J('bg-first-3') .. ' for background migration bg-first (attempt 3 of 3)')
  end)

  it('lets a failed on-error=abort slug waiting for its backoff hold the slugs after it', function()
    local ns = runner.new_ns()
    local dir = release(ns, { first_on_error = 'abort' })
    put_index(dir, ns)
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(1) }))
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: no background migration is pending')
    assert.are.same({}, names(jobs(ns)))
    local st = runner.status(dir, ns)
    for _, r in ipairs(st) do
      if r.migration == 'bg-second' then contains(r.background, 'held: bg-first before it waits (on-error=abort)') end
    end
  end)

  it('stops at the retry bound: no more Jobs, one MigrationAttemptsExhausted Event, and status says so', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    local ok = { state = 'ok', at = utc(), attempts = 1 }
    put_index(dir, ns, { ['max-attempts'] = '3', ['retry-backoff'] = '1s' })
    runner.make_ledger(ns, fixture.ledger({ ['bg-first'] = failed_record(3, utc(-3600)), ['bg-second'] = ok, ['bg-third'] = ok }))
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: no background migration is pending (2 recorded, 0 waiting for a retry, 1 past their 3 attempts')
    contains(res.err, 'background migration bg-first failed 3 of 3 attempts')
    h.must(dispatch(dir, ns))
    assert.are.same({}, names(jobs(ns)))
    local ev = events(ns, 'MigrationAttemptsExhausted')
    assert.are.equal(1, #ev, 'said once')
    assert.are.equal('cozystack-version', ev[1].involvedObject.name)
    contains(ev[1].message, 'the widget backend is unreachable')
    local st = h.must(h.cozy('status', '--dir', dir, '--namespace', ns))
    contains(st.out, "failed 3 of 3 attempts (ScriptError): not retried; 'run --only bg-first' or 'skip bg-first' settles it")
    -- a higher bound in the index lets it go on
    put_index(dir, ns, { ['max-attempts'] = '4', ['retry-backoff'] = '1s' })
    res = h.must(dispatch(dir, ns))
    contains(res.out, 'created Job ' .. J('bg-first-4') .. ' for background migration bg-first (attempt 4 of 4)')
  end)

  it('retries a Job that failed without a record after the backoff, and one that ended without a record (yielded) at once', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns, { ['retry-backoff'] = '30s' })
    local ok = { state = 'ok', at = utc(), attempts = 1 }
    runner.make_ledger(ns, fixture.ledger({ ['bg-second'] = ok, ['bg-third'] = ok }))
    h.must(dispatch(dir, ns))
    finish(ns, J('bg-first-1'), true)             -- failed, nothing recorded (a crash, an image pull)
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do')
    contains(res.out, 'bg-first waits until')
    local st = h.must(h.cozy('status', '--dir', dir, '--namespace', ns))
    contains(st.out, 'its Job ' .. J('bg-first-1') .. ' failed without recording it (1 so), retried after 30s')
    -- once the backoff passed (the Job ended 31 s ago), the same attempt again, in a Job of its own name
    local ns2 = runner.new_ns()
    local dir2 = release(ns2)
    put_index(dir2, ns2, { ['retry-backoff'] = '30s' })
    runner.make_ledger(ns2, fixture.ledger({ ['bg-second'] = ok, ['bg-third'] = ok }))
    h.must(dispatch(dir2, ns2))
    finish(ns2, J('bg-first-1'), true, -31)
    res = h.must(dispatch(dir2, ns2))
    contains(res.out, 'created Job ' .. J('bg-first-1-1') .. ' for background migration bg-first (attempt 1 of 3): its Job ' ..
      J('bg-first-1') .. ' failed without recording it')
    -- a Job that completed without a record handed the lock to the upgrade: the next dispatch goes on at once
    finish(ns2, J('bg-first-1-1'), false)
    res = h.must(dispatch(dir2, ns2))
    contains(res.out, 'created Job ' .. J('bg-first-1-2') .. ' for background migration bg-first (attempt 1 of 3)')
    contains(res.out, 'it yielded the lock to the upgrade')
  end)

  it('leaves the tier alone while the upgrade holds the runner lock', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local now = os.date('!%Y-%m-%dT%H:%M:%S.000000Z')
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns, annotations = { ['platform.cozystack.io/holder-tier'] = 'pre-apply' } },
      spec = { holderIdentity = 'hook-pod/1/1/ab', leaseDurationSeconds = 90, renewTime = now } })
    local res = h.must(dispatch(dir, ns))
    contains(res.out, 'nothing to do: the upgrade holds the runner lock ' .. ns .. '/cozystack-version-lock (pre-apply runner hook-pod/1/1/ab); bg-first goes next time')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('refuses a ledger it cannot trust (exit 7) and dispatches nothing', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, { ['m.bg-second'] = 'not json' })
    local res = dispatch(dir, ns)
    assert.are.equal(7, res.code)
    contains(res.err, 'm.bg-second cannot be read')
    assert.are.same({}, names(jobs(ns)))
  end)

  it('makes one Job when two dispatches run at once', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local cmd = string.format('env MIGRATIONS_IMAGE=%s %s dispatch --namespace %s --dir %s', h.q(IMAGE), h.q(h.bin), ns,
      h.q(dir))
    local out = runner.together(cmd, cmd)
    assert.are.equal('0\n', out.r1, out.e1)
    assert.are.equal('0\n', out.r2, out.e2)
    assert.are.same({ J('bg-first-1') }, names(jobs(ns)))
    contains(out.o1 .. out.o2, 'created Job ' .. J('bg-first-1'))
    lacks(out.e1 .. out.e2, 'carries the background dispatcher')
  end)

  it('says what it would create with --dry-run, creating nothing', function()
    local ns = runner.new_ns()
    local dir = release(ns)
    put_index(dir, ns)
    runner.make_ledger(ns, {})
    local res = h.must(dispatch(dir, ns, '--dry-run'))
    contains(res.out, 'would create Job ' .. J('bg-first-1') .. ' for background migration bg-first')
    assert.are.same({}, names(jobs(ns)))
    lacks(res.out, 'created Job')
  end)
end)
