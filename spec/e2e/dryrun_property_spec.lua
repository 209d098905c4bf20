-- The dry-run promise as a property: whatever mix of verbs and options a
-- migration sends under `lua --dry-run`, `run --dry-run` or `preview`
-- (creates with names and generated names, replaces with and without a
-- resourceVersion, every patch type, deletes with every propagation policy,
-- updates, applies with force), nothing persists: every object keeps its
-- resourceVersion, its finalizers and its life, and no object appears. Each
-- case is a random program from a seed; a failure names the seed and the
-- program, so it can be replayed.
local h = require('support.helpers')
local fixture = require('support.fixture')
local runner = require('support.runner')
local json = require('json')

local KINDS = { 'configmaps', 'secrets', 'serviceaccounts' }
local NAMES = { 'a', 'b', 'held', 'gone' } -- 'gone' never exists; 'held' has a finalizer

-- Everything in ns that a write could touch, by kind/name: resourceVersion,
-- finalizers, deletion.
local function state(ns)
  local out = {}
  for _, kind in ipairs(KINDS) do
    for _, o in ipairs(h.kubectl_json('get ' .. kind .. ' -n ' .. ns).items) do
      local m = o.metadata
      out[kind .. '/' .. m.name] = m.resourceVersion .. ' ' .. table.concat(m.finalizers or {}, ',') ..
        (m.deletionTimestamp and ' deleting' or '')
    end
  end
  return out
end

-- One random operation as Lua source; the program pcalls each, so a refused
-- or invalid one goes on to the next.
local function operation(rnd, ns)
  local kind = KINDS[rnd(#KINDS)]
  local name = NAMES[rnd(#NAMES)]
  local o = string.format('{ namespace = %q', ns)
  local body = kind == 'configmaps' and string.format('data = { k = %q }', tostring(rnd(1000)))
    or kind == 'secrets' and string.format('stringData = { k = %q }', tostring(rnd(1000)))
    or string.format('metadata = { labels = { k = %q } }', tostring(rnd(1000)))
  local verb = rnd(9)
  if verb == 1 then
    local meta = rnd(2) == 1 and string.format('{ name = %q }', name .. '-new' .. rnd(3))
      or string.format('{ generateName = %q }', 'gen-')
    return string.format('kube.create(%q, { metadata = %s, %s }, %s })', kind, meta,
      kind == 'serviceaccounts' and 'automountServiceAccountToken = false' or body, o)
  elseif verb == 2 then
    return string.format([[local cur = kube.get(%q, %q, %s })
      if cur then %s kube.replace(%q, cur, %s }) end]], kind, name, o,
      rnd(2) == 1 and 'cur.metadata.resourceVersion = nil' or '', kind, o)
  elseif verb == 3 then
    return string.format('kube.patch(%q, %q, { %s }, %s, type = "merge" })', kind, name, body, o)
  elseif verb == 4 then
    return string.format('kube.patch(%q, %q, { %s }, %s, type = "strategic" })', kind, name, body, o)
  elseif verb == 5 then
    local ops = {
      '{ op = "add", path = "/metadata/labels", value = { j = "1" } }',
      '{ op = "remove", path = "/metadata/finalizers" }',
      '{ op = "replace", path = "/metadata/labels", value = {} }',
    }
    return string.format('kube.patch(%q, %q, { %s }, %s, type = "json" })', kind, name, ops[rnd(#ops)], o)
  elseif verb == 6 then
    local applied = kind == 'serviceaccounts'
      and string.format('metadata = { name = %q, labels = { k = %q } }', name, tostring(rnd(1000)))
      or string.format('metadata = { name = %q }, %s', name, body)
    return string.format('kube.apply(%q, { %s }, %s, force = %s })', kind, applied, o,
      rnd(2) == 1 and 'true' or 'false')
  elseif verb == 7 then
    local props = { 'nil', '"Background"', '"Foreground"', '"Orphan"' }
    return string.format('kube.delete(%q, %q, %s, propagation = %s, ignore_not_found = %s, wait = %s })',
      kind, name, o, props[rnd(#props)], rnd(2) == 1 and 'true' or 'false', rnd(2) == 1 and 'true' or 'false')
  elseif verb == 8 then
    return string.format([[kube.update(%q, %q, function(x)
        x.metadata.labels = x.metadata.labels or {}; x.metadata.labels.u = %q
        x.metadata.finalizers = nil
      end, %s })]], kind, name, tostring(rnd(100)), o)
  end
  return string.format('kube.patch(%q, %q, { metadata = { finalizers = json.null, ownerReferences = { { ' ..
    'apiVersion = "v1", kind = "ConfigMap", name = "a", uid = "00000000-0000-0000-0000-000000000000" } } } }, %s })',
    kind, name, o)
end

-- A program of n random operations for seed.
local function program(seed, n, ns)
  local state_ = seed
  local function rnd(m) -- a small LCG, so a seed replays the same program anywhere
    state_ = (state_ * 1103515245 + 12345) % 2147483648
    return (state_ // 65536) % m + 1
  end
  local lines = { "local kube = require('kube')", "local json = require('json')", 'local sent, refused = 0, 0' }
  for _ = 1, n do
    lines[#lines + 1] = 'do local ok = pcall(function() ' .. operation(rnd, ns) ..
      ' end); if ok then sent = sent + 1 else refused = refused + 1 end end'
  end
  lines[#lines + 1] = "print(string.format('%d ok, %d refused', sent, refused))"
  return table.concat(lines, '\n')
end

describe('#e2e the dry-run promise', function()
  local ns
  setup(function()
    h.need_cluster()
    ns = runner.new_ns()
    runner.make_ledger(ns, {})
    for _, n in ipairs { 'a', 'b', 'held' } do
      h.must(h.kubectl(string.format('create configmap %s -n %s --from-literal=k=v', n, ns)))
      h.must(h.kubectl(string.format('create secret generic %s -n %s --from-literal=k=v', n, ns)))
      h.must(h.kubectl(string.format('create serviceaccount %s -n %s', n, ns)))
    end
    for _, kind in ipairs(KINDS) do
      h.must(h.kubectl(string.format([[patch %s held -n %s --type merge -p '{"metadata":{"finalizers":["spec.cozystack.io/hold"]}}']],
        kind, ns)))
    end
  end)
  teardown(function()
    for _, kind in ipairs(KINDS) do
      h.kubectl(string.format([[patch %s held -n %s --type merge -p '{"metadata":{"finalizers":null}}']], kind, ns))
    end
    runner.delete_namespaces()
  end)

  local SEEDS = { 1, 7, 42, 1234, os.time() % 100000 }

  for _, seed in ipairs(SEEDS) do
    it('holds for a random program (seed ' .. seed .. ') under lua --dry-run, run --dry-run and preview', function()
      local src = program(seed, 40, ns)
      local before = state(ns)
      local ledger = runner.get_ledger(ns).metadata.resourceVersion
      local res = h.lua(src, '--dry-run')
      assert.are.equal(0, res.code, res.err)
      local ok = tonumber(res.out:match('(%d+) ok, %d+ refused\n$'))
      assert.is_true(ok and ok >= 10, 'too few operations went through to test anything: ' .. res.out:sub(-200))
      assert.are.same(before, state(ns), 'lua --dry-run, seed ' .. seed .. ':\n' .. src)

      local dir = fixture.tree { batches = { { '00001-v1', { 'random' } } },
        scripts = { random = { body = src, on_error = 'warn' } } }
      res = runner.run(dir, ns, '--dry-run')
      assert.are.equal(0, res.code, res.out .. res.err)
      assert.are.same(before, state(ns), 'run --dry-run, seed ' .. seed .. ':\n' .. src)
      res = h.cozy('preview', '--dir', dir, '--namespace', ns)
      assert.are.equal(0, res.code, res.out .. res.err)
      h.sleep(0.3) -- a collector acting on a persisted deletion would be quick
      assert.are.same(before, state(ns), 'preview, seed ' .. seed .. ':\n' .. src)
      assert.are.equal(ledger, runner.get_ledger(ns).metadata.resourceVersion, 'the ledger was written')
      assert.are.equal(0, #h.kubectl_json('get leases -n ' .. ns).items, 'a Lease was taken')
    end)
  end
end)
