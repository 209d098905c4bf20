-- Which cluster the engine talks to, and as whom, decides what a migration
-- changes: these specs drive `cozy-migrate config` (kubeconfig.c) with a
-- scrubbed environment, so the caller's own KUBECONFIG or service account can
-- never leak into the answer.
local json = require('json')

local BIN = os.getenv('COZY_MIGRATE') or 'build/cozy-migrate'

local h = require('support.helpers')
local q, slurp, write, tmpdir = h.q, h.slurp, h.write, h.tmpdir

local dirs = {}
local function scratch()
  local d = tmpdir()
  dirs[#dirs + 1] = d
  return d
end

local function mkdir(path)
  assert(os.execute('mkdir -p ' .. q(path)))
  return path
end

-- config(env, args...) runs `cozy-migrate config ARGS` under `env -i`: only
-- the variables given (plus HOME, and the sanitizer settings of an ASan
-- build) reach it. Returns {code, out, err, json}.
local function config(env, ...)
  local parts = { 'env', '-i' }
  env = env or {}
  if env.HOME == nil then env.HOME = '/nonexistent' end
  for _, k in ipairs({ 'ASAN_OPTIONS', 'LSAN_OPTIONS', 'UBSAN_OPTIONS' }) do
    if os.getenv(k) and env[k] == nil then env[k] = os.getenv(k) end
  end
  for _, k in ipairs(h.keys(env)) do parts[#parts + 1] = k .. '=' .. q(env[k]) end
  parts[#parts + 1] = q(BIN)
  parts[#parts + 1] = 'config'
  for _, a in ipairs({ ... }) do parts[#parts + 1] = q(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(table.concat(parts, ' ') .. ' >' .. out .. ' 2>' .. err)
  local res = { out = slurp(out), err = slurp(err) }
  os.remove(out)
  os.remove(err)
  res.code = how == 'signal' and 128 + code or code
  if res.code == 0 then res.json = json.decode(res.out) end
  return res
end

local function succeeds(res)
  assert.are.equal(0, res.code, 'exit ' .. tostring(res.code) .. ', stderr: ' .. res.err)
  assert.is_table(res.json)
  return res.json
end

-- The contract for a failure: exit 6 and exactly one line on stderr.
local function fails(res)
  assert.are.equal(6, res.code, 'expected exit 6, got ' .. tostring(res.code) .. ': ' .. res.out .. res.err)
  assert.are.equal('', res.out)
  assert.truthy(res.err:match('^cozy%-migrate: [^\n]+\n$'), 'not one error line: ' .. res.err)
  return res.err
end

local function plain(s)
  return (s:gsub('%p', '%%%0'))
end

local function b64(s)
  local p = assert(io.popen('printf %s ' .. q(s) .. ' | base64 -w0'))
  local r = p:read('a')
  p:close()
  return r
end

-- A real certificate and its key (the resolver reads both, and checks that
-- they belong together), made once for the file.
local function keypair()
  local d = tmpdir()
  h.must(h.run(string.format('openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ' ..
    '-keyout %s -out %s -subj /CN=cozy-spec -days 2', q(d .. '/k.pem'), q(d .. '/c.pem'))), 'openssl')
  return slurp(d .. '/c.pem'), slurp(d .. '/k.pem')
end
local PEM, KEY = keypair()

local FILE_A = [[
apiVersion: v1
kind: Config
current-context: ctx-a
clusters:
- name: shared
  cluster:
    server: https://a.example:6443/
- name: only-a
  cluster:
    server: https://only-a.example:6443
users:
- name: shared-user
  user:
    token: token-from-a
contexts:
- name: ctx-a
  context:
    cluster: shared
    user: shared-user
    namespace: ns-a
]]

local FILE_B = [[
apiVersion: v1
kind: Config
current-context: ctx-b
clusters:
- name: shared
  cluster:
    server: https://b.example:6443
- name: only-b
  cluster:
    server: https://only-b.example:6443
    insecure-skip-tls-verify: true
    tls-server-name: api.internal
users:
- name: shared-user
  user:
    token: token-from-b
contexts:
- name: ctx-a
  context:
    cluster: only-b
    user: shared-user
- name: ctx-b
  context:
    cluster: only-b
    user: shared-user
    namespace: ns-b
]]

describe('kubeconfig', function()
  teardown(function()
    for _, d in ipairs(dirs) do os.execute('rm -rf ' .. q(d)) end
  end)

  describe('KUBECONFIG merge', function()
    local d, a, b
    before_each(function()
      d = scratch()
      a = write(d .. '/a.yaml', FILE_A)
      b = write(d .. '/b.yaml', FILE_B)
    end)

    it('merges two files, first wins for a name and for current-context', function()
      local c = succeeds(config({ KUBECONFIG = a .. ':' .. b }))
      assert.are.equal('ctx-a', c.context)
      assert.are.equal('shared', c.cluster)
      -- both files define cluster "shared" and context "ctx-a": a's win,
      -- and the trailing slash is gone
      assert.are.equal('https://a.example:6443', c.server)
      assert.are.equal('ns-a', c.namespace)
      assert.are.equal('token', c.auth)
      assert.are.equal(a .. ':' .. b, c.source)
    end)

    it('takes a context only the second file has', function()
      local c = succeeds(config({ KUBECONFIG = a .. ':' .. b }, '--context', 'ctx-b'))
      assert.are.equal('ctx-b', c.context)
      assert.are.equal('https://only-b.example:6443', c.server)
      assert.are.equal('ns-b', c.namespace)
      assert.is_true(c.insecure)
      assert.are.equal('api.internal', c.tls_server_name)
    end)

    it('uses the second file first when it is listed first', function()
      local c = succeeds(config({ KUBECONFIG = b .. ':' .. a }))
      assert.are.equal('ctx-b', c.context)
      assert.are.equal('https://only-b.example:6443', c.server)
    end)

    it('skips a missing file and empty entries in KUBECONFIG', function()
      local c = succeeds(config({ KUBECONFIG = d .. '/missing.yaml::' .. b }))
      assert.are.equal('ctx-b', c.context)
      assert.are.equal(b, c.source)
    end)

    it('falls back to nothing when KUBECONFIG names no existing file', function()
      write(mkdir(d .. '/home/.kube') .. '/config', FILE_A)
      local err = fails(config({ HOME = d .. '/home', KUBECONFIG = d .. '/missing.yaml' }))
      assert.truthy(err:find('no kubeconfig', 1, true), err)
    end)

    it('uses ~/.kube/config when neither flag nor KUBECONFIG is set', function()
      local cfg = write(mkdir(d .. '/home/.kube') .. '/config', FILE_B)
      local c = succeeds(config({ HOME = d .. '/home' }))
      assert.are.equal(cfg, c.source)
      assert.are.equal('ctx-b', c.context)
    end)

    it('prefers --kubeconfig over KUBECONFIG', function()
      local c = succeeds(config({ KUBECONFIG = a }, '--kubeconfig', b))
      assert.are.equal(b, c.source)
      assert.are.equal('ctx-b', c.context)
    end)

    it('never prints a token', function()
      local res = config({ KUBECONFIG = a .. ':' .. b })
      succeeds(res)
      assert.falsy(res.out:find('token-from', 1, true))
    end)
  end)

  describe('errors', function()
    local d
    before_each(function() d = scratch() end)

    it('fails when --kubeconfig names a missing file', function()
      local f = d .. '/nope.yaml'
      local err = fails(config({ KUBECONFIG = write(d .. '/ok.yaml', FILE_A) }, '--kubeconfig', f))
      assert.truthy(err:find(f .. ': No such file or directory', 1, true), err)
    end)

    it('fails with no config anywhere', function()
      local err = fails(config({ HOME = d }))
      assert.are.equal('cozy-migrate: no kubeconfig: set --kubeconfig or KUBECONFIG, or run in a cluster\n', err)
    end)

    it('reports malformed YAML with file and line', function()
      local f = write(d .. '/bad.yaml', 'apiVersion: v1\nclusters:\n- name: x\n  cluster: {server: https://x\n  oops: : :\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:match('^cozy%-migrate: ' .. plain(f) .. ':%d+:%d+: '), err)
    end)

    it('reports the line of a bad indentation', function()
      local f = write(d .. '/bad.yaml', 'apiVersion: v1\nkind: Config\ncurrent-context: x\n  users: []\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':4:', 1, true), err)
    end)

    it('reports a duplicate key with its line', function()
      local f = write(d .. '/dup.yaml', FILE_A .. 'current-context: other\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':21:', 1, true), err)
      assert.truthy(err:find('duplicate', 1, true), err)
    end)

    it('reports clusters that are not a list with file and line', function()
      local f = write(d .. '/shape.yaml', 'apiVersion: v1\nkind: Config\nclusters:\n  shared: {server: x}\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':4: clusters is not a list', 1, true), err)
    end)

    it('reports an entry without a name with file and line', function()
      local f = write(d .. '/noname.yaml', 'users:\n- name: ok\n  user: {}\n- user:\n    token: t\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':4: users[1] has no name', 1, true), err)
    end)

    it('reports a cluster that is not a mapping', function()
      local f = write(d .. '/cl.yaml', 'clusters:\n- name: c\n  cluster: https://x\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':3: cluster "c": cluster is not a mapping', 1, true), err)
    end)

    it('checks every file in KUBECONFIG, not only the one used', function()
      local good = write(d .. '/good.yaml', FILE_A)
      local bad = write(d .. '/bad.yaml', 'contexts: 7\n')
      local err = fails(config({ KUBECONFIG = good .. ':' .. bad }))
      assert.truthy(err:find(bad .. ':1: contexts is not a list', 1, true), err)
    end)

    it('names an unknown context and the files searched', function()
      local a = write(d .. '/a.yaml', FILE_A)
      local b = write(d .. '/b.yaml', FILE_B)
      local err = fails(config({ KUBECONFIG = a .. ':' .. b }, '--context', 'nope'))
      assert.truthy(err:find('context "nope" not found', 1, true), err)
      assert.truthy(err:find(a, 1, true) and err:find(b, 1, true), err)
    end)

    it('names a context whose cluster is missing', function()
      local f = write(d .. '/c.yaml', [[
current-context: c
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: ghost, user: u}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('cluster "ghost" of context "c" not found', 1, true), err)
    end)

    it('names a context without a user', function()
      local f = write(d .. '/c.yaml', [[
current-context: c
clusters: [{name: k, cluster: {server: https://k}}]
contexts: [{name: c, context: {cluster: k}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('context "c" in ' .. f .. ' has no user', 1, true), err)
    end)

    it('requires a context when current-context is unset', function()
      local f = write(d .. '/c.yaml', 'clusters: []\n')
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('no context', 1, true), err)
    end)

    it('refuses an exec user as not supported', function()
      local f = write(d .. '/exec.yaml', [[
current-context: eks
clusters: [{name: eks, cluster: {server: "https://eks.example"}}]
contexts: [{name: eks, context: {cluster: eks, user: aws}}]
users:
- name: aws
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.are.equal('cozy-migrate: user "aws" in ' .. f .. ': exec credential plugins are not supported\n', err)
    end)

    it('refuses an auth-provider user and basic auth', function()
      local f = write(d .. '/ap.yaml', [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k"}}]
contexts: [{name: c, context: {cluster: k, user: g}}, {name: b, context: {cluster: k, user: basic}}]
users:
- {name: g, user: {auth-provider: {name: gcp}}}
- {name: basic, user: {username: admin, password: hunter2}}
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('user "g" in ' .. f .. ': auth-provider plugins are not supported', 1, true), err)
      err = fails(config({}, '--kubeconfig', f, '--context', 'b'))
      assert.truthy(err:find('not supported', 1, true), err)
      assert.falsy(err:find('hunter2', 1, true), err)
    end)

    it('reports bad base64 with file and line', function()
      local f = write(d .. '/b64.yaml', [[
current-context: c
clusters:
- name: k
  cluster:
    server: https://k
    certificate-authority-data: "not=base64!"
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: t}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':6: cluster "k": certificate-authority-data is not valid base64', 1, true), err)
    end)

    it('reports a cluster without a server', function()
      local f = write(d .. '/ns.yaml', [[
current-context: c
clusters: [{name: k, cluster: {insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: t}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('cluster "k" has no server', 1, true), err)
    end)
  end)

  describe('credentials', function()
    local d
    before_each(function() d = scratch() end)

    it('reads a kind-style kubeconfig with inline data', function()
      local f = write(d .. '/kind.yaml', ([[
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: https://127.0.0.1:38457
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: %s
    client-key-data: %s
]]):format(b64(PEM), b64(PEM), b64(KEY)))
      local res = config({}, '--kubeconfig', f)
      local c = succeeds(res)
      assert.are.equal('https://127.0.0.1:38457', c.server)
      assert.are.equal('kind-kind', c.context)
      assert.are.equal('kind-kind', c.user)
      assert.are.equal('data', c.ca)
      assert.are.equal('client-certificate', c.auth)
      assert.is_false(c.insecure)
      assert.falsy(res.out:find('BEGIN', 1, true))
    end)

    it('resolves relative paths against the directory of the file that defines them', function()
      local cfgdir = mkdir(d .. '/conf')
      mkdir(cfgdir .. '/pki')
      write(cfgdir .. '/pki/ca.crt', PEM)
      write(cfgdir .. '/pki/client.crt', PEM)
      write(cfgdir .. '/pki/client.key', KEY)
      local f = write(cfgdir .. '/config', [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k:6443", certificate-authority: pki/ca.crt}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users:
- name: u
  user:
    client-certificate: ./pki/client.crt
    client-key: ../conf/pki/client.key
]])
      -- run from the repository, not from cfgdir: relative to cwd would miss
      local c = succeeds(config({ KUBECONFIG = f }))
      assert.are.equal('file', c.ca)
      assert.are.equal(cfgdir .. '/pki/ca.crt', c.ca_file)
      assert.are.equal(cfgdir .. '/pki/client.crt', c.cert_file)
      assert.are.equal(cfgdir .. '/pki/client.key', c.key_file)
      assert.are.equal('client-certificate', c.auth)
    end)

    it('resolves each entry against its own file when merging', function()
      mkdir(d .. '/one')
      mkdir(d .. '/two/pki')
      write(d .. '/two/pki/ca.crt', PEM)
      local one = write(d .. '/one/config', [[
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: t}}]
]])
      local two = write(d .. '/two/config', [[
clusters: [{name: k, cluster: {server: "https://k", certificate-authority: pki/ca.crt}}]
]])
      local c = succeeds(config({ KUBECONFIG = one .. ':' .. two }))
      assert.are.equal(d .. '/two/pki/ca.crt', c.ca_file)
    end)

    it('names the resolved path of a missing certificate file', function()
      mkdir(d .. '/conf')
      local f = write(d .. '/conf/config', [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k", certificate-authority: missing/ca.crt}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: t}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find(f .. ':2: cluster "k": certificate-authority ' .. d .. '/conf/missing/ca.crt: No such file or directory', 1, true), err)
    end)

    it('uses a tokenFile, resolved against the file', function()
      mkdir(d .. '/conf')
      write(d .. '/conf/token', 'sekrit\n')
      local f = write(d .. '/conf/config', [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {tokenFile: token}}]
]])
      local res = config({}, '--kubeconfig', f)
      local c = succeeds(res)
      assert.are.equal('token-file', c.auth)
      assert.are.equal(d .. '/conf/token', c.token_file)
      assert.are.equal('system', c.ca)
      assert.falsy(res.out:find('sekrit', 1, true))
    end)

    it('fails on a tokenFile that does not exist', function()
      local f = write(d .. '/config', [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {tokenFile: /nonexistent/token}}]
]])
      local err = fails(config({}, '--kubeconfig', f))
      assert.truthy(err:find('tokenFile /nonexistent/token', 1, true), err)
    end)
  end)

  describe('in-cluster', function()
    local d, env
    before_each(function()
      d = scratch()
      write(d .. '/token', 'sa-token')
      write(d .. '/ca.crt', PEM)
      write(d .. '/namespace', '  cozy-system\n')
      env = {
        KUBERNETES_SERVICE_HOST = '10.96.0.1',
        KUBERNETES_SERVICE_PORT = '443',
        COZY_SERVICEACCOUNT_DIR = d,
      }
    end)

    it('uses the service account when there is no kubeconfig', function()
      local res = config(env)
      local c = succeeds(res)
      assert.are.equal('in-cluster', c.source)
      assert.are.equal('https://10.96.0.1:443', c.server)
      assert.are.equal('cozy-system', c.namespace)
      assert.are.equal('token-file', c.auth)
      assert.are.equal(d .. '/token', c.token_file)
      assert.are.equal('file', c.ca)
      assert.are.equal(d .. '/ca.crt', c.ca_file)
      assert.falsy(res.out:find('sa-token', 1, true))
    end)

    it('brackets an IPv6 service host', function()
      env.KUBERNETES_SERVICE_HOST = 'fd00:10:96::1'
      local c = succeeds(config(env))
      assert.are.equal('https://[fd00:10:96::1]:443', c.server)
    end)

    it('works without ca.crt and namespace files', function()
      os.remove(d .. '/ca.crt')
      os.remove(d .. '/namespace')
      local c = succeeds(config(env))
      assert.are.equal('system', c.ca)
      assert.are.equal(json.null, c.namespace)
    end)

    it('fails when the token file is missing', function()
      os.remove(d .. '/token')
      local err = fails(config(env))
      assert.truthy(err:find(d .. '/token: No such file or directory', 1, true), err)
    end)

    it('ignores the service account when KUBERNETES_SERVICE_PORT is unset', function()
      env.KUBERNETES_SERVICE_PORT = nil
      local err = fails(config(env))
      assert.truthy(err:find('no kubeconfig', 1, true), err)
    end)

    it('prefers KUBECONFIG over the service account', function()
      env.KUBECONFIG = write(d .. '/kc.yaml', FILE_A)
      local c = succeeds(config(env))
      assert.are.equal(env.KUBECONFIG, c.source)
      assert.are.equal('https://a.example:6443', c.server)
    end)

    it('refuses in-cluster credentials with --local', function()
      local err = fails(config(env, '--local'))
      assert.truthy(err:find('no kubeconfig', 1, true), err)
      assert.truthy(err:find('--local', 1, true), err)
    end)

    it('uses ~/.kube/config with --local inside a cluster', function()
      local home = mkdir(d .. '/home')
      local cfg = write(mkdir(home .. '/.kube') .. '/config', FILE_B)
      env.HOME = home
      local c = succeeds(config(env, '--local'))
      assert.are.equal(cfg, c.source)
      assert.are.equal('ctx-b', c.context)
      -- and without --local the service account wins, as the header says
      local ic = succeeds(config(env))
      assert.are.equal('in-cluster', ic.source)
    end)
  end)
end)
