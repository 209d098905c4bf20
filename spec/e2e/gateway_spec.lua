-- A shell migration reaches the cluster only through the runner's loopback
-- gateway (host/gateway/server.c): its kubectl talks TLS to 127.0.0.1 with
-- the migration's own token, and every request passes the same door as a
-- Lua migration's: the ledger guard, dry run, the deadline, the retry
-- policy, the write journal, the preview's overlay. Against the local
-- apiserver, each case in namespaces of its own.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local proxy = require('support.proxy')
local json = require('json')

local contains, must = h.contains, h.must
local PATH = h.root .. '/build/testenv/bin:' .. os.getenv('PATH')

local function env(extra)
  local e = { PATH = PATH }
  for k, v in pairs(extra or {}) do e[k] = v end
  return { env = e }
end

-- `cozy-migrate exec` of a bash script; res.json is its result line.
local function exec(script, ...)
  local f = h.write(h.tmpdir() .. '/script.sh', '#!/bin/bash\nset -euo pipefail\n' .. script)
  local args = { 'exec', ... }
  args[#args + 1] = 'gateway-case'
  args[#args + 1] = f
  args[#args + 1] = env()
  local res = h.cozy(table.unpack(args))
  local last = res.out:match('([^\n]*)\n?$')
  res.json = last and last ~= '' and json.decode(last) or {}
  return res
end

local function legacy_tree(scripts, on_error)
  local names, legacy, specs = {}, {}, {}
  for i, s in ipairs(scripts) do
    names[i] = s[1]
    legacy[i] = { i, s[1] }
    specs[s[1]] = { shell = true, on_error = on_error or 'warn', body = s[2] }
  end
  return fixture.tree({ batches = { { '00000-legacy', names } }, legacy = legacy, scripts = specs })
end

describe('#e2e a shell migration through the runner\'s gateway', function()
  setup(function() h.need_cluster() end)

  it('gets a kubeconfig naming the gateway alone, and the gateway answers nothing without its token', function()
    local res = exec([[
cat "$KUBECONFIG"
env | sort | sed -n 's/^\(KUBERNETES_[A-Z_]*\)=.*/\1/p'
server=$(sed -n 's/^ *server: //p' "$KUBECONFIG")
curl -sk "$server/api/v1/namespaces/default/configmaps" -o /dev/null -w 'no token: %{http_code}\n'
kubectl get namespace default -o jsonpath='{.metadata.name}{"\n"}'
]])
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('ok', res.json.outcome, res.err)
    contains(res.err, '[gateway-case]     server: https://127.0.0.1:', 'the kubeconfig')
    assert.truthy(res.err:match('%[gateway%-case%]     token: %x+\n'), res.err)
    assert.is_nil(res.err:find('client-key', 1, true), res.err)
    assert.is_nil(res.err:find('KUBERNETES_SERVICE', 1, true), 'the in-cluster address is not passed')
    contains(res.err, '[gateway-case] no token: 401')
    contains(res.err, '[gateway-case] default')
    assert.is_true(res.json.gateway.requests >= 2)
  end)

  it('refuses every kind of ledger write as LedgerProtected, and the record says so', function()
    local ns = runner.new_ns()
    local L = runner.LEDGER
    local k = 'kubectl -n "$NAMESPACE" '
    local dir = legacy_tree({
      { 'apply-key', string.format('%screate configmap %s --from-literal=version=2 --from-literal=other=1 ' ..
        '--dry-run=client -o yaml | %sapply -f -', k, L, k) },
      { 'patch-it', k .. 'patch configmap ' .. L .. ' -p \'{"data":{"m.fake":"{}"}}\'' },
      { 'delete-it', k .. 'delete configmap ' .. L },
      { 'label-it', k .. 'label configmap ' .. L .. ' x=y' },
      { 'annotate-it', k .. 'annotate configmap ' .. L .. ' x=y' },
      { 'edit-it', 'KUBE_EDITOR="sed -i -e \'s/^data:/data:\\n  edited: \\"yes\\"/\'" ' .. k .. 'edit configmap ' .. L },
      { 'raw-put', k .. 'get configmap ' .. L .. ' -o json | sed \'s/"version": *"[0-9]*"/"version": "99"/\' >"$TMPDIR/l.json"\n' ..
        'kubectl replace --raw "/api/v1/namespaces/$NAMESPACE/configmaps/' .. L .. '" -f "$TMPDIR/l.json"' },
    })
    runner.make_ledger(ns, { version = '1' })
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local tmp = h.tmpdir()
    local res = runner.run(dir, ns, env({ TMPDIR = tmp }))
    assert.are.equal(0, res.code, res.out .. res.err)
    local recs, _, cm = runner.records(ns)
    for _, slug in ipairs({ 'apply-key', 'patch-it', 'delete-it', 'label-it', 'annotate-it', 'edit-it', 'raw-put' }) do
      assert.are.equal('failed', recs[slug].state, slug)
      assert.are.equal('LedgerProtected', recs[slug].reason, slug .. ': ' .. tostring(recs[slug].message))
      contains(recs[slug].message, "after the runner's gateway refused", slug)
    end
    assert.are.equal('1', cm.data.version)
    assert.is_nil(cm.data.other)
    assert.is_nil(cm.data['m.fake'])
    assert.is_nil(cm.data.edited)
    assert.is_nil((cm.metadata.labels or {}).x)
    assert.is_nil((cm.metadata.annotations or {}).x)
    assert.are_not.equal(rv, cm.metadata.resourceVersion, 'the records were written')
  end)

  it('that cannot be set up stops the run with one line, and the script never runs without it', function()
    local ns = runner.new_ns()
    local marker = h.tmpdir() .. '/ran'
    local dir = legacy_tree({ { 'needs-cluster', 'touch ' .. h.q(marker) .. '\nkubectl get namespace default' } }, 'abort')
    runner.make_ledger(ns, { version = '1' })
    local res = runner.run(dir, ns, env({ TMPDIR = '/nonexistent/cozy-gateway' }))
    assert.are.equal(6, res.code, res.out .. res.err)
    local line = res.err:gsub('\n$', '')
    assert.is_nil(line:find('\n'), 'one line: ' .. res.err)
    contains(line, 'needs-cluster: ')
    assert.is_nil(io.open(marker), 'the script ran')
    assert.is_nil(runner.records(ns)['needs-cluster'], 'nothing recorded')
  end)

  it('absorbs a legacy stamp only to the number the legacy map allows', function()
    local ns = runner.new_ns()
    local stamp = 'kubectl -n "$NAMESPACE" create configmap ' .. runner.LEDGER ..
      ' --from-literal=version=%d --dry-run=client -o yaml | kubectl -n "$NAMESPACE" apply -f -'
    local dir = legacy_tree({ { 'good', stamp:format(2) }, { 'wrong', stamp:format(9) } })
    runner.make_ledger(ns, { version = '1' })
    local res = runner.run(dir, ns, env())
    assert.are.equal(0, res.code, res.out .. res.err)
    local recs, _, cm = runner.records(ns)
    assert.are.same({ 'ok', 'version=2' }, { recs.good.state, recs.good.stamp })
    assert.are.same({ 'failed', 'LedgerProtected' }, { recs.wrong.state, recs.wrong.reason })
    contains(recs.wrong.message, 'this legacy script may stamp version 3 (its number in the legacy map, plus one), not 9')
    assert.are.equal('2', cm.data.version)
  end)

  -- send METHOD PATH CONTENT-TYPE BODY: a raw request with the migration's
  -- own token, printing "CODE REASON-OR-NAME" (curl, as a hostile script would)
  local RAW = [[
server=$(sed -n 's/^ *server: //p' "$KUBECONFIG")
tok=$(sed -n 's/^ *token: //p' "$KUBECONFIG")
d=$(mktemp -d)
send() {
  printf '%s\n' "$4" >"$d/body"
  code=$(curl -sk -X "$1" -H "Authorization: Bearer $tok" -H "Content-Type: $3" --data-binary @"$d/body" \
    "$server$2" -o "$d/out" -w '%{http_code}')
  echo "$code $(jq -r 'if .kind == "Status" then .reason else .metadata.name end' <"$d/out")"
}
]]

  it('sends a YAML body as the JSON the guard read, and refuses one the apiserver would read otherwise', function()
    local ns = runner.new_ns()
    local f = h.write(h.tmpdir() .. '/yaml.sh', '#!/bin/bash\nset -euo pipefail\n' .. RAW .. [[
cm=/api/v1/namespaces/$NAMESPACE/configmaps
echo "merge: $(send POST "$cm" application/yaml 'metadata: {<<: {name: cozystack-version}}
data: {m.pwned: "{}"}')"
echo "binary: $(send POST "/apis/coordination.k8s.io/v1/namespaces/$NAMESPACE/leases" application/yaml 'metadata:
  name: !!binary Y296eXN0YWNrLXZlcnNpb24tbG9jaw==
spec: {holderIdentity: squatter}')"
echo "plain: $(send POST "$cm" application/yaml 'x: &v "1"
metadata: {name: yaml-plain}
data: {a: *v}')"
echo "apply: $(send PATCH "$cm/yaml-applied?fieldManager=spec" application/apply-patch+yaml 'apiVersion: v1
kind: ConfigMap
metadata: {name: yaml-applied}
data: {b: "2"}')"
]])
    local res = h.cozy('exec', 'yaml-case', f, { env = { PATH = PATH, NAMESPACE = ns } })
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.err, '[yaml-case] merge: 400 BadRequest')
    contains(res.err, '[yaml-case] binary: 400 BadRequest')
    contains(res.err, '[yaml-case] plain: 201 yaml-plain')
    contains(res.err, '[yaml-case] apply: 201 yaml-applied')
    assert.is_nil(runner.get_ledger(ns), 'a merge key made the ledger')
    assert.is_nil(runner.get_lease(ns), "a !!binary name made the runner's Lease")
    assert.are.equal('1', h.kubectl_json('get configmap yaml-plain -n ' .. ns).data.a)
    assert.are.equal('2', h.kubectl_json('get configmap yaml-applied -n ' .. ns).data.b)
  end)

  it("keeps the engine's Events whatever their names: no delete or patch of one, its own Events free", function()
    local ns = runner.new_ns()
    local function event(name, about, source, reason)
      h.kcreate({ apiVersion = 'v1', kind = 'Event', metadata = { name = name, namespace = ns },
        involvedObject = { apiVersion = about[1], kind = about[2], name = about[3], namespace = ns },
        source = { component = source }, reportingComponent = source, reportingInstance = 'spec',
        reason = reason, message = 'said by ' .. source, type = 'Warning', count = 1,
        firstTimestamp = '2026-01-01T00:00:00Z', lastTimestamp = '2026-01-01T00:00:00Z' })
    end
    event('cozystack-migrations-index.1', { 'v1', 'ConfigMap', 'cozystack-migrations-index' }, 'cozy-migrate',
      'MigrationsIndexMismatch')
    event('bg-job.2', { 'batch/v1', 'Job', 'bg-job' }, 'cozy-migrate', 'MigrationJobNotOurs')
    event('mine', { 'v1', 'ConfigMap', 'settings' }, 'my-script', 'Done')
    local f = h.write(h.tmpdir() .. '/events.sh', [[
k="kubectl -n $NAMESPACE"
$k delete event cozystack-migrations-index.1 || echo "delete refused"
$k patch event bg-job.2 --type=merge -p '{"message":"rewritten"}' || echo "patch refused"
$k delete events.v1.events.k8s.io bg-job.2 || echo "events.k8s.io delete refused"
$k patch event mine --type=merge -p '{"message":"mine again"}' && $k delete event mine && echo "own deleted"
]])
    local res = h.cozy('exec', 'events-case', f, { env = { PATH = PATH, NAMESPACE = ns } })
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.err, '[events-case] delete refused')
    contains(res.err, '[events-case] patch refused')
    contains(res.err, '[events-case] events.k8s.io delete refused')
    contains(res.err, '(LedgerProtected)')
    contains(res.err, 'it acts on is the runner')
    contains(res.err, '[events-case] own deleted')
    local left = {}
    for _, e in ipairs(h.kubectl_json('get events -n ' .. ns).items) do left[e.metadata.name] = e.message end
    assert.are.same({ ['cozystack-migrations-index.1'] = 'said by cozy-migrate', ['bg-job.2'] = 'said by cozy-migrate' }, left)
  end)

  it('streams a watch however it is spelled, without holding the other requests off', function()
    local ns = runner.new_ns()
    local f = h.write(h.tmpdir() .. '/watch.sh', RAW .. [[
w() { curl -skN -H "Authorization: Bearer $tok" "$server$1" >"$d/$2" & }
cm=/api/v1/namespaces/$NAMESPACE/configmaps
w "$cm?watch=t&timeoutSeconds=20" t
w "$cm?watch=TRUE&timeoutSeconds=20" upper
w "$cm?watch=&timeoutSeconds=20" empty
w "/api/v1/w%61tch/namespaces/$NAMESPACE/configmaps?timeoutSeconds=20" path
sleep 1
start=$(date +%s%N)
kubectl -n "$NAMESPACE" create configmap w-seen >/dev/null
echo "create took $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 1
for x in t upper empty path; do grep -q '"type":"ADDED".*"name":"w-seen"' "$d/$x" && echo "$x streamed"; done
kill $(jobs -p) 2>/dev/null
]])
    local res = h.cozy('exec', '--timeout', '30s', 'watch-case', f, { env = { PATH = PATH, NAMESPACE = ns } })
    assert.are.equal(0, res.code, res.out .. res.err)
    local ms = tonumber(res.err:match('create took (%d+) ms'))
    assert.is_true(ms ~= nil and ms < 5000, res.err)
    for _, x in ipairs({ 't', 'upper', 'empty', 'path' }) do contains(res.err, '[watch-case] ' .. x .. ' streamed') end
  end)

  it('refuses impersonation (--as) in one line rather than drop it', function()
    local f = h.write(h.tmpdir() .. '/as.sh', [[
kubectl --as=system:anonymous get namespace default || echo "as refused"
kubectl --as-group=system:unauthenticated --as=nobody get namespace default || echo "group refused"
]])
    local res = h.cozy('exec', 'as-case', f, env())
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.err, "Error from server (Forbidden): the runner's gateway does not relay impersonation (Impersonate-")
    contains(res.err, '[as-case] as refused')
    contains(res.err, '[as-case] group refused')
    assert.is_nil(res.err:find('[as-case] default', 1, true), res.err)
  end)

  it('keeps a stamp sent as a server dry run a dry run', function()
    local ns = runner.new_ns()
    local stamp = 'kubectl -n "$NAMESPACE" create configmap ' .. runner.LEDGER ..
      ' --from-literal=version=2 --dry-run=client -o yaml | kubectl -n "$NAMESPACE" apply --dry-run=server -f -'
    local dir = legacy_tree({ { 'tries', stamp } })
    runner.make_ledger(ns, { version = '1' })
    local res = runner.run(dir, ns, env())
    assert.are.equal(0, res.code, res.out .. res.err)
    local recs, _, cm = runner.records(ns)
    assert.are.equal('ok', recs.tries.state)
    assert.is_nil(recs.tries.stamp, 'a dry run was taken over as a stamp')
    assert.are.equal('1', cm.data.version)
  end)

  for _, dry in ipairs({ false, true }) do
    it('journals a server-side apply that creates its object as changed, and no review as a write' ..
      (dry and ', in a dry run too' or ''), function()
      local ns = runner.new_ns()
      local f = h.write(h.tmpdir() .. '/ssa.sh', [[
set -euo pipefail
printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa-made"},"data":{"a":"1"}}' |
  kubectl -n "$NAMESPACE" apply --server-side -f -
kubectl -n "$NAMESPACE" auth can-i create configmaps
kubectl auth whoami >/dev/null && echo "whoami answered"
kubectl -n "$NAMESPACE" auth can-i --list >/dev/null && echo "rules answered"
]])
      local args = { 'exec', 'ssa-case', f, { env = { PATH = PATH, NAMESPACE = ns } } }
      if dry then table.insert(args, 2, '--dry-run') end
      local res = h.cozy(table.unpack(args))
      local out = json.decode(res.out:match('([^\n]*)\n?$'))
      assert.are.equal('ok', out.outcome, res.out .. res.err)
      contains(res.err, '[ssa-case] yes')
      contains(res.err, '[ssa-case] whoami answered')
      contains(res.err, '[ssa-case] rules answered')
      assert.are.equal(1, out.journal.writes, res.out)
      assert.are.equal(1, out.journal.changed, res.out)
      assert.are.equal('apply', out.journal.entries[1].verb, res.out)
      assert.are.equal(not dry, h.kubectl('get configmap ssa-made -n ' .. ns).code == 0)
    end)
  end

  it('keeps the journal counts of a shell migration in its record', function()
    local ns = runner.new_ns()
    local dir = legacy_tree({ { 'writes-two', string.format(
      'kubectl -n %s create configmap gw-one\nkubectl -n %s label configmap gw-one a=b\nkubectl -n %s get configmap gw-one >/dev/null',
      ns, ns, ns) } })
    runner.make_ledger(ns, { version = '1' })
    local res = must(runner.run(dir, ns, env()))
    contains(res.out, 'writes-two ... ok')
    contains(res.out, '2 writes, 2 changed')
    local r = runner.records(ns)['writes-two']
    assert.are.same({ 'ok', 2, 2 }, { r.state, r.writes, r.changed })
  end)

  it('sends every write of a script that ignores DRY_RUN as a dry run, --cascade included, and says what it would change', function()
    local ns = runner.new_ns()
    for _, name in ipairs({ 'keep-a', 'keep-b', 'keep-c' }) do
      must(h.kubectl(string.format('create configmap %s -n %s --from-literal=v=1', name, ns)))
    end
    local before = {}
    for _, it in ipairs(h.kubectl_json('get configmaps -n ' .. ns).items) do
      before[it.metadata.name] = it.metadata.resourceVersion
    end
    local k = 'kubectl -n ' .. ns .. ' '
    local dir = legacy_tree({ { 'careless', table.concat({
      k .. 'create configmap made-here --from-literal=v=1',
      k .. 'create configmap applied --from-literal=v=1 --dry-run=client -o yaml | ' .. k .. 'apply -f -',
      k .. 'patch configmap keep-a -p \'{"data":{"v":"2"}}\'',
      k .. 'label configmap keep-a tier=gold',
      k .. 'annotate configmap keep-a note=x',
      k .. 'delete configmap keep-b --cascade=foreground',
      k .. 'delete configmap keep-c --cascade=orphan',
      k .. 'get configmap keep-a -o json | sed \'s/"v": "1"/"v": "3"/\' | ' .. k .. 'replace -f -',
    }, '\n') } })
    runner.make_ledger(ns, { version = '1' })
    local res = must(runner.run(dir, ns, '--dry-run', env()))
    contains(res.out, 'careless ... ok (dry run)')
    contains(res.err, '[careless] dry-run: would patch configmaps ' .. ns .. '/keep-a')
    contains(res.err, 'data.v: "1" -> "2"')
    contains(res.err, '[careless] dry-run: would delete configmaps ' .. ns .. '/keep-b')
    local after = {}
    for _, it in ipairs(h.kubectl_json('get configmaps -n ' .. ns).items) do
      after[it.metadata.name] = it.metadata.resourceVersion
    end
    after[runner.LEDGER], before[runner.LEDGER] = nil, nil
    assert.are.same(before, after)
    assert.is_nil(runner.records(ns).careless, 'a dry run records nothing')
  end)

  it('lets kubectl wait and rollout status watch through it', function()
    local ns = runner.new_ns()
    local k = 'kubectl -n ' .. ns .. ' '
    local deploy = json.encode({ apiVersion = 'apps/v1', kind = 'Deployment',
      metadata = { name = 'web', namespace = ns },
      spec = { replicas = 1, selector = { matchLabels = { app = 'web' } },
        template = { metadata = { labels = { app = 'web' } },
          spec = { containers = { { name = 'c', image = 'example.invalid/none' } } } } } })
    local status = json.encode({ status = { observedGeneration = 1, replicas = 1, updatedReplicas = 1,
      readyReplicas = 1, availableReplicas = 1,
      conditions = { { type = 'Available', status = 'True', reason = 'Test', message = 'set by the spec',
        lastTransitionTime = '2026-01-01T00:00:00Z', lastUpdateTime = '2026-01-01T00:00:00Z' } } } })
    local res = exec(table.concat({
      "echo '" .. deploy .. "' | " .. k .. 'apply -f -',
      k .. 'create configmap flag --from-literal=ready=no',
      -- no kubelet here: the status is written by hand, a second later, while both wait
      '( sleep 1; ' .. k .. "patch deployment web --subresource=status --type=merge -p '" .. status .. "'; " ..
        k .. 'patch configmap flag -p \'{"data":{"ready":"yes"}}\' ) &',
      k .. "wait --for=jsonpath='{.data.ready}'=yes configmap/flag --timeout=30s",
      k .. 'rollout status deployment/web --timeout=30s',
      k .. 'wait --for=condition=Available deployment/web --timeout=30s',
      'wait',
    }, '\n'), '--timeout', '60s')
    assert.are.equal('ok', res.json.outcome, res.err)
    contains(res.err, 'configmap/flag condition met')
    contains(res.err, 'deployment "web" successfully rolled out')
    contains(res.err, 'deployment.apps/web condition met')
  end)

  describe('in front of a fault-injecting proxy', function()
    local p, ns
    setup(function()
      p = proxy.start('-seed 29')
      ns = runner.new_ns()
      must(h.kubectl('create configmap target -n ' .. ns .. ' --from-literal=n=0'))
    end)
    teardown(function() proxy.stop(p) end)

    it('retries a throttled read by the same policy as a Lua request', function()
      local path = '/api/v1/namespaces/' .. ns .. '/configmaps/target'
      proxy.faults(p, { 'method=GET,path=' .. path .. ',action=429,retry-after=0,count=1' })
      local res = exec('kubectl -n ' .. ns .. ' get configmap target -o jsonpath="{.data.n}{\\"\\n\\"}"',
        '--kubeconfig', p.kubeconfig)
      assert.are.equal('ok', res.json.outcome, res.err)
      local c = proxy.counts(p)
      assert.are.equal(2, c.received['GET ' .. path])
      assert.are.equal(1, c.forwarded['GET ' .. path])
      contains(res.err, 'retrying GET ' .. path)
    end)

    it('never sends a request that starts after the deadline', function()
      proxy.faults(p, {})
      -- the create is sent once the deadline's TERM came (the script keeps
      -- going through the grace), however long the get before it took
      local res = exec(table.concat({
        "trap 'late=1' TERM",
        'kubectl -n ' .. ns .. ' get configmap target >/dev/null',
        'while [ -z "${late:-}" ]; do sleep 0.1 || true; done', -- (the TERM ends the sleep too)
        'kubectl -n ' .. ns .. ' create configmap too-late || echo "refused: $?"',
      }, '\n'), '--kubeconfig', p.kubeconfig, '--timeout', '4s', '--grace', '4s')
      assert.are.equal('timeout', res.json.outcome, res.err)
      local c = proxy.counts(p)
      assert.are.equal(1, c.received['GET /api/v1/namespaces/' .. ns .. '/configmaps/target'])
      assert.is_nil(c.received['POST /api/v1/namespaces/' .. ns .. '/configmaps'], 'a late create reached the proxy')
      assert.are.same({ 'Timeout' }, { res.json.gateway.refusal_reason }, res.out .. res.err)
      assert.is_nil(h.kubectl_json('get configmaps -n ' .. ns).items[2], 'nothing was created')
    end)
  end)

  it('previews a chain legacy shell -> Lua as it would run: the Lua step sees the shell step\'s dry-run writes', function()
    local ns = runner.new_ns()
    must(h.kubectl('create configmap tenant -n ' .. ns .. ' --from-literal=v=1'))
    local rv = h.kubectl_json('get configmap tenant -n ' .. ns).metadata.resourceVersion
    local dir = fixture.tree({
      batches = { { '00000-legacy', { 'label-tenant' } }, { '00001-v1.0.0', { 'count-gold' } } },
      legacy = { { 1, 'label-tenant' } },
      scripts = {
        ['label-tenant'] = { shell = true, body = 'kubectl -n ' .. ns .. ' label configmap tenant tier=gold' },
        ['count-gold'] = { body = string.format([[
local kube = require('kube')
local n = 0
for _ in kube.list('configmaps', {namespace = %q, label_selector = 'tier=gold'}) do n = n + 1 end
if n ~= 1 then error('the labelled tenant is not there: ' .. n) end
print('gold tenants: ' .. n)]], ns) },
      },
    })
    runner.make_ledger(ns, { version = '1' })
    local res = h.cozy('preview', '--dir', dir, '--namespace', ns, env())
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.out, 'label-tenant ... ok: 1 writes, 1 would change')
    contains(res.out, 'count-gold ... ok')
    contains(res.err, '[count-gold] gold tenants: 1')
    assert.is_nil(res.out:find('predicted without its effects', 1, true), res.out)
    assert.are.equal(rv, h.kubectl_json('get configmap tenant -n ' .. ns).metadata.resourceVersion)
  end)
end)
