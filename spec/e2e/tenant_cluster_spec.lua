-- kube for a cluster the platform hosts: kube.cluster / kube.clusters over
-- a kubeconfig Secret of the management cluster, against real apiservers
-- (the testenv as the management cluster, tenants from tools/testenv
-- tenant, support.tenant). Scripts run as the runner runs them (exec: a
-- supervised child, the sandbox, the write journal).
local h = require('support.helpers')
local cluster = require('support.cluster')
local tenant = require('support.tenant')
local json = require('json')

-- exec(source [, flags...]) -> the result line decoded, with code and output
local function exec(source, ...)
  local f = h.write(os.tmpname() .. '.lua', source)
  local args = { 'exec', ... }
  args[#args + 1] = 'tenant-script'
  args[#args + 1] = f
  local res = h.cozy(table.unpack(args))
  os.remove(f)
  local ok, d = pcall(json.decode, res.out:match('([^\n]+)\n?$') or '')
  assert(ok and type(d) == 'table', 'exec printed no result line: ' .. res.out .. res.err)
  d.code, d.output = res.code, res.err
  return d
end

local function script(vars, body)
  local pre = { "local kube = require('kube')", "local json = require('json')" }
  local names = {}
  for k in pairs(vars) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do pre[#pre + 1] = string.format('local %s = %q', k, vars[k]) end
  return table.concat(pre, '\n') .. '\n' .. body
end

-- the last line the script printed that is JSON
local function last_json(d)
  local got
  for line in d.output:gmatch('[^\n]+') do
    local j = line:match('^%[tenant%-script%] ([{%[].*)$')
    if j then got = json.decode(j) end
  end
  return got
end

describe('#e2e kube for a tenant cluster', function()
  local up, down, ns, token
  setup(function()
    h.need_cluster()
    if not tenant.available() then return end
    up = tenant.start('up')
    down = tenant.start('down')
    ns = cluster.namespace('tenants')
    tenant.secret(up, ns, 'up-admin-kubeconfig')
    tenant.secret(down, ns, 'down-admin-kubeconfig')
    tenant.secret('apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "https://127.0.0.1:1", ' ..
      'certificate-authority: /etc/hostname}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n' ..
      'current-context: x\nusers:\n- name: u\n  user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}\n',
      ns, 'files-admin-kubeconfig')
    down.stop()
    token = h.slurp(up.kubeconfig):match('token: (%x+)')
  end)
  teardown(function()
    if up then up.stop() end
    cluster.cleanup()
  end)

  local function need() return tenant.need(up, pending) end

  it('starts a tenant apiserver that is a cluster of its own', function()
    if not need() then return end
    h.must(up.kc('create configmap only-in-tenant -n default --from-literal=a=b'))
    assert.are.equal(0, up.kc('get configmap only-in-tenant -n default').code)
    assert.are_not.equal(0, h.kc('get configmap only-in-tenant -n default').code)
    assert.truthy(h.has(h.must(h.run(h.q(h.testenv) .. ' tenant list')).out, up.name))
    -- its credential is its own: the management cluster refuses it
    local server = h.kc_json('config view --minify').clusters[1].cluster.server
    local r = h.run(string.format('%s --kubeconfig /dev/null --server %s --token %s --insecure-skip-tls-verify get ns',
      h.q(h.kubectl_bin()), h.q(server), token))
    assert.are_not.equal(0, r.code)
  end)

  it('reaches the tenant through its Secret, with the same verbs, and journals each write with its cluster', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local t = assert(kube.cluster { secret = { namespace = ns, name = 'up-admin-kubeconfig' } })
      t.create('configmaps', { metadata = { name = 'written-by-script', namespace = 'default' }, data = { a = '1' } })
      t.patch('configmaps', 'written-by-script', { data = { b = '2' } }, { namespace = 'default' })
      local seen = 0
      for _ in t.list('namespaces', { limit = 1 }) do seen = seen + 1 end
      assert(t.get('configmaps', 'absent', { namespace = 'default' }) == nil)
      kube.create('configmaps', { metadata = { name = 'in-management', namespace = ns } })
      print(json.encode({ name = t.name, namespaces = seen, has_verbs = type(t.update) == 'function' }))
    ]]))
    assert.are.equal('ok', d.outcome, d.output)
    local got = last_json(d)
    assert.are.equal(ns .. '/up-admin-kubeconfig', got.name)
    assert.is_true(got.namespaces >= 4) -- paged one at a time
    assert.is_true(got.has_verbs)
    assert.are.same({ a = '1', b = '2' }, up.kc_json('get configmap written-by-script -n default').data)
    assert.are_not.equal(0, h.kc('get configmap written-by-script -n default').code)
    local by = {}
    for _, e in ipairs(d.journal.entries) do by[e.verb .. ' ' .. e.name] = e end
    assert.are.equal(ns .. '/up-admin-kubeconfig', by['create written-by-script'].cluster)
    assert.are.equal(ns .. '/up-admin-kubeconfig', by['patch written-by-script'].cluster)
    assert.is_nil(by['create in-management'].cluster)
    assert.are.equal(3, d.journal.writes)
  end)

  it('returns a tenant that is down as an error value naming its Secret, which the script branches on', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local t, err = kube.cluster { secret = { namespace = ns, name = 'down-admin-kubeconfig' }, probe_timeout = 2 }
      print(json.encode({ client = t ~= nil, code = err.code, reason = err.reason, cluster = err.cluster,
        secret = err.secret.name, unreachable = kube.is_unreachable(err), text = tostring(err) }))
    ]]))
    assert.are.equal('ok', d.outcome, d.output)
    local got = last_json(d)
    assert.is_false(got.client)
    assert.are.equal(0, got.code)
    assert.is_true(got.unreachable, got.reason)
    assert.are.equal(ns .. '/down-admin-kubeconfig', got.cluster)
    assert.are.equal('down-admin-kubeconfig', got.secret)
    assert.truthy(h.has(got.text, 'Secret ' .. ns .. '/down-admin-kubeconfig'), got.text)
  end)

  it('says what is wrong with a Secret that is missing, lacks the key, or names files', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local out = {}
      for _, c in ipairs({ { 'absent', 'super-admin.conf' }, { 'up-admin-kubeconfig', 'other.conf' },
                          { 'files-admin-kubeconfig', 'super-admin.conf' } }) do
        local t, err = kube.cluster { secret = { namespace = ns, name = c[1], key = c[2] } }
        out[#out + 1] = { ok = t ~= nil, code = err.code, reason = err.reason, message = err.message }
      end
      print(json.encode(out))
    ]]))
    assert.are.equal('ok', d.outcome, d.output)
    local got = last_json(d)
    assert.are.equal(404, got[1].code)
    assert.are.equal('NotFound', got[1].reason)
    assert.truthy(h.has(got[1].message, 'Secret ' .. ns .. '/absent'), got[1].message)
    assert.are.equal('BadKubeconfig', got[2].reason)
    assert.truthy(h.has(got[2].message, 'has no key other.conf'), got[2].message)
    assert.are.equal('BadKubeconfig', got[3].reason)
    assert.truthy(h.has(got[3].message, "certificate-authority names a file"), got[3].message)
  end)

  it('iterates every tenant a selector picks, a tenant that is down as a step of its own', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local out = {}
      for ref, t, err in kube.clusters { namespace = ns, probe_timeout = 2 } do
        out[#out + 1] = { cluster = ref.cluster, ok = t ~= nil, reason = err and err.reason or json.null,
          component = ref.labels['kamaji.clastix.io/component'] }
      end
      print(json.encode(out))
    ]]))
    assert.are.equal('ok', d.outcome, d.output)
    local got = last_json(d)
    assert.are.equal(3, #got)
    local by = {}
    for _, g in ipairs(got) do by[g.cluster] = g end
    assert.is_true(by[ns .. '/up-admin-kubeconfig'].ok)
    assert.is_false(by[ns .. '/down-admin-kubeconfig'].ok)
    assert.are.equal('admin-kubeconfig', by[ns .. '/up-admin-kubeconfig'].component)
    assert.are.equal('BadKubeconfig', by[ns .. '/files-admin-kubeconfig'].reason)
  end)

  it('sends a tenant\'s writes as dry runs under --dry-run: nothing persisted on any cluster', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local t = assert(kube.cluster { secret = { namespace = ns, name = 'up-admin-kubeconfig' } })
      t.create('configmaps', { metadata = { name = 'dry-tenant', namespace = 'default' } })
      t.patch('namespaces', 'default', { metadata = { labels = { dry = 'yes' } } })
      kube.create('configmaps', { metadata = { name = 'dry-management', namespace = ns } })
    ]]), '--dry-run')
    assert.are.equal('ok', d.outcome, d.output)
    assert.are_not.equal(0, up.kc('get configmap dry-tenant -n default').code)
    assert.is_nil((up.kc_json('get namespace default').metadata.labels or {}).dry)
    assert.are_not.equal(0, h.kc('get configmap dry-management -n ' .. ns).code)
    for _, e in ipairs(d.journal.entries) do assert.is_true(e.dry_run, json.encode(e)) end
    assert.are.equal(ns .. '/up-admin-kubeconfig', d.journal.entries[1].cluster)
  end)

  it('fleet.clusters runs each cluster\'s work its own, concurrently, and names each cluster that failed', function()
    if not need() then return end
    tenant.secret(up, ns, 'up2-admin-kubeconfig')
    local function run(concurrency)
      return exec(script({ ns = ns }, string.format([[
        local fleet = require('fleet')
        local t0, seen, spans = kube.now(), {}, {}
        local ok, err = pcall(fleet.clusters, { namespace = ns, probe_timeout = 1, concurrency = %d },
          function(ref, t, cerr)
            if ref.name == 'files-admin-kubeconfig' then return false end
            if not t then error('down: ' .. cerr.reason) end
            local at = kube.now()
            kube.sleep(1)
            spans[#spans + 1] = { at, kube.now() }
            t.apply('configmaps', { apiVersion = 'v1', kind = 'ConfigMap',
              metadata = { name = 'fleet-' .. ref.name, namespace = 'default' } })
            seen[#seen + 1] = ref.name
            return true
          end)
        table.sort(seen)
        print(json.encode({ elapsed = kube.now() - t0 - 0, reason = err.reason, message = err.message,
          failed = #err.failed, changed = err.changed, seen = seen, spans = spans }))
      ]], concurrency)))
    end
    local d = run(3)
    assert.are.equal('ok', d.outcome, d.output)
    local got = last_json(d)
    assert.are.equal('FleetFailed', got.reason)
    assert.are.equal(1, got.failed)
    assert.are.equal(2, got.changed)
    assert.truthy(h.has(got.message, ns .. '/down-admin-kubeconfig: '), got.message)
    assert.are.same({ 'up-admin-kubeconfig', 'up2-admin-kubeconfig' }, got.seen)
    assert.are.equal(0, up.kc('get configmap fleet-up2-admin-kubeconfig -n default').code)
    local clusters = {}
    for _, e in ipairs(d.journal.entries) do clusters[e.cluster or 'management'] = true end
    assert.are.same({ [ns .. '/up-admin-kubeconfig'] = true, [ns .. '/up2-admin-kubeconfig'] = true }, clusters)
    -- the two clusters' sleeps overlap; one at a time they do not (told by
    -- when each began and ended, not by how long the run took: any machine)
    local function overlap(sp)
      assert.are.equal(2, #sp)
      return math.max(sp[1][1], sp[2][1]) < math.min(sp[1][2], sp[2][2])
    end
    assert.is_true(overlap(got.spans), 'concurrent: ' .. json.encode(got.spans))
    got = last_json(run(1))
    assert.is_false(overlap(got.spans), 'one at a time: ' .. json.encode(got.spans))
  end)

  it('keeps the tenant\'s credential out of the script\'s reach', function()
    if not need() then return end
    local d = exec(script({ ns = ns }, [[
      local t = assert(kube.cluster { secret = { namespace = ns, name = 'up-admin-kubeconfig' } })
      local seen, out = {}, {}
      local function walk(v, depth)
        if depth > 6 or seen[v] then return end
        if type(v) == 'string' then out[#out + 1] = v return end
        if type(v) ~= 'table' then out[#out + 1] = tostring(v) return end
        seen[v] = true
        out[#out + 1] = tostring(getmetatable(v))
        for k, x in pairs(v) do walk(k, depth + 1) walk(x, depth + 1) end
      end
      walk(t, 0)
      walk(t.config(), 0)
      for ref in kube.clusters { namespace = ns, probe_timeout = 1 } do walk(ref, 0) end
      local _, err = kube.cluster { secret = { namespace = ns, name = 'down-admin-kubeconfig' }, probe_timeout = 1 }
      walk(err, 0)
      print(table.concat(out, '\n'))
    ]]))
    assert.are.equal('ok', d.outcome, d.output)
    assert.truthy(h.has(d.output, 'kube.cluster'), d.output) -- the walk did see the client
    assert.is_nil(d.output:find(token, 1, true), 'the tenant\'s token reached the script')
    assert.is_nil(d.output:find('BEGIN', 1, true), 'key or certificate material reached the script')
  end)
end)
