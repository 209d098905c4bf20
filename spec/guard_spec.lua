-- The ledger guard as a pure function (guard.c through the spec-only
-- `migrate` module): every known way a request could write the ledger
-- ConfigMap, the runner's Lease, the namespace holding them or the runner's
-- Events while looking like something else. The
-- guard judges the path exactly as it is sent; a path it cannot judge is
-- refused outright, and a create in a guarded collection is judged by the
-- name its body really carries. End-to-end proofs against the apiserver are
-- in spec/e2e/kube_guard_spec.lua.
local migrate = require('migrate')

local CM = '/api/v1/namespaces/cozy-system/configmaps'
local LEASES = '/apis/coordination.k8s.io/v1/namespaces/cozy-system/leases'

local function verdict(method, path, body, ct, target)
  local v = migrate.guard(method, path, body, ct, target)
  return v
end

local function refuses(v, method, path, body, ct)
  local got, why = migrate.guard(method, path, body, ct)
  assert.are.equal(v, got, string.format('%s %s %s: %s', method, path, tostring(body), why))
  assert.is_true(#why > 0 and not why:find('\n'), 'one line saying why')
end

describe('the ledger guard', function()
  describe('refuses a write to the ledger', function()
    for _, case in ipairs {
      { 'PATCH', CM .. '/cozystack-version', 'by its name' },
      { 'PUT', CM .. '/cozystack-version', 'by a replace' },
      { 'DELETE', CM .. '/cozystack-version', 'by a delete' },
      { 'PATCH', CM .. '/Cozystack-Version', 'with its name in another case' },
      { 'PATCH', '/api/v1/namespaces/cozy-system/ConfigMaps/cozystack-version', 'with the resource in another case' },
      { 'PATCH', '/API/V1/namespaces/cozy-system/configmaps/cozystack-version', 'with the prefix in another case' },
      { 'PATCH', CM .. '/cozystack%2Dversion', 'with a percent-encoded name' },
      { 'PATCH', '/api/v1/namespaces/cozy%2dsystem/%63onfigmaps/cozystack-version', 'with an encoded namespace and resource' },
      { 'DELETE', '/api/v1/name%73paces/cozy-system/configmaps/cozystack-version', 'with an encoded namespaces segment' },
      { 'PATCH', CM .. '/cozystack-version/status', 'through a subresource' },
      { 'DELETE', CM, 'by deleting the whole collection' },
      { 'DELETE', '/api/v1/configmaps', 'by a collection across all namespaces' },
      { 'DELETE', '/api/v1/namespaces/cozy-system', 'by deleting its namespace' },
      { 'DELETE', '/api/v1/namespaces', 'by deleting every namespace' },
      { 'PUT', CM, 'by a replace of the collection' },
    } do
      it(case[3], function() refuses('LedgerProtected', case[1], case[2]) end)
    end
  end)

  describe('refuses a write to the runner Lease', function()
    for _, case in ipairs {
      { 'PATCH', LEASES .. '/cozystack-version-lock', 'by its name' },
      { 'DELETE', LEASES .. '/cozystack-version-lock', 'by a delete' },
      { 'PUT', '/apis/coordination.k8s.io/v1beta1/namespaces/cozy-system/leases/cozystack-version-lock', 'in another version' },
      { 'PATCH', '/apis/Coordination.K8s.io/v1/namespaces/cozy-system/leases/COZYSTACK-VERSION-LOCK', 'in another case' },
      { 'DELETE', LEASES, 'by deleting the collection' },
      { 'DELETE', '/apis/coordination.k8s.io/v1/leases', 'across all namespaces' },
    } do
      it(case[3], function() refuses('LedgerProtected', case[1], case[2]) end)
    end
  end)

  describe('refuses a path it cannot judge, before anything is decided', function()
    for _, case in ipairs {
      { CM .. '/cozystack-version#', 'with a fragment' },
      { CM .. '/x#/../cozystack-version', 'with a fragment hiding dot segments' },
      { CM .. '/x/../cozystack-version', 'with a dot-dot segment' },
      { CM .. '/./cozystack-version', 'with a dot segment' },
      { CM .. '/%2e%2e/cozystack-version', 'with an encoded dot-dot segment' },
      { '//api//v1/namespaces/cozy-system//configmaps/cozystack-version', 'with empty segments' },
      { CM .. '/cozystack-version/', 'with a trailing slash' },
      { CM .. '/cozystack-version?dryRun=All', 'with a query of its own' },
      { CM .. '/cozystack-version%2Fx', 'with an encoded slash' },
      { CM .. '/cozystack-version%00', 'with an encoded NUL' },
      { CM .. '/x%zz', 'with a malformed escape' },
      { CM .. '/x%4', 'with a cut escape' },
      { CM .. '/cozystack-version\r\nImpersonate-User: admin', 'with a line break' },
      { CM .. '/cozystack version', 'with a space' },
      { CM .. '/x\\..\\cozystack-version', 'with backslashes' },
      { CM .. '/caf\195\169', 'with a non-ASCII byte' },
      { 'api/v1/namespaces/cozy-system/configmaps/x', 'that is not absolute' },
      { '/healthz/../api/v1/namespaces/cozy-system/configmaps/cozystack-version', 'outside /api and /apis' },
      { '/version', 'that is not an API path' },
    } do
      it(case[2], function()
        refuses('BadPath', 'PATCH', case[1])
        -- a read of such a path is refused just the same: it is never sent
        refuses('BadPath', 'GET', case[1])
      end)
    end
  end)

  describe('judges a create in a guarded collection by the name in its body', function()
    it('refuses the ledger by name, in JSON', function()
      refuses('LedgerProtected', 'POST', CM, '{"metadata":{"name":"cozystack-version"}}', 'application/json')
    end)
    it('refuses the Lease by name, in YAML', function()
      refuses('LedgerProtected', 'POST', LEASES, 'metadata:\n  name: cozystack-version-lock\n', 'application/apply-patch+yaml')
    end)
    it('refuses a name in another case', function()
      refuses('LedgerProtected', 'POST', CM, '{"metadata":{"name":"COZYSTACK-VERSION"}}')
    end)
    it('refuses a body with the name key twice (decoders keep the last)', function()
      refuses('BadBody', 'POST', CM, '{"metadata":{"name":"other","name":"cozystack-version"}}')
    end)
    it('refuses a body with the name key in two spellings', function()
      refuses('BadBody', 'POST', CM, '{"metadata":{"name":"other","Name":"cozystack-version"}}')
    end)
    it('refuses a body with metadata twice', function()
      refuses('BadBody', 'POST', LEASES, '{"metadata":{"name":"x"},"metadata":{"name":"cozystack-version-lock"}}')
    end)
    it('refuses a YAML body with a duplicate key', function()
      refuses('BadRequest', 'POST', LEASES, 'metadata:\n  name: x\n  name: cozystack-version-lock\n', 'application/yaml')
    end)
    it('refuses a body that is not one object', function()
      refuses('BadBody', 'POST', CM, '[{"metadata":{"name":"cozystack-version"}}]')
      refuses('BadBody', 'POST', CM, '{"metadata":{"name":"x"}} {"metadata":{"name":"cozystack-version"}}')
      refuses('BadBody', 'POST', CM, 'not json')
    end)
    it('refuses a create with no body, or one in a format it does not read', function()
      refuses('BadBody', 'POST', CM, nil)
      refuses('BadBody', 'POST', CM, 'x', 'application/vnd.kubernetes.protobuf')
    end)
    it('refuses a name that is not a string', function()
      refuses('BadBody', 'POST', CM, '{"metadata":{"name":["cozystack-version"]}}')
    end)
    it('reads an escaped key the way a decoder does', function()
      refuses('LedgerProtected', 'POST', CM, '{"metadata":{"n\\u0061me":"cozystack-version"}}')
    end)
    it('allows another name, and a generated one', function()
      assert.are.equal('allow', verdict('POST', CM, '{"metadata":{"name":"cozystack-version-2"}}'))
      assert.are.equal('allow', verdict('POST', CM, '{"metadata":{"generateName":"cozystack-version"}}'))
    end)
  end)

  describe('reads a YAML body as the apiserver (YAML 1.1) reads it, or refuses it in one line', function()
    local EV = '/api/v1/namespaces/cozy-system/events'
    local SECRETS = '/api/v1/namespaces/cozy-system/secrets'
    for _, case in ipairs {
      { 'POST', CM, 'metadata: {<<: {name: cozystack-version}}\n', 'application/yaml', 'a merge key hiding the ledger\'s name' },
      { 'POST', LEASES, 'metadata:\n  name: !!binary Y296eXN0YWNrLXZlcnNpb24tbG9jaw==\n', 'application/yaml',
        "a !!binary name (the Lease's, in base64)" },
      { 'POST', EV, 'metadata: {name: x}\nsource:\n  <<: {component: cozy-migrate}\n', 'application/yaml',
        'an Event claiming the runner through a merge key' },
      { 'PATCH', EV .. '/mine', 'reportingController: !!str cozy-migrate\nrelated: !!binary eA==\n',
        'application/apply-patch+yaml', 'a server-side apply with a tag' },
      { 'POST', SECRETS, 'metadata: {name: s}\nstringData: {enabled: yes}\n', 'application/yaml',
        'a 1.1 boolean spelling anywhere, even where nothing is guarded' },
      { 'POST', SECRETS, 'metadata: {name: s}\ndata: {mode: 0644}\n', 'application/yaml', 'a leading-zero octal' },
      { 'POST', SECRETS, 'metadata: {name: s}\ndata: {n: 1_000}\n', 'application/yaml', 'a number with underscores' },
      { 'POST', SECRETS, 'metadata: {name: s}\ndata: {~: x}\n', 'application/yaml',
        'a key the apiserver prints as other text (~ becomes "null")' },
      { 'POST', SECRETS, 'metadata: {name: s}\ndata: {y: x}\n', 'application/yaml', 'a key y (the apiserver\'s "true")' },
      { 'POST', SECRETS, 'metadata: {name: s}\nx: &k ~\ndata: {*k : v}\n', 'application/yaml', 'an alias as a key' },
      { 'DELETE', CM .. '/mine', 'dryRun: !!set {All: null}\n', 'application/yaml', 'DeleteOptions with a tag' },
      { 'POST', CM, 'metadata: {name: a}\n---\nmetadata: {name: cozystack-version}\n', 'application/yaml',
        'a second document' },
      { 'POST', CM, 'metadata: {name: [unclosed\n', 'Application/YAML', 'a body that does not parse, in any case of its type' },
    } do
      it('refuses ' .. case[5], function() refuses('BadRequest', case[1], case[2], case[3], case[4]) end)
    end
    it('follows anchors and aliases as the apiserver does', function()
      refuses('LedgerProtected', 'POST', CM, 'x: &n cozystack-version\nmetadata:\n  name: *n\n', 'application/yaml')
      refuses('LedgerProtected', 'POST', LEASES, 'm: &m {name: cozystack-version-lock}\nmetadata: *m\n',
        'application/apply-patch+yaml')
    end)
    it('allows YAML that reads the same under both, quoted 1.1 spellings included', function()
      assert.are.equal('allow', verdict('POST', CM, 'metadata:\n  name: plain\ndata: {a: "yes", b: "0644", "~": x, "1": z, "y": "n"}\n',
        'application/yaml'))
      assert.are.equal('allow', verdict('PATCH', CM .. '/plain', 'data: {num: 10, f: 1.5, t: true, z: null}\n',
        'application/apply-patch+yaml'))
    end)
  end)

  describe('lets everything else through', function()
    it('reads, the ledger included', function()
      assert.are.equal('allow', verdict('GET', CM .. '/cozystack-version'))
      assert.are.equal('allow', verdict('GET', '/api/v1/namespaces'))
    end)
    it('writes other objects in the ledger namespace', function()
      assert.are.equal('allow', verdict('PATCH', CM .. '/cozystack-version-2'))
      assert.are.equal('allow', verdict('DELETE', LEASES .. '/other'))
      assert.are.equal('allow', verdict('DELETE', '/api/v1/namespaces/cozy-system/secrets/cozystack-version'))
    end)
    it('writes the same names in another namespace', function()
      assert.are.equal('allow', verdict('PATCH', '/api/v1/namespaces/tenant-a/configmaps/cozystack-version'))
      assert.are.equal('allow', verdict('DELETE', '/api/v1/namespaces/tenant-a'))
    end)
    it('guards the names it is given', function()
      local t = { ns = 'platform', ledger = 'ledger', lease = 'ledger-lock' }
      assert.are.equal('LedgerProtected', verdict('PATCH', '/api/v1/namespaces/platform/configmaps/ledger', nil, nil, t))
      assert.are.equal('allow', verdict('PATCH', CM .. '/cozystack-version', nil, nil, t))
    end)
  end)

  describe('keeps the namespace of the ledger read-only, by every verb and subresource', function()
    local NS = '/api/v1/namespaces/cozy-system'
    for _, case in ipairs {
      { 'PATCH', NS, 'a patch (labels, an ownerReference a collector would follow)' },
      { 'PUT', NS, 'a replace' },
      { 'DELETE', NS, 'a delete' },
      { 'PUT', NS .. '/finalize', 'its finalize subresource' },
      { 'PUT', NS .. '/status', 'its status subresource' },
      { 'PATCH', NS .. '/status', 'a patch of its status' },
      { 'PATCH', '/api/v1/namespaces/Cozy-System', 'its name in another case' },
      { 'PATCH', '/api/v1/namespaces/cozy%2Dsystem/finalize', 'an encoded name' },
      { 'PATCH', '/api/v1/watch/namespaces/cozy-system', 'a watch prefix' },
      { 'PATCH', '/api/v1/namespaces', 'a write of every namespace' },
      { 'PUT', '/api/v1/namespaces', 'a replace of the collection' },
    } do
      it('refuses ' .. case[3], function() refuses('LedgerProtected', case[1], case[2]) end)
    end
    it('refuses a create that names it', function()
      refuses('LedgerProtected', 'POST', '/api/v1/namespaces', '{"metadata":{"name":"cozy-system"}}')
    end)
    it('still reads it, writes other namespaces, and writes what is inside it', function()
      assert.are.equal('allow', verdict('GET', NS))
      assert.are.equal('allow', verdict('PATCH', '/api/v1/namespaces/tenant-a'))
      assert.are.equal('allow', verdict('PUT', '/api/v1/namespaces/tenant-a/finalize'))
      assert.are.equal('allow', verdict('POST', '/api/v1/namespaces', '{"metadata":{"name":"tenant-b"}}'))
      assert.are.equal('allow', verdict('PATCH', NS .. '/secrets/s'))
      assert.are.equal('allow', verdict('POST', NS .. '/secrets', '{"metadata":{"name":"s"}}'))
    end)
  end)

  describe("protects the runner's Events", function()
    local EV = '/api/v1/namespaces/cozy-system/events'
    local EV2 = '/apis/events.k8s.io/v1/namespaces/cozy-system/events'
    for _, case in ipairs {
      { 'DELETE', EV .. '/cozystack-version.17a2b3c4', 'a delete of one it wrote on the ledger' },
      { 'PATCH', EV .. '/cozystack-version.17a2b3c4', 'a patch of one' },
      { 'PUT', EV2 .. '/Cozystack-Version.17a2b3c4', 'a replace through events.k8s.io, in another case' },
      { 'DELETE', EV, 'a delete of every Event in the ledger namespace' },
      { 'DELETE', '/api/v1/events', 'a write across all namespaces' },
    } do
      it('refuses ' .. case[3], function() refuses('LedgerProtected', case[1], case[2]) end)
    end
    for _, case in ipairs {
      { EV, '{"metadata":{"name":"x"},"source":{"component":"cozy-migrate"},"reason":"MigrationSucceeded"}',
        'claiming the runner as its source' },
      { '/api/v1/namespaces/tenant-a/events', '{"metadata":{"name":"x"},"reportingComponent":"Cozy-Migrate"}',
        'claiming the runner as reporting component, in any namespace' },
      { '/apis/events.k8s.io/v1/namespaces/tenant-a/events', '{"metadata":{"name":"x"},"reportingController":"cozy-migrate"}',
        'claiming the runner as reporting controller (events.k8s.io)' },
      { EV2, '{"metadata":{"name":"x"},"deprecatedSource":{"component":"cozy-migrate"}}',
        "naming the runner in events.k8s.io's deprecatedSource" },
      { EV, '{"metadata":{"name":"x"},"involvedObject":{"kind":"ConfigMap","name":"cozystack-version"}}',
        'about the ledger' },
      { EV2, '{"metadata":{"name":"x"},"regarding":{"kind":"Lease","namespace":"cozy-system","name":"cozystack-version-lock"}}',
        'about the Lease' },
      { EV, '{"metadata":{"generateName":"cozystack-version."}}', "named the way the runner's are" },
      { EV, '{"metadata":{"name":"cozystack-migrations-index.mismatch-42"}}',
        "named the way the dispatcher's on the index are (a squatter would silence it)" },
    } do
      it('refuses a create ' .. case[3], function() refuses('LedgerProtected', 'POST', case[1], case[2]) end)
    end
    it('refuses a patch that would make an Event claim the runner', function()
      refuses('LedgerProtected', 'PATCH', EV .. '/mine', '{"source":{"component":"cozy-migrate"}}',
        'application/merge-patch+json')
      refuses('LedgerProtected', 'PATCH', EV .. '/mine', '[{"op":"replace","path":"/source/component","value":"x"}]',
        'application/json-patch+json')
      refuses('LedgerProtected', 'PATCH', EV .. '/mine', '[{"op":"copy","from":"/x","path":"/involvedObject"}]',
        'application/json-patch+json')
      refuses('LedgerProtected', 'PATCH', EV .. '/mine', 'reportingController: cozy-migrate\n',
        'application/apply-patch+yaml')
    end)
    it('lets a migration write and delete Events of its own', function()
      assert.are.equal('allow', verdict('POST', EV, '{"metadata":{"name":"mine"},"source":{"component":"my-migration"},' ..
        '"involvedObject":{"kind":"ConfigMap","name":"settings"}}'))
      assert.are.equal('allow', verdict('DELETE', EV .. '/mine'))
      assert.are.equal('allow', verdict('PATCH', EV .. '/mine', '{"message":"again"}', 'application/merge-patch+json'))
      assert.are.equal('allow', verdict('DELETE', '/api/v1/namespaces/tenant-a/events'))
      assert.are.equal('allow', verdict('GET', EV .. '/cozystack-version.17a2b3c4'))
    end)
  end)

  describe("judges a write of one Event on the Event as it is, whatever its name", function()
    local EV = '/api/v1/namespaces/cozy-system/events'
    local EV2 = '/apis/events.k8s.io/v1/namespaces/cozy-system/events'
    local json = require('json')
    local dispatchers = json.encode({ metadata = { name = 'cozystack-migrations-index.17a2' },
      involvedObject = { kind = 'ConfigMap', name = 'cozystack-migrations-index' },
      source = { component = 'cozy-migrate' }, reportingComponent = 'cozy-migrate', reason = 'MigrationsIndexMismatch' })
    it('waits on the object for a delete, patch or replace of a named Event, in both groups', function()
      for _, case in ipairs { { 'DELETE', EV .. '/x' }, { 'PATCH', EV2 .. '/x' }, { 'PUT', '/api/v1/namespaces/tenant/events/x' } } do
        assert.is_true((migrate.guard_object(case[1], case[2])), case[1] .. ' ' .. case[2])
      end
      for _, case in ipairs { { 'GET', EV .. '/x' }, { 'POST', EV }, { 'DELETE', CM .. '/x' } } do
        assert.is_false((migrate.guard_object(case[1], case[2])), case[1] .. ' ' .. case[2])
      end
    end)
    it("refuses one the engine wrote (the dispatcher's, the runner's, one about a Job)", function()
      for _, ev in ipairs {
        dispatchers,
        '{"metadata":{"name":"bg-job.1"},"involvedObject":{"kind":"Job","name":"bg-job"},"source":{"component":"cozy-migrate"}}',
        '{"metadata":{"name":"x"},"reportingController":"cozy-migrate","regarding":{"kind":"Job","name":"j"}}',
        '{"metadata":{"name":"x"},"deprecatedSource":{"component":"Cozy-Migrate"}}',
        '{"metadata":{"name":"x"},"involvedObject":{"kind":"ConfigMap","name":"cozystack-version","namespace":"cozy-system"}}',
      } do
        local _, v, why = migrate.guard_object('DELETE', EV .. '/x', ev)
        assert.are.equal('LedgerProtected', v, ev)
        assert.is_true(#why > 0 and not why:find('\n'), 'one line saying why')
      end
    end)
    it('lets a migration change or delete an Event of its own, or one that is not there', function()
      local mine = '{"metadata":{"name":"x"},"source":{"component":"my-script"},"involvedObject":{"kind":"ConfigMap","name":"settings"}}'
      assert.are.equal('allow', select(2, migrate.guard_object('PATCH', EV .. '/x', mine)))
      assert.are.equal('allow', select(2, migrate.guard_object('DELETE', EV .. '/x', nil)))
    end)
  end)

  describe('in a dry run, refuses what the apiserver would not dry-run', function()
    local DRY = { dry_run = true }
    local function dry(method, path, body) return migrate.guard(method, path, body, nil, DRY) end
    it('refuses a TokenRequest, whose dry-run answer is a live token', function()
      local v, why = dry('POST', '/api/v1/namespaces/tenant-a/serviceaccounts/default/token', '{}')
      assert.are.equal('DryRunRefused', v)
      assert.matches('live credential', why)
      assert.are.equal('allow', verdict('POST', '/api/v1/namespaces/tenant-a/serviceaccounts/default/token', '{}'))
    end)
    it('refuses exec, attach and port-forward, which have no dry run', function()
      for _, sub in ipairs { 'exec', 'attach', 'portforward' } do
        assert.are.equal('DryRunRefused', dry('POST', '/api/v1/namespaces/tenant-a/pods/p/' .. sub), sub)
        assert.are.equal('DryRunRefused', dry('GET', '/api/v1/namespaces/tenant-a/pods/p/' .. sub), sub)
      end
    end)
    it('lets every other dry-run write through to the apiserver', function()
      assert.are.equal('allow', dry('POST', '/api/v1/namespaces/tenant-a/pods/p/eviction', '{}'))
      assert.are.equal('allow', dry('PATCH', '/api/v1/namespaces/tenant-a/configmaps/token'))
      assert.are.equal('allow', dry('POST', '/apis/certificates.k8s.io/v1/certificatesigningrequests', '{}'))
    end)
  end)

  it('refuses a write through a proxy subresource, which it cannot see into', function()
    refuses('LedgerProtected', 'POST',
      '/api/v1/namespaces/default/services/https:kubernetes:443/proxy/api/v1/namespaces/cozy-system/configmaps')
  end)
end)

-- kubectl's typed clients send a create as Kubernetes protobuf (`kubectl
-- create configmap`): the guard reads the name out of it (host/door/
-- k8sproto.c), with protobuf's own rule for a repeated message (it merges:
-- the last name wins), and refuses a body it cannot read whole.
describe('the ledger guard, given a protobuf create', function()
  local PB = 'application/vnd.kubernetes.protobuf'
  local function ld(tag, s) assert(#s < 128) return string.char(tag, #s) .. s end
  local function meta(name) return ld(0x0a, ld(0x0a, name)) end
  local function envelope(object)
    return 'k8s\0' .. ld(0x0a, ld(0x0a, 'v1') .. ld(0x12, 'ConfigMap')) .. ld(0x12, object)
  end

  it('refuses one naming the ledger', function()
    assert.are.equal('LedgerProtected', (migrate.guard('POST', CM, envelope(meta('cozystack-version')), PB)))
  end)
  it('allows one naming anything else', function()
    assert.are.equal('allow', (migrate.guard('POST', CM, envelope(meta('ran-legacy-1')), PB)))
  end)
  it('reads the name the server reads when metadata comes twice', function()
    local body = envelope(meta('harmless') .. meta('cozystack-version'))
    assert.are.equal('LedgerProtected', (migrate.guard('POST', CM, body, PB)))
  end)
  it('refuses a body it cannot read whole', function()
    local body = envelope(meta('cozystack-version'))
    assert.are.equal('BadBody', (migrate.guard('POST', CM, body:sub(1, #body - 3), PB)))
    assert.are.equal('BadBody', (migrate.guard('POST', CM, 'not protobuf', PB)))
  end)
end)
