-- Every kube verb against the real local kube-apiserver (tools/testenv):
-- each runs in `cozy-migrate lua`, and what it did is checked with kubectl.
-- No controllers run here, so Deployments are plain API objects: their scale
-- and status subresources exist, but nothing reconciles them, and a
-- Foreground or Orphan deletion stays pending on its finalizer.
local h = require('support.helpers')
local json = require('json')

local NS = string.format('kv-%d-%d', os.time(), math.random(1000, 9999))

local must = h.must

local function run(body, ...)
  return h.kube_script({ NS = NS }, body, ...)
end

local kubectl_json = h.kubectl_json

local kapply = h.kapply

local function deployment(name)
  return {
    apiVersion = 'apps/v1', kind = 'Deployment',
    metadata = { name = name, namespace = NS },
    spec = {
      replicas = 1,
      selector = { matchLabels = { app = name } },
      template = {
        metadata = { labels = { app = name } },
        spec = { containers = json.array {
          { name = 'main', image = 'busybox:1.36' },
          { name = 'side', image = 'busybox:1.36' },
        } },
      },
    },
  }
end

describe('#e2e kube verbs', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
  end)

  teardown(function()
    h.kubectl('delete configmaps,deployments --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  describe('get', function()
    it('returns the object kubectl sees', function()
      must(h.kubectl('create configmap g1 -n ' .. NS .. ' --from-literal=k=v1'))
      local want = kubectl_json('get configmap g1 -n ' .. NS)
      local res = run [[
        local cm = kube.get('configmaps', 'g1', { namespace = NS })
        print(json.encode({ uid = cm.metadata.uid, rv = cm.metadata.resourceVersion, k = cm.data.k,
          kind = cm.kind, apiVersion = cm.apiVersion }))
      ]]
      must(res)
      assert.are.same({ uid = want.metadata.uid, rv = want.metadata.resourceVersion, k = 'v1',
        kind = 'ConfigMap', apiVersion = 'v1' }, res.json)
    end)

    it('returns nil only for NotFound', function()
      local res = must(run [[
        print(json.encode({ absent = kube.get('configmaps', 'no-such-cm', { namespace = NS }) == nil }))
      ]])
      assert.is_true(res.json.absent)
    end)
  end)

  describe('list', function()
    it('yields the objects a label selector picks, with apiVersion and kind', function()
      for i = 1, 3 do
        must(h.kubectl(string.format('create configmap l%d -n %s', i, NS)))
        must(h.kubectl(string.format('label configmap l%d -n %s pick=%s', i, NS, i == 2 and 'no' or 'yes')))
      end
      local want = kubectl_json('get configmaps -n ' .. NS .. ' -l pick=yes')
      local names = {}
      for _, o in ipairs(want.items) do names[#names + 1] = o.metadata.name end
      table.sort(names)
      local res = must(run [[
        local names, kinds = {}, {}
        for cm in kube.list('cm', { namespace = NS, label_selector = { pick = 'yes' }, limit = 1 }) do
          names[#names + 1] = cm.metadata.name
          kinds[cm.apiVersion .. '/' .. cm.kind] = true
        end
        local all = kube.list_all('configmaps', { namespace = NS, label_selector = 'pick=yes' })
        table.sort(names)
        print(json.encode({ names = json.array(names), kinds = kinds, all = #all }))
      ]])
      assert.are.same(names, res.json.names)
      assert.are.same({ ['v1/ConfigMap'] = true }, res.json.kinds)
      assert.are.equal(#names, res.json.all)
    end)
  end)

  describe('create', function()
    it('creates the object and returns what the server stored', function()
      local res = must(run [[
        local cm = kube.create('configmaps', { metadata = { name = 'c1', namespace = NS }, data = { a = 'b' } })
        print(json.encode({ uid = cm.metadata.uid, a = cm.data.a }))
      ]])
      local got = kubectl_json('get configmap c1 -n ' .. NS)
      assert.are.equal(got.metadata.uid, res.json.uid)
      assert.are.equal('b', got.data.a)
    end)
  end)

  describe('replace', function()
    it('writes the whole object, and refuses a stale resourceVersion with a Conflict', function()
      must(h.kubectl('create configmap r1 -n ' .. NS .. ' --from-literal=k=old'))
      local res = run [[
        local cm = kube.get('cm', 'r1', { namespace = NS })
        local stale = cm.metadata.resourceVersion
        cm.data = { k = 'new' }
        local out = kube.replace('cm', cm)
        cm.metadata.resourceVersion = stale
        cm.data = { k = 'lost' }
        local ok, err = pcall(kube.replace, 'cm', cm)
        print(json.encode({ k = out.data.k, ok = ok, code = err.code, reason = err.reason,
          conflict = kube.is_conflict(err) }))
      ]]
      must(res)
      assert.are.same({ k = 'new', ok = false, code = 409, reason = 'Conflict', conflict = true }, res.json)
      assert.are.equal('new', kubectl_json('get configmap r1 -n ' .. NS).data.k)
    end)
  end)

  describe('patch', function()
    it('merge: sets and removes keys (json.null deletes)', function()
      must(h.kubectl('create configmap p1 -n ' .. NS .. ' --from-literal=keep=1 --from-literal=drop=2'))
      must(run [[
        kube.patch('cm', 'p1', { metadata = { labels = { patched = 'merge' } }, data = { drop = json.null, add = '3' } },
          { namespace = NS })
      ]])
      local got = kubectl_json('get configmap p1 -n ' .. NS)
      assert.are.same({ keep = '1', add = '3' }, got.data)
      assert.are.equal('merge', got.metadata.labels.patched)
    end)

    it('json: applies operations in order, and a failed test op changes nothing', function()
      must(h.kubectl('create configmap p2 -n ' .. NS .. ' --from-literal=a=1'))
      local res = run [[
        kube.patch('cm', 'p2', {
          { op = 'add', path = '/data/b', value = '2' },
          { op = 'replace', path = '/data/a', value = '10' },
        }, { type = 'json', namespace = NS })
        local ok, err = pcall(kube.patch, 'cm', 'p2', {
          { op = 'test', path = '/data/a', value = 'not-10' },
          { op = 'remove', path = '/data/a' },
        }, { type = 'json', namespace = NS })
        print(json.encode({ ok = ok, code = err and err.code }))
      ]]
      must(res)
      assert.is_false(res.json.ok)
      assert.is_true(res.json.code >= 400 and res.json.code < 500)
      assert.are.same({ a = '10', b = '2' }, kubectl_json('get configmap p2 -n ' .. NS).data)
    end)

    it('strategic: merges a Deployment container list by name where merge would replace it', function()
      kapply(deployment('sd'))
      kapply(deployment('md'))
      must(run [[
        local p = { spec = { template = { spec = { containers = json.array { { name = 'main', image = 'busybox:1.37' } } } } } }
        kube.patch('deploy', 'sd', p, { type = 'strategic', namespace = NS })
        local q = { spec = { template = { spec = { containers = json.array { { name = 'main', image = 'busybox:1.37' } } } } } }
        kube.patch('deploy', 'md', q, { type = 'merge', namespace = NS })
      ]])
      local function images(name)
        local d = kubectl_json('get deployment ' .. name .. ' -n ' .. NS)
        local out = {}
        for _, c in ipairs(d.spec.template.spec.containers) do out[c.name] = c.image end
        return out
      end
      assert.are.same({ main = 'busybox:1.37', side = 'busybox:1.36' }, images('sd'))
      assert.are.same({ main = 'busybox:1.37' }, images('md'))
    end)

    it('apply: server-side apply owns fields, is a no-op when repeated, and needs force to take a field', function()
      local res = run [[
        local obj = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'a1', namespace = NS }, data = { x = '1' } }
        local first = kube.apply('cm', obj)
        local second = kube.apply('cm', { apiVersion = 'v1', kind = 'ConfigMap',
          metadata = { name = 'a1', namespace = NS }, data = { x = '1' } })
        local ok, err = pcall(kube.apply, 'cm', { metadata = { name = 'a1', namespace = NS }, data = { x = '2' } },
          { field_manager = 'other' })
        local forced = kube.apply('cm', { metadata = { name = 'a1', namespace = NS }, data = { x = '3' } },
          { field_manager = 'other', force = true })
        print(json.encode({ rv1 = first.metadata.resourceVersion, rv2 = second.metadata.resourceVersion,
          ok = ok, code = err and err.code, x = forced.data.x }))
      ]]
      must(res)
      assert.are.equal(res.json.rv1, res.json.rv2)
      assert.is_false(res.json.ok)
      assert.are.equal(409, res.json.code)
      assert.are.equal('3', res.json.x)
      local got = kubectl_json('get configmap a1 -n ' .. NS .. ' --show-managed-fields')
      local managers = {}
      for _, m in ipairs(got.metadata.managedFields) do managers[m.manager] = m.operation end
      assert.are.equal('Apply', managers['other'])
      assert.are.equal('3', got.data.x)
    end)
  end)

  describe('delete', function()
    it('deletes; with ignore_not_found a missing object is false, without it NotFound is raised', function()
      must(h.kubectl('create configmap d1 -n ' .. NS))
      local res = run [[
        local first = kube.delete('cm', 'd1', { namespace = NS })
        local again = kube.delete('cm', 'd1', { namespace = NS, ignore_not_found = true })
        local ok, err = pcall(kube.delete, 'cm', 'd1', { namespace = NS })
        print(json.encode({ first = first, again = again, ok = ok, code = err.code, nf = kube.is_not_found(err) }))
      ]]
      must(res)
      assert.are.same({ first = true, again = false, ok = false, code = 404, nf = true }, res.json)
      local k = h.kubectl('get configmap d1 -n ' .. NS)
      assert.are_not.equal(0, k.code)
      assert.matches('NotFound', k.err)
    end)

    it('sends the propagation policy: Foreground and Orphan leave their finalizer pending', function()
      kapply(deployment('fg'))
      kapply(deployment('or'))
      kapply(deployment('bg'))
      must(run [[
        kube.delete('deploy', 'fg', { namespace = NS, propagation = 'Foreground' })
        kube.delete('deploy', 'or', { namespace = NS, propagation = 'Orphan' })
        kube.delete('deploy', 'bg', { namespace = NS, propagation = 'Background', wait = true, timeout = 20 })
      ]])
      local fg = kubectl_json('get deployment fg -n ' .. NS)
      local orph = kubectl_json('get deployment or -n ' .. NS)
      assert.is_not_nil(fg.metadata.deletionTimestamp)
      assert.are.same({ 'foregroundDeletion' }, fg.metadata.finalizers)
      assert.are.same({ 'orphan' }, orph.metadata.finalizers)
      assert.are_not.equal(0, h.kubectl('get deployment bg -n ' .. NS).code)
      for _, n in ipairs({ 'fg', 'or' }) do
        must(h.kubectl('patch deployment ' .. n .. ' -n ' .. NS .. ' --type=merge -p \'{"metadata":{"finalizers":null}}\''))
      end
    end)

    it('wait blocks until the object is gone, and times out while a finalizer holds it', function()
      kapply(deployment('wt'))
      local res = run [[
        local t0 = require('kube.core').now()
        local ok, err = pcall(kube.delete, 'deploy', 'wt', { namespace = NS, propagation = 'Foreground', wait = true, timeout = 1 })
        print(json.encode({ ok = ok, reason = err and err.reason, timeout = kube.is_timeout(err),
          elapsed = require('kube.core').now() - t0 }))
      ]]
      must(res)
      assert.is_false(res.json.ok)
      assert.is_true(res.json.timeout)
      assert.is_true(res.json.elapsed >= 1)
      must(h.kubectl('patch deployment wt -n ' .. NS .. ' --type=merge -p \'{"metadata":{"finalizers":null}}\''))
    end)
  end)

  describe('subresources', function()
    it('scale: reads and patches a Deployment through its scale subresource', function()
      kapply(deployment('sc'))
      local res = run [[
        local s = kube.get('deploy', 'sc', { namespace = NS, subresource = 'scale' })
        local out = kube.patch('deploy', 'sc', { spec = { replicas = 5 } }, { namespace = NS, subresource = 'scale' })
        print(json.encode({ kind = s.kind, before = s.spec.replicas, after = out.spec.replicas }))
      ]]
      must(res)
      assert.are.same({ kind = 'Scale', before = 1, after = 5 }, res.json)
      assert.are.equal(5, kubectl_json('get deployment sc -n ' .. NS).spec.replicas)
    end)

    it('status: a status patch lands through the subresource and is ignored through the object', function()
      kapply(deployment('st'))
      must(run [[
        kube.patch('deploy', 'st', { status = { observedGeneration = 7 } }, { namespace = NS })
        kube.patch('deploy', 'st', { status = { replicas = 3 } }, { namespace = NS, subresource = 'status' })
        local d = kube.get('deploy', 'st', { namespace = NS })
        d.status.readyReplicas = 2
        kube.replace('deploy', d, { subresource = 'status' })
      ]])
      local st = kubectl_json('get deployment st -n ' .. NS).status
      assert.are.equal(3, st.replicas)
      assert.are.equal(2, st.readyReplicas)
      assert.is_nil(st.observedGeneration)
    end)
  end)

  describe('update', function()
    it('retries a real 409: a concurrent write lands between its read and its write', function()
      must(h.kubectl('create configmap u1 -n ' .. NS .. ' --from-literal=n=0'))
      local res = run [[
        local calls = 0
        local obj, changed = kube.update('cm', 'u1', function(cm)
          calls = calls + 1
          if calls == 1 then
            -- another writer moves the resourceVersion under us
            kube.patch('cm', 'u1', { data = { other = 'writer' } }, { namespace = NS })
          end
          cm.data.n = tostring(tonumber(cm.data.n) + 1)
        end, { namespace = NS })
        local same, unchanged = kube.update('cm', 'u1', function() return false end, { namespace = NS })
        print(json.encode({ calls = calls, changed = changed, n = obj.data.n, other = obj.data.other,
          unchanged = unchanged, rv_same = same.metadata.resourceVersion == obj.metadata.resourceVersion }))
      ]]
      must(res)
      assert.are.same({ calls = 2, changed = true, n = '1', other = 'writer', unchanged = false, rv_same = true },
        res.json)
      assert.matches('conflict, retrying', res.err)
      assert.are.same({ n = '1', other = 'writer' }, kubectl_json('get configmap u1 -n ' .. NS).data)
    end)

    it('gives up with the Conflict after the allowed attempts', function()
      must(h.kubectl('create configmap u2 -n ' .. NS .. ' --from-literal=n=0'))
      local res = run [[
        local calls = 0
        local ok, err = pcall(kube.update, 'cm', 'u2', function(cm)
          calls = calls + 1
          kube.patch('cm', 'u2', { data = { c = tostring(calls) } }, { namespace = NS })
          cm.data.n = 'mine'
        end, { namespace = NS, attempts = 3 })
        print(json.encode({ ok = ok, calls = calls, conflict = kube.is_conflict(err) }))
      ]]
      must(res)
      assert.are.same({ ok = false, calls = 3, conflict = true }, res.json)
      assert.are.equal('0', kubectl_json('get configmap u2 -n ' .. NS).data.n)
    end)
  end)

  describe('wait', function()
    it('returns once the predicate holds for a change made by someone else', function()
      must(h.kubectl('create configmap w1 -n ' .. NS))
      -- kubectl labels the object once the script says it is about to wait
      -- (it creates w1-waiting), however long the script took to start
      os.execute(string.format('(%s; sleep 0.3; %s kubectl label configmap w1 -n %s ready=yes) >/dev/null 2>&1 &',
        require('support.runner').until_configmap(NS, 'w1-waiting'), h.q(h.testenv), NS))
      local res = run [[
        local before = kube.get('cm', 'w1', { namespace = NS }).metadata.labels
        kube.create('cm', { metadata = { name = 'w1-waiting' } }, { namespace = NS })
        local cm = kube.wait('cm', 'w1', function(o) return o and o.metadata.labels and o.metadata.labels.ready == 'yes' end,
          30, { namespace = NS })
        print(json.encode({ ready = cm.metadata.labels.ready, before = before or json.null }))
      ]]
      must(res)
      -- unlabelled when it began, labelled by someone else while it waited
      assert.are.same({ ready = 'yes', before = json.null }, res.json)
    end)

    it('raises a Timeout error value when the predicate never holds', function()
      local res = run [[
        local ok, err = pcall(kube.wait, 'cm', 'never-there', function(o) return o ~= nil end, 1, { namespace = NS })
        print(json.encode({ ok = ok, reason = err.reason, verb = err.verb, is_error = kube.is_error(err),
          text = tostring(err) }))
      ]]
      must(res)
      assert.is_false(res.json.ok)
      assert.are.equal('Timeout', res.json.reason)
      assert.are.equal('wait', res.json.verb)
      assert.is_true(res.json.is_error)
      assert.matches('never%-there', res.json.text)
    end)
  end)
end)
