-- Strict inputs (issue 19), end to end against the real local apiserver:
-- each bad command line, environment, ledger content or kubeconfig below is
-- refused with one line naming the culprit and the way out, its exit code
-- from the table, and nothing run or recorded. Helpers: spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, one_line = h.contains, h.one_line

-- A tree of one pre-apply migration `alpha` that leaves a marker ConfigMap
-- ran-alpha in ns when it runs, and a ledger there with nothing pending
-- but alpha.
local function setup_case(extra)
  local ns = runner.new_ns()
  local spec = { batches = { { '00001-v1.0.0', { 'alpha' } } },
                 scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') } } }
  for k, v in pairs(extra or {}) do spec[k] = v end
  local dir = fixture.tree(spec)
  runner.make_ledger(ns, { ['m.seen'] = '{"state":"ok"}' })
  return ns, dir
end

-- Nothing ran and the ledger did not move.
local function untouched(ns, rv)
  assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion, 'the ledger was written')
  assert.is_nil(runner.markers(ns)['ran-alpha'], 'alpha ran')
end

-- res is a refusal with this exit code, one line on stderr holding each
-- of the texts, nothing on stdout.
local function refused(res, code, ...)
  assert.are.equal(code, res.code, 'exit code; stdout: ' .. res.out .. '\nstderr: ' .. res.err)
  one_line(res.err)
  for _, text in ipairs({ ... }) do contains(res.err, text, 'stderr') end
end

describe('#e2e strict inputs', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  describe('the environment', function()
    for _, v in ipairs({ 'yes', 'TRUE', 'on', '2', ' 1' }) do
      it('refuses DRY_RUN=' .. v .. ' with exit 2 instead of doing a real run', function()
        local ns, dir = setup_case()
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        refused(runner.run(dir, ns, { env = { DRY_RUN = v } }), 2, "DRY_RUN='" .. v .. "'",
          'neither 1 or true (a dry run) nor 0, false or empty (a real run)')
        untouched(ns, rv)
      end)
    end

    it('takes DRY_RUN=true for a dry run and DRY_RUN=false for a real one', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      h.must(runner.run(dir, ns, { env = { DRY_RUN = 'true' } }))
      untouched(ns, rv)
      h.must(runner.run(dir, ns, { env = { DRY_RUN = 'false' } }))
      assert.is_true(runner.markers(ns)['ran-alpha'])
      assert.are.equal('ok', runner.records(ns).alpha.state)
    end)

    for _, case in ipairs({
      { 'a dot', 'a.b' }, { '100 characters', string.rep('a', 100) }, { 'a capital', 'Cozy' } }) do
      it('refuses a NAMESPACE with ' .. case[1] .. ' (and --namespace alike)', function()
        local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'alpha' } } }, scripts = { alpha = {} } })
        refused(h.cozy('plan', '--dir', dir, { env = { NAMESPACE = case[2] } }), 2,
          "NAMESPACE='" .. case[2] .. "' is not a namespace name")
        refused(h.cozy('plan', '--dir', dir, '--namespace', case[2]), 2,
          "--namespace: '" .. case[2] .. "' is not a namespace name")
      end)
    end

    it('refuses a MIGRATIONS_IMAGE holding a newline, which would print as a fake progress line', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(runner.run(dir, ns, { env = { MIGRATIONS_IMAGE = 'img\n[1/1] pre-apply alpha ... ok' } }), 2,
        [[MIGRATIONS_IMAGE='img\n[1/1] pre-apply alpha ... ok' is not an image reference]])
      refused(runner.run(dir, ns, { env = { MIGRATIONS_IMAGE = string.rep('i', 256) } }), 2,
        'at most 255 bytes')
      untouched(ns, rv)
    end)

    it('refuses a skip reason holding a newline (--reason and SKIP_REASON)', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(h.cozy('skip', 'alpha', '--reason', 'line one\n[1/1] fake', '--dir', dir, '--namespace', ns), 2,
        '--reason: one line of text, without newlines')
      refused(runner.run(dir, ns, { env = { SKIP = 'alpha', SKIP_REASON = 'a\nb' } }), 2,
        'SKIP_REASON: one line of text')
      untouched(ns, rv)
    end)

    for _, case in ipairs({
      { 'KUBECONFIG' }, { 'KUBERNETES_SERVICE_HOST' }, { 'HTTPS_PROXY' }, { 'NAMESPACE' },
      { 'SKIP_BACKUP,KUBECONFIG', 'KUBECONFIG' } }) do
      it('refuses PASS_ENV and --pass-env naming ' .. case[1] .. ': the cluster identity is the runner\'s', function()
        local ns, dir = setup_case()
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        local name = case[2] or case[1]
        refused(runner.run(dir, ns, { env = { PASS_ENV = case[1] } }), 2,
          'PASS_ENV: ' .. name .. " is the runner's to set")
        refused(runner.run(dir, ns, '--pass-env', case[1]), 2, '--pass-env: ' .. name .. " is the runner's to set")
        untouched(ns, rv)
      end)
    end

    for _, bad in ipairs({ '1ABC', 'A-B', 'A,,B', 'A B' }) do
      it(string.format('refuses PASS_ENV=%q, which names no variable', bad), function()
        local ns, dir = setup_case()
        refused(runner.run(dir, ns, { env = { PASS_ENV = bad } }), 2,
          "PASS_ENV: '" .. bad .. "' is not a comma-separated list of variable names")
      end)
    end

    it('gives a shell migration the runner\'s private kubeconfig (its gateway) even with KUBECONFIG in the caller\'s env', function()
      local ns = runner.new_ns()
      local out = h.tmpdir()
      local dir = fixture.tree({ batches = { { '00000-legacy', { 'who' } } },
        scripts = { who = { shell = true, body = 'echo "$KUBECONFIG" > ' .. h.q(out .. '/kc') ..
          '; kubectl config current-context > ' .. h.q(out .. '/ctx') } } })
      runner.make_ledger(ns, { ['m.seen'] = '{"state":"ok"}' })
      -- the caller's KUBECONFIG also names a context the runner was not told to use
      h.must(runner.run(dir, ns, '--context', 'testenv'))
      assert.is_not.equal(os.getenv('KUBECONFIG'), (h.slurp(out .. '/kc'):gsub('\n$', '')))
      assert.are.equal('cozy-migrate-gateway\n', h.slurp(out .. '/ctx'))
    end)
  end)

  describe('the command line', function()
    it('refuses --tier background --only of a pre-apply slug instead of running it', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(runner.run(dir, ns, '--tier', 'background', '--only', 'alpha'), 2,
        '--only alpha: it is in the pre-apply tier, not the --tier background asked for')
      untouched(ns, rv)
    end)

    it('refuses --force without --only, and any flag given twice', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(runner.run(dir, ns, '--force'), 2, '--force applies to --only SLUG')
      refused(runner.run(dir, ns, '--only', 'alpha', '--only', 'seen'), 2, '--only is given twice')
      refused(runner.run(dir, ns, '--dir', dir), 2, '--dir is given twice')
      untouched(ns, rv)
    end)

    it('refuses a flag taken as the value of the one before it (run --only --dir X)', function()
      local ns, dir = setup_case()
      refused(h.cozy('run', '--namespace', ns, '--only', '--dir', dir), 2,
        "--only needs a value, but the next argument is the flag '--dir'")
    end)

    it('refuses a value given to a flag that takes none (--dry-run=yes)', function()
      local ns, dir = setup_case()
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(runner.run(dir, ns, '--dry-run=yes'), 2, "--dry-run takes no value ('--dry-run=yes')")
      untouched(ns, rv)
    end)

    it('refuses --kubeconfig "" instead of falling back to KUBECONFIG', function()
      local ns, dir = setup_case()
      refused(runner.plan(dir, ns, '--kubeconfig', ''), 2, '--kubeconfig: an empty value names no file')
      refused(runner.plan(dir, ns, '--context', ''), 2, '--context: an empty value names no context')
    end)

    it('refuses exec of a SLUG that is not a slug', function()
      local f = h.write(h.tmpdir() .. '/x.lua', '-- cozystack-migration: on-error=abort\n')
      refused(h.cozy('exec', 'Not_A_Slug', f), 2, "'Not_A_Slug' is not a valid slug")
    end)

    it('calls lua and exec of a missing file a usage error (exit 2)', function()
      refused(h.cozy('lua', '/nonexistent/x.lua'), 2, '/nonexistent/x.lua: No such file or directory')
      refused(h.cozy('exec', 'x', '/nonexistent/x.lua'), 2, '/nonexistent/x.lua: No such file or directory')
      refused(h.cozy('lua', h.tmpdir()), 2, 'not a file')
    end)

    it("lets plan take every option of run, as the docs say", function()
      local ns, dir = setup_case()
      local res = h.must(runner.plan(dir, ns, '--timeout', '5m', '--lock-timeout', '1s', '--lease-duration', '10s',
        '--grace', '1s', '--memory', '64', '--pass-env', 'SKIP_BACKUP', '--max-attempts', '2'))
      contains(res.out, 'alpha')
    end)

    it('refuses new --dir of a directory that does not exist, creating nothing', function()
      local d = h.tmpdir() .. '/does/not/exist'
      refused(h.cozy('new', 'fresh-slug', '--dir', d), 2, '--dir ' .. d .. ': No such file or directory')
      assert.is_false(h.run('test -e ' .. h.q(d)).ok, d .. ' was created')
    end)

    it('gives order --out at a file the usage code of its table (2)', function()
      local f = h.write(h.tmpdir() .. '/afile', 'x\n')
      local res = h.cozy('order', '--repo', h.root, '--out', f)
      refused(res, 2, f .. ': not a directory')
      assert.are.equal('x\n', h.slurp(f))
    end)
  end)

  describe('the ledger', function()
    -- A ledger holding data (a JSON text: values may hold \u0000), made by
    -- kubectl from that text.
    local function raw_ledger(ns, data_json, extra)
      local f = h.write(h.tmpdir() .. '/cm.json', string.format(
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"%s"},"data":%s%s}',
        runner.LEDGER, ns, data_json, extra or ''))
      h.must(h.kubectl('create -f ' .. h.q(f)), 'create the ledger')
    end

    local function tree(ns)
      return fixture.tree({ batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') }, beta = { body = runner.lua_marker(ns, 'beta') } } })
    end

    -- The kubectl command a refusal names, run as the operator would.
    local function run_repair(err)
      local args = assert(err:match("kubectl (%-n [%w-]+ patch configmap [%w.-]+ %-%-type=json %-p '[^']+')"), err)
      h.must(h.kubectl(args), 'the repair')
    end

    for _, case in ipairs({
      { 'text after the object', [["{\"state\":\"ok\"} trailing"]], 'not one JSON object: text follows it' },
      { 'a NUL byte after the object', [["{\"state\":\"ok\"}\u0000junk"]], 'holds a NUL byte' },
      { 'a key given twice', [["{\"state\":\"failed\",\"state\":\"ok\"}"]], "key 'state' appears twice" },
      { 'an at of "yesterday"', [["{\"state\":\"ok\",\"at\":\"yesterday\"}"]], [[field 'at' is "yesterday"]] },
    }) do
      it('refuses a record with ' .. case[1] .. ' (exit 7), and --only repairs it', function()
        local ns = runner.new_ns()
        local dir = tree(ns)
        raw_ledger(ns, '{"m.alpha":' .. case[2] .. ',"m.beta":"{\\"state\\":\\"ok\\"}"}')
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        local res = runner.run(dir, ns)
        refused(res, 7, 'm.alpha cannot be read (' .. case[3], "repair it with 'cozy-migrate run --only alpha'")
        assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
        h.must(runner.run(dir, ns, '--only', 'alpha'))
        assert.are.equal('ok', runner.records(ns).alpha.state)
        h.must(runner.run(dir, ns))
      end)
    end

    for _, case in ipairs({
      { 'a slug no migration has (m.nosuch)', 'nosuch', 'no migration of this image has that slug' },
      { 'a key that is no slug (m.Bad_Key)', 'Bad_Key', 'it is not m.<slug>' },
      { 'a bare m.', '', 'it is not m.<slug>' },
    }) do
      it('refuses an unreadable record of ' .. case[1] .. ', naming a repair that works', function()
        local ns = runner.new_ns()
        local dir = tree(ns)
        runner.make_ledger(ns, { ['m.' .. case[2]] = 'garbage', ['m.beta'] = '{"state":"ok"}' })
        local res = runner.run(dir, ns)
        refused(res, 7, 'm.' .. case[2] .. ' cannot be read', case[3], 'remove the key by hand',
          '"path":"/data/m.' .. case[2] .. '"')
        h.lacks(res.err, "'cozy-migrate skip " .. case[2], 'stderr')
        h.lacks(res.err, "--only " .. case[2] .. "'", 'stderr')
        run_repair(res.err)
        h.must(runner.run(dir, ns))
        assert.is_true(runner.markers(ns)['ran-alpha'])
      end)
    end

    it('refuses a ledger with binaryData (exit 7), naming the key and the command that removes it', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      raw_ledger(ns, '{"m.beta":"{\\"state\\":\\"ok\\"}"}', ',"binaryData":{"m.alpha":"eyJzdGF0ZSI6Im9rIn0="}')
      local res = runner.run(dir, ns)
      refused(res, 7, "key 'm.alpha' is under binaryData, where the engine never looks", '"path":"/binaryData"')
      refused(runner.plan(dir, ns), 7, 'binaryData')
      assert.is_nil(runner.markers(ns)['ran-alpha'])
      run_repair(res.err)
      h.must(runner.run(dir, ns))
      assert.is_true(runner.markers(ns)['ran-alpha'])
    end)

    it('takes a 404 that names no ConfigMap (a server URL with a wrong prefix) for an error, not a fresh install', function()
      local ns, dir = setup_case()
      local view = h.kc_json('config view --raw --minify')
      view.clusters[1].cluster.server = view.clusters[1].cluster.server .. '/prefix'
      local kc = h.write(h.tmpdir() .. '/kubeconfig', json.encode(view))
      for _, cmd in ipairs({ 'status', 'plan' }) do
        local res = h.cozy(cmd, '--dir', dir, '--namespace', ns, '--kubeconfig', kc)
        refused(res, 6, 'answered 404 without saying the ConfigMap is absent', '/prefix')
        h.lacks(res.out, 'nothing has run on this cluster')
        h.lacks(res.out, 'fresh install')
      end
    end)
  end)

  describe('the kubeconfig', function()
    -- The testenv's admin context as a kubeconfig table, edited by fn, written.
    local function kubeconfig(fn)
      local view = h.kc_json('config view --raw --minify --context testenv')
      fn(view, view.clusters[1].cluster, view.users[1].user)
      return h.write(h.tmpdir() .. '/kubeconfig', json.encode(view))
    end
    local function b64(s)
      return h.must(h.run('printf %s ' .. h.q(s) .. ' | base64 -w0')).out
    end
    -- Another CA (and a certificate of its own with the key), nothing the testenv trusts.
    local function other_ca()
      local d = h.tmpdir()
      h.must(h.run(string.format('openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ' ..
        '-keyout %s -out %s -subj /CN=other-ca -days 2', h.q(d .. '/k.pem'), h.q(d .. '/c.pem'))))
      return h.slurp(d .. '/c.pem'), h.slurp(d .. '/k.pem')
    end

    it('honours proxy-url: a dead proxy is an error, not a direct connection', function()
      local ns, dir = setup_case()
      local kc = kubeconfig(function(_, cluster) cluster['proxy-url'] = 'http://127.0.0.1:9' end)
      local res = h.cozy('status', '--dir', dir, '--namespace', ns, '--kubeconfig', kc, '--retry-for', '1s')
      assert.are.equal(6, res.code, res.out .. res.err)
      local c = json.decode(h.must(h.cozy('config', '--kubeconfig', kc)).out)
      assert.are.equal('http://127.0.0.1:9', c.proxy_url)
    end)

    it("honours proxy-url for a shell migration's requests too: its gateway sends them through it", function()
      local kc = kubeconfig(function(_, cluster) cluster['proxy-url'] = 'http://127.0.0.1:9' end)
      local out = h.tmpdir() .. '/seen'
      local f = h.write(h.tmpdir() .. '/p.sh', '# cozystack-migration: on-error=abort\n' ..
        '(grep -c proxy-url "$KUBECONFIG" || true) > ' .. h.q(out) .. '\n' ..
        'kubectl get namespace default --request-timeout=20s\n')
      local res = h.cozy('exec', '--kubeconfig', kc, '--retry-for', '1s', 'proxy-check', f,
        { env = { PATH = h.root .. '/build/testenv/bin:' .. os.getenv('PATH') } })
      assert.are.equal(1, res.code, res.out .. res.err)
      assert.are.equal('0\n', h.slurp(out), 'the script\'s kubeconfig names the gateway alone')
      contains(res.err, 'ServiceUnavailable', 'the dead proxy, through the gateway')
    end)

    it('refuses a proxy-url that is no http, https or socks5 URL', function()
      local kc = kubeconfig(function(_, cluster) cluster['proxy-url'] = 'ftp://127.0.0.1:21' end)
      refused(h.cozy('config', '--kubeconfig', kc), 6, 'proxy-url "ftp://127.0.0.1:21" is not a proxy URL', 'the scheme is ftp')
    end)

    it('refuses insecure-skip-tls-verify beside a CA, as kubectl does, instead of not verifying', function()
      local kc = kubeconfig(function(_, cluster) cluster['insecure-skip-tls-verify'] = true end)
      refused(h.cozy('config', '--kubeconfig', kc), 6, kc, 'cluster "testenv": insecure-skip-tls-verify beside certificate-authority-data')
    end)

    it('refuses a context name given twice instead of taking the last', function()
      local kc = kubeconfig(function(view)
        view.contexts[2] = { name = view.contexts[1].name, context = { cluster = 'testenv', user = 'nobody' } }
      end)
      refused(h.cozy('config', '--kubeconfig', kc), 6, kc, 'context "testenv" is defined twice (also at line')
    end)

    it('names the kubeconfig and its CA field when the server is not signed by that CA', function()
      local ns, dir = setup_case()
      local ca = other_ca()
      local kc = kubeconfig(function(_, cluster) cluster['certificate-authority-data'] = b64(ca) end)
      local t0 = os.time()
      local res = h.cozy('status', '--dir', dir, '--namespace', ns, '--kubeconfig', kc)
      refused(res, 6, 'TLS with https://', 'not signed by the CA', 'cluster "testenv" (certificate-authority-data)', kc)
      assert.is_true(os.time() - t0 < 10, 'a certificate that does not verify is not retried')
    end)

    for _, case in ipairs({
      { 'CA data that is not PEM', function(_, cluster) cluster['certificate-authority-data'] = b64('not a certificate') end,
        'cluster "testenv": certificate-authority-data holds no PEM certificate' },
      { 'a client key that is not PEM', function(_, _, user) user['client-key-data'] = b64('not a key') end,
        'user "testenv-admin": client-key-data holds no PEM private key' },
      { 'a client key of another certificate', function(_, _, user)
          local _, key = other_ca()
          user['client-key-data'] = b64(key)
        end, 'user "testenv-admin": client-key-data is not the key of client-certificate-data' },
      { 'a server that is no URL', function(_, cluster) cluster.server = 'https://exa mple:6443' end,
        'cluster "testenv": server "https://exa mple:6443" is not a URL like https://host:6443' },
      { 'an ftp:// server', function(_, cluster) cluster.server = 'ftp://127.0.0.1:21' end,
        'server "ftp://127.0.0.1:21" is not a URL like https://host:6443 (the scheme is ftp' },
      { 'a server without a scheme', function(_, cluster) cluster.server = '127.0.0.1:6443' end,
        'server "127.0.0.1:6443" is not a URL' },
    }) do
      it('refuses ' .. case[1] .. ' before any request, naming the file, line and field', function()
        local kc = kubeconfig(case[2])
        local t0 = os.time()
        refused(h.cozy('status', '--namespace', 'default', '--kubeconfig', kc), 6, kc .. ':', case[3])
        assert.is_true(os.time() - t0 < 5, 'refused at once, not retried')
      end)
    end
  end)

  describe('the tree', function()
    it('refuses a tree without migrations/revoked (exit 3) before anything runs', function()
      local ns, dir = setup_case({ revoked = false })
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      refused(runner.run(dir, ns), 3, '/migrations/revoked: missing')
      untouched(ns, rv)
    end)

    it('refuses a dotfile in pre-apply/ and in order.d/ (exit 3)', function()
      for _, path in ipairs({ 'migrations/pre-apply/.draft.lua', 'migrations/order.d/.00002-v2' }) do
        local ns, dir = setup_case({ raw = { [path] = '-- cozystack-migration: on-error=abort\n' } })
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        refused(runner.run(dir, ns), 3, path)
        untouched(ns, rv)
      end
    end)

    it('refuses a legacy script in 00000-legacy but missing from legacy-map (exit 3), running nothing', function()
      local ns = runner.new_ns()
      local f = os.tmpname()
      local dir = fixture.tree({ batches = { { '00000-legacy', { 'one', 'two' } } },
        scripts = { one = { shell = true, body = runner.sh_append(f) }, two = { shell = true, body = runner.sh_append(f) } },
        legacy = { { 1, 'one' } } })
      runner.make_ledger(ns, { version = '1' })
      refused(runner.run(dir, ns), 3, "'two' is not in legacy-sh/legacy-map")
      assert.are.equal('', h.slurp(f))
    end)

    it("refuses an 00000-legacy out of the map's numeric order (exit 3) instead of stamping version backwards", function()
      local ns = runner.new_ns()
      local f = os.tmpname()
      local dir = fixture.tree({ batches = { { '00000-legacy', { 'two', 'one' } } },
        scripts = { one = { shell = true, body = runner.sh_append(f) }, two = { shell = true, body = runner.sh_append(f) } },
        legacy = { { 1, 'one' }, { 2, 'two' } } })
      runner.make_ledger(ns, { version = '1' })
      refused(runner.run(dir, ns), 3, "00000-legacy:1: 'two' where legacy-map has 'one'")
      assert.are.equal('', h.slurp(f))
    end)
  end)
end)
