-- The upgrade lane (make cluster-test; tools/cluster-test prepares it): a
-- platform chart made of a stand-in workload and the deploy/helm snippet,
-- installed and upgraded by real helm on a real node (tools/testenv
-- cluster) in a namespace that enforces Pod Security "restricted", with the
-- chart's admission policy on, the hook running the image built from the
-- Dockerfile as the image's entrypoint in a Pod of a Job, as 65534 on a
-- read-only root, with a projected ServiceAccount token. Releases A..E are
-- the tags of the platform repository (spec/cluster/fixtures/releases), one
-- image each.
-- The steps run in order and share the cluster; each writes its timings to
-- build/cluster-test/steps.txt.
--
-- Not in the default `make test` run (the file name does not end in _spec).
-- Each release's chart ships that release's migrations index (tools/
-- cluster-test made it; chart_args puts it in the chart before helm reads
-- it), so the render gate and the dispatcher see what the release ships.
local h = require('support.helpers')
local json = require('json')

local LANE = os.getenv('LANE_DIR')
assert(LANE and LANE ~= '', 'LANE_DIR is not set: run the lane with make cluster-test')
local IMAGE = os.getenv('LANE_IMAGE') or 'localhost/cozy-lane'
local NS, RELEASE = 'cozy-lane', 'lane-platform'
local CLUSTER = h.q(h.root .. '/tools/testenv') .. ' cluster'
local HELM = h.root .. '/build/testenv/bin/helm'
local CHART = LANE .. '/chart'
local VALUES = h.root .. '/spec/cluster/fixtures/lane-values.yaml'
local REASON = 'widgets are not used on this platform, see #42, decided by ops'

local function now()
  local p = io.popen('date +%s.%N')
  local v = tonumber(p:read('l'))
  p:close()
  return v
end

local function kc(args) return h.run(CLUSTER .. ' kubectl ' .. args) end
local function kc_json(args) return json.decode(h.must(kc(args .. ' -o json'), 'kubectl ' .. args).out) end
local function absent(what) return kc('get ' .. what .. ' --ignore-not-found -o name').out == '' end
-- The log of a finished Job's pod: asked again for up to 10 s while kubectl
-- gets nothing (once, a Job just complete answered an empty log); on a
-- failure, what kubectl said instead.
local function job_log(name)
  local r
  h.eventually(10, function()
    r = kc('logs job/' .. name .. ' -n ' .. NS)
    return r.code == 0 and r.out ~= ''
  end)
  return r.out ~= '' and r.out or ('(kubectl logs job/' .. name .. ': exit ' .. tostring(r.code) .. ': ' .. r.err .. ')')
end

-- helm inside the cluster's network, its caches under the lane's directory
-- (never the home directory's).
local function helm(args)
  local home = LANE .. '/helm-home'
  return h.run(string.format('%s exec env HELM_CACHE_HOME=%s HELM_CONFIG_HOME=%s HELM_DATA_HOME=%s %s %s',
    CLUSTER, h.q(home .. '/cache'), h.q(home .. '/config'), h.q(home .. '/data'), h.q(HELM), args))
end

-- The chart as release rel ships it: its index in files/ (chart: the
-- lane's chart, or another copy of it).
local function chart_for(rel, chart)
  h.write((chart or CHART) .. '/files/cozy-migrate-index.json', h.slurp(LANE .. '/indexes/' .. rel .. '.json'))
end

local function chart_args(rel, extra, chart)
  chart_for(rel, chart)
  return string.format('%s %s -n %s -f %s --set migrations.image=%s --set platform.release=%s %s',
    RELEASE, h.q(chart or CHART), NS, h.q(VALUES), h.q(IMAGE .. ':' .. rel), rel, extra or '')
end

-- The --timeout Helm gets: the hook Job's deadline (the chart derives it
-- from the lock wait and the migrations' budget) plus a minute for the
-- rest of the upgrade, as docs/operating.md tells operators.
local TIMEOUT
local function timeout()
  if not TIMEOUT then
    local out = h.must(helm('template ' .. chart_args('v1.0.0', '--show-only templates/migrations-hook.yaml'))).out
    TIMEOUT = tonumber(out:match('activeDeadlineSeconds: (%d+)')) + 60
  end
  return TIMEOUT
end

-- A watch on the hook Job while helm runs: when it started and finished
-- (complete or failed), from the Job's own status.
local WATCH = "jsonpath={.metadata.name}{'|'}{.status.startTime}{'|'}{.status.completionTime}{'|'}" ..
  "{.status.conditions[?(@.type=='Failed')].lastTransitionTime}{'|'}{.status.failed}{'\\n'}"
local function watch_jobs(ns)
  local out, pid = os.tmpname(), os.tmpname()
  h.must(h.run(string.format('(%s kubectl get jobs -n %s -w -o %s >%s 2>&1 & echo $! >%s)', CLUSTER, ns or NS, h.q(WATCH),
    h.q(out), h.q(pid))))
  return { out = out, pid = pid }
end

local function epoch(ts)
  local y, mo, d, hh, mi, ss = ts:match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)Z$')
  if not y then return nil end
  return os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(hh),
    min = tonumber(mi), sec = tonumber(ss) })
end

local function stop_watch(w, name)
  h.sleep(1)
  h.run('kill ' .. h.slurp(w.pid):gsub('%s', '') .. ' 2>/dev/null')
  local job = {}
  for line in h.slurp(w.out):gmatch('[^\n]+') do
    local n, start, done, failed, nfailed = line:match('^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
    if n == name and start ~= '' then
      job.start = epoch(start)
      job.finish = epoch(done ~= '' and done or failed) or job.finish
      job.failed = failed ~= ''
      job.pods_failed = tonumber(nfailed) or 0
    end
  end
  os.remove(w.out)
  os.remove(w.pid)
  if job.start and job.finish then job.seconds = job.finish - job.start end
  return job
end

local function note(name, seconds, what)
  local f = assert(io.open(LANE .. '/steps.txt', 'a'))
  f:write(string.format('  %-52s %8.1fs%s\n', name, seconds or 0, what and ('  (' .. what .. ')') or ''))
  f:close()
end

local function step(name, res)
  local job, what = res.job
  if job then
    what = 'hook Job ' .. (job.seconds and (job.seconds .. ' s') or 'not seen') ..
      (job.failed and (', failed after ' .. (job.pods_failed or 0) .. ' failed pod(s)') or '')
  end
  note(name, res.seconds, what)
end

local function upgrade(rel, extra)
  local w = watch_jobs()
  local t = now()
  local res = helm(string.format('upgrade --install --create-namespace --wait --timeout %ds %s', timeout(),
    chart_args(rel, extra)))
  res.seconds = now() - t
  res.job = stop_watch(w, 'cozystack-migrations')
  res.all = res.out .. res.err
  return res
end

-- A kubectl watch whose every line carries the observer's time (bash's
-- EPOCHREALTIME): the phases of a hook pod in fractions of a second, where
-- the API's own timestamps have whole seconds. In a session of its own, so
-- that stopping it stops the kubectl too.
local function timed_watch(args)
  local w = { out = os.tmpname(), pid = os.tmpname() }
  local cmd = CLUSTER .. ' kubectl ' .. args ..
    ' | while IFS= read -r l; do printf "%s %s\\n" "$EPOCHREALTIME" "$l"; done'
  h.must(h.run(string.format('(setsid bash -c %s >%s 2>&1 </dev/null & echo $! >%s)', h.q(cmd), h.q(w.out),
    h.q(w.pid))))
  return w
end

-- Stops it; its lines as {t = observer seconds, f = the '|' fields}.
local function stop_timed(w)
  h.run('kill -- -' .. h.slurp(w.pid):gsub('%s', '') .. ' 2>/dev/null')
  local lines = {}
  for t, rest in h.slurp(w.out):gmatch('(%d+%.%d+) ([^\n]*)') do
    local f = {}
    for v in (rest .. '|'):gmatch('([^|]*)|') do f[#f + 1] = v end
    lines[#lines + 1] = { t = tonumber(t), f = f }
  end
  os.remove(w.out)
  os.remove(w.pid)
  return lines
end

local HOOK_POD = "jsonpath={.metadata.name}{'|'}{.status.conditions[?(@.type=='PodScheduled')].status}{'|'}" ..
  "{.status.containerStatuses[0].state.running.startedAt}{'|'}{.status.containerStatuses[0].state.terminated.startedAt}" ..
  "{'|'}{.status.containerStatuses[0].state.terminated.finishedAt}{'|'}" ..
  "{.status.containerStatuses[0].state.terminated.exitCode}{'|'}{.status.containerStatuses[0].state.terminated.message}{'\\n'}"
local HOOK_JOB = "jsonpath={.metadata.name}{'|'}{.status.conditions[?(@.type=='Complete')].status}{'\\n'}"

-- helm upgrade to rel with chart, the hook's phases seen from outside:
-- each phase's end in seconds after helm started (nil: not seen), and
-- the engine's own account from the pod's termination message.
local function phased_upgrade(rel, chart)
  local pw = timed_watch('get pods -n ' .. NS .. ' -l job-name=cozystack-migrations -w -o ' .. h.q(HOOK_POD))
  local jw = timed_watch('get jobs -n ' .. NS .. ' -w -o ' .. h.q(HOOK_JOB))
  h.sleep(1) -- both watches are established (their first lists are empty)
  local t0 = now()
  local res = helm(string.format('upgrade --install --wait --timeout %ds %s', timeout(), chart_args(rel, nil, chart)))
  local ph = { helm = now() - t0 }
  res.all = res.out .. res.err
  h.sleep(1)
  local function first(lines, ok)
    for _, l in ipairs(lines) do if l.t >= t0 and ok(l.f) then return l.t - t0, l.f end end
  end
  local jobs, pods = stop_timed(jw), stop_timed(pw)
  ph.job = first(jobs, function(f) return f[1] == 'cozystack-migrations' end)
  ph.complete = first(jobs, function(f) return f[1] == 'cozystack-migrations' and f[2] == 'True' end)
  ph.pod = first(pods, function(f) return (f[1] or '') ~= '' end)
  ph.scheduled = first(pods, function(f) return f[2] == 'True' end)
  ph.started = first(pods, function(f) return (f[3] or '') ~= '' or (f[4] or '') ~= '' end)
  local exited, f = first(pods, function(x) return (x[5] or '') ~= '' end)
  ph.exited, ph.exit_code, ph.message = exited, f and tonumber(f[6]), f and f[7]
  return res, ph
end

local function ledger() return kc_json('get configmap cozystack-version -n ' .. NS) end
local function record(slug)
  local v = (ledger().data or {})['m.' .. slug]
  return v and json.decode(v)
end

local function tenant_settings() return kc_json('get configmap tenant-settings -n lane-tenant') end

local function markers(what)
  local list = kc_json('get configmaps -n lane-tenant -l lane.cozystack.io/slow=' .. what)
  return #list.items
end

local function cozy(args)
  return h.run(string.format('%s exec %s %s --local --namespace %s', CLUSTER, h.q(h.bin), args, NS))
end

describe('the upgrade lane: the hook chart installed and upgraded by real helm on a real node', function()
  setup(function()
    os.remove(LANE .. '/steps.txt')
    h.must(h.run(CLUSTER .. ' status'), 'the cluster is not up (tools/cluster-test brings it up)')
  end)

  it('installs release A on a fresh cluster in a namespace enforcing Pod Security "restricted": the hook Job seeds the ledger in a pod, then Helm applies the chart', function()
    assert.is_true(absent('namespace ' .. NS), 'the lane needs a fresh cluster')
    h.must(kc('create namespace ' .. NS))
    h.must(kc('label namespace ' .. NS .. ' pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted'))
    local res = upgrade('v1.0.0')
    step('install A (fresh: the hook seeds the ledger)', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_truthy(res.job.seconds, 'the hook Job was not seen completing')
    assert.is_false(res.job.failed)
    local l = ledger()
    assert.are.equal('true', l.metadata.labels['platform.cozystack.io/no-delete'])
    assert.are.equal('keep', l.metadata.annotations['helm.sh/resource-policy'])
    for _, slug in ipairs({ 'lane-seed-settings', 'lane-legacy-base' }) do
      assert.are.equal('skipped-fresh-install', record(slug).state, slug)
    end
    assert.are.equal('v1.0.0', tenant_settings().data.release)
    h.must(kc('rollout status deployment/platform-controller -n ' .. NS .. ' --timeout=60s'))
    -- the hook's objects went once it succeeded; the Jobs' ServiceAccount is the release's
    assert.is_true(absent('job/cozystack-migrations -n ' .. NS))
    assert.is_true(absent('serviceaccount/cozystack-migrations -n ' .. NS))
    assert.is_true(absent('clusterrolebinding/cozystack-migrations-' .. NS))
    assert.is_false(absent('serviceaccount/cozystack-migrations-jobs -n ' .. NS))
    -- the admission policy guarding the Jobs' identity is the release's
    assert.is_false(absent('validatingadmissionpolicy/cozystack-migrations-jobs-' .. NS))
    assert.is_false(absent('validatingadmissionpolicybinding/cozystack-migrations-jobs-' .. NS))
    h.lacks(res.all, 'would violate PodSecurity')
  end)

  it('upgrades to B: the hook runs the new Lua and legacy shell migrations before the chart applies, recorded with the image the chart passed', function()
    local res = upgrade('v1.1.0')
    step('upgrade to B (a Lua and a legacy shell migration)', res)
    assert.are.equal(0, res.code, res.all)
    for _, slug in ipairs({ 'lane-label-tenant', 'lane-legacy-stamp' }) do
      local r = record(slug)
      assert.are.equal('ok', r.state, slug)
      assert.are.equal(IMAGE .. ':v1.1.0', r.image, slug)
      assert.are.equal(1, r.attempts, slug)
    end
    assert.matches('%-v1%.1%.0$', record('lane-label-tenant').batch)
    local cm = tenant_settings()
    assert.are.equal('lane-label-tenant', cm.metadata.labels['lane.cozystack.io/labelled-by'])
    assert.are.equal('v1.1.0', cm.data.release, 'the chart applied after the hook, keeping the label')
    -- the shell migration ran as the image's user, with kubectl and jq, before B applied
    local proof = kc_json('get configmap legacy-proof -n lane-tenant').data
    assert.are.same({ uid = '65534', seen = 'v1.0.0', target = '3' }, proof)
    -- its `kubectl apply` of version left every record in place
    local data = ledger().data
    assert.are.equal('3', data.version)
    assert.is_truthy(data['m.lane-label-tenant'] and data['m.lane-seed-settings'])
  end)

  it('upgrades to C whose migration aborts: Helm fails with the reason, the pod\'s termination message and an Event on the ledger show it, nothing is recorded', function()
    local res = upgrade('v1.2.0')
    step('upgrade to C (an abort: Helm fails)', res)
    assert.are_not.equal(0, res.code)
    assert.matches('pre-upgrade hooks failed', res.all, 1, true)
    -- the hook pod's log, printed by Helm itself (hook-output-log-policy)
    assert.matches('lane-tenant/lane-prerequisite is missing', res.all, 1, true)
    assert.is_true(res.job.failed)
    local pods = kc_json('get pods -n ' .. NS .. ' -l job-name=cozystack-migrations').items
    assert.are.equal(2, #pods, 'backoffLimit 1: one retry')
    for _, p in ipairs(pods) do
      local term = p.status.containerStatuses[1].state.terminated
      assert.are.equal(1, term.exitCode)
      assert.matches('lane-tenant/lane-prerequisite is missing', term.message, 1, true)
    end
    local ev = kc_json('get events -n ' .. NS .. ' --field-selector involvedObject.name=cozystack-version,reason=MigrationFailed').items
    assert.is_true(#ev >= 1, 'no MigrationFailed Event on the ledger')
    assert.matches('lane-needs-prerequisite', ev[#ev].message, 1, true)
    assert.matches('lane-prerequisite is missing', ev[#ev].message, 1, true)
    assert.is_nil(record('lane-needs-prerequisite'))
    -- an abort records nothing, but the runner keeps its last failure on
    -- the ledger: status --failed lists it (exit 1), saying where it came
    -- from; `status` shows the slug pending
    local tree = LANE .. '/trees/v1.2.0'
    local failed = cozy('status --failed --dir ' .. h.q(tree))
    assert.are.equal(1, failed.code, failed.out .. failed.err)
    assert.matches('lane%-needs%-prerequisite%s+pending .*lane%-prerequisite is missing', failed.out)
    assert.matches("in the ledger's annotation platform.cozystack.io/pending-failures", failed.out, 1, true)
    local status = h.must(cozy('status --dir ' .. h.q(tree)))
    assert.matches('lane%-needs%-prerequisite%s+pending', status.out)
    local f = assert(io.open(LANE .. '/abort-status.txt', 'w'))
    f:write('$ cozy-migrate status --failed (exit ', failed.code, ')\n', failed.out, failed.err,
      '$ cozy-migrate status\n', status.out)
    f:close()
  end)

  it('retries C once the operator fixed the cause: the migration runs again and is recorded', function()
    h.must(kc('create configmap lane-prerequisite -n lane-tenant --from-literal=value=fixed-by-ops'))
    local res = upgrade('v1.2.0')
    step('retry C after the fix', res)
    assert.are.equal(0, res.code, res.all)
    local r = record('lane-needs-prerequisite')
    assert.are.equal('ok', r.state)
    assert.are.equal(1, r.attempts, 'the aborted runs recorded nothing')
    assert.are.equal('fixed-by-ops', tenant_settings().metadata.annotations['lane.cozystack.io/prerequisite'])
    assert.is_true(absent('job/cozystack-migrations -n ' .. NS), 'the failed Job was replaced, then deleted')
  end)

  it('upgrades to D past a migration that cannot run here through the chart values (skip), its reason with commas intact', function()
    local res = upgrade('v1.3.0')
    step('upgrade to D (fails)', res)
    assert.are_not.equal(0, res.code)
    assert.matches('widgets.lane.cozystack.io is not served', res.all, 1, true)
    res = upgrade('v1.3.0', "--set 'migrations.skip={lane-cannot-run}' --set-json " ..
      h.q('migrations.skipReason="' .. REASON .. '"'))
    step('upgrade to D, skip through the values', res)
    assert.are.equal(0, res.code, res.all)
    local r = record('lane-cannot-run')
    assert.are.equal('skipped', r.state)
    assert.are.equal('Operator', r.reason)
    assert.are.equal(REASON, r.message)
    assert.matches('cozystack%-migrations', r.by)
  end)

  it('re-runs one slug with the --only Job rendered from the chart: its record is rewritten with attempts incremented', function()
    local out = h.must(helm('template ' .. chart_args('v1.3.0',
      '--set migrations.only=lane-label-tenant --show-only templates/migrations-only.yaml'))).out
    local file = h.write(LANE .. '/only-job.yaml', out)
    local t = now()
    h.must(kc('apply -f ' .. h.q(file)))
    local waited = kc('wait --for=condition=complete job/cozystack-migration-only -n ' .. NS .. ' --timeout=180s')
    local seconds = now() - t
    local job = kc_json('get job cozystack-migration-only -n ' .. NS)
    note('the --only Job (re-run lane-label-tenant)', seconds, job.status.completionTime and
      ('Job ' .. (epoch(job.status.completionTime) - epoch(job.status.startTime)) .. ' s'))
    assert.are.equal(0, waited.code, waited.out .. waited.err .. kc('logs -n ' .. NS .. ' job/cozystack-migration-only').out)
    local r = record('lane-label-tenant')
    assert.are.equal('ok', r.state)
    assert.are.equal(2, r.attempts)
    assert.are.equal(IMAGE .. ':v1.3.0', r.image)
    h.must(kc('delete job cozystack-migration-only -n ' .. NS .. ' --wait=true'))
  end)


  -- The background tier at D: the render gate leaves an upgrade with
  -- nothing pending without a hook; the dispatcher's CronJob (suspended in
  -- the lane's values until here) then runs D's background migrations, one
  -- Job per slug, one after another; the failing one is retried with its
  -- backoff up to the bound and reported.
  it('upgrades with nothing pending without a hook: no Job, no pod, no image pulled', function()
    local pods0 = {}
    for _, p in ipairs(kc_json('get pods -n ' .. NS).items) do pods0[p.metadata.name] = true end
    local wp, wpid = os.tmpname(), os.tmpname()
    h.must(h.run(string.format('(%s kubectl get pods,jobs -n %s -w -o name >%s 2>&1 & echo $! >%s)', CLUSTER, NS,
      h.q(wp), h.q(wpid))))
    local res = upgrade('v1.3.0')
    step('upgrade to D again, nothing pending (no hook)', res)
    h.sleep(1)
    h.run('kill ' .. h.slurp(wpid):gsub('%s', '') .. ' 2>/dev/null')
    assert.are.equal(0, res.code, res.all)
    assert.is_nil(res.job.start, 'a hook Job ran')
    local seen = {}
    for name in h.slurp(wp):gmatch('([%w/.%-]+)') do
      local kind, n = name:match('^([%w.]+)/(.+)$')
      if kind == 'job.batch' or (kind == 'pod' and not pods0[n]) then seen[#seen + 1] = name end
    end
    assert.are.same({}, seen, 'objects the upgrade created')
    for _, p in ipairs(kc_json('get pods -n ' .. NS).items) do
      assert.is_true(pods0[p.metadata.name] ~= nil, 'a pod appeared: ' .. p.metadata.name)
    end
    assert.is_true(absent('serviceaccount/cozystack-migrations -n ' .. NS))
    -- the release's index is in the cluster, with the background slugs D ships
    local ix = json.decode(kc_json('get configmap cozystack-migrations-index -n ' .. NS).data['index.json'])
    local bg = {}
    for _, b in ipairs(ix.background) do bg[#bg + 1] = b.slug end
    assert.are.same({ 'lane-bg-backfill', 'lane-bg-flaky', 'lane-bg-relabel' }, bg)
    os.remove(wp)
    os.remove(wpid)
  end)

  it('finds the live index in agreement with the image\'s own tree (cozy-migrate index --check in a pod of the image)', function()
    local pod = { apiVersion = 'v1', kind = 'Pod', metadata = { name = 'lane-index-check', namespace = NS },
      spec = { restartPolicy = 'Never',
        securityContext = { runAsNonRoot = true, runAsUser = 65534, seccompProfile = { type = 'RuntimeDefault' } },
        containers = { { name = 'check', image = IMAGE .. ':v1.3.0', imagePullPolicy = 'Never',
          command = { '/usr/bin/cozy-migrate' },
          args = { 'index', '--check', '/index/index.json', '--image', IMAGE .. ':v1.3.0' },
          securityContext = { allowPrivilegeEscalation = false, capabilities = { drop = { 'ALL' } } },
          volumeMounts = { { name = 'index', mountPath = '/index' } } } },
        volumes = { { name = 'index', configMap = { name = 'cozystack-migrations-index' } } } } }
    local f = h.write(LANE .. '/index-check.json', json.encode(pod))
    local t = now()
    h.must(kc('apply -f ' .. h.q(f)))
    local waited = kc("wait --for=jsonpath='{.status.phase}'=Succeeded pod/lane-index-check -n " .. NS .. ' --timeout=90s')
    local logs = kc('logs lane-index-check -n ' .. NS).out
    note('index --check in a pod of the image', now() - t)
    assert.are.equal(0, waited.code, waited.err .. logs)
    h.contains(logs, 'agrees with the tree /usr/share/cozy-migrate: 6 pre-apply, 3 background, 0 revoked slugs')
    h.must(kc('delete pod lane-index-check -n ' .. NS .. ' --wait=true'))
  end)

  it('dispatches the background tier through the CronJob: one Job per slug, one after another, each recorded; the failing one retried up to the bound, then reported', function()
    local t0 = now()
    local res = upgrade('v1.3.0', "--set migrations.dispatch.suspend=false --set " ..
      h.q('migrations.dispatch.schedule=* * * * *') .. ' --set migrations.dispatch.retryBackoff=20s' ..
      ' --set migrations.dispatch.retryBackoffMax=20s')
    step('upgrade to D, dispatcher on (every minute, backoff 20 s)', res)
    assert.are.equal(0, res.code, res.all)
    -- the first background Job comes from a run the CronJob scheduled itself
    local first
    assert.is_true(h.eventually(90, function()
      local r = kc('get job mig-cozystack-version-lane-bg-backfill-1 -n ' .. NS .. ' -o name')
      first = r.code == 0
      return first
    end), 'the CronJob made no dispatch within 90 s')
    local first_at = now() - t0
    local by_cron = false
    for _, j in ipairs(kc_json('get jobs -n ' .. NS).items) do
      for _, o in ipairs(j.metadata.ownerReferences or {}) do
        if o.kind == 'CronJob' and o.name == 'cozystack-migrations-dispatch' and
            (j.metadata.annotations or {})['cronjob.kubernetes.io/instantiate'] ~= 'manual' then
          by_cron = true
        end
      end
    end
    assert.is_true(by_cron, 'no dispatcher Job the CronJob scheduled')
    note('  upgrade to the first background Job (the CronJob)', first_at)
    -- then the lane runs the CronJob's Job by hand (kubectl create job
    -- --from) whenever nothing runs, instead of waiting a minute each time.
    -- The schedule is suspended first: a Job made --from is the CronJob's
    -- (its controller reference), and the CronJob keeps one successful Job
    -- (successfulJobsHistoryLimit 1), so a scheduled run ending after the
    -- lane's removed the lane's before its log was read (`jobs.batch
    -- "lane-dispatch-9" not found`). With no scheduled run made after, and
    -- none still running when the lane makes one (dispatchers() below), the
    -- lane's Job is the newest the CronJob owns until the lane deletes it.
    h.must(kc('patch cronjob cozystack-migrations-dispatch -n ' .. NS .. [[ --type=merge -p '{"spec":{"suspend":true}}']]))
    local function dispatchers()
      local out = {}
      for _, j in ipairs(kc_json('get jobs -n ' .. NS).items) do
        for _, o in ipairs(j.metadata.ownerReferences or {}) do
          if o.controller and o.kind == 'CronJob' and o.name == 'cozystack-migrations-dispatch' then out[#out + 1] = j end
        end
      end
      return out
    end
    local function mig_jobs()
      local out = {}
      for _, j in ipairs(kc_json('get jobs -n ' .. NS .. ' -l platform.cozystack.io/dispatched-by=cozy-migrate').items) do
        out[#out + 1] = j
      end
      table.sort(out, function(a, b) return a.metadata.creationTimestamp < b.metadata.creationTimestamp or
        (a.metadata.creationTimestamp == b.metadata.creationTimestamp and a.metadata.name < b.metadata.name) end)
      return out
    end
    local function finished(j)
      for _, c in ipairs(j.status.conditions or {}) do
        if (c.type == 'Complete' or c.type == 'Failed') and c.status == 'True' then return c end
      end
    end
    local function settled()
      local f, a, b = record('lane-bg-flaky'), record('lane-bg-backfill'), record('lane-bg-relabel')
      return f and f.attempts == 3 and a and a.state == 'ok' and b and b.state == 'ok'
    end
    local n, lines = 0, {}
    local deadline = now() + 360
    while now() < deadline do
      local busy = false
      for _, j in ipairs(mig_jobs()) do busy = busy or not finished(j) end
      for _, j in ipairs(dispatchers()) do busy = busy or not finished(j) end
      if not busy and settled() then break end
      if not busy then
        n = n + 1
        local name = 'lane-dispatch-' .. n
        h.must(kc('create job ' .. name .. ' --from=cronjob/cozystack-migrations-dispatch -n ' .. NS))
        local w = kc('wait --for=condition=complete job/' .. name .. ' -n ' .. NS .. ' --timeout=90s')
        local log = job_log(name)
        lines[#lines + 1] = log
        assert.are.equal(0, w.code, 'dispatch ' .. name .. ': ' .. w.err .. log)
        h.must(kc('delete job ' .. name .. ' -n ' .. NS .. ' --wait=false'))
        if log:find('nothing to do', 1, true) then h.sleep(3) end
      else
        h.sleep(1)
      end
    end
    assert.is_true(settled(), 'the tier did not settle in time:\n' .. table.concat(lines))
    -- once exhausted, a dispatch creates nothing more and says why
    n = n + 1
    h.must(kc('create job lane-dispatch-' .. n .. ' --from=cronjob/cozystack-migrations-dispatch -n ' .. NS))
    h.must(kc('wait --for=condition=complete job/lane-dispatch-' .. n .. ' -n ' .. NS .. ' --timeout=90s'))
    local last = job_log('lane-dispatch-' .. n)
    h.contains(last, 'nothing to do: no background migration is pending (2 recorded, 0 waiting for a retry, 1 past their 3 attempts')
    local seconds = now() - t0
    -- one Job per attempt, in this order, each after the one before ended
    local jobs = mig_jobs()
    local got = {}
    for _, j in ipairs(jobs) do got[#got + 1] = j.metadata.name end
    local J = function(r) return 'mig-cozystack-version-' .. r end
    assert.are.same({ J('lane-bg-backfill-1'), J('lane-bg-flaky-1'), J('lane-bg-relabel-1'), J('lane-bg-flaky-2'),
      J('lane-bg-flaky-3') }, got)
    local ledger_uid = ledger().metadata.uid
    for i, j in ipairs(jobs) do
      local c = finished(j)
      assert.is_truthy(c, j.metadata.name .. ' did not finish')
      local secs = epoch(c.lastTransitionTime) - epoch(j.metadata.creationTimestamp)
      note('  ' .. j.metadata.name, secs, (c.type == 'Complete' and 'complete' or 'failed') .. ', creation to end')
      if i > 1 then
        local prev = finished(jobs[i - 1])
        assert.is_true(epoch(j.metadata.creationTimestamp) >= epoch(prev.lastTransitionTime),
          j.metadata.name .. ' was created before ' .. jobs[i - 1].metadata.name .. ' ended')
      end
      local env = {}
      for _, e in ipairs(j.spec.template.spec.containers[1].env) do env[e.name] = e.value end
      assert.are.equal(j.metadata.labels['platform.cozystack.io/migration'], env.ONLY)
      assert.are.equal(IMAGE .. ':v1.3.0', j.spec.template.spec.containers[1].image)
      assert.are.equal('cozystack-migrations-jobs', j.spec.template.spec.serviceAccountName)
      -- owned by the ledger; restricted
      assert.are.equal(ledger_uid, j.metadata.ownerReferences[1].uid)
      assert.are.equal(ledger_uid, j.metadata.labels['platform.cozystack.io/ledger-uid'])
      assert.are.equal('RuntimeDefault', j.spec.template.spec.securityContext.seccompProfile.type)
    end
    -- each recorded by the runner in its Job
    for _, slug in ipairs({ 'lane-bg-backfill', 'lane-bg-relabel' }) do
      local r = record(slug)
      assert.are.equal('ok', r.state, slug)
      assert.are.equal(1, r.attempts, slug)
      assert.are.equal('background', r.tier, slug)
      assert.are.equal(IMAGE .. ':v1.3.0', r.image, slug)
    end
    local f = record('lane-bg-flaky')
    assert.are.equal('failed', f.state)
    assert.are.equal(3, f.attempts)
    assert.matches('widget backend is unreachable', f.message, 1, true)
    -- each attempt executed once: three of the failing one, one of each other
    for slug, times in pairs({ ['lane-bg-flaky'] = 3, ['lane-bg-backfill'] = 1, ['lane-bg-relabel'] = 1 }) do
      assert.are.equal(times, #kc_json('get configmaps -n lane-tenant -l lane.cozystack.io/bg=' .. slug).items, slug)
    end
    -- no two migrations overlapped
    for _, cm in ipairs(kc_json('get configmaps -n lane-tenant').items) do
      assert.is_falsy(cm.metadata.name:match('^lane%-overlap%-'), 'two migrations overlapped')
    end
    -- the failed attempts say why where an operator looks: the pod's termination message
    for _, name in ipairs({ J('lane-bg-flaky-1'), J('lane-bg-flaky-3') }) do
      local p = kc_json('get pods -n ' .. NS .. ' -l job-name=' .. name).items[1]
      local term = p.status.containerStatuses[1].state.terminated
      assert.are.equal(1, term.exitCode, name)
      h.contains(term.message, 'failed: lane-bg-flaky (background): ScriptError: lane-bg-flaky: the widget backend is unreachable', name)
    end
    -- and the ledger's Events: one per Job dispatched (on the Job), one for the exhausted slug
    local exhausted = kc_json('get events -n ' .. NS .. ' --field-selector reason=MigrationAttemptsExhausted').items
    assert.are.equal(1, #exhausted)
    assert.are.equal('cozystack-version', exhausted[1].involvedObject.name)
    h.contains(exhausted[1].message, 'lane-bg-flaky failed 3 of 3 attempts')
    local dispatched = kc_json('get events -n ' .. NS .. ' --field-selector reason=MigrationDispatched').items
    assert.are.equal(5, #dispatched)
    -- status shows the tier as the dispatcher sees it
    local st = h.must(cozy('status --dir ' .. h.q(LANE .. '/trees/v1.3.0'))).out
    assert.matches('lane%-bg%-flaky%s+failed 3 of 3 attempts %(ScriptError%): not retried', st)
    h.write(LANE .. '/background-status.txt', st .. '\n' .. table.concat(lines) .. last)
    note('the background tier (5 Jobs, ' .. n .. ' dispatches by hand)', seconds)
  end)

  it('refuses a Job made with the dispatcher\'s token and another image, or as another identity (the admission policy), where the dispatcher\'s own ran', function()
    local t = now()
    local token = h.must(kc('create token cozystack-migrations-dispatch -n ' .. NS)).out:gsub('%s+$', '')
    local cfg = kc_json('config view --raw --minify')
    cfg.users = { { name = 'dispatcher', user = { token = token } } }
    cfg.contexts[1].context.user = 'dispatcher'
    local file = h.write(LANE .. '/dispatcher-kubeconfig.json', json.encode(cfg))
    local function job(name, sa, image)
      return { apiVersion = 'batch/v1', kind = 'Job', metadata = { name = name, namespace = NS },
        spec = { backoffLimit = 0, template = { spec = { serviceAccountName = sa, restartPolicy = 'Never',
          securityContext = { runAsNonRoot = true, runAsUser = 65534, seccompProfile = { type = 'RuntimeDefault' } },
          containers = { { name = 'migrate', image = image, imagePullPolicy = 'Never', command = { '/bin/sh', '-c', 'id' },
            securityContext = { allowPrivilegeEscalation = false, capabilities = { drop = { 'ALL' } } } } } } } } }
    end
    local function create_as(obj)
      local f = h.write(LANE .. '/forged-' .. obj.metadata.name .. '.json', json.encode(obj))
      return h.run(string.format('%s exec %s --kubeconfig %s create -f %s', CLUSTER,
        h.q(h.root .. '/build/testenv/bin/kubectl'), h.q(file), h.q(f)))
    end
    -- RBAC alone lets that token create any Job in the namespace
    local can = h.run(string.format('%s exec %s --kubeconfig %s auth can-i create jobs -n %s', CLUSTER,
      h.q(h.root .. '/build/testenv/bin/kubectl'), h.q(file), NS))
    h.contains(can.out, 'yes')
    local res = create_as(job('lane-forged-image', 'cozystack-migrations-jobs', 'localhost/cozy-testenv/pause:1'))
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, "runs the release's image")
    res = create_as(job('lane-forged-sa', 'default', 'localhost/cozy-testenv/pause:1'))
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, "the background dispatcher's Jobs run as cozystack-migrations-jobs")
    assert.is_true(absent('job/lane-forged-image -n ' .. NS))
    assert.is_true(absent('job/lane-forged-sa -n ' .. NS))
    -- a pod of the Jobs' identity with another image, made by cluster-admin, is refused too
    local pod = { apiVersion = 'v1', kind = 'Pod', metadata = { name = 'lane-forged-pod', namespace = NS },
      spec = job('x', 'cozystack-migrations-jobs', 'localhost/cozy-testenv/pause:1').spec.template.spec }
    res = kc('create -f ' .. h.q(h.write(LANE .. '/forged-pod.json', json.encode(pod))))
    assert.are.equal(1, res.code, res.out)
    h.contains(res.err, 'ValidatingAdmissionPolicy')
    note('a Job with the dispatcher\'s token and another image: refused', now() - t)
  end)

  it('completes E after the hook pod is deleted in the middle of a migration (TERM, KILL after the grace period), recording nothing false', function()
    local w = watch_jobs()
    local out, rc = os.tmpname(), os.tmpname()
    local t = now()
    h.must(h.run(string.format('( %s exec env HELM_CACHE_HOME=%s %s upgrade --install --wait --timeout %ds %s >%s 2>&1; echo $? >%s ) &',
      CLUSTER, h.q(LANE .. '/helm-home/cache'), h.q(HELM), timeout(), chart_args('v1.4.0'), h.q(out), h.q(rc))))
    -- the migration has started (its marker) in a pod the kubelet reports
    -- running (its status may lag the container's start)
    local pod = ''
    assert.is_true(h.eventually(180, function()
      if markers('started') ~= 1 then return false end
      pod = kc('get pods -n ' .. NS .. ' -l job-name=cozystack-migrations --field-selector=status.phase=Running ' ..
        "-o jsonpath='{.items[*].metadata.name}'").out
      return pod:match('^%S+$') ~= nil
    end), 'lane-slow-step did not start in a running pod')
    -- the cluster's memory at its fullest: the hook's pod running, and the workload's
    h.write(LANE .. '/memory.txt', h.run(CLUSTER .. ' stats').out)
    -- how the killed pod's container ended, seen while it still exists
    local term = os.tmpname()
    h.must(h.run(string.format("(%s kubectl get pod %s -n %s -w -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}{\"\\n\"}' >%s 2>&1 &)",
      CLUSTER, pod, NS, h.q(term))))
    local t_del = now()
    h.must(kc('delete pod ' .. pod .. ' -n ' .. NS .. ' --grace-period=10 --wait=true --timeout=60s'))
    local gone = now() - t_del
    -- the run it cut short recorded nothing
    assert.is_nil(record('lane-slow-step'))
    assert.is_true(h.eventually(timeout(), function() return h.slurp(rc) ~= '' end), 'helm did not finish')
    local res = { code = tonumber(h.slurp(rc)), seconds = now() - t, job = stop_watch(w, 'cozystack-migrations') }
    res.all = h.slurp(out)
    step('upgrade to E, hook pod deleted mid-migration', res)
    local exit = h.slurp(term):match('(%d+)%s*$')
    note('  pod deletion to pod gone', gone, 'the killed container exited ' .. (exit or '?'))
    assert.are.equal(0, res.code, res.all)
    local r = record('lane-slow-step')
    assert.are.equal('ok', r.state)
    assert.are.equal(1, r.attempts)
    assert.is_falsy(r.runner:find(pod, 1, true), 'recorded by the killed pod: ' .. r.runner)
    assert.are.equal(2, markers('started'), 'two executions')
    assert.are.equal(1, markers('done'), 'only the second ran to its end')
    assert.is_truthy(exit == '137' or exit == '143', 'the killed container exited ' .. tostring(exit))
    os.remove(out)
    os.remove(rc)
    os.remove(term)
  end)

  -- The upgrade at the pod-start limit: release F ships one trivial
  -- pre-apply migration. The same chart with the hook's container running
  -- the image's `true` instead of the engine (a copy of the chart, its
  -- hook's command replaced) gives what Kubernetes alone costs: the Job,
  -- its pod scheduled and started, the container's exit, the Job
  -- complete. The bare hook runs twice (the first applies F's chart, so
  -- both measured upgrades change nothing else), then the engine's, which
  -- runs the migration; the difference of the hooks is the engine's part.
  it('measures the upgrade at the pod-start limit: one trivial pending migration against a bare hook running the image\'s true, phase by phase', function()
    local bare = LANE .. '/chart-bare'
    h.must(h.run('rm -rf ' .. h.q(bare) .. ' && cp -R ' .. h.q(CHART) .. ' ' .. h.q(bare)))
    local hook = bare .. '/templates/migrations-hook.yaml'
    local text, n = h.slurp(hook):gsub('"args" %$args "env" %$env%)',
      '"args" (list) "env" $env "command" (list "/bin/true"))')
    assert.are.equal(1, n, 'the hook template changed: the bare copy cannot replace its command')
    h.write(hook, text)
    local warm = phased_upgrade('v1.5.0', bare)
    assert.are.equal(0, warm.code, warm.all)
    assert.is_nil(record('lane-trivial'), 'the bare hook ran no migration')
    local res_b, b = phased_upgrade('v1.5.0', bare)
    assert.are.equal(0, res_b.code, res_b.all)
    assert.is_nil(record('lane-trivial'))
    assert.are.equal(0, b.exit_code)
    local res_e, e = phased_upgrade('v1.5.0')
    assert.are.equal(0, res_e.code, res_e.all)
    local r = record('lane-trivial')
    assert.are.equal('ok', r.state)
    assert.are.equal(0, e.exit_code)
    -- the engine says where its seconds went, from the process's start
    local account = (e.message or ''):match('ok: 1 step in ([%d.]+) s from the process\'s start: (.-)%s*$')
    assert.is_truthy(account, 'the hook pod\'s termination message: ' .. tostring(e.message))
    for _, p in ipairs({ b, e }) do
      for _, k in ipairs({ 'job', 'pod', 'scheduled', 'started', 'exited', 'complete' }) do
        assert.is_truthy(p[k], 'phase ' .. k .. ' not seen')
      end
    end
    -- a container that ends within a second or so is reported started
    -- and exited in one status update of the kubelet: then one row, and
    -- the engine's own account splits the time inside it
    local rows = {
      { 'helm upgrade, start to Job created', 0, 'job' },
      { 'Job created to its pod created', 'job', 'pod' },
      { 'pod created to scheduled', 'pod', 'scheduled' },
    }
    if b.started == b.exited or e.started == e.exited then
      rows[#rows + 1] = { 'scheduled to container started and exited', 'scheduled', 'exited' }
    else
      rows[#rows + 1] = { 'scheduled to container started', 'scheduled', 'started' }
      rows[#rows + 1] = { 'container started to exited', 'started', 'exited' }
    end
    rows[#rows + 1] = { 'container exited to Job complete', 'exited', 'complete' }
    rows[#rows + 1] = { 'Job complete to helm done', 'complete', 'helm' }
    local function at(p, k) return k == 0 and 0 or p[k] end
    local f = assert(io.open(LANE .. '/steps.txt', 'a'))
    f:write('  the upgrade at the pod-start limit (F: one trivial pre-apply migration), seconds:\n')
    f:write(string.format('    %-44s %10s %10s %10s\n', 'phase (observer\'s clock)', 'bare hook', 'engine', 'engine -'))
    for _, row in ipairs(rows) do
      local db, de = at(b, row[3]) - at(b, row[2]), at(e, row[3]) - at(e, row[2])
      f:write(string.format('    %-44s %10.2f %10.2f %+10.2f\n', row[1], db, de, de - db))
    end
    local hb, he = b.complete - b.job, e.complete - e.job
    f:write(string.format('    %-44s %10.2f %10.2f %+10.2f\n', 'the hook: Job created to Job complete', hb, he, he - hb))
    f:write(string.format('    %-44s %10.2f %10.2f %+10.2f\n', 'helm upgrade in all', b.helm, e.helm, e.helm - b.helm))
    f:write('    inside the engine\'s container (its termination message): ' .. e.message:gsub('%s+$', '') .. '\n')
    f:write(string.format('    goal: the engine\'s part <= 0.5 s of the hook\'s time: %s (%.2f s of %.2f s; the rest is Kubernetes\')\n',
      he - hb <= 0.5 and 'met' or 'MISSED', he - hb, he))
    f:close()
  end)

  it('leaves no hook ServiceAccount or binding behind after helm uninstall, even after a failed hook; the ledger stays', function()
    -- skipping a slug recorded ok is refused (exit 11): the Job fails at once, no retry
    local res = upgrade('v1.5.0', "--set 'migrations.skip={lane-label-tenant}' --set migrations.skipReason=late")
    step('upgrade refused by the ledger (exit 11)', res)
    assert.are_not.equal(0, res.code)
    local job = kc_json('get job cozystack-migrations -n ' .. NS)
    local failed
    for _, c in ipairs(job.status.conditions or {}) do if c.type == 'Failed' then failed = c end end
    assert.are.equal('PodFailurePolicy', failed and failed.reason)
    assert.are.equal(1, job.status.failed)
    assert.is_false(absent('serviceaccount/cozystack-migrations -n ' .. NS))
    assert.is_false(absent('clusterrolebinding/cozystack-migrations-' .. NS))
    local t = now()
    local un = helm('uninstall ' .. RELEASE .. ' -n ' .. NS .. ' --wait --timeout 120s')
    note('helm uninstall', now() - t)
    assert.are.equal(0, un.code, un.out .. un.err)
    for _, what in ipairs({ 'serviceaccount/cozystack-migrations -n ' .. NS, 'clusterrolebinding/cozystack-migrations-' .. NS,
      'serviceaccount/cozystack-migrations-jobs -n ' .. NS, 'clusterrolebinding/cozystack-migrations-jobs-' .. NS,
      'validatingadmissionpolicy/cozystack-migrations-jobs-' .. NS,
      'validatingadmissionpolicybinding/cozystack-migrations-jobs-' .. NS }) do
      assert.is_true(absent(what), what .. ' outlived the release')
    end
    -- the failed Job keeps its pod's logs until its TTL; the ledger is not the chart's
    assert.are.equal(86400, kc_json('get job cozystack-migrations -n ' .. NS).spec.ttlSecondsAfterFinished)
    assert.are.equal('ok', record('lane-slow-step').state)
  end)
end)

-- The first upgrade onto the engine: a platform shaped like Cozystack's
-- before it (spec/cluster/fixtures/old-platform: its chart renders the
-- ledger itself when absent, with keep and the no-delete label; a numbered
-- hook Job gated on version < targetVersion runs the legacy scripts and
-- each stamps `version`), upgraded to the same chart wired with the engine
-- (tools/cluster-test made both: the ledger template and the old hook
-- removed, the snippet added, values merged). Release G (v1.6.0) ships
-- legacy scripts 3 and 4 and a new Lua migration; it revokes the main
-- sequence's migrations, which work on lane-tenant. Each case is a block
-- of its own, in its own namespace and release; they run in order.
describe('the first upgrade onto the engine, from a platform with a numbered hook', function()
  local ONS, OREL = 'cozy-old', 'old-platform'
  local OLD, WIRED = LANE .. '/old-chart', LANE .. '/wired-chart'
  local FIXO = h.root .. '/spec/cluster/fixtures/old-platform'
  local G = 'v1.6.0'
  local TENANT = 'lane-old-tenant'

  local function values(wired)
    return string.format('-f %s %s --set migrations.image=%s', h.q(FIXO .. '/migrations-values.yaml'),
      wired and ('-f ' .. h.q(FIXO .. '/wired-values.yaml')) or '', h.q(IMAGE .. ':' .. G))
  end
  -- helm upgrade --install of the old chart or the wired one, timed, the
  -- hook Jobs (either) watched
  local function up(ns, rel, wired, extra, verb)
    if wired then chart_for(G, WIRED) end
    local w = watch_jobs(ns)
    local t = now()
    local res = helm(string.format('%s %s %s -n %s --create-namespace --wait --timeout 600s %s %s',
      verb or 'upgrade --install', rel, h.q(wired and WIRED or OLD), ns, values(wired), extra or ''))
    res.seconds = now() - t
    res.job = stop_watch(w, wired and 'cozystack-migrations' or 'cozystack-migration-hook')
    res.all = res.out .. res.err
    return res
  end
  local function get(what, ns) return kc_json('get ' .. what .. ' -n ' .. ns) end
  local function gone(what) return kc('get ' .. what .. ' --ignore-not-found -o name').out == '' end
  local function ledger_in(ns) return get('configmap cozystack-version', ns) end
  local function rec(ns, slug)
    local v = (ledger_in(ns).data or {})['m.' .. slug]
    return v and json.decode(v)
  end
  local function ran(label, value)
    return kc_json('get configmaps -n ' .. TENANT .. ' -l lane.cozystack.io/' .. label .. '=' .. value).items
  end

  local uid
  it('installs the old-shape platform: its chart renders the ledger (version 3, keep, no-delete), no hook runs', function()
    local res = up(ONS, OREL, false)
    step('old shape: install (its chart renders the ledger)', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_nil(res.job.start, 'the numbered hook ran on a fresh install')
    local l = ledger_in(ONS)
    assert.are.equal('3', l.data.version)
    assert.are.equal('keep', l.metadata.annotations['helm.sh/resource-policy'])
    assert.are.equal('true', l.metadata.labels['platform.cozystack.io/no-delete'])
    assert.are.equal(OREL, l.metadata.annotations['meta.helm.sh/release-name'], 'the old chart owns its ledger')
    uid = l.metadata.uid
  end)

  it('upgrades the old shape to targetVersion 4: its numbered hook runs script 3 (with the hatch as "0") and stamps 4; the Job stays', function()
    local res = up(ONS, OREL, false, '--set migrations.targetVersion=4')
    step('old shape: upgrade, the numbered hook runs 3', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_truthy(res.job.seconds, 'the numbered hook was not seen')
    assert.are.equal('4', ledger_in(ONS).data.version)
    local runs = ran('legacy', '3')
    assert.are.equal(1, #runs)
    assert.are.same({ runner = 'old-hook', skip_backup = '0', cluster_domain = '[unset]' }, runs[1].data)
    -- the old shape's leftovers: its Job (before-hook-creation alone); a
    -- failed run leaves its ServiceAccount and cluster-admin binding too,
    -- made here as that run would have left them
    assert.is_false(gone('job/cozystack-migration-hook -n ' .. ONS))
    h.must(kc('create serviceaccount cozystack-migration-hook -n ' .. ONS))
    h.must(kc('create clusterrolebinding cozystack-migration-hook --clusterrole=cluster-admin ' ..
      '--serviceaccount=' .. ONS .. ':cozystack-migration-hook'))
  end)

  it('refuses the old chart\'s rendering with index --check-chart (the numbered hook, no index) and passes the wired one\'s', function()
    local function rendered(chart, args)
      local f = LANE .. '/rendered-' .. chart:match('([^/]+)$') .. '.yaml'
      local res = h.must(helm(string.format('template %s %s -n %s --dry-run=server %s', OREL, h.q(chart), ONS, args)))
      h.write(f, res.out)
      return f
    end
    chart_for(G, WIRED)
    local function check(f)
      return h.run(string.format('%s index --check-chart %s --dir %s --image %s', h.q(h.bin), h.q(f),
        h.q(LANE .. '/trees/' .. G), h.q(IMAGE .. ':' .. G)))
    end
    -- the cluster holds version 4 and the old chart says 5: its hook renders
    local res = check(rendered(OLD, values(false) .. ' --set migrations.targetVersion=5'))
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.out, 'Job cozystack-migration-hook: a pre-install/pre-upgrade hook that is not the engine\'s')
    h.contains(res.out, 'renders no ConfigMap cozystack-migrations-index')
    res = check(rendered(WIRED, values(true)))
    assert.are.equal(0, res.code, res.out .. res.err)
  end)

  it('upgrades to the wired release: the ledger survives with its version, legacy 1-3 are seeded, 4 runs through the engine with the chart\'s values, the Lua migration runs, the old hook\'s objects are gone', function()
    -- the deadline the hook gets: what is pending (legacy 4 and the Lua
    -- migration), not every shipped script's timeout
    chart_for(G, WIRED)
    local dry = h.must(helm(string.format('upgrade %s %s -n %s --dry-run=server %s', OREL, h.q(WIRED), ONS, values(true))))
    local pending = tonumber(dry.out:match('platform.cozystack.io/migrations%-timeout%-seconds: "(%d+)"'))
    assert.are.equal(600 + 60, pending, 'legacy-4 (10m) + lane-wired-first (1m)')
    local res = up(ONS, OREL, true, '--set migrations.laneSkipBackup=true')
    step('old shape to wired: the first upgrade onto the engine', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_truthy(res.job.seconds, 'the engine\'s hook was not seen')
    local l = ledger_in(ONS)
    assert.are.equal(uid, l.metadata.uid, 'the ledger was replaced')
    assert.are.equal('5', l.data.version, 'legacy 4 stamped 5')
    assert.are.equal('keep', l.metadata.annotations['helm.sh/resource-policy'])
    assert.are.equal('true', l.metadata.labels['platform.cozystack.io/no-delete'])
    for _, slug in ipairs({ 'lane-legacy-base', 'lane-legacy-stamp', 'lane-legacy-old-a' }) do
      assert.are.equal('legacy', rec(ONS, slug).state, slug)
    end
    for _, slug in ipairs({ 'lane-legacy-old-b', 'lane-wired-first' }) do
      assert.are.equal('ok', rec(ONS, slug).state, slug)
      assert.are.equal(1, rec(ONS, slug).attempts, slug)
    end
    assert.are.equal('revoked', rec(ONS, 'lane-slow-step').state)
    -- script 4 ran once, in the engine, with the chart's extraEnv and the
    -- hatch as the exact string it tests; script 3 did not run again
    local runs = ran('legacy', '4')
    assert.are.equal(1, #runs)
    assert.are.same({ runner = 'engine', skip_backup = '1', cluster_domain = 'cozy.local' }, runs[1].data)
    assert.are.equal(1, #ran('legacy', '3'))
    assert.are.equal(1, #ran('wired', 'lane-wired-first'))
    -- the old shape's hook, its identity and binding are gone; the engine's are the release's
    for _, what in ipairs({ 'job/cozystack-migration-hook -n ' .. ONS, 'serviceaccount/cozystack-migration-hook -n ' .. ONS,
      'clusterrolebinding/cozystack-migration-hook' }) do
      assert.is_true(gone(what), what .. ' outlived the old hook')
    end
    assert.is_false(gone('configmap/cozystack-migrations-index -n ' .. ONS))
    assert.is_false(gone('cronjob/cozystack-migrations-dispatch -n ' .. ONS))
  end)

  it('rolls back to the old release and forward again: nothing runs twice, the ledger keeps every record', function()
    local t = now()
    local rb = helm('rollback ' .. OREL .. ' -n ' .. ONS .. ' --wait --timeout 300s')
    note('old shape: helm rollback to the numbered hook\'s release', now() - t)
    assert.are.equal(0, rb.code, rb.out .. rb.err)
    local l = ledger_in(ONS)
    assert.are.equal(uid, l.metadata.uid)
    assert.are.equal('5', l.data.version)
    assert.are.equal('ok', rec(ONS, 'lane-wired-first').state)
    assert.is_true(gone('configmap/cozystack-migrations-index -n ' .. ONS), 'the rollback keeps the engine\'s release objects')
    local res = up(ONS, OREL, true)
    step('old shape: forward again to wired (nothing pending)', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_nil(res.job.start, 'a hook ran with nothing pending')
    assert.are.equal(1, #ran('legacy', '3'))
    assert.are.equal(1, #ran('legacy', '4'))
    assert.are.equal(1, #ran('wired', 'lane-wired-first'))
    assert.are.equal(1, rec(ONS, 'lane-legacy-old-b').attempts)
    assert.are.equal('5', ledger_in(ONS).data.version)
  end)

  it('installs the wired release fresh: no AlreadyExists, the hook creates the ledger and only seeds it', function()
    local ns = 'cozy-fresh'
    local res = up(ns, 'fresh-platform', true, '--set oldPlatform.tenant=lane-fresh-tenant')
    step('wired release: fresh install', res)
    assert.are.equal(0, res.code, res.all)
    h.lacks(res.all, 'already exists')
    local l = ledger_in(ns)
    assert.is_nil(l.data.version, 'the engine never writes version')
    assert.are.equal('keep', l.metadata.annotations['helm.sh/resource-policy'])
    assert.is_nil((l.metadata.annotations or {})['meta.helm.sh/release-name'], 'the chart rendered the ledger')
    for _, slug in ipairs({ 'lane-legacy-base', 'lane-legacy-old-b', 'lane-wired-first' }) do
      assert.are.equal('skipped-fresh-install', rec(ns, slug).state, slug)
    end
    assert.are.equal(1, #ran('legacy', '4'), 'a script ran on a fresh install')
    assert.are.equal(1, #ran('wired', 'lane-wired-first'))
  end)

  it('installs the wired release with migrations.enabled false: none of the engine\'s objects, no ledger', function()
    local ns = 'cozy-off'
    local res = up(ns, 'off-platform', true, '--set oldPlatform.tenant=lane-off-tenant --set migrations.enabled=false')
    step('wired release: install with migrations.enabled=false', res)
    assert.are.equal(0, res.code, res.all)
    assert.is_nil(res.job.start, 'a hook ran with migrations off')
    local manifest = h.must(helm('get manifest off-platform -n ' .. ns)).out
    h.lacks(manifest, 'cozystack-migrations')
    for _, what in ipairs({ 'configmap/cozystack-version -n ' .. ns, 'configmap/cozystack-migrations-index -n ' .. ns,
      'serviceaccount/cozystack-migrations-jobs -n ' .. ns, 'cronjob/cozystack-migrations-dispatch -n ' .. ns,
      'clusterrolebinding/cozystack-migrations-jobs-' .. ns, 'validatingadmissionpolicy/cozystack-migrations-jobs-' .. ns }) do
      assert.is_true(gone(what), what .. ' rendered with migrations off')
    end
    assert.is_false(gone('configmap/platform-settings -n ' .. ns), 'the platform itself was installed')
  end)
end)

-- A hostile legacy script in the hook's pod (issue 39): release H
-- (v1.7.0) of the wired platform ships legacy script 5, lane-legacy-hostile
-- (on-error=warn), which tries, as the runner's user in the runner's pod
-- (Pod Security restricted, RuntimeDefault seccomp), the pod's
-- service-account token, /proc/1/environ and mem (the runner is PID 1),
-- its supervisor's environ, a token minted through its gateway and the
-- apiserver straight, then leaves a setsid child creating a ConfigMap
-- through the gateway every 0.5 s; and legacy script 6,
-- lane-legacy-witness, which looks for that child in the same pod right
-- after. The platform the block above left at version 5 (cozy-old, every
-- record of G), its namespace now enforcing Pod Security "restricted", is
-- upgraded to H, so these two are all that is pending.
describe('a hostile legacy script in the hook\'s pod', function()
  local ONS, OREL, H = 'cozy-old', 'old-platform', 'v1.7.0'
  local WIRED = LANE .. '/wired-chart'
  local FIXO = h.root .. '/spec/cluster/fixtures/old-platform'
  local TENANT = 'lane-old-tenant'
  local SLUG, WITNESS = 'lane-legacy-hostile', 'lane-legacy-witness'

  local function ticks()
    return kc_json('get configmaps -n ' .. TENANT .. ' -l lane.cozystack.io/hostile=tick').items
  end

  it('is refused the token file, /proc/1/environ, a minted token and the apiserver; its setsid child dies with it; the ledger gets only the engine\'s records, saying what was refused', function()
    local before = kc_json('get configmap cozystack-version -n ' .. ONS).data
    assert.are.equal('5', before.version, 'the block above leaves the wired platform at version 5')
    -- the hook's pod as the platform runs it: Pod Security restricted
    -- (RuntimeDefault seccomp, no privilege, every capability dropped)
    h.must(kc('label namespace ' .. ONS .. ' pod-security.kubernetes.io/enforce=restricted ' ..
      'pod-security.kubernetes.io/warn=restricted --overwrite'))
    chart_for(H, WIRED)
    local w = watch_jobs(ONS)
    local t = now()
    local res = helm(string.format('upgrade %s %s -n %s --wait --timeout 600s -f %s -f %s --set migrations.image=%s',
      OREL, h.q(WIRED), ONS, h.q(FIXO .. '/migrations-values.yaml'), h.q(FIXO .. '/wired-values.yaml'),
      h.q(IMAGE .. ':' .. H)))
    res.seconds = now() - t
    res.job = stop_watch(w, 'cozystack-migrations')
    res.all = res.out .. res.err
    step('hostile legacy script in the hook pod (upgrade to H)', res)
    -- on-error=warn: the hook succeeds with the failure recorded
    assert.are.equal(0, res.code, res.all)
    assert.is_truthy(res.job.seconds, 'the engine\'s hook was not seen')
    h.lacks(res.all, 'would violate PodSecurity')

    local after = kc_json('get configmap cozystack-version -n ' .. ONS).data
    local rec = json.decode(assert(after['m.' .. SLUG], 'no record of ' .. SLUG))
    local shown = json.encode(rec)
    assert.are.equal('failed', rec.state, shown)
    assert.are.equal(1, rec.attempts, shown)
    -- the record says what was refused: the gateway's refusal of the mint
    -- is its reason, and the script's own lines are its output tail
    assert.are.equal('CredentialRefused', rec.reason, shown)
    h.contains(rec.message, 'serviceaccounts/cozystack-migrations/token', shown)
    local out = rec.output or ''
    -- each attempt's line: refused by the kernel (Landlock, or the runner
    -- not dumpable: EACCES), never a file or host that was not there
    local function line(what) return out:match('\nhostile: ' .. what:gsub('%-', '%%-') .. ': ([^\n]*)') or '(no line)' end
    for _, what in ipairs({ 'token', 'token-dir', 'pid1-environ', 'pid1-mem', 'parent-environ', 'apiserver-service',
      'apiserver-endpoint' }) do
      h.contains(line(what), 'refused: ', what .. ': ' .. shown)
      h.contains(line(what), 'Permission denied', what .. ': ' .. shown)
    end
    h.contains(line('mint'), 'refused: error: failed to create token: a TokenRequest mints a credential', shown)
    h.contains(out, 'hostile: gateway: GOT ', 'its own gateway answers')
    h.lacks((out:gsub('hostile: gateway: GOT', '')), 'GOT ', shown)

    -- the ledger: untouched but for the engine's two records (no stamp,
    -- nothing the script wrote)
    for k, v in pairs(before) do assert.are.equal(v, after[k], k) end
    for k in pairs(after) do
      assert.is_true(before[k] ~= nil or k == 'm.' .. SLUG or k == 'm.' .. WITNESS, 'a new ledger key ' .. k)
    end

    -- the setsid child: it ticked while its migration ran (its gateway
    -- answered), none after the record was written, none since; the
    -- witness, next in the same pod, found it gone
    local n = ticks()
    assert.is_true(#n >= 1, 'the setsid child never ticked: ' .. shown)
    local at = epoch(rec.at)
    for _, cm in ipairs(n) do
      assert.is_true(epoch(cm.metadata.creationTimestamp) <= at,
        cm.metadata.name .. ' made at ' .. cm.metadata.creationTimestamp .. ', after the record (' .. rec.at .. ')')
    end
    h.sleep(3)
    assert.are.equal(#n, #ticks(), 'a tick after the hook ended')
    local seen = kc_json('get configmap hostile-witness -n ' .. TENANT).data
    assert.are.same({ pid = kc_json('get configmap hostile-ticker -n ' .. TENANT).data.pid, ticker = 'gone',
      matching = '0' }, seen)
    assert.are.equal('ok', json.decode(after['m.' .. WITNESS]).state, after['m.' .. WITNESS])
    -- what each attempt got, for the lane's log and build/cluster-test/hostile.txt
    local account = string.format('%s\nrecord: %s: %s\n%d tick(s) while it ran, none after; witness: %s\n',
      out, rec.reason, rec.message, #n, json.encode(seen))
    h.write(LANE .. '/hostile.txt', account)
    io.stdout:write('\n', account)
  end)
end)
