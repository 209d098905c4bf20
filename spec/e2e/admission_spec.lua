-- What the local apiserver's own admission makes of the chart (deploy/helm,
-- rendered by real helm for a namespace of the spec's own and applied):
--   - its ValidatingAdmissionPolicy admits a pod as the Jobs'
--     ServiceAccount only with the release's image, the engine's entrypoint
--     and arguments, the chart's env and volumes, and no host namespace,
--     hostPath or privilege; refuses an ephemeral container added later; a
--     Job made with the dispatcher's token and another image, or as another
--     identity, is refused, while the dispatcher's own Job (the real
--     dispatcher, running with that token) is admitted; nobody else makes a
--     Job with the dispatcher's labels;
--   - Pod Security "restricted" (the namespace label enforce=restricted)
--     admits the pod of every Job and CronJob the chart renders: Pod
--     Security enforces on pods, so each template is created as a Pod
--     (server dry run: admission runs, nothing is stored), and a pod
--     without the seccomp profile is refused, so the check is live.
-- The testenv runs no kubelet and no Job controller: what is checked is
-- admission, on the objects as they are created.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')
local yaml = require('yaml')

local HELM = h.root .. '/build/testenv/bin/helm'
local KUBECTL = h.root .. '/build/testenv/bin/kubectl'
local IMAGE = 'reg.example/platform-migrate@sha256:' .. string.rep('7a', 32)

local function docs(text)
  local out = {}
  for doc in ('\n' .. text .. '\n---\n'):gmatch('\n(.-)\n%-%-%-') do
    local d = yaml.decode(doc)
    if type(d) == 'table' then out[#out + 1] = d end
  end
  return out
end

-- A release: one pre-apply and two background slugs, its tree and a copy
-- of the chart shipping its index.
local function release()
  local dir = fixture.tree({
    batches = { { '00001-v1.0.0', { 'up-one', 'bg-one', 'bg-two' } } },
    scripts = { ['up-one'] = { body = '' }, ['bg-one'] = { tier = 'background', on_error = 'warn', body = '' },
      ['bg-two'] = { tier = 'background', on_error = 'warn', body = '' } },
  })
  local chart = h.tmpdir()
  h.must(h.run(string.format('cp -R %s/. %s/', h.q(h.root .. '/deploy/helm'), h.q(chart))))
  h.write(chart .. '/files/cozy-migrate-index.json', h.must(h.cozy('index', '--dir', dir)).out)
  return dir, chart
end

local function render(chart, ns, extra)
  -- helm template sees no cluster: told this one serves the policy's API
  return docs(h.must(h.run(string.format('%s template cozy-migrate %s --namespace %s --set migrations.image=%s ' ..
    '--api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy %s',
    h.q(HELM), h.q(chart), ns, h.q(IMAGE), extra or '')), 'helm template').out)
end

local function find(list, kind, name)
  for _, d in ipairs(list) do
    if d.kind == kind and (not name or d.metadata.name == name) then return d end
  end
end

local function create(obj, flags)
  local f = h.write(os.tmpname() .. '.json', json.encode(obj))
  local res = h.kubectl('create ' .. (flags or '--dry-run=server') .. ' -f ' .. h.q(f))
  os.remove(f)
  return res
end

local function pod_of(spec, ns, name)
  return { apiVersion = 'v1', kind = 'Pod', metadata = { name = name, namespace = ns }, spec = json.decode(json.encode(spec)) }
end

local policies = {}

-- Applies the release's rendering (the hook aside: it needs no cluster
-- here) and waits until the policy refuses what it must.
local function install(chart, ns)
  policies[#policies + 1] = 'cozystack-migrations-jobs-' .. ns
  local list = render(chart, ns)
  local keep = {}
  for _, d in ipairs(list) do
    local hook = (d.metadata.annotations or {})['helm.sh/hook']
    if not hook then keep[#keep + 1] = d end
  end
  h.must(h.kubectl('apply -f ' .. h.q(h.write(os.tmpname() .. '.json', json.encode({ apiVersion = 'v1', kind = 'List', items = keep })))))
  local only = find(render(chart, ns, '--set migrations.only=bg-one --show-only templates/migrations-only.yaml'), 'Job')
  local bad = pod_of(only.spec.template.spec, ns, 'probe')
  bad.spec.containers[1].image = 'evil.example/x:v1'
  assert.is_true(h.eventually(20, function() return create(bad).code ~= 0 end), 'the admission policy never became active')
  return list, only
end

-- A kubeconfig acting as the dispatcher's ServiceAccount (its token).
local function as_dispatcher(ns)
  local token = h.must(h.kubectl('create token cozystack-migrations-dispatch -n ' .. ns)).out:gsub('%s+$', '')
  local cfg = h.kubectl_json('config view --raw --minify')
  cfg.users = { { name = 'dispatcher', user = { token = token } } }
  cfg.contexts[1].context.user = 'dispatcher'
  return h.write(os.tmpname() .. '.json', json.encode(cfg))
end

describe('#e2e the chart\'s admission policy and Pod Security, by the local apiserver\'s own admission', function()
  local dir, chart
  setup(function()
    h.need_cluster()
    h.must(h.run(h.q(h.testenv) .. ' build helm'), 'tools/testenv build helm')
    dir, chart = release()
  end)
  teardown(function()
    runner.delete_namespaces()
    for _, name in ipairs(policies) do
      h.kubectl('delete validatingadmissionpolicybinding,validatingadmissionpolicy ' .. name .. ' --ignore-not-found')
    end
  end)

  it('admits a pod as the Jobs\' ServiceAccount only with the release\'s image, the engine\'s command and env, and no host access', function()
    local ns = runner.new_ns()
    local _, only = install(chart, ns)
    local good = pod_of(only.spec.template.spec, ns, 'good')
    local res = create(good)
    assert.are.equal(0, res.code, res.err)
    local cases = {
      { "runs the release's image", function(p, c) c.image = 'evil.example/x:v1' end },
      { 'shares no host namespace', function(p) p.hostPID = true end },
      { 'shares no host namespace', function(p) p.hostNetwork = true end },
      { 'mounts an emptyDir at /tmp and its token, nothing else', function(p, c)
        p.volumes[#p.volumes + 1] = { name = 'root', hostPath = { path = '/' } }
        c.volumeMounts[#c.volumeMounts + 1] = { name = 'root', mountPath = '/host' }
      end },
      { 'mounts an emptyDir at /tmp and its token, nothing else', function(p, c)
        p.volumes[#p.volumes + 1] = { name = 'tree', configMap = { name = 'evil' } }
        c.volumeMounts[#c.volumeMounts + 1] = { name = 'tree', mountPath = '/usr/share/cozy-migrate/migrations' }
      end },
      { "runs the engine's entrypoint", function(_, c) c.command = { '/bin/sh', '-c', 'id' } end },
      { "runs the engine's entrypoint", function(_, c) c.args = { 'exec', '--', 'sh' } end },
      { "runs the engine's entrypoint", function(_, c) c.lifecycle = { postStart = { exec = { command = { 'sh' } } } } end },
      { "runs the engine's entrypoint", function(_, c) c.livenessProbe = { exec = { command = { 'sh' } } } end },
      { 'takes only the env the chart gives it', function(_, c) c.env[#c.env + 1] = { name = 'BASH_ENV', value = '/tmp/x' } end },
      { 'takes only the env the chart gives it', function(_, c) c.env[#c.env + 1] = { name = 'SKIP', value = 'up-one' } end },
      { 'takes only the env the chart gives it', function(_, c) c.envFrom = { { configMapRef = { name = 'x' } } } end },
      { 'runs one container', function(p, c) p.initContainers = { { name = 'init', image = IMAGE } } end },
      { 'gets no privilege', function(_, c) c.securityContext.capabilities.add = { 'SYS_ADMIN' } end },
    }
    for i, case in ipairs(cases) do
      local p = pod_of(only.spec.template.spec, ns, 'bad-' .. i)
      case[2](p.spec, p.spec.containers[1])
      res = create(p)
      assert.are.equal(1, res.code, case[1] .. ': admitted')
      h.contains(res.err, 'ValidatingAdmissionPolicy', case[1])
      h.contains(res.err, case[1], case[1])
    end
    -- a pod of another identity is not the policy's business
    local other = pod_of(only.spec.template.spec, ns, 'other')
    other.spec.serviceAccountName = 'default'
    other.spec.containers[1].image = 'evil.example/x:v1'
    assert.are.equal(0, create(other).code)
  end)

  it('refuses an ephemeral container added to a migration\'s running pod (kubectl debug)', function()
    local ns = runner.new_ns()
    local _, only = install(chart, ns)
    h.must(create(pod_of(only.spec.template.spec, ns, 'running'), ''))
    local pod = h.kubectl_json('get pod running -n ' .. ns)
    pod.spec.ephemeralContainers = { { name = 'debugger', image = 'busybox:1.36', command = { 'sh' } } }
    local f = h.write(os.tmpname() .. '.json', json.encode(pod))
    local res = h.kubectl(string.format('replace --raw /api/v1/namespaces/%s/pods/running/ephemeralcontainers -f %s', ns, h.q(f)))
    assert.are_not.equal(0, res.code, res.out)
    h.contains(res.err, 'no init or ephemeral container')
  end)

  it('refuses a Job made with the dispatcher\'s token and another image or identity, and admits the dispatcher\'s own', function()
    local ns = runner.new_ns()
    local list = install(chart, ns)
    local cfg = as_dispatcher(ns)
    local tmpl
    for _, e in ipairs(find(list, 'CronJob').spec.jobTemplate.spec.template.spec.containers[1].env) do
      if e.name == 'MIGRATIONS_JOB_TEMPLATE' then tmpl = e.value end
    end
    local function job(name, sa, image)
      return { apiVersion = 'batch/v1', kind = 'Job', metadata = { name = name, namespace = ns },
        spec = { template = { spec = { serviceAccountName = sa, restartPolicy = 'Never',
          securityContext = { runAsNonRoot = true, seccompProfile = { type = 'RuntimeDefault' } },
          containers = { { name = 'migrate', image = image,
            securityContext = { allowPrivilegeEscalation = false, capabilities = { drop = { 'ALL' } } } } } } } } }
    end
    local function create_as(obj)
      local f = h.write(os.tmpname() .. '.json', json.encode(obj))
      return h.run(string.format('%s --kubeconfig %s create -f %s', h.q(KUBECTL), h.q(cfg), h.q(f)))
    end
    -- RBAC lets the token create any Job in the namespace; the policy does not
    local res = create_as(job('evil-image', 'cozystack-migrations-jobs', 'evil.example/x:v1'))
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, "runs the release's image")
    res = create_as(job('evil-sa', 'default', 'evil.example/x:v1'))
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, "the background dispatcher's Jobs run as cozystack-migrations-jobs")
    -- the dispatcher itself, with that token, from the release's own tree and template
    runner.make_ledger(ns, {})
    res = h.cozy('dispatch', '--namespace', ns, '--dir', dir, { env = { KUBECONFIG = cfg, MIGRATIONS_IMAGE = IMAGE,
      MIGRATIONS_JOB_TEMPLATE = tmpl } })
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'created Job mig-cozystack-version-bg-one-1 for background migration bg-one')
    -- nobody else (cluster-admin included) makes a Job the dispatcher would take for its own
    local forged = job('forged', 'default', 'busybox:1.36')
    forged.metadata.labels = { ['platform.cozystack.io/dispatched-by'] = 'cozy-migrate' }
    res = create(forged, '')
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, "is made only by its ServiceAccount (cozystack-migrations-dispatch)")
  end)

  it('has every pod the chart renders admitted by Pod Security "restricted", and refuses one without its seccomp profile', function()
    local ns = runner.new_ns()
    h.must(h.kubectl('label namespace ' .. ns .. ' pod-security.kubernetes.io/enforce=restricted'))
    local _, only = install(chart, ns)
    local list = render(chart, ns)
    local specs = {
      hook = find(list, 'Job', 'cozystack-migrations').spec.template.spec,
      only = only.spec.template.spec,
      dispatcher = find(list, 'CronJob').spec.jobTemplate.spec.template.spec,
    }
    for _, e in ipairs(specs.dispatcher.containers[1].env) do
      if e.name == 'MIGRATIONS_JOB_TEMPLATE' then specs.background = json.decode(e.value).spec.template.spec end
    end
    for what, spec in pairs(specs) do
      local res = create(pod_of(spec, ns, 'psa-' .. what))
      assert.are.equal(0, res.code, what .. ': ' .. res.err)
      h.lacks(res.err, 'would violate', what)
    end
    local bare = pod_of(specs.hook, ns, 'psa-bare')
    bare.spec.securityContext.seccompProfile = nil
    local res = create(bare)
    assert.are.equal(1, res.code)
    h.contains(res.err, 'violates PodSecurity "restricted:latest"')
    h.contains(res.err, 'seccompProfile')
  end)
end)
