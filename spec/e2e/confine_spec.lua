-- A shell migration run as the hook runs it (an unprivileged user, no_new_privs,
-- the script the same user, in-cluster credentials from a service-account
-- directory) reaches nothing but its gateway: not the token file, not the
-- runner's kubeconfig, /proc environ or memory, not the apiserver directly,
-- not another migration's private directory; nothing it starts outlives it
-- (host/proc/confine.c, host/proc/reap.c, host/proc/child.c). Each hostile
-- script tries, is refused or dead, and the ledger is untouched.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, must = h.contains, h.must
local PATH = h.root .. '/build/testenv/bin:/usr/local/bin:/usr/bin:/bin'
local NOBODY = 'setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs'

-- A directory of the runner's user (nobody) outside every place a shell may
-- read: /tmp, where the runner keeps its migrations' private directories.
local function nobody_dir()
  local d = h.private_tmpdir()
  must(h.run('chown 65534:65534 ' .. h.q(d) .. ' && chmod 700 ' .. h.q(d)), 'chown')
  return d
end

-- The in-cluster credentials of the hook's pod, made from the testenv's
-- admin token: a service-account directory nobody owns (token 0600).
local function service_account(ns)
  local dir = nobody_dir() .. '/serviceaccount'
  local pki = os.getenv('TESTENV_DIR') .. '/pki'
  must(h.run(string.format('mkdir %s && cp %s/admin.token %s/token && cp %s/ca.crt %s/ca.crt && ' ..
    'printf %%s %s >%s/namespace && chown -R 65534:65534 %s && chmod 600 %s/token',
    h.q(dir), h.q(pki), h.q(dir), h.q(pki), h.q(dir), ns, h.q(dir), h.q(dir), h.q(dir))), 'service account')
  local server = h.slurp(os.getenv('KUBECONFIG')):match('server: https://([^\n]+)')
  local host, port = server:match('^(.*):(%d+)$')
  return { dir = dir, host = host, port = port }
end

local function tree(scripts)
  local names, legacy, specs = {}, {}, {}
  for i, s in ipairs(scripts) do
    names[i] = s[1]
    legacy[i] = { i, s[1] }
    specs[s[1]] = { shell = true, on_error = 'warn', body = s[2] }
  end
  local dir = fixture.tree({ batches = { { '00000-legacy', names } }, legacy = legacy, scripts = specs })
  must(h.run('chmod -R a+rX ' .. h.q(dir)), 'chmod')
  return dir
end

-- A scratch directory the script may write (COZY_SHELL_RW) and the spec reads.
local function scratch()
  local d = h.tmpdir()
  must(h.run('chmod 1777 ' .. h.q(d)), 'chmod')
  return d
end

-- `cozy-migrate run` as the hook runs it: nobody, no_new_privs, in-cluster.
local function hook_run(dir, ns, sa, extra)
  local env = string.format('env -i PATH=%s HOME=/nonexistent KUBERNETES_SERVICE_HOST=%s ' ..
    'KUBERNETES_SERVICE_PORT=%s COZY_SERVICEACCOUNT_DIR=%s COZY_SHELL_RW=%s %s',
    h.q(PATH), sa.host, sa.port, h.q(sa.dir), h.q(os.getenv('COZY_SHELL_RW') or ''), extra or '')
  return h.run(string.format('%s %s %s run --dir %s --namespace %s --log-format text', NOBODY, env,
    h.q(h.bin), h.q(dir), ns))
end

describe('#e2e a shell migration confined as the hook runs it', function()
  setup(function() h.need_cluster() end)
  teardown(function() runner.delete_namespaces() end)

  it('cannot read the token file, the runner\'s /proc files or reach the apiserver, and the ledger is untouched', function()
    local ns = runner.new_ns()
    local sa = service_account(ns)
    local out = scratch()
    local body = string.format([[
o=%s/seen
runner=$(pgrep -o -u 65534 -f 'cozy-migrate run')
try() { if eval "$2" >/dev/null 2>&1; then echo "$1 READ" >>"$o"; else echo "$1 refused" >>"$o"; fi; }
try token "cat %s/token"
try token-dir "ls %s"
try environ "cat /proc/$runner/environ"
try mem "exec 4</proc/$runner/mem"
try parent-environ "cat /proc/$PPID/environ"
try apiserver "curl -sk --max-time 3 https://%s:%s/version"
try apiserver-tcp "exec 3<>/dev/tcp/%s/%s"
try tmp "ls /tmp"
try gateway "kubectl get namespace default"
kubectl -n "$NAMESPACE" patch configmap cozystack-version -p '{"data":{"m.pwned":"{}"}}'
]], h.q(out), h.q(sa.dir), h.q(sa.dir), sa.host, sa.port, sa.host, sa.port)
    local dir = tree({ { 'hostile', body } })
    runner.make_ledger(ns, { version = '1' })
    local res = hook_run(dir, ns, sa)
    assert.are.equal(0, res.code, res.out .. res.err)
    local seen = h.slurp(out .. '/seen')
    for _, what in ipairs({ 'token', 'token-dir', 'environ', 'mem', 'parent-environ', 'apiserver',
      'apiserver-tcp', 'tmp' }) do
      contains(seen, what .. ' refused\n', what)
    end
    contains(seen, 'gateway READ\n', 'its own gateway answers')
    local recs, _, cm = runner.records(ns)
    assert.is_nil(cm.data['m.pwned'])
    assert.are.equal('1', cm.data.version)
    assert.are.equal('failed', recs.hostile.state, json.encode(recs.hostile))
    assert.are.equal('LedgerProtected', recs.hostile.reason)
  end)

  it('cannot mint a credential through its gateway: a token, a binding to cluster-admin, a token Secret', function()
    local ns = runner.new_ns()
    local sa = service_account(ns)
    local out = scratch()
    local body = string.format([[
o=%s/minted
k="kubectl -n $NAMESPACE"
$k create serviceaccount mint >/dev/null
try() { if eval "$2" >>"$o.log" 2>&1; then echo "$1 MADE" >>"$o"; else echo "$1 refused" >>"$o"; fi; }
try token "$k create token mint"
try binding "kubectl create clusterrolebinding mint-%s --clusterrole=cluster-admin --serviceaccount=$NAMESPACE:mint"
try ssa-binding "kubectl create rolebinding mint --clusterrole=cluster-admin --serviceaccount=$NAMESPACE:mint -n $NAMESPACE --dry-run=client -o yaml | kubectl apply --server-side -f -"
try secret "$k create secret generic mint --type=kubernetes.io/service-account-token --from-literal=x=y"
try plain-binding "$k create rolebinding view --clusterrole=view --serviceaccount=$NAMESPACE:mint"
exit 1
]], h.q(out), ns)
    local dir = tree({ { 'minter', body } })
    runner.make_ledger(ns, { version = '1' })
    local res = hook_run(dir, ns, sa)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('token refused\nbinding refused\nssa-binding refused\nsecret refused\nplain-binding MADE\n',
      h.slurp(out .. '/minted'), h.slurp(out .. '/minted.log'))
    contains(h.slurp(out .. '/minted.log'), 'CredentialRefused', 'what kubectl printed')
    local rec = runner.records(ns).minter
    assert.are.equal('failed', rec.state)
    assert.are.equal('CredentialRefused', rec.reason, json.encode(rec))
    contains(rec.message, 'serviceaccounts/mint/token', 'the record names the refused request')
    assert.are.equal(1, h.kubectl('get clusterrolebinding mint-' .. ns).code, 'the binding exists')
    assert.are.equal(1, h.kubectl('get secret mint -n ' .. ns).code, 'the token Secret exists')
  end)

  it('kills a setsid grandchild that outlives its migration before the record, so it never reads the next one\'s kubeconfig', function()
    local ns = runner.new_ns()
    local sa = service_account(ns)
    local out = scratch()
    local leaver = string.format([[
setsid bash -c 'echo $$ >%s/pid; for i in $(seq 200); do echo tick >>%s/ticks; cat /tmp/cozy-migrate-*/kubeconfig >>%s/stolen 2>/dev/null; kubectl --kubeconfig "$(ls -d /tmp/cozy-migrate-* | head -1)/kubeconfig" get ns >>%s/stolen 2>&1; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do [ -s %s/ticks ] && break; sleep 0.05; done
]], h.q(out), h.q(out), h.q(out), h.q(out), h.q(out))
    local next_one = string.format([[
p=$(cat %s/pid)
if [ -d /proc/$p ]; then echo alive >%s/next; else echo dead >%s/next; fi
wc -l <%s/ticks >%s/ticks-then
sleep 1
wc -l <%s/ticks >%s/ticks-later
]], h.q(out), h.q(out), h.q(out), h.q(out), h.q(out), h.q(out), h.q(out))
    local dir = tree({ { 'leaver', leaver }, { 'next-one', next_one } })
    runner.make_ledger(ns, { version = '1' })
    local res = hook_run(dir, ns, sa)
    assert.are.equal(0, res.code, res.out .. res.err)
    local pid = h.slurp(out .. '/pid'):match('%d+')
    assert.truthy(pid, 'the grandchild started')
    assert.are.equal('dead\n', h.slurp(out .. '/next'), 'the grandchild was alive when the next migration ran')
    assert.is_nil(io.open('/proc/' .. pid .. '/stat'), 'the grandchild outlived the run')
    assert.are.equal(h.slurp(out .. '/ticks-then'), h.slurp(out .. '/ticks-later'), 'it kept running')
    h.lacks(h.slurp(out .. '/stolen'), 'token:', 'it read a private kubeconfig')
    h.lacks(h.slurp(out .. '/stolen'), 'Active', 'it listed namespaces through another gateway')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs.leaver.state, json.encode(recs.leaver))
    assert.are.equal('ok', recs['next-one'].state, json.encode(recs['next-one']))
  end)

  it('gives each migration a private directory of its own (HOME, TMPDIR, kubectl cache), gone after it', function()
    local ns = runner.new_ns()
    local sa = service_account(ns)
    local out = scratch()
    local show = string.format([[
echo "$HOME $TMPDIR $KUBECACHEDIR $KUBECONFIG" >>%s/dirs
stat -c '%%a' "$(dirname "$KUBECONFIG")" >>%s/modes
kubectl get namespace default >/dev/null
touch "$TMPDIR/left" "$HOME/left"
]], h.q(out), h.q(out))
    local dir = tree({ { 'first', show }, { 'second', show } })
    runner.make_ledger(ns, { version = '1' })
    local res = hook_run(dir, ns, sa)
    assert.are.equal(0, res.code, res.out .. res.err)
    local lines = h.lines_of(out .. '/dirs')
    assert.are.equal(2, #lines)
    local a, b = {}, {}
    for w in lines[1]:gmatch('%S+') do a[#a + 1] = w end
    for w in lines[2]:gmatch('%S+') do b[#b + 1] = w end
    local base = a[4]:match('^(.*)/kubeconfig$')
    assert.are.same({ base .. '/home', base .. '/tmp', base .. '/cache' }, { a[1], a[2], a[3] })
    assert.are_not.equal(a[4], b[4], 'two migrations shared a private directory')
    assert.are.same({ '700', '700' }, h.lines_of(out .. '/modes'))
    for _, p in ipairs({ base, b[4]:match('^(.*)/kubeconfig$') }) do
      assert.is_nil(io.open(p .. '/.'), 'the private directory outlived its migration: ' .. p)
    end
  end)

  it('where the kernel lacks a protection, refuses shell migrations in-cluster unless the operator names it, in one line', function()
    local ns = runner.new_ns()
    local sa = service_account(ns)
    local out = scratch()
    local dir = tree({ { 'plain', 'echo ran >' .. h.q(out .. '/ran') } })
    runner.make_ledger(ns, { version = '1' })
    local res = hook_run(dir, ns, sa, 'COZY_CONFINE_ABI=3')
    local recs = runner.records(ns)
    assert.are.equal('failed', recs.plain.state, res.out .. res.err)
    assert.are.equal('Unconfined', recs.plain.reason)
    contains(recs.plain.message, 'lacks tcp-connect,scope (Landlock ABI 3)', 'the message')
    contains(recs.plain.message, 'COZY_ALLOW_UNCONFINED=tcp-connect,scope', 'the way out')
    assert.is_nil(io.open(out .. '/ran'), 'the script ran unconfined')

    local ns2 = runner.new_ns()
    local sa2 = service_account(ns2)
    runner.make_ledger(ns2, { version = '1' })
    res = hook_run(dir, ns2, sa2, 'COZY_CONFINE_ABI=3 COZY_ALLOW_UNCONFINED=tcp-connect,scope')
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('ok', runner.records(ns2).plain.state, res.out .. res.err)
    h.one_line(res.err:match('[^\n]*lacks tcp%-connect,scope[^\n]*\n') or '', 'the warning')
    assert.are.equal('ran\n', h.slurp(out .. '/ran'))
  end)

  it('keeps two `exec --dry-run` of one user apart: neither reads the other\'s kubeconfig nor reaches its gateway, nor the runner\'s --kubeconfig', function()
    local out = scratch()
    local kc = nobody_dir() .. '/kubeconfig'
    must(h.run(string.format('cp %s %s && chown 65534 %s && chmod 600 %s', h.q(os.getenv('KUBECONFIG')),
      h.q(kc), h.q(kc), h.q(kc))), 'kubeconfig')
    local first = h.write(out .. '/first.sh', string.format([[
echo "$KUBECONFIG" >%s/first-kc
sed -n 's/^ *server: https:\/\/127.0.0.1://p' "$KUBECONFIG" >%s/first-port
for i in $(seq 200); do [ -e %s/second-done ] && break; sleep 0.05; done
]], h.q(out), h.q(out), h.q(out)))
    local second = h.write(out .. '/second.sh', string.format([[
for i in $(seq 200); do [ -s %s/first-port ] && break; sleep 0.05; done
kc=$(cat %s/first-kc); port=$(cat %s/first-port)
if cat "$kc" >/dev/null 2>&1; then echo "kubeconfig READ"; else echo "kubeconfig refused"; fi >>%s/seen
if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "gateway READ"; else echo "gateway refused"; fi >>%s/seen
if cat %s >/dev/null 2>&1; then echo "runner-kubeconfig READ"; else echo "runner-kubeconfig refused"; fi >>%s/seen
touch %s/second-done
]], h.q(out), h.q(out), h.q(out), h.q(out), h.q(out), h.q(kc), h.q(out), h.q(out)))
    must(h.run('chmod a+r ' .. h.q(first) .. ' ' .. h.q(second)), 'chmod')
    local cmd = string.format('%s env -i PATH=%s HOME=/nonexistent COZY_SHELL_RW=%s %s exec --dry-run --quiet ' ..
      '--kubeconfig %s', NOBODY, h.q(PATH), h.q(os.getenv('COZY_SHELL_RW') or ''), h.q(h.bin), h.q(kc))
    local f = runner.together(cmd .. ' one ' .. h.q(first), cmd .. ' two ' .. h.q(second))
    assert.are.equal('0\n', f.r1, f.e1)
    assert.are.equal('0\n', f.r2, f.e2)
    assert.are.equal('kubeconfig refused\ngateway refused\nrunner-kubeconfig refused\n', h.slurp(out .. '/seen'))
  end)
end)
