-- The ledger guard against the real apiserver: no script may write the
-- ledger ConfigMap (cozystack-version), the runner's Lease
-- (cozystack-version-lock), the platform namespace itself (--namespace, else
-- $NAMESPACE, else cozy-system) or the runner's Events, by any verb,
-- subresource or path spelling. A refused
-- write raises "the ledger is written by the runner" and sends nothing: the
-- module's request counter does not move and kubectl sees the same
-- resourceVersion. Reads, and writes to anything else, still work.
local h = require('support.helpers')
local json = require('json')

local GNS = string.format('kg-%d-%d', os.time(), math.random(1000, 9999))

local must = h.must

local function run(body, ...)
  return h.kube_script({ GNS = GNS }, body, ...)
end

local function rv(kind, name)
  return json.decode(must(h.kubectl(string.format('get %s %s -n %s -o json', kind, name, GNS))).out)
    .metadata.resourceVersion
end

-- Tries every write on the ledger and the lease; reports each refusal and
-- how many requests went out meanwhile.
local ATTEMPTS = [[
local lease_path = '/apis/coordination.k8s.io/v1/namespaces/' .. ns .. '/leases'
local cm_path = '/api/v1/namespaces/' .. ns .. '/configmaps'
local writes = {
  create_cm = function() return kube.create('cm', { metadata = { name = 'cozystack-version', namespace = ns } }) end,
  create_lease = function()
    return kube.create('leases', { metadata = { name = 'cozystack-version-lock', namespace = ns } })
  end,
  replace_cm = function()
    return kube.replace('cm', { metadata = { name = 'cozystack-version', namespace = ns }, data = { version = '99' } })
  end,
  replace_lease = function()
    return kube.replace('leases', { metadata = { name = 'cozystack-version-lock', namespace = ns }, spec = {} })
  end,
  merge_cm = function() return kube.patch('cm', 'cozystack-version', { data = { version = '99' } }, { namespace = ns }) end,
  json_cm = function()
    return kube.patch('cm', 'cozystack-version', { { op = 'add', path = '/data/x', value = 'y' } },
      { namespace = ns, type = 'json' })
  end,
  strategic_lease = function()
    return kube.patch('lease', 'cozystack-version-lock', { spec = { holderIdentity = 'me' } },
      { namespace = ns, type = 'strategic' })
  end,
  apply_cm = function()
    return kube.apply('cm', { metadata = { name = 'cozystack-version', namespace = ns }, data = { version = '99' } })
  end,
  apply_lease = function()
    return kube.apply('Lease', { metadata = { name = 'cozystack-version-lock', namespace = ns }, spec = {} })
  end,
  delete_cm = function() return kube.delete('cm', 'cozystack-version', { namespace = ns }) end,
  delete_lease = function() return kube.delete('leases.coordination.k8s.io', 'cozystack-version-lock', { namespace = ns }) end,
  update_cm = function()
    return kube.update('cm', 'cozystack-version', function(cm) cm.data = { version = '99' } end, { namespace = ns })
  end,
  status_lease = function()
    return kube.patch('leases', 'cozystack-version-lock', { spec = {} }, { namespace = ns, subresource = 'status' })
  end,
  delete_namespace = function() return kube.delete('namespaces', ns) end,
  patch_namespace = function()
    return kube.patch('namespaces', ns, { metadata = { labels = { squatted = 'yes' } } })
  end,
  own_namespace = function()
    -- an ownerReference a garbage collector would follow to take the ledger with it
    return kube.patch('namespaces', ns, { metadata = { ownerReferences = { { apiVersion = 'v1', kind = 'ConfigMap',
      name = 'bait', uid = '00000000-0000-0000-0000-000000000000' } } } })
  end,
  update_namespace = function()
    return kube.update('namespaces', ns, function(o) o.metadata.labels = { squatted = 'yes' } end)
  end,
  apply_namespace = function() return kube.apply('namespaces', { metadata = { name = ns, labels = { x = 'y' } } }) end,
  finalize_namespace = function()
    return kube.replace('namespaces', { metadata = { name = ns }, spec = { finalizers = {} } }, { subresource = 'finalize' })
  end,
  status_namespace = function()
    return kube.patch('namespaces', ns, { status = { phase = 'Terminating' } }, { subresource = 'status' })
  end,
  delete_runner_event = function() return kube.delete('events', 'cozystack-version.17a2b3c4d5e6f708', { namespace = ns }) end,
  forge_runner_event = function()
    return kube.create('events', { metadata = { name = 'forged' }, reason = 'MigrationSucceeded', message = 'x succeeded',
      involvedObject = { apiVersion = 'v1', kind = 'ConfigMap', name = 'cozystack-version', namespace = ns },
      source = { component = 'cozy-migrate' } }, { namespace = ns })
  end,
  forge_event_elsewhere = function()
    return kube.create('events.events.k8s.io', { metadata = { name = 'forged' }, reason = 'MigrationSucceeded',
      reportingController = 'cozy-migrate', reportingInstance = 'x', action = 'Run', eventTime = '2026-01-01T00:00:00.000000Z',
      regarding = { kind = 'ConfigMap', name = 'settings' } }, { namespace = 'default' })
  end,
  kind_name = function() return kube.delete('ConfigMap', 'cozystack-version', { namespace = ns }) end,
  qualified_name = function()
    return kube.patch('configmaps.v1.', 'cozystack-version', { data = { version = '99' } }, { namespace = ns })
  end,
  lease_qualified = function()
    return kube.delete('leases.v1.coordination.k8s.io', 'cozystack-version-lock', { namespace = ns })
  end,
  upper_case_name = function() return kube.delete('cm', 'Cozystack-Version', { namespace = ns }) end,
  tampered_resource = function()
    -- a resource table is resolved again from its name: a prefix a script
    -- edits steers nothing
    local r = kube.resource('cm')
    r.prefix = '/api/v1/namespaces/elsewhere/secrets'
    return kube.delete(r, 'cozystack-version', { namespace = ns })
  end,
  yaml_apply_lease = function()
    return kube.apply('leases', { metadata = { name = 'cozystack-version-lock', namespace = ns },
      spec = { holderIdentity = 'squatter' } }, { force = true })
  end,
}
kube.resource('cm'); kube.resource('leases') -- discovery first
local out = { writes = {}, total = 0 }
for name, f in pairs(writes) do
  local before = core.requests()
  local ok, err = pcall(f)
  out.writes[name] = { ok = ok, reason = type(err) == 'table' and err.reason or tostring(err),
    text = tostring(err), protected = kube.is_ledger_protected(err), sent = core.requests() - before }
  out.total = out.total + 1
end
print(json.encode(out))
]]

-- the attempts, on the ledger in the namespace the Lua expression names
local function attempts(ns_expr)
  return 'local ns = ' .. ns_expr .. '\n' .. ATTEMPTS
end

describe('#e2e kube ledger guard', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. GNS))
    must(h.kubectl('create configmap cozystack-version -n ' .. GNS .. ' --from-literal=version=3'))
    local f = h.write(os.tmpname() .. '.json', json.encode({
      apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = 'cozystack-version-lock', namespace = GNS }, spec = { holderIdentity = 'runner' } }))
    must(h.kubectl('apply -f ' .. f))
    os.remove(f)
  end)

  teardown(function()
    h.kubectl('delete configmaps,leases --all -n ' .. GNS .. ' --wait=false')
    h.kubectl('delete namespace ' .. GNS .. ' --wait=false')
  end)

  local function check_all_refused(res, absent)
    local n = 0
    for name, r in pairs(res.json.writes) do
      n = n + 1
      local update = name == 'update_cm' or name == 'update_namespace'
      if absent and update then
        -- update reads first (allowed); with no ledger it stops at NotFound
        assert.are.same({ ok = false, reason = 'NotFound', sent = 1 }, { ok = r.ok, reason = r.reason, sent = r.sent })
        goto continue
      end
      assert.is_false(r.ok, name .. ' was let through')
      assert.is_true(r.protected, name .. ': ' .. r.text)
      assert.matches('the ledger is written by the runner', r.text, 1, true)
      -- nothing sent; update reads the object (allowed) before its write is refused
      assert.are.equal(update and 1 or 0, r.sent, name)
      ::continue::
    end
    assert.is_true(n > 0)
    assert.are.equal(res.json.total, n)
  end

  local function ns_rv() return h.kubectl_json('get namespace ' .. GNS).metadata.resourceVersion end

  it('refuses every write to the ledger, the lease, their namespace and the runner\'s Events, sending nothing', function()
    local cm_rv, lease_rv, nrv = rv('configmap', 'cozystack-version'), rv('lease', 'cozystack-version-lock'), ns_rv()
    local res = must(run(attempts('GNS'), '--namespace', GNS))
    check_all_refused(res)
    assert.are.equal(cm_rv, rv('configmap', 'cozystack-version'))
    assert.are.equal(lease_rv, rv('lease', 'cozystack-version-lock'))
    assert.are.equal(nrv, ns_rv(), 'the namespace of the ledger was written')
    assert.are.same({}, h.kubectl_json('get events -n ' .. GNS .. ' --field-selector reason=MigrationSucceeded').items)
  end)

  it("keeps the runner's own Events on the ledger, and lets a migration write Events of its own", function()
    h.kcreate({ apiVersion = 'v1', kind = 'Event',
      metadata = { name = 'cozystack-version.17a2b3c4d5e6f708', namespace = GNS },
      involvedObject = { apiVersion = 'v1', kind = 'ConfigMap', name = 'cozystack-version', namespace = GNS },
      reason = 'MigrationSucceeded', message = 'done', type = 'Normal', source = { component = 'cozy-migrate' } })
    local erv = h.kubectl_json('get event cozystack-version.17a2b3c4d5e6f708 -n ' .. GNS).metadata.resourceVersion
    local res = must(run([[
      local out = {}
      out.delete = select(2, pcall(kube.delete, 'events', 'cozystack-version.17a2b3c4d5e6f708', { namespace = GNS })).reason
      out.patch = select(2, pcall(kube.patch, 'events', 'cozystack-version.17a2b3c4d5e6f708', { message = 'forged' },
        { namespace = GNS })).reason
      local mine = kube.create('events', { metadata = { name = 'mine' }, reason = 'Labelled', message = 'ok',
        involvedObject = { apiVersion = 'v1', kind = 'ConfigMap', name = 'settings', namespace = GNS },
        source = { component = 'label-tenants' } }, { namespace = GNS })
      kube.patch('events', 'mine', { message = 'again' }, { namespace = GNS })
      out.mine = kube.delete('events', 'mine', { namespace = GNS })
      print(json.encode(out))
    ]], '--namespace', GNS))
    assert.are.same({ delete = 'LedgerProtected', patch = 'LedgerProtected', mine = true }, res.json)
    assert.are.equal(erv, h.kubectl_json('get event cozystack-version.17a2b3c4d5e6f708 -n ' .. GNS).metadata.resourceVersion)
  end)

  it("keeps every Event the engine wrote whatever its name (the dispatcher's on the index and on a Job)", function()
    h.kcreate({ apiVersion = 'v1', kind = 'Event',
      metadata = { name = 'cozystack-migrations-index.mismatch-7', namespace = GNS },
      involvedObject = { apiVersion = 'v1', kind = 'ConfigMap', name = 'cozystack-migrations-index', namespace = GNS },
      reason = 'MigrationsIndexMismatch', message = 'differs', type = 'Warning', source = { component = 'cozy-migrate' },
      reportingComponent = 'cozy-migrate' })
    h.kcreate({ apiVersion = 'v1', kind = 'Event', metadata = { name = 'some-job.foreign-1', namespace = GNS },
      involvedObject = { apiVersion = 'batch/v1', kind = 'Job', name = 'some-job', namespace = GNS },
      reason = 'MigrationJobNotOurs', message = 'not ours', type = 'Warning', source = { component = 'cozy-migrate' } })
    local erv = h.kubectl_json('get event some-job.foreign-1 -n ' .. GNS).metadata.resourceVersion
    local res = must(run([[
      local out = {}
      out.delete = select(2, pcall(kube.delete, 'events', 'cozystack-migrations-index.mismatch-7', { namespace = GNS })).reason
      out.patch = select(2, pcall(kube.patch, 'events', 'some-job.foreign-1', { message = 'ours now' },
        { namespace = GNS })).reason
      print(json.encode(out))
    ]], '--namespace', GNS))
    assert.are.same({ delete = 'LedgerProtected', patch = 'LedgerProtected' }, res.json)
    assert.are.equal(erv, h.kubectl_json('get event some-job.foreign-1 -n ' .. GNS).metadata.resourceVersion)
    must(h.kubectl('get event cozystack-migrations-index.mismatch-7 -n ' .. GNS))
  end)

  it('takes the namespace from $NAMESPACE, and refuses in dry-run mode too', function()
    local cm_rv = rv('configmap', 'cozystack-version')
    local res = must(run(attempts('GNS'), '--dry-run', { env = { NAMESPACE = GNS } }))
    check_all_refused(res)
    assert.are.equal(cm_rv, rv('configmap', 'cozystack-version'))
  end)

  it('guards cozy-system by default, whether or not it exists', function()
    local absent = h.kubectl('get configmap cozystack-version -n cozy-system').code ~= 0
    local res = must(run(attempts("'cozy-system'")))
    check_all_refused(res, absent)
  end)

  it('still reads the ledger, and writes other objects in its namespace', function()
    local res = must(run([[
      local ledger = kube.get('cm', 'cozystack-version', { namespace = GNS })
      local lease = kube.get('leases', 'cozystack-version-lock', { namespace = GNS })
      local other = kube.create('cm', { metadata = { name = 'cozystack-version-2', namespace = GNS } })
      kube.patch('cm', 'cozystack-version-2', { data = { a = 'b' } }, { namespace = GNS })
      kube.delete('cm', 'cozystack-version-2', { namespace = GNS })
      print(json.encode({ version = ledger.data.version, holder = lease.spec.holderIdentity,
        other = other.metadata.name }))
    ]], '--namespace', GNS))
    assert.are.same({ version = '3', holder = 'runner', other = 'cozystack-version-2' }, res.json)
  end)

  it('writes the ledger namespace freely when the platform namespace is another one', function()
    local res = must(run([[
      kube.patch('cm', 'cozystack-version', { metadata = { labels = { touched = 'yes' } } }, { namespace = GNS })
      print(json.encode({ ok = true }))
    ]], '--namespace', GNS .. '-other'))
    assert.is_true(res.json.ok)
    local cm = json.decode(must(h.kubectl('get configmap cozystack-version -n ' .. GNS .. ' -o json')).out)
    assert.are.equal('yes', cm.metadata.labels.touched)
  end)

  -- A subresource is the one part of a path a verb takes as the script
  -- gives it: every way to make the sent path differ from the judged one.
  local BAD_SUBRESOURCES = {
    dots = { '../cozystack-version', "'.' or '..' segment" },
    fragment = { '#', "fragment ('#')" },
    query = { 'status?dryRun=None', 'holds a query' },
    empty = { '/status', 'empty segment' },
    crlf = { 'status\r\nImpersonate-User: admin', 'control, space or non-ASCII' },
    encoded_slash = { 'x%2F..%2Fcozystack-version', "escaped '/'" },
  }

  for _, dry in ipairs { false, true } do
    it('refuses a path it cannot judge instead of sending it' .. (dry and ', in dry run too' or ''), function()
      local cases = {}
      for name, c in pairs(BAD_SUBRESOURCES) do cases[#cases + 1] = string.format('%s = %q', name, c[1]) end
      local res = must(run([[
        kube.resource('cm')
        local subs = { ]] .. table.concat(cases, ', ') .. [[ }
        local out = {}
        for name, sub in pairs(subs) do
          local before = core.requests()
          local ok, err = pcall(kube.patch, 'cm', 'x', { data = { a = 'b' } }, { namespace = GNS, subresource = sub })
          out[name] = { ok = ok, err = tostring(err), sent = core.requests() - before }
        end
        print(json.encode(out))
      ]], '--namespace', GNS, dry and '--dry-run' or nil))
      for name, c in pairs(BAD_SUBRESOURCES) do
        local r = res.json[name]
        assert.is_false(r.ok, name)
        assert.matches(c[2], r.err, 1, true)
        assert.are.equal(0, r.sent, name)
      end
    end)
  end

  -- The same attempts from a migration under `run`: the script raises if any
  -- write got through, so an `ok` record proves every one was refused, and
  -- the ledger holds nothing but `version` and the runner's own record.
  for _, dry in ipairs { true, false } do
    it('refuses every write from a migration under run' .. (dry and ' --dry-run' or ''), function()
      local fixture = require('support.fixture')
      local body = 'local kube, json = require("kube"), require("json")\nlocal core = { requests = kube.requests }\n' ..
        attempts(string.format('%q', GNS)) .. [[
        for name, r in pairs(out.writes) do
          if r.ok or (not r.protected and not (name:match('^update_') and r.reason == 'NotFound')) then
            error('not refused: ' .. name .. ': ' .. r.text)
          end
        end
      ]]
      local dir = fixture.tree { batches = { { '00001-v1', { 'attempt' } } }, scripts = { attempt = { body = body } } }
      local cm_rv, lease_rv = rv('configmap', 'cozystack-version'), rv('lease', 'cozystack-version-lock')
      local res = must(h.cozy('run', '--dir', dir, '--namespace', GNS, dry and '--dry-run' or nil))
      if not dry then
        local cm = h.kubectl_json('get configmap cozystack-version -n ' .. GNS)
        local keys = {}
        for k in pairs(cm.data) do keys[#keys + 1] = k end
        table.sort(keys)
        assert.are.same({ 'm.attempt', 'version' }, keys)
        assert.are.equal('ok', json.decode(cm.data['m.attempt']).state)
        assert.are.equal('3', cm.data.version)
        -- the runner took the (never renewed) Lease and released it: put
        -- the other holder back for the cases that read it
        local f = h.write(os.tmpname() .. '.json', json.encode({
          apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
          metadata = { name = 'cozystack-version-lock', namespace = GNS }, spec = { holderIdentity = 'runner' } }))
        must(h.kubectl('apply -f ' .. f))
        os.remove(f)
      else
        assert.are.equal(0, res.code, res.out .. res.err)
        assert.matches('ok %(dry run%)', res.out)
        assert.are.equal(cm_rv, rv('configmap', 'cozystack-version'))
        assert.are.equal(lease_rv, rv('lease', 'cozystack-version-lock'))
      end
    end)
  end

  it('gives a migration no raw request function, only the verbs', function()
    local res = must(run([[
      local found = {}
      for k, v in pairs(core) do if type(v) == 'function' then found[#found + 1] = k end end
      for k, v in pairs(kube) do if k == 'request' or k == 'core' then found[#found + 1] = 'kube.' .. k end end
      table.sort(found)
      local ok, err = pcall(load, "return require('kube.core').request")
      print(json.encode({ fns = json.array(found), request = core.request == nil and 'absent' or 'present',
        package = type(package), debug = type(debug) }))
    ]], '--namespace', GNS))
    assert.are.equal('absent', res.json.request)
    assert.are.equal('nil', res.json.package)
    assert.are.equal('nil', res.json.debug)
    for _, f in ipairs(res.json.fns) do assert.are_not.equal('request', f) end
  end)

  it('sends header values only from a fixed list', function()
    local res = must(run([[
      local ok, err = pcall(kube.patch, 'cm', 'x', { data = {} },
        { namespace = GNS, type = 'merge\r\nImpersonate-User: admin' })
      print(json.encode({ ok = ok, err = tostring(err) }))
    ]], '--namespace', GNS))
    assert.is_false(res.json.ok)
    assert.matches('unknown patch type', res.json.err, 1, true)
  end)
end)
