-- Which cluster a shell migration acts on, end to end against two real local
-- kube-apiservers: A (the testenv in KUBECONFIG) and B (a second testenv this
-- file starts and stops). A legacy script's kubectl must reach exactly the
-- runner's cluster as the runner's identity, whatever else the environment
-- offers it (a merged kubeconfig whose current context is the other
-- cluster, a ~/.kube/config, no KUBECONFIG at all): the runner hands it a
-- private kubeconfig naming only its loopback gateway and a fresh token
-- (0600, in a 0700 directory, removed afterwards, also when the script
-- fails or the runner is stopped), and the gateway sends its requests on to
-- the runner's own resolved context (in-cluster, its service account),
-- whose credentials never reach the script.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local must, contains = h.must, h.contains
local KUBECTL = h.root .. '/build/testenv/bin/kubectl'
local PATH = h.root .. '/build/testenv/bin:' .. os.getenv('PATH')
-- where a confined shell may write besides its own directory (tools/run-tests)
local RW = 'COZY_SHELL_RW=' .. h.q(os.getenv('COZY_SHELL_RW') or '')

describe('#e2e a shell migration acts on the runner\'s cluster only', function()
  local bdir, A, B, token, ns

  -- The raw kubeconfig of a testenv, decoded.
  local function raw(kubeconfig)
    return json.decode(must(h.run(string.format('%s --kubeconfig %s config view --raw -o json', h.q(KUBECTL),
      h.q(kubeconfig)))).out)
  end
  local function entry(list, name)
    for _, e in ipairs(list) do if e.name == name then return e end end
  end

  -- A kubeconfig holding both clusters (contexts a, a-token and b) whose
  -- current context is `current`.
  local function merged(current)
    local f = os.tmpname()
    h.write(f, json.encode({
      apiVersion = 'v1', kind = 'Config', ['current-context'] = current,
      clusters = { { name = 'a', cluster = A.cluster }, { name = 'b', cluster = B.cluster } },
      users = { { name = 'a-admin', user = A.admin }, { name = 'a-token', user = { token = token } },
                { name = 'b-admin', user = B.admin } },
      contexts = { { name = 'a', context = { cluster = 'a', user = 'a-admin' } },
                   { name = 'a-token', context = { cluster = 'a', user = 'a-token' } },
                   { name = 'b', context = { cluster = 'b', user = 'b-admin' } } },
    }))
    return f
  end

  local function kubectl(ctx, args)
    return h.run(string.format('%s --kubeconfig %s --context %s %s', h.q(KUBECTL), h.q(merged(ctx)), ctx, args))
  end
  local function touched(ctx)
    local r = kubectl(ctx, 'get configmap touched -n ' .. ns .. ' -o name')
    return r.code == 0
  end
  local function ledger(ctx)
    local r = kubectl(ctx, 'get configmap ' .. runner.LEDGER .. ' -n ' .. ns .. ' -o json')
    return r.code == 0 and json.decode(r.out) or nil
  end

  -- `cozy-migrate ARGS` with exactly this environment besides PATH and
  -- TMPDIR: nothing of the test's own KUBECONFIG leaks in.
  local function cozy(env, ...)
    local parts = { 'env', '-i', 'PATH=' .. h.q(PATH), 'TMPDIR=' .. h.q(os.getenv('TMPDIR') or '/tmp'), RW }
    for k, v in pairs(env) do parts[#parts + 1] = k .. '=' .. h.q(v) end
    parts[#parts + 1] = h.q(h.bin)
    for _, a in ipairs({ ... }) do parts[#parts + 1] = h.q(a) end
    return h.run(table.concat(parts, ' '))
  end

  -- A tree whose shell migration `touch` creates ConfigMap `touched` in the
  -- platform namespace and reports what its kubeconfig holds into out/.
  local function tree(out, extra)
    return fixture.tree({
      batches = { { '00000-legacy', { 'touch' } } },
      scripts = { touch = { shell = true, on_error = 'warn', body = table.concat({
        'echo "$KUBECONFIG" > ' .. out .. '/path',
        'stat -c %a "$KUBECONFIG" > ' .. out .. '/mode',
        'stat -c %a "$(dirname "$KUBECONFIG")" > ' .. out .. '/dirmode',
        "kubectl config view -o jsonpath='{.contexts[*].name}' > " .. out .. '/contexts',
        "kubectl config view --raw -o json > " .. out .. '/config',
        'kubectl create configmap touched -n "$NAMESPACE" >/dev/null',
        extra or '',
      }, '\n') } },
    })
  end

  local function fresh_case()
    ns = runner.new_ns()                            -- on A (the testenv)
    must(kubectl('b', 'create namespace ' .. ns))   -- and the same on B
    return h.tmpdir()
  end

  -- What the script saw: one context naming the runner's loopback gateway,
  -- its own token and nothing of the runner's credentials (none of the
  -- strings in forbidden appear in its kubeconfig).
  local function gateway_only(out, ...)
    assert.are.equal('cozy-migrate-gateway', h.slurp(out .. '/contexts'))
    local text = h.slurp(out .. '/config')
    local cfg = json.decode(text)
    assert.truthy(cfg.clusters[1].cluster.server:match('^https://127%.0%.0%.1:%d+$'), cfg.clusters[1].cluster.server)
    assert.are.equal(1, #cfg.users)
    local user = cfg.users[1].user
    assert.truthy(user.token and user.token:match('^%x+$') and #user.token == 64, 'a fresh token')
    for k in pairs(user) do assert.are.equal('token', k, 'the user holds more than the token') end
    for _, f in ipairs({ ... }) do
      assert.is_nil(text:find(f, 1, true), 'the runner\'s ' .. f:sub(1, 40) .. ' reached the script')
    end
    return cfg
  end

  local function private_gone(out)
    local path = h.slurp(out .. '/path'):gsub('\n$', '')
    assert.is_truthy(path:match('/cozy%-migrate%-[^/]+/kubeconfig$'), 'KUBECONFIG was ' .. path)
    assert.is_nil(io.open(path), 'the private kubeconfig outlived the run: ' .. path)
    assert.is_nil(io.open(path:match('^(.*)/kubeconfig$') .. '/.'), 'its directory outlived the run')
  end

  setup(function()
    h.need_cluster()
    local a = raw(os.getenv('KUBECONFIG'))
    A = { cluster = entry(a.clusters, 'testenv').cluster, admin = entry(a.users, 'testenv-admin').user }
    token = entry(a.users, 'testenv-token-admin').user.token
    bdir = h.root .. '/build/testenv/op-b-' .. h.unique()
    must(h.run(string.format('TESTENV_DIR=%s %s up', h.q(bdir), h.q(h.testenv))), 'start the second apiserver')
    local b = raw(bdir .. '/kubeconfig')
    B = { cluster = entry(b.clusters, 'testenv').cluster, admin = entry(b.users, 'testenv-admin').user }
    assert.are_not.equal(A.cluster.server, B.cluster.server)
  end)

  teardown(function()
    runner.delete_namespaces()
    if bdir then h.run(string.format('TESTENV_DIR=%s %s down', h.q(bdir), h.q(h.testenv))) end
  end)

  it('under --context A with a merged KUBECONFIG whose current context is B', function()
    local out = fresh_case()
    runner.make_ledger(ns, {})
    local res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir() },
      'run', '--context', 'a', '--only', 'touch', '--dir', tree(out), '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_true(touched('a'), 'the script did not act on A')
    assert.is_false(touched('b'), 'the script acted on B')
    assert.are.equal('ok', json.decode(ledger('a').data['m.touch']).state)
    assert.is_nil(ledger('b'))
    -- what the script saw: the gateway alone, nothing of the runner's identity
    gateway_only(out, A.cluster.server, A.admin['client-certificate-data'], A.admin['client-key-data'])
    assert.are.equal('600\n', h.slurp(out .. '/mode'))
    assert.are.equal('700\n', h.slurp(out .. '/dirmode'))
    private_gone(out)
  end)

  it('under --context with a token user: the gateway\'s own token, never the runner\'s', function()
    local out = fresh_case()
    runner.make_ledger(ns, {})
    local res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir() },
      'run', '--context', 'a-token', '--dir', tree(out), '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_true(touched('a'))
    assert.is_false(touched('b'))
    gateway_only(out, token)
  end)

  it('under --kubeconfig F with no KUBECONFIG, whatever ~/.kube/config says, or without one', function()
    for _, home_config in ipairs({ true, false }) do
      local out = fresh_case()
      runner.make_ledger(ns, {})
      local home = h.tmpdir()
      if home_config then
        must(h.run('mkdir -p ' .. h.q(home .. '/.kube') .. ' && cp ' .. h.q(merged('b')) .. ' ' .. h.q(home .. '/.kube/config')))
      end
      local res = cozy({ HOME = home }, 'run', '--kubeconfig', merged('a'), '--dir', tree(out), '--namespace', ns)
      assert.are.equal(0, res.code, res.out .. res.err)
      assert.is_true(touched('a'), 'the script did not act on A (home config: ' .. tostring(home_config) .. ')')
      assert.is_false(touched('b'), 'the script acted on B')
      assert.are.equal('ok', json.decode(ledger('a').data['m.touch']).state)
      private_gone(out)
    end
  end)

  it('under --local: the kubeconfig\'s context, never the in-cluster service account', function()
    local out = fresh_case()
    must(kubectl('b', 'create configmap ' .. runner.LEDGER .. ' -n ' .. ns))
    local sa = h.private_tmpdir() -- (a service-account directory is no shell's to read)
    h.write(sa .. '/token', token)
    local port = A.cluster.server:match(':(%d+)$')
    local res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir(), KUBERNETES_SERVICE_HOST = '127.0.0.1',
      KUBERNETES_SERVICE_PORT = port, COZY_SERVICEACCOUNT_DIR = sa },
      'run', '--local', '--dir', tree(out), '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_true(touched('b'), 'the script did not act on B')
    assert.is_false(touched('a'), 'the script acted on A')
    assert.are.equal('ok', json.decode(ledger('b').data['m.touch']).state)
    gateway_only(out, token, B.cluster.server)
  end)

  it('in-cluster: the service account, even with a ~/.kube/config naming the other cluster', function()
    local out = fresh_case()
    runner.make_ledger(ns, {})
    local sa = h.private_tmpdir() -- (a service-account directory is no shell's to read)
    h.write(sa .. '/token', token .. '\n')
    h.write(sa .. '/namespace', ns .. '\n')
    must(h.run(string.format('(printf %%s %s | base64 -d > %s)', h.q(A.cluster['certificate-authority-data']),
      h.q(sa .. '/ca.crt'))))
    local home = h.tmpdir()
    must(h.run('mkdir -p ' .. h.q(home .. '/.kube') .. ' && cp ' .. h.q(merged('b')) .. ' ' .. h.q(home .. '/.kube/config')))
    local env = { HOME = home, KUBERNETES_SERVICE_HOST = '127.0.0.1',
      KUBERNETES_SERVICE_PORT = A.cluster.server:match(':(%d+)$'), COZY_SERVICEACCOUNT_DIR = sa }
    local res = cozy(env, 'run', '--dir', tree(out), '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_true(touched('a'), 'the script did not act on A')
    assert.is_false(touched('b'), 'the script acted on B (its ~/.kube/config)')
    -- the runner reads the service account token (re-read as it rotates);
    -- the script gets the gateway, its namespace, and no path to either
    local cfg = gateway_only(out, sa, token)
    assert.are.equal(ns, cfg.contexts[1].context.namespace)
    private_gone(out)
    -- and a skip records the service account as who (this token is no JWT,
    -- so by its namespace)
    local ns2 = runner.new_ns()
    runner.make_ledger(ns2, {})
    res = cozy(env, 'skip', 'touch', '--reason', 'x', '--dir', tree(out), '--namespace', ns2)
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('the in-cluster service account of namespace ' .. ns,
      runner.records(ns2).touch.by)
  end)

  it('records who skipped: the user and context the config resolved', function()
    local out = fresh_case()
    runner.make_ledger(ns, {})
    local res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir() },
      'skip', 'touch', '--reason', 'not on this cluster', '--context', 'a', '--dir', tree(out), '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    local r = json.decode(ledger('a').data['m.touch'])
    assert.are.same({ 'skipped', 'Operator', 'not on this cluster', 'a-admin (context a)' },
      { r.state, r.reason, r.message, r.by })
  end)

  it('removes the private kubeconfig when the script fails, and when the runner is stopped', function()
    local out = fresh_case()
    runner.make_ledger(ns, {})
    local res = cozy({ KUBECONFIG = merged('a'), HOME = h.tmpdir() },
      'run', '--dir', tree(out, 'exit 3'), '--namespace', ns)
    assert.are.equal(0, res.code, res.err)
    contains(res.out, 'touch ... FAILED (warn)')
    private_gone(out)
    -- SIGTERM to the runner while the script sleeps
    out = fresh_case()
    runner.make_ledger(ns, {})
    local dir = tree(out, 'echo sleeping > ' .. out .. '/at\nsleep 30.5151')
    local base = string.format('env -i ' .. RW .. ' PATH=%s HOME=%s KUBECONFIG=%s %s run --dir %s --namespace %s', h.q(PATH),
      h.q(h.tmpdir()), h.q(merged('a')), h.q(h.bin), h.q(dir), ns)
    local f = runner.alongside(base, 0, runner.until_line(out .. '/at', 'sleeping') .. '; kill -TERM $p')
    assert.are.equal('143\n', f.r1, f.e1)
    private_gone(out)
    assert.is_nil(runner.records(ns).touch, 'nothing recorded for a stopped run')
    -- and SIGKILL, which the runner cannot catch: the shell child's
    -- supervisor removes it as it takes the migration down
    out = fresh_case()
    runner.make_ledger(ns, {})
    dir = tree(out, 'echo sleeping > ' .. out .. '/at\nsleep 30.5152')
    base = string.format('env -i ' .. RW .. ' PATH=%s HOME=%s KUBECONFIG=%s %s run --dir %s --namespace %s --lease-duration 3s',
      h.q(PATH), h.q(h.tmpdir()), h.q(merged('a')), h.q(h.bin), h.q(dir), ns)
    f = runner.alongside(base, 0, runner.until_line(out .. '/at', 'sleeping') .. '; kill -KILL $p')
    assert.are.equal('137\n', f.r1, f.e1)
    local path = h.slurp(out .. '/path'):gsub('\n$', '')
    -- (the supervisor removes the file, then its directory: wait for both)
    assert.is_true(h.eventually(2, function()
      return io.open(path) == nil and io.open(path:match('^(.*)/kubeconfig$') .. '/.') == nil
    end), 'the private kubeconfig or its directory outlived a killed runner: ' .. path)
    private_gone(out)
  end)

  it('under exec --context A too: one script, the context the flags name', function()
    local out = fresh_case()
    local script = tree(out) .. '/legacy-sh/touch.sh'
    local res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir(), NAMESPACE = ns },
      'exec', '--context', 'a', '--quiet', 'touch', script)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('ok', json.decode(res.out).outcome)
    assert.is_true(touched('a'), 'the script did not act on A')
    assert.is_false(touched('b'), 'the script acted on B')
    gateway_only(out, A.cluster.server, A.admin['client-key-data'])
    assert.are.equal('600\n', h.slurp(out .. '/mode'))
    private_gone(out)
    -- cluster options that resolve to nothing: exit 6, the script not run
    out = fresh_case()
    res = cozy({ KUBECONFIG = merged('b'), HOME = h.tmpdir(), NAMESPACE = ns },
      'exec', '--context', 'nowhere', '--quiet', 'touch', tree(out) .. '/legacy-sh/touch.sh')
    assert.are.equal(6, res.code, res.out .. res.err)
    contains(res.err, 'exec: ')
    contains(res.err, 'nowhere')
    assert.are.equal('', h.slurp(out .. '/path'), 'the script ran')
    -- no cluster options and nothing resolves: the script runs, its
    -- environment as it was (a supervision check needs no cluster)
    local script = h.write(h.tmpdir() .. '/plain.sh', 'echo "kubeconfig=$KUBECONFIG"\n')
    res = cozy({ KUBECONFIG = '/nonexistent/config', HOME = h.tmpdir() }, 'exec', '--quiet', 'plain', script)
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(json.decode(res.out).tail, 'kubeconfig=/nonexistent/config')
  end)
end)
