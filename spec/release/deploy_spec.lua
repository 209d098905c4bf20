-- deploy/: the hook's chart (deploy/helm) passes real `helm lint` and is
-- rendered by real `helm template` (tools/helm's build); deploy/*.yaml are
-- that rendering, byte for byte; the hook's shape holds (hook annotations,
-- pull policy, backoff, a deadline of the lock wait plus the index's
-- timeouts, restricted Pod Security, the failure reason in the termination
-- message); the background Jobs' template is in the dispatcher's own spec,
-- never in the index; the admission policy is rendered (and can be turned
-- off); bad values are refused at render time; and every manifest is
-- accepted by the real apiserver (kubectl apply --dry-run=server). What the
-- apiserver's admission makes of them is spec/e2e/admission_spec.lua.
local h = require('support.helpers')
local yaml = require('yaml')

local DEPLOY = h.root .. '/deploy'
local CHART = DEPLOY .. '/helm'
local HELM = h.root .. '/build/testenv/bin/helm'

local function helm(args)
  return h.run(h.q(HELM) .. ' ' .. args)
end

-- helm template sees no cluster: it is told the cluster serves
-- ValidatingAdmissionPolicy (the policy renders only where it does).
local VAP = ' --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy '
local function template(args)
  return helm('template cozy-migrate ' .. h.q(CHART) .. ' --namespace cozy-system' .. VAP .. (args or ''))
end

local function docs(text)
  local out = {}
  for doc in ('\n' .. text .. '\n---\n'):gmatch('\n(.-)\n%-%-%-') do
    local d = yaml.decode(doc)
    if type(d) == "table" then out[#out + 1] = d end
  end
  return out
end

local function rendered(args)
  return docs(h.must(template(args), 'helm template').out)
end

local function kind(list, k)
  for _, d in ipairs(list) do if d.kind == k then return d end end
end

local function container(job) return job.spec.template.spec.containers[1] end

local json = require('json')
local DIGEST = 'reg.example/cozy/cozy-migrate@sha256:' .. string.rep('0123abcd', 8)

-- A copy of the chart whose files/cozy-migrate-index.json is the index
-- given ({image=, pre={{slug=, timeout_s=}}, revoked=, bg={{slug=,
-- timeout_s=}}}), nil: the chart's own.
local function chart_with_index(ix)
  local dir = h.tmpdir()
  h.must(h.run(string.format('cp -R %s/. %s/', h.q(CHART), h.q(dir))))
  if ix then
    local function entries(list, on_error)
      local out = {}
      for _, g in ipairs(list or {}) do
        out[#out + 1] = { slug = g.slug, timeout_s = g.timeout_s, on_error = on_error, requires = json.array({}),
          legacy = g.legacy }
      end
      return json.array(out)
    end
    h.write(dir .. '/files/cozy-migrate-index.json', json.encode({ version = 2, image = ix.image or json.null,
      ['pre-apply'] = entries(ix.pre, 'abort'), background = entries(ix.bg, 'warn'), revoked = json.array(ix.revoked or {}) }))
  end
  return dir
end

-- The sum of the pre-apply timeouts of the chart's own index.
local function pre_timeouts()
  local ix = json.decode(h.slurp(CHART .. '/files/cozy-migrate-index.json'))
  local sum = 0
  for _, g in ipairs(ix['pre-apply']) do sum = sum + g.timeout_s end
  return sum
end

-- The background Jobs' template the dispatcher's CronJob carries.
local function job_template(list)
  local cj = kind(list, 'CronJob')
  for _, e in ipairs(cj.spec.jobTemplate.spec.template.spec.containers[1].env) do
    if e.name == 'MIGRATIONS_JOB_TEMPLATE' then return json.decode(e.value) end
  end
end

local function env_of(job)
  local env = {}
  for _, e in ipairs(container(job).env) do env[e.name] = e end
  return env
end

-- The upgrade's lock wait with the chart's own index: lockTimeoutSeconds,
-- at least the longest background timeout plus a minute.
local function upgrade_wait(lock_s)
  local ix = json.decode(h.slurp(CHART .. '/files/cozy-migrate-index.json'))
  local wait = lock_s
  for _, g in ipairs(ix.background) do wait = math.max(wait, g.timeout_s + 60) end
  return wait
end

local function lock_timeout(job)
  local args = container(job).args
  for i, a in ipairs(args) do
    if a == '--lock-timeout' then return tonumber(args[i + 1]:match('^(%d+)s$')) end
  end
end

describe('deploy/ (the hook chart, rendered by real helm)', function()
  local values
  setup(function()
    -- make test has built it (testenv-build); a lone run of this spec builds it here
    h.must(h.run(h.q(h.testenv) .. ' build helm'), 'tools/testenv build helm')
    values = yaml.decode(h.slurp(CHART .. '/values.yaml')).migrations
  end)

  it('passes helm lint --strict', function()
    local res = helm('lint --strict ' .. h.q(CHART))
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.matches('1 chart(s) linted, 0 chart(s) failed', res.out, 1, true)
  end)

  it('has deploy/*.yaml equal to the chart rendered, and says which file differs when one does', function()
    local res = h.run(h.q(h.root .. '/tools/render-deploy') .. ' --check')
    assert.are.equal(0, res.code, res.out .. res.err)
    local copy = h.tmpdir()
    h.must(h.run(string.format('cp %s/*.yaml %s/', h.q(DEPLOY), h.q(copy))))
    h.write(copy .. '/hook-job.yaml', (h.slurp(copy .. '/hook-job.yaml'):gsub('backoffLimit: 3', 'backoffLimit: 1')))
    res = h.run(h.q(h.root .. '/tools/render-deploy') .. ' --check ' .. h.q(copy))
    assert.are.equal(1, res.code, res.out .. res.err)
    assert.matches('hook-job.yaml differs from the chart', res.err, 1, true)
    assert.not_matches('only-job.yaml differs', res.err, 1, true)
  end)

  it('renders a pre-upgrade,pre-install hook that never pulls when the image is there and shows why it failed', function()
    local list = rendered('--show-only templates/migrations-hook.yaml')
    assert.are.equal(3, #list)
    for _, d in ipairs(list) do
      assert.is_truthy(h.has(d.metadata.annotations['helm.sh/hook'], 'pre-upgrade,pre-install'), d.kind)
      assert.is_truthy(h.has(d.metadata.annotations['helm.sh/hook-delete-policy'], 'before-hook-creation'), d.kind)
      assert.is_truthy(h.has(d.metadata.annotations['helm.sh/hook-delete-policy'], 'hook-succeeded'), d.kind)
    end
    -- the ServiceAccount and its cluster-admin binding are made and deleted
    -- again on uninstall, so none outlives the release
    for _, k in ipairs({ 'ServiceAccount', 'ClusterRoleBinding' }) do
      assert.are.equal('pre-upgrade,pre-install,pre-delete', kind(list, k).metadata.annotations['helm.sh/hook'])
    end
    local job = kind(list, 'Job')
    assert.are.equal('pre-upgrade,pre-install', job.metadata.annotations['helm.sh/hook'])
    assert.are.equal('hook-failed', job.metadata.annotations['helm.sh/hook-output-log-policy'])
    assert.are.equal('cozy-system', job.metadata.namespace)
    assert.are.equal('cozy-system', kind(list, 'ServiceAccount').metadata.namespace)
    assert.are.equal(values.backoffLimit, job.spec.backoffLimit)
    assert.are.equal(3, job.spec.backoffLimit, 'the retry budget of the numbered hook it replaces')
    assert.are.equal('600', job.metadata.annotations['platform.cozystack.io/helm-timeout-seconds'])
    assert.are.equal(upgrade_wait(values.lockTimeoutSeconds), lock_timeout(job))
    assert.are.equal(upgrade_wait(values.lockTimeoutSeconds) + pre_timeouts() + 60, job.spec.activeDeadlineSeconds)
    assert.are.equal(tostring(pre_timeouts()), job.metadata.annotations['platform.cozystack.io/migrations-timeout-seconds'])
    assert.are.same({ 2, 3, 4, 7, 9, 11, 12, 13, 14 }, job.spec.podFailurePolicy.rules[1].onExitCodes.values)
    assert.are.equal('FailJob', job.spec.podFailurePolicy.rules[1].action)
    assert.are.equal(65534, job.spec.template.spec.securityContext.runAsUser)
    -- Pod Security "restricted"
    assert.is_true(job.spec.template.spec.securityContext.runAsNonRoot)
    assert.are.same({ type = 'RuntimeDefault' }, job.spec.template.spec.securityContext.seccompProfile)
    local c = container(job)
    assert.are.equal(values.image, c.image)
    assert.are.equal('IfNotPresent', c.imagePullPolicy)
    assert.are.equal('FallbackToLogsOnError', c.terminationMessagePolicy)
    assert.are.same({ requests = { cpu = '100m', memory = '128Mi' }, limits = { memory = '1Gi' } }, c.resources)
    assert.is_true(c.securityContext.readOnlyRootFilesystem)
    assert.is_false(c.securityContext.allowPrivilegeEscalation)
    assert.are.same({ 'ALL' }, c.securityContext.capabilities.drop)
    local env = env_of(job)
    assert.are.equal(values.image, env.MIGRATIONS_IMAGE.value)
    assert.are.equal('metadata.namespace', env.NAMESPACE.valueFrom.fieldRef.fieldPath)
    assert.are.equal('', env.SKIP.value)
    assert.are.equal('', env.SKIP_REASON.value)
    assert.are.same({ name = 'CLUSTER_DOMAIN', value = 'cozy.local' }, c.env[#c.env])
    -- the index the gate decided on, its image the release's
    local ix = json.decode(env.MIGRATIONS_INDEX.value)
    assert.are.equal(values.image, ix.image)
    assert.are.same(json.decode(h.slurp(CHART .. '/files/cozy-migrate-index.json'))['pre-apply'], ix['pre-apply'])
  end)

  it('puts every hook object in the release namespace, which helm makes before any hook runs', function()
    for _, d in ipairs(rendered('--namespace platform-x --show-only templates/migrations-hook.yaml')) do
      if d.kind ~= 'ClusterRoleBinding' then assert.are.equal('platform-x', d.metadata.namespace, d.kind) end
    end
    local crb = kind(rendered('--namespace platform-x --show-only templates/migrations-hook.yaml'), 'ClusterRoleBinding')
    assert.are.equal('platform-x', crb.subjects[1].namespace)
    assert.are.equal('cozystack-migrations-platform-x', crb.metadata.name)
  end)

  it('takes an image by tag or digest with the pull policy given, and refuses a bare name or latest', function()
    local digest = 'reg.example:5000/cozy/cozy-migrate@sha256:' .. string.rep('0123abcd', 8)
    for _, ref in ipairs({ 'reg.example:5000/cozy/cozy-migrate:v1.2.3', digest, 'cozy-migrate:v1@sha256:' .. string.rep('ab', 32) }) do
      local job = kind(rendered('--set migrations.image=' .. h.q(ref) .. ' --set migrations.imagePullPolicy=Never'), 'Job')
      assert.are.equal(ref, container(job).image)
      assert.are.equal(ref, env_of(job).MIGRATIONS_IMAGE.value)
      assert.are.equal('Never', container(job).imagePullPolicy)
    end
    for ref, why in pairs({
      ['cozy-migrate'] = 'give a tag or a digest',
      ['reg.example:5000/cozy-migrate'] = 'give a tag or a digest',
      ['cozy-migrate:latest'] = 'the tag latest names no fixed image',
      ['cozy-migrate@sha256:abc'] = 'a digest is @sha256: and 64 hex digits',
    }) do
      local res = template('--set migrations.image=' .. h.q(ref))
      assert.are.equal(1, res.code, ref)
      assert.matches(why, res.err, 1, true)
    end
  end)

  it('keeps a skip reason with commas intact from --set-json or a values file, and refuses a skip without a reason', function()
    local reason = 'CRD removed upstream, see #1234, and "quoted"'
    local job = kind(rendered("--set 'migrations.skip={adopt-a,adopt-b}' --set-json " ..
      h.q('migrations.skipReason=' .. '"CRD removed upstream, see #1234, and \\"quoted\\""')), 'Job')
    assert.are.equal('adopt-a,adopt-b', env_of(job).SKIP.value)
    assert.are.equal(reason, env_of(job).SKIP_REASON.value)
    local f = h.write(os.tmpname() .. '.yaml', 'migrations:\n  skip: [adopt-a]\n  skipReason: "' ..
      reason:gsub('"', '\\"') .. '"\n')
    job = kind(rendered('-f ' .. h.q(f)), 'Job')
    assert.are.equal('adopt-a', env_of(job).SKIP.value)
    assert.are.equal(reason, env_of(job).SKIP_REASON.value)
    -- a comma-separated string from a values file is the same list
    f = h.write(os.tmpname() .. '.yaml', 'migrations:\n  skip: "adopt-a, adopt-b"\n  skipReason: why\n')
    assert.are.equal('adopt-a,adopt-b', env_of(kind(rendered('-f ' .. h.q(f)), 'Job')).SKIP.value)
    -- --set splits on the comma: helm itself refuses, nothing half-parsed reaches the hook
    local res = template("--set 'migrations.skip={adopt-a}' --set " .. h.q('migrations.skipReason=' .. reason))
    assert.are_not.equal(0, res.code)
    res = template("--set 'migrations.skip={adopt-a}'")
    assert.are.equal(1, res.code)
    assert.matches('migrations.skip needs migrations.skipReason', res.err, 1, true)
  end)

  it('derives the deadline from the lock wait and the index\'s timeouts (no hand-kept total), and refuses one that would cut a migration short', function()
    assert.is_nil(values.migrationsTimeoutSeconds, 'the hand-kept total is gone')
    local chart = chart_with_index({ pre = { { slug = 'pre-a', timeout_s = 90 }, { slug = 'pre-b', timeout_s = 45 } },
      bg = { { slug = 'bg-a', timeout_s = 30 } } })
    local function hook(args)
      return kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
        (args or ''))).out), 'Job')
    end
    local job = hook('--set migrations.lockTimeoutSeconds=20')
    assert.are.equal(90 + 90 + 45 + 60, job.spec.activeDeadlineSeconds, 'lock wait (bg-a + 60) + 90 + 45 + 60')
    assert.are.equal(90, lock_timeout(job))
    job = hook('--set migrations.activeDeadlineSeconds=5000')
    assert.are.equal(5000, job.spec.activeDeadlineSeconds)
    local res = helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
      '--set migrations.activeDeadlineSeconds=' .. (300 + 135))
    assert.are.equal(1, res.code)
    h.contains(res.err, "must be above the lock wait + the migrations' timeouts from the index (435)")
    -- the --only Job waits for its one slug's timeout, and refuses a slug the index does not ship
    local only = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
      '--set migrations.only=pre-b --show-only templates/migrations-only.yaml')).out), 'Job')
    assert.are.equal(300 + 45 + 60, only.spec.activeDeadlineSeconds)
    res = helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
      '--set migrations.only=nope --show-only templates/migrations-only.yaml')
    assert.are.equal(1, res.code)
    h.contains(res.err, 'migrations.only "nope" is not a slug the index ships')
  end)

  it('rounds a timeout of part of a second up, never down, in every deadline it derives', function()
    local chart = chart_with_index({ pre = { { slug = 'pre-a', timeout_s = 1.5 }, { slug = 'pre-b', timeout_s = 0.25 } },
      bg = { { slug = 'bg-a', timeout_s = 30.5 } } })
    local job = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
      '--set migrations.lockTimeoutSeconds=20')).out), 'Job')
    assert.are.equal(91 + 2 + 1 + 60, job.spec.activeDeadlineSeconds, 'lock wait (ceil 30.5 + 60) + ceil 1.5 + ceil 0.25 + 60')
    assert.are.equal(91, lock_timeout(job))
    local only = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' ..
      '--set migrations.only=pre-b --show-only templates/migrations-only.yaml')).out), 'Job')
    assert.are.equal(300 + 1 + 60, only.spec.activeDeadlineSeconds)
  end)

  it('makes the upgrade wait for the lock at least the longest background migration of the index plus a minute, so one in flight hands over inside the wait', function()
    local chart = chart_with_index({ bg = { { slug = 'bg-short', timeout_s = 60 }, { slug = 'bg-long', timeout_s = 1800 } } })
    local function jobs(args)
      local list = docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/m:v1 ' .. args)).out)
      local hook, only
      for _, d in ipairs(list) do
        if d.kind == 'Job' and d.metadata.name == 'cozystack-migrations' then hook = d end
        if d.kind == 'Job' and d.metadata.name ~= 'cozystack-migrations' then only = d end
      end
      return hook, only
    end
    local hook, only = jobs('--set migrations.lockTimeoutSeconds=300 --set migrations.only=bg-short')
    assert.are.equal(1860, lock_timeout(hook))
    assert.are.equal(1860, lock_timeout(only), 'an --only asks for the lock as the hook does')
    assert.are.equal(1860 + 0 + 60, hook.spec.activeDeadlineSeconds)
    -- a longer wait given is kept
    hook = jobs('--set migrations.lockTimeoutSeconds=4000')
    assert.are.equal(4000, lock_timeout(hook))
    -- without background migrations the wait is the one given
    hook = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart_with_index({})) ..
      ' --set migrations.image=reg.example/m:v1 --set migrations.lockTimeoutSeconds=300')).out), 'Job')
    assert.are.equal(300, lock_timeout(hook))
  end)

  it('renders the index, the dispatcher, the Jobs\' identity and its admission policy as release resources, the --only Job only when asked, all with the hook\'s pod', function()
    local kinds = {}
    for _, d in ipairs(rendered('')) do kinds[#kinds + 1] = d.kind .. '/' .. d.metadata.name end
    table.sort(kinds)
    assert.are.same({ 'ClusterRoleBinding/cozystack-migrations-cozy-system', 'ClusterRoleBinding/cozystack-migrations-jobs-cozy-system',
      'ConfigMap/cozystack-migrations-index', 'CronJob/cozystack-migrations-dispatch',
      'Job/cozystack-migrations', 'Role/cozystack-migrations-dispatch', 'RoleBinding/cozystack-migrations-dispatch',
      'ServiceAccount/cozystack-migrations', 'ServiceAccount/cozystack-migrations-dispatch',
      'ServiceAccount/cozystack-migrations-jobs',
      'ValidatingAdmissionPolicy/cozystack-migrations-jobs-cozy-system',
      'ValidatingAdmissionPolicyBinding/cozystack-migrations-jobs-cozy-system' }, kinds)
    local only = kind(rendered('--set migrations.only=tenant-ancestor-labels --show-only templates/migrations-only.yaml'), 'Job')
    assert.are.same({ name = 'ONLY', value = 'tenant-ancestor-labels' }, env_of(only).ONLY)
    local bg = job_template(rendered('--show-only templates/migrations-dispatch.yaml'))
    assert.are.same({ '--tier', 'background', '--lock-timeout', '300s', '--log-format', 'text' }, container(bg).args)
    assert.are.equal(values.lockTimeoutSeconds + 60, bg.spec.activeDeadlineSeconds)
    local hook = kind(rendered(''), 'Job')
    for _, j in ipairs({ only, bg }) do
      assert.is_nil((j.metadata or {}).annotations, 'not a hook')
      -- an ordinary release resource: there between upgrades, unlike the hook's
      assert.are.equal('cozystack-migrations-jobs', j.spec.template.spec.serviceAccountName)
      assert.are.equal(0, j.spec.backoffLimit)
      assert.is_true(j.spec.activeDeadlineSeconds > lock_timeout(j))
      local c, hc = container(j), container(hook)
      for _, k in ipairs({ 'image', 'imagePullPolicy', 'terminationMessagePolicy', 'resources', 'securityContext', 'volumeMounts' }) do
        assert.are.same(hc[k], c[k], k)
      end
    end
    for _, d in ipairs(rendered('--show-only templates/migrations-dispatch.yaml --show-only templates/migrations-jobs-rbac.yaml ' ..
      '--show-only templates/migrations-index.yaml --show-only templates/migrations-admission.yaml')) do
      assert.is_nil((d.metadata.annotations or {})['helm.sh/hook'], d.kind .. ' is a hook resource')
    end
    -- the policy can be turned off for a cluster before 1.30
    local res = template('--set migrations.admissionPolicy.enabled=false --show-only templates/migrations-admission.yaml')
    assert.are.equal(1, res.code)
    h.contains(res.err, 'could not find template templates/migrations-admission.yaml in chart')
    local off = {}
    for _, d in ipairs(rendered('--set migrations.admissionPolicy.enabled=false')) do off[d.kind] = true end
    assert.is_nil(off.ValidatingAdmissionPolicy)
    assert.is_nil(off.ValidatingAdmissionPolicyBinding)
  end)

  it('renders the index ConfigMap from the chart\'s copy, with the image and the retry policy, and nothing that says how a Job is built', function()
    local cm = kind(rendered('--show-only templates/migrations-index.yaml'), 'ConfigMap')
    assert.are.equal('cozy-system', cm.metadata.namespace)
    assert.are.same(json.decode(h.slurp(CHART .. '/files/cozy-migrate-index.json')), json.decode(cm.data['index.json']))
    assert.are.same({ 'image', 'index.json', 'max-attempts', 'retry-backoff', 'retry-backoff-max' }, h.keys(cm.data))
    assert.are.equal(values.image, cm.data.image)
    assert.are.equal('3', cm.data['max-attempts'])
    assert.are.equal('10m', cm.data['retry-backoff'])
    assert.are.equal('2h', cm.data['retry-backoff-max'])
    cm = kind(rendered('--show-only templates/migrations-index.yaml --set migrations.dispatch.maxAttempts=5 ' ..
      '--set migrations.dispatch.retryBackoff=30s'), 'ConfigMap')
    assert.are.equal('5', cm.data['max-attempts'])
    assert.are.equal('30s', cm.data['retry-backoff'])
  end)

  it('renders the dispatcher as a CronJob that never runs twice at once, as an identity that may only read and create Jobs', function()
    local list = rendered('--show-only templates/migrations-dispatch.yaml')
    local cj = kind(list, 'CronJob')
    assert.are.equal('Forbid', cj.spec.concurrencyPolicy)
    assert.are.equal(values.dispatch.schedule, cj.spec.schedule)
    assert.is_false(cj.spec.suspend)
    local pod = cj.spec.jobTemplate.spec.template.spec
    assert.are.equal('cozystack-migrations-dispatch', pod.serviceAccountName)
    assert.are.same({ '/usr/bin/cozy-migrate' }, pod.containers[1].command)
    assert.are.same({ 'dispatch', '--log-format', 'text' }, pod.containers[1].args)
    assert.are.equal(0, cj.spec.jobTemplate.spec.backoffLimit)
    -- its own image, as the Jobs' (the index's is only compared)
    local env = {}
    for _, e in ipairs(pod.containers[1].env) do env[e.name] = e.value end
    assert.are.equal(values.image, env.MIGRATIONS_IMAGE)
    assert.are.equal('RuntimeDefault', pod.securityContext.seccompProfile.type)
    local verbs = {}
    for _, r in ipairs(kind(list, 'Role').rules) do
      for _, res in ipairs(r.resources) do verbs[res] = table.concat(r.verbs, ',') end
    end
    assert.are.same({ configmaps = 'get', leases = 'get', jobs = 'list,get,create', events = 'create' }, verbs)
    cj = kind(rendered('--show-only templates/migrations-dispatch.yaml --set migrations.dispatch.schedule=* --set migrations.dispatch.suspend=true'), 'CronJob')
    assert.are.equal('*', cj.spec.schedule)
    assert.is_true(cj.spec.suspend)
  end)

  it('runs the image the index names when migrations.image is empty, and refuses two images for one release', function()
    local chart = chart_with_index({ image = DIGEST })
    local job = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=')).out), 'Job')
    assert.are.equal(DIGEST, container(job).image)
    -- a mirror of the same image keeps its digest
    local mirror = 'mirror.local/cozy/cozy-migrate@' .. DIGEST:match('(sha256:%x+)$')
    job = kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=' .. h.q(mirror))).out), 'Job')
    assert.are.equal(mirror, container(job).image)
    local res = helm('template cozy-migrate ' .. h.q(chart) .. ' --set migrations.image=reg.example/other:v2')
    assert.are.equal(1, res.code)
    h.contains(res.err, 'is not the image the index names')
    -- a chart without its index is refused, naming the file
    local bare = chart_with_index(nil)
    os.remove(bare .. '/files/cozy-migrate-index.json')
    res = helm('template cozy-migrate ' .. h.q(bare))
    assert.are.equal(1, res.code)
    h.contains(res.err, 'files/cozy-migrate-index.json is missing')
  end)

  it('renders none of the engine\'s objects with migrations.enabled false, however the values spell it', function()
    for _, set in ipairs({ '--set migrations.enabled=false', '--set-string migrations.enabled=false',
      '--set migrations.enabled=0', '--set-string migrations.enabled=no' }) do
      local res = h.must(template(set .. ' --set migrations.only=tenant-ancestor-labels'))
      assert.are.same({}, docs(res.out), set)
    end
    -- a platform's values without the key: on, as the snippet's default
    local chart = chart_with_index(nil)
    local v = h.slurp(chart .. '/values.yaml'):gsub('\n  enabled: true\n', '\n')
    h.write(chart .. '/values.yaml', v)
    assert.is_truthy(kind(docs(h.must(helm('template cozy-migrate ' .. h.q(chart))).out), 'Job'))
    -- and true spelled as a Package CR may spell it
    assert.is_truthy(kind(rendered('--set-string migrations.enabled=true'), 'Job'))
  end)

  it('renders the admission policy only where the cluster serves ValidatingAdmissionPolicy (.Capabilities), and not when turned off', function()
    local function has_policy(args)
      local list = docs(h.must(helm('template cozy-migrate ' .. h.q(CHART) .. ' --namespace cozy-system ' .. args)).out)
      return kind(list, 'ValidatingAdmissionPolicy') ~= nil, kind(list, 'ValidatingAdmissionPolicyBinding') ~= nil, list
    end
    local p, b, list = has_policy('--kube-version v1.29.0')
    assert.is_false(p, 'a 1.29 cluster does not serve it')
    assert.is_false(b)
    assert.is_truthy(kind(list, 'CronJob'), 'the rest of the engine renders')
    p, b = has_policy(VAP)
    assert.is_true(p)
    assert.is_true(b)
    p = has_policy(VAP .. ' --set migrations.admissionPolicy.enabled=false')
    assert.is_false(p)
  end)

  it('passes extraEnv and each named hatch to shell migrations in the hook, the --only Job and the background Jobs, named in PASS_ENV, and admits exactly them', function()
    local hatch = ' --set migrations.hatches.ETCD_ADOPT_SKIP_BACKUP=etcdAdoptSkipBackup '
    local function envs(args)
      local list = rendered(hatch .. '--set migrations.only=tenant-ancestor-labels ' .. (args or ''))
      local out = {}
      for _, d in ipairs(list) do
        if d.kind == 'Job' then out[d.metadata.name] = env_of(d) end
      end
      local bg = job_template(list)
      local e = {}
      for _, x in ipairs(container(bg).env) do e[x.name] = x end
      out.background = e
      return out, kind(list, 'ValidatingAdmissionPolicy')
    end
    -- the platform's spellings of its hatch: a bool, a Package CR's string, a number
    for value, want in pairs({ ['--set migrations.etcdAdoptSkipBackup=true'] = '1',
      ['--set-string migrations.etcdAdoptSkipBackup=true'] = '1', ['--set-string migrations.etcdAdoptSkipBackup=Yes'] = '1',
      ['--set migrations.etcdAdoptSkipBackup=1'] = '1', ['--set migrations.etcdAdoptSkipBackup=false'] = '0',
      ['--set-string migrations.etcdAdoptSkipBackup=garbage'] = '0', [''] = '0' }) do
      local all, vap = envs(value)
      for _, job in ipairs({ 'cozystack-migrations', 'cozystack-migration-only', 'background' }) do
        local env = all[job]
        assert.are.equal(want, env.ETCD_ADOPT_SKIP_BACKUP.value, job .. ' ' .. value)
        assert.are.equal('cozy.local', env.CLUSTER_DOMAIN.value, job)
        assert.are.equal('CLUSTER_DOMAIN,ETCD_ADOPT_SKIP_BACKUP', env.PASS_ENV.value, job)
      end
      -- the admission policy admits these values and no others
      local text = json.encode(vap.spec.validations)
      h.contains(text, 'ETCD_ADOPT_SKIP_BACKUP=' .. want)
      h.contains(text, 'PASS_ENV=CLUSTER_DOMAIN,ETCD_ADOPT_SKIP_BACKUP')
      h.contains(text, 'CLUSTER_DOMAIN=cozy.local')
    end
    -- without any, no PASS_ENV
    local list = rendered('--set migrations.extraEnv=null')
    assert.is_nil(env_of(kind(list, 'Job')).PASS_ENV)
    -- a name the engine sets, a name twice, not a name: refused at render time
    for args, why in pairs({
      ['--set migrations.extraEnv[0].name=NAMESPACE --set migrations.extraEnv[0].value=x'] = 'NAMESPACE is the engine\'s to set',
      ['--set migrations.extraEnv[0].name=PASS_ENV --set migrations.extraEnv[0].value=HOME'] = 'PASS_ENV is the engine\'s to set',
      ['--set migrations.hatches.KUBECONFIG=x'] = 'KUBECONFIG is the engine\'s to set',
      ['--set migrations.hatches.CLUSTER_DOMAIN=x'] = 'a name is given twice',
      ['--set migrations.extraEnv[0].name=a-b --set migrations.extraEnv[0].value=x'] = '"a-b" is not a variable name',
    }) do
      local res = template(args)
      assert.are.equal(1, res.code, args)
      h.contains(res.err, why, args)
    end
  end)

  it('passes its own helm-unittest suites (deploy/helm/tests, for a platform\'s CI) where helm-unittest is given (HELM_UNITTEST)', function()
    local bin = os.getenv('HELM_UNITTEST')
    if not bin or bin == '' then
      pending('HELM_UNITTEST names no helm-unittest binary (built from github.com/helm-unittest/helm-unittest/cmd/helm-unittest)')
      return
    end
    local res = h.run(h.q(bin) .. ' ' .. h.q(CHART))
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'PASS')
    h.lacks(res.out, 'FAIL')
    -- and they do fail: a chart that renders the engine with migrations off
    local chart = chart_with_index(nil)
    h.write(chart .. '/templates/migrations-index.yaml',
      (h.slurp(chart .. '/templates/migrations-index.yaml'):gsub('{{%- if include "cozy%-migrate.enabled" %. }}', '{{- if true }}')))
    res = h.run(h.q(bin) .. ' ' .. h.q(chart))
    assert.are_not.equal(0, res.code, res.out)
    h.contains(res.out, "- renders none of the engine's objects with migrations.enabled false")
  end)

  it('fails open under helm template (no cluster to look at): the hook is rendered', function()
    local list = docs(h.must(helm('template cozy-migrate ' .. h.q(chart_with_index({})))).out)
    assert.is_truthy(kind(list, 'Job'), 'no hook Job')
  end)

  it('sizes the hook\'s deadline from what the live ledger leaves pending (legacy slugs below its version are seeded, not run), and replaces a numbered hook\'s leftovers found by lookup', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local ns = 'deploy-lookup-' .. tostring(os.time())
    h.must(h.kubectl('create namespace ' .. ns))
    finally(function()
      h.kubectl('delete namespace ' .. ns .. ' --wait=false')
      h.kubectl('delete clusterrolebinding ' .. ns .. '-old-hook --ignore-not-found')
    end)
    local chart = chart_with_index({ pre = { { slug = 'legacy-one', timeout_s = 600, legacy = 1 },
      { slug = 'legacy-two', timeout_s = 600, legacy = 2 }, { slug = 'legacy-three', timeout_s = 600, legacy = 3 },
      { slug = 'new-lua', timeout_s = 60 }, { slug = 'done-lua', timeout_s = 90 } } })
    local function live(args)
      return docs(h.must(helm('template cozy-migrate ' .. h.q(chart) .. ' -n ' .. ns ..
        ' --dry-run=server --set migrations.image=reg.example/m:v1 --set migrations.lockTimeoutSeconds=20 ' .. (args or ''))).out)
    end
    -- the old shape's ledger: version 3, one record of the engine's
    h.must(h.kubectl('create configmap cozystack-version -n ' .. ns .. ' --from-literal=version=3 ' ..
      "--from-literal=m.done-lua='{\"state\":\"ok\"}'"))
    local job = kind(live(), 'Job')
    assert.are.equal('660', job.metadata.annotations['platform.cozystack.io/migrations-timeout-seconds'],
      'legacy-three (600) + new-lua (60): legacy one and two are seeded, done-lua is recorded')
    assert.are.equal(20 + 660 + 60, job.spec.activeDeadlineSeconds)
    -- no ledger: everything counts (a fresh install, as helm template sees it)
    h.must(h.kubectl('delete configmap cozystack-version -n ' .. ns))
    assert.are.equal(tostring(600 * 3 + 60 + 90), kind(live(), 'Job').metadata.annotations['platform.cozystack.io/migrations-timeout-seconds'])
    -- the numbered hook's leftovers: each found is replaced by a hook of its kind and name
    local replaces = ' --set migrations.replaces.job=old-hook --set migrations.replaces.serviceAccount=old-hook ' ..
      '--set migrations.replaces.clusterRoleBinding=' .. ns .. '-old-hook'
    local function standins()
      local out = {}
      for _, d in ipairs(live(replaces)) do
        if (d.metadata.annotations or {})['platform.cozystack.io/replaces'] then
          out[#out + 1] = d.kind .. '/' .. d.metadata.name
          assert.are.equal('before-hook-creation,hook-succeeded', d.metadata.annotations['helm.sh/hook-delete-policy'])
          assert.are.equal('pre-upgrade,pre-install', d.metadata.annotations['helm.sh/hook'])
        end
      end
      table.sort(out)
      return out
    end
    assert.are.same({}, standins(), 'nothing to replace')
    h.must(h.kubectl('create serviceaccount old-hook -n ' .. ns))
    h.must(h.kubectl('create clusterrolebinding ' .. ns .. '-old-hook --clusterrole=cluster-admin --serviceaccount=' .. ns .. ':old-hook'))
    h.must(h.kubectl('create job old-hook -n ' .. ns .. ' --image=reg.example/old:v1 -- /bin/true'))
    assert.are.same({ 'ClusterRoleBinding/' .. ns .. '-old-hook', 'Job/old-hook', 'ServiceAccount/old-hook' }, standins())
    local crb
    for _, d in ipairs(live(replaces)) do
      if d.kind == 'ClusterRoleBinding' and d.metadata.name == ns .. '-old-hook' then crb = d end
    end
    assert.are.equal('view', crb.roleRef.name, 'the stand-in grants nothing')
  end)

  it('every manifest passes the apiserver with server-side dry run', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local ns = h.kubectl('get namespace cozy-system')
    if ns.code ~= 0 then
      h.must(h.kubectl('create namespace cozy-system'))
      -- the manifests name it; made for this case, it goes with it
      finally(function() h.kubectl('delete namespace cozy-system --wait=false') end)
    end
    local all = h.must(template('--set migrations.only=tenant-ancestor-labels')).out
    local files = { DEPLOY .. '/hook-job.yaml', DEPLOY .. '/jobs-rbac.yaml', DEPLOY .. '/only-job.yaml',
      DEPLOY .. '/dispatch.yaml', DEPLOY .. '/index.yaml', DEPLOY .. '/admission.yaml', h.write(os.tmpname() .. '.yaml', all) }
    for _, f in ipairs(files) do
      local res = h.kubectl('apply --dry-run=server -f ' .. h.q(f))
      assert.are.equal(0, res.code, f .. ': ' .. res.err)
      assert.matches('(server dry run)', res.out, 1, true)
    end
    -- and the server does check: a broken Job is refused
    local bad = h.write(os.tmpname() .. '.yaml', (h.slurp(files[3]):gsub('backoffLimit: 0', 'backoffLimit: many')))
    assert.are_not.equal(0, h.kubectl('apply --dry-run=server -f ' .. h.q(bad)).code)
  end)
end)
