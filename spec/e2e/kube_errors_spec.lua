-- Apiserver errors as Lua values, from the real apiserver: 404, 409
-- (AlreadyExists and Conflict), 415, 422, 401 (a wrong token), 403 (the
-- read-only context). Each carries code, reason, message, details, verb and
-- path; tostring() reads as kubectl's own error line for the same request;
-- each predicate is true for its error and false for the others. (410 is
-- covered in kube_list_spec, connection errors in kube_retry_spec.)
local h = require('support.helpers')
local json = require('json')

local NS = string.format('ke-%d-%d', os.time(), math.random(1000, 9999))
local SUFFIX = string.format('%d%d', os.time() % 100000, math.random(100, 999))
local GROUP = 'e' .. SUFFIX .. '.cozystack.io'
local PLURAL = 'things' .. SUFFIX

local must = h.must

local function run(body, ...)
  return h.kube_script({ NS = NS, PLURAL = PLURAL, GROUP = GROUP }, body, ...)
end

-- Every error the script collects is reported with all its fields and
-- every predicate's verdict.
local REPORT = [[
local PREDICATES = { 'is_not_found', 'is_conflict', 'is_already_exists', 'is_forbidden', 'is_unauthorized',
  'is_invalid', 'is_gone', 'is_too_many_requests', 'is_unsupported_media_type', 'is_timeout',
  'is_connection_error', 'is_ledger_protected' }
local function report(ok, err)
  assert(not ok, 'the call was expected to fail')
  local r = { code = err.code, reason = err.reason, message = err.message, verb = err.verb,
    method = err.method, path = err.path, details = err.details, text = tostring(err),
    is_error = kube.is_error(err), preds = {} }
  for _, p in ipairs(PREDICATES) do r.preds[p] = kube[p](err) end
  return r
end
]]

local function only(pred, preds)
  for name, v in pairs(preds) do
    if name == pred then
      assert.is_true(v, name .. ' should hold')
    else
      assert.is_false(v, name .. ' should not hold')
    end
  end
end

-- kubectl's error line for the same failing request
local function kubectl_error(args)
  local k = h.kubectl(args)
  assert.are_not.equal(0, k.code)
  return (k.err:match('^(.-)\n?$'))
end

-- kubectl's error line for a raw create (the imperative `kubectl create
-- configmap` wraps the server's error in its own words)
local function kubectl_create_error(ns, name, context)
  local f = h.write(os.tmpname() .. '.json', json.encode({ apiVersion = 'v1', kind = 'ConfigMap',
    metadata = { name = name } }))
  local line = kubectl_error(string.format('%s create --raw /api/v1/namespaces/%s/configmaps -f %s',
    context and ('--context ' .. context) or '', ns, f))
  os.remove(f)
  return line
end

describe('#e2e kube errors', function()
  local kc_dir

  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    must(h.kubectl('create configmap exists -n ' .. NS))
    h.apply_crd({
      apiVersion = 'apiextensions.k8s.io/v1', kind = 'CustomResourceDefinition',
      metadata = { name = PLURAL .. '.' .. GROUP },
      spec = { group = GROUP, scope = 'Namespaced',
        names = { plural = PLURAL, singular = PLURAL:sub(1, -2), kind = 'Thing' .. SUFFIX },
        versions = json.array { { name = 'v1', served = true, storage = true,
          schema = { openAPIV3Schema = { type = 'object', ['x-kubernetes-preserve-unknown-fields'] = true } } } } },
    })
    h.kapply({ apiVersion = GROUP .. '/v1', kind = 'Thing' .. SUFFIX, metadata = { name = 't1', namespace = NS },
      spec = { a = 1 } })
    -- a kubeconfig for the same server with a token it never issued
    kc_dir = h.tmpdir()
    local view = json.decode(must(h.kubectl('config view --raw --minify --context testenv -o json')).out)
    local cluster = view.clusters[1].cluster
    h.write(kc_dir .. '/bad-token', json.encode({
      apiVersion = 'v1', kind = 'Config', ['current-context'] = 'bad',
      clusters = json.array { { name = 'c', cluster = { server = cluster.server,
        ['certificate-authority-data'] = cluster['certificate-authority-data'] } } },
      users = json.array { { name = 'u', user = { token = 'not-a-token-this-server-issued' } } },
      contexts = json.array { { name = 'bad', context = { cluster = 'c', user = 'u' } } },
    }))
  end)

  teardown(function()
    h.kubectl('delete ' .. PLURAL .. '.' .. GROUP .. ',configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete crd ' .. PLURAL .. '.' .. GROUP .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  it('404: NotFound from a write, as a value with verb, method and path', function()
    local res = must(run(REPORT .. [[
      print(json.encode(report(pcall(kube.patch, 'cm', 'missing', { data = { a = 'b' } }, { namespace = NS }))))
    ]]))
    local e = res.json
    assert.are.equal(404, e.code)
    assert.are.equal('NotFound', e.reason)
    assert.are.same({ verb = 'patch', method = 'PATCH', path = '/api/v1/namespaces/' .. NS .. '/configmaps/missing' },
      { verb = e.verb, method = e.method, path = e.path })
    assert.are.same({ name = 'missing', kind = 'configmaps' }, e.details)
    assert.is_true(e.is_error)
    only('is_not_found', e.preds)
    assert.are.equal(kubectl_error('patch configmap missing -n ' .. NS .. ' --type merge -p \'{"data":{"a":"b"}}\''),
      e.text)
  end)

  it('409: AlreadyExists on create', function()
    local res = must(run(REPORT .. [[
      print(json.encode(report(pcall(kube.create, 'cm', { metadata = { name = 'exists', namespace = NS } }))))
    ]]))
    local e = res.json
    assert.are.same({ 409, 'AlreadyExists', 'create', 'POST' }, { e.code, e.reason, e.verb, e.method })
    only('is_already_exists', e.preds)
    assert.are.equal(kubectl_create_error(NS, 'exists'), e.text)
  end)

  it('409: Conflict on a write with a stale resourceVersion', function()
    local res = must(run(REPORT .. [[
      local cm = kube.get('cm', 'exists', { namespace = NS })
      kube.patch('cm', 'exists', { metadata = { labels = { moved = 'on' } } }, { namespace = NS })
      cm.data = { stale = 'write' }
      print(json.encode(report(pcall(kube.replace, 'cm', cm))))
    ]]))
    local e = res.json
    assert.are.same({ 409, 'Conflict', 'replace', 'PUT' }, { e.code, e.reason, e.verb, e.method })
    only('is_conflict', e.preds)
    assert.matches('the object has been modified', e.message)
    assert.matches('^Error from server %(Conflict%): ', e.text)
  end)

  it('415: a strategic merge patch on a custom resource says it is unsupported there', function()
    local res = must(run(REPORT .. [[
      print(json.encode(report(pcall(kube.patch, PLURAL .. '.' .. GROUP, 't1', { spec = { a = 2 } },
        { namespace = NS, type = 'strategic' }))))
    ]]))
    local e = res.json
    assert.are.same({ 415, 'UnsupportedMediaType', 'patch' }, { e.code, e.reason, e.verb })
    only('is_unsupported_media_type', e.preds)
    assert.matches('strategic merge patch is not supported for ' .. PLURAL .. '.' .. GROUP, e.message, 1, true)
    assert.matches('merge, json and apply', e.message, 1, true)
    -- nothing changed
    local obj = json.decode(must(h.kubectl('get ' .. PLURAL .. '.' .. GROUP .. ' t1 -n ' .. NS .. ' -o json')).out)
    assert.are.equal(1, obj.spec.a)
  end)

  it('422: Invalid, with the causes in details', function()
    local res = must(run(REPORT .. [[
      print(json.encode(report(pcall(kube.create, 'cm', { metadata = { name = 'Not_Valid', namespace = NS } }))))
    ]]))
    local e = res.json
    assert.are.same({ 422, 'Invalid', 'create' }, { e.code, e.reason, e.verb })
    only('is_invalid', e.preds)
    assert.are.equal('Not_Valid', e.details.name)
    assert.is_true(#e.details.causes >= 1)
    assert.are.equal('metadata.name', e.details.causes[1].field)
    assert.are.equal((kubectl_create_error(NS, 'Not_Valid'):gsub('^The ', '')), e.message)
  end)

  it('401: a token the server never issued is Unauthorized, even for a read', function()
    local res = must(run(REPORT .. [[
      print(json.encode(report(pcall(kube.get, 'cm', 'exists', { namespace = NS }))))
    ]], '--kubeconfig', kc_dir .. '/bad-token'))
    local e = res.json
    assert.are.equal(401, e.code)
    assert.are.equal('Unauthorized', e.reason)
    only('is_unauthorized', e.preds)
    local k = h.run(string.format('%s/build/testenv/bin/kubectl --kubeconfig %s get configmap exists -n %s', h.q(h.root),
      h.q(kc_dir .. '/bad-token'), NS))
    assert.are_not.equal(0, k.code)
    assert.matches('Unauthorized', k.err)
  end)

  it('403: the read-only context may read testenv-ro, not write it, and not read elsewhere', function()
    local res = must(run(REPORT .. string.format([[
      local absent = kube.get('cm', 'nothing-here', { namespace = 'testenv-ro' })
      local w = report(pcall(kube.create, 'cm', { metadata = { name = 'nope', namespace = 'testenv-ro' } }))
      local r = report(pcall(kube.get, 'cm', 'exists', { namespace = %q }))
      print(json.encode({ absent = absent == nil, write = w, read = r }))
    ]], NS), '--context', 'testenv-reader'))
    assert.is_true(res.json.absent)
    for _, e in ipairs({ res.json.write, res.json.read }) do
      assert.are.equal(403, e.code)
      assert.are.equal('Forbidden', e.reason)
      only('is_forbidden', e.preds)
    end
    assert.are.equal(kubectl_create_error('testenv-ro', 'nope', 'testenv-reader'), res.json.write.text)
    assert.are.equal(kubectl_error('--context testenv-reader get configmap exists -n ' .. NS), res.json.read.text)
  end)

  it('an unexpected error raised out of a script fails the run with the kubectl-like line', function()
    local res = run [[ kube.get('cm', 'exists', { namespace = NS }) ]]
    assert.are.equal(0, res.code, res.err)
    local bad = run([[ kube.get('cm', 'exists', { namespace = NS }) ]], '--context', 'testenv-reader')
    assert.are_not.equal(0, bad.code)
    assert.matches('Error from server %(Forbidden%): configmaps "exists" is forbidden', bad.err)
  end)
end)
