-- The runner's ledger end to end against the real local kube-apiserver
-- (tools/testenv): what `cozy-migrate run` records in the ledger ConfigMap
-- and when: a fresh install, legacy seeding below `version`, the retention
-- floor, revoked slugs, checksums, records that survive the legacy
-- `kubectl apply` of version, records it cannot read, a ledger migrations may
-- not write, and its size. Every case has its own namespace (so its own
-- ledger and Lease); helpers are in spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local must, contains, lacks, one_line, count, lines_of = h.must, h.contains, h.lacks, h.one_line, h.count, h.lines_of

describe('#e2e the runner', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('on a fresh install creates a kept ledger recording every slug skipped-fresh-install and runs nothing', function()
    local ns = runner.new_ns()
    local log = os.tmpname()
    os.remove(log)
    local dir = fixture.tree({
      batches = {
        { '00000-legacy', { 'old-one', 'old-gone retired' } },
        { '00001-v1.0.0', { 'alpha', 'bg', 'gamma retired', 'bad' } },
      },
      scripts = {
        ['old-one'] = { shell = true, body = runner.sh_append(log) },
        alpha = { body = runner.lua_marker(ns, 'alpha') },
        bg = { tier = 'background', body = runner.lua_marker(ns, 'bg') },
        bad = { body = runner.lua_marker(ns, 'bad') },
      },
      revoked = { 'bad' },
      legacy = { { 1, 'old-one' }, { 2, 'old-gone' } },
    })
    assert.is_nil(runner.get_ledger(ns))
    local res = must(runner.run(dir, ns))
    contains(res.out, 'fresh install: created the ledger ' .. ns .. '/' .. runner.LEDGER ..
      ', recorded 6 migrations as skipped-fresh-install; nothing to run')
    local recs, _, cm = runner.records(ns)
    assert.is_not_nil(cm, 'the ledger was not created')
    assert.are.equal('true', cm.metadata.labels['platform.cozystack.io/no-delete'])
    assert.are.equal('keep', cm.metadata.annotations['helm.sh/resource-policy'])
    assert.is_nil(cm.data.version, 'the runner must never write version')
    local want = {
      ['old-one'] = { '00000-legacy', 'pre-apply' }, ['old-gone'] = { '00000-legacy', 'pre-apply' },
      alpha = { '00001-v1.0.0', 'pre-apply' }, bg = { '00001-v1.0.0', 'background' },
      gamma = { '00001-v1.0.0', 'pre-apply' }, bad = { '00001-v1.0.0', 'pre-apply' },
    }
    assert.are.equal(6, count(recs))
    for slug, bt in pairs(want) do
      local r = recs[slug]
      assert.is_table(r, 'no record for ' .. slug)
      assert.are.equal('skipped-fresh-install', r.state, slug)
      assert.are.equal(bt[1], r.batch, slug)
      assert.are.equal(bt[2], r.tier, slug)
      assert.are.equal(0, r.attempts, slug)
    end
    assert.are.same({}, (runner.markers(ns)))
    assert.is_nil(io.open(log), 'a shell migration ran')
    local evs = runner.events(ns)
    assert.are.equal(1, #evs)
    assert.are.equal('LedgerCreated', evs[1].reason)
    assert.are.equal(cm.metadata.uid, evs[1].involvedObject.uid)

    -- A second run, of either tier, runs nothing and writes nothing.
    local rv = cm.metadata.resourceVersion
    res = must(runner.run(dir, ns))
    contains(res.out, 'nothing to run for the pre-apply tier')
    lacks(res.out, 'running')
    res = must(runner.run(dir, ns, '--tier', 'background'))
    contains(res.out, 'nothing to run for the background tier')
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    assert.are.same({}, (runner.markers(ns)))
    assert.is_nil(io.open(log), 'a shell migration ran')
  end)

  it('seeds legacy records below the version per key, before the floor, and runs the rest in map order', function()
    local ns = runner.new_ns()
    local log = os.tmpname()
    local dir = fixture.tree({
      batches = {
        { '00000-legacy', { 'l-one retired', 'l-two', 'l-three', 'l-four', 'l-five' } },
      },
      scripts = {
        ['l-two'] = { shell = true, body = runner.sh_append(log) },
        ['l-three'] = { shell = true, body = runner.sh_append(log) },
        ['l-four'] = { shell = true, body = runner.sh_append(log) },
        ['l-five'] = { shell = true, body = runner.sh_append(log) },
      },
      legacy = { { 1, 'l-one' }, { 2, 'l-two' }, { 3, 'l-three' }, { 4, 'l-four' }, { 5, 'l-five' } },
    })
    local pre = '{"state":"ok","at":"2020-01-01T00:00:00Z","attempts":7}'
    runner.make_ledger(ns, { version = '4', ['m.l-three'] = pre })
    local res = must(runner.run(dir, ns, { env = { MIGRATIONS_IMAGE = 'registry.example/cozy-migrate:v9' } }))
    -- l-one (retired: would trip the floor without its seed) and l-two
    contains(res.out, 'legacy: recorded 2 migrations below version 4 as legacy')
    local recs, raw, cm = runner.records(ns)
    assert.are.equal('legacy', recs['l-one'].state)
    assert.are.equal('legacy', recs['l-two'].state)
    assert.are.equal('00000-legacy', recs['l-one'].batch)
    assert.are.equal(pre, raw['l-three'], 'a pre-existing record was rewritten')
    assert.are.equal('ok', recs['l-four'].state)
    assert.are.equal(1, recs['l-four'].attempts)
    assert.are.equal('ok', recs['l-five'].state)
    assert.are.equal('4', cm.data.version)
    -- the image is recorded, on seeds and on executions
    assert.are.equal('registry.example/cozy-migrate:v9', recs['l-one'].image)
    assert.are.equal('registry.example/cozy-migrate:v9', recs['l-four'].image)
    local seeded_ev
    for _, e in ipairs(runner.events(ns)) do
      if e.reason == 'LegacySeeded' then seeded_ev = e end
    end
    assert.is_table(seeded_ev, 'no LegacySeeded event')
    contains(seeded_ev.message, '2 legacy migrations below version 4 recorded')
    -- map order (l-four before l-five), not alphabetical; nothing below 4 ran
    assert.are.same({ 'l-four ' .. ns, 'l-five ' .. ns }, lines_of(log))

    -- idempotent
    local rv = cm.metadata.resourceVersion
    res = must(runner.run(dir, ns))
    lacks(res.out, 'legacy:')
    contains(res.out, 'nothing to run')
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    assert.are.same({ 'l-four ' .. ns, 'l-five ' .. ns }, lines_of(log))
    os.remove(log)
  end)

  it('refuses a cluster below the retention floor, naming the release, writing nothing', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = {
        { '00001-v1.0.0', { 'old-thing retired' } },
        { '00002-v1.1.0', { 'alpha' } },
      },
      scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') } },
    })
    runner.make_ledger(ns, { ['m.other'] = '{"state":"ok"}' })
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = runner.run(dir, ns)
    assert.are.equal(4, res.code, res.err)
    contains(res.err, "no record of 'old-thing', retired in 00001-v1.0.0")
    contains(res.err, 'upgrade through v1.0.0 first')
    local recs, _, cm = runner.records(ns)
    assert.are.equal(rv, cm.metadata.resourceVersion)
    assert.are.same({ 'other' }, (function()
      local k = {}
      for s in pairs(recs) do k[#k + 1] = s end
      return k
    end)())
    assert.are.same({}, (runner.markers(ns)))
  end)

  it('records revoked only where no record exists and never runs a revoked slug', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'rev-ok', 'rev-new', 'alpha' } } },
      scripts = {
        ['rev-ok'] = { body = runner.lua_marker(ns, 'rev-ok') },
        ['rev-new'] = { body = runner.lua_marker(ns, 'rev-new') },
        alpha = { body = runner.lua_marker(ns, 'alpha') },
      },
      revoked = { 'rev-ok', 'rev-new' },
    })
    local okrec = '{"state":"ok","at":"2021-01-01T00:00:00Z","attempts":1}'
    runner.make_ledger(ns, { ['m.rev-ok'] = okrec })
    local res = must(runner.run(dir, ns))
    contains(res.out, 'rev-new ... revoked, recorded')
    local recs, raw = runner.records(ns)
    assert.are.equal(okrec, raw['rev-ok'])
    assert.are.equal('revoked', recs['rev-new'].state)
    assert.are.equal(0, recs['rev-new'].attempts)
    assert.are.equal('00001-v1.0.0', recs['rev-new'].batch)
    assert.are.equal('ok', recs.alpha.state)
    assert.are.same({ ['ran-alpha'] = true }, (runner.markers(ns)))
    -- and again: nothing changes
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    res = must(runner.run(dir, ns))
    contains(res.out, 'nothing to run')
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
  end)

  it('reports an ok record whose checksum differs, without re-running or rewriting it', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
      scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') }, beta = { body = runner.lua_marker(ns, 'beta') } },
    })
    local rec = '{"state":"ok","at":"2021-01-01T00:00:00Z","sha256":"' .. string.rep('deadbeef', 8) ..
      '","attempts":1}'
    runner.make_ledger(ns, { ['m.alpha'] = rec })
    local res = must(runner.run(dir, ns))
    contains(res.err, 'alpha: recorded sha256 deadbeefdead differs from the shipped script')
    lacks(res.out, 'alpha ... running')
    local recs, raw = runner.records(ns)
    assert.are.equal(rec, raw.alpha)
    assert.are.equal('ok', recs.beta.state)
    assert.are.same({ ['ran-beta'] = true }, (runner.markers(ns)))
    local st = runner.status(dir, ns)
    local sums = {}
    for _, e in ipairs(st) do sums[e.migration] = e.checksum end
    assert.are.same({ alpha = 'DIFFERS', beta = 'match' }, sums)
  end)

  describe('keeps its records through the legacy `kubectl apply` of version', function()
    local function legacy_apply(ns, version)
      local k = h.q(h.testenv) .. ' kubectl'
      return must(h.run(string.format(
        '%s create configmap %s -n %s --from-literal=version=%s --dry-run=client -o yaml | %s apply -f-',
        k, runner.LEDGER, ns, version, k)), 'legacy apply')
    end

    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') },
                    beta = { on_error = 'warn', body = "error('x')" } },
      })
    end

    -- Runs the tree (two records), applies version 5 the legacy way twice,
    -- asserts that the records did not change, and returns the ledger.
    local function run_then_apply(ns)
      must(runner.run(tree(ns), ns))
      local before = runner.records(ns)
      assert.are.equal(2, count(before))
      legacy_apply(ns, '5')
      legacy_apply(ns, '5')
      local after, _, cm = runner.records(ns)
      assert.are.same(before, after)
      assert.are.equal('5', cm.data.version)
      return cm
    end

    it('on a ledger first made by kubectl apply', function()
      local ns = runner.new_ns()
      legacy_apply(ns, '4')
      assert.is_string(runner.get_ledger(ns).metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'])
      local cm = run_then_apply(ns)
      lacks(cm.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'], 'm.alpha',
        'last-applied')
    end)

    -- A legacy script's own apply of version goes through the runner's
    -- gateway, which answers it as the apiserver would and leaves it to the
    -- runner: the version lands with the script's ok record, in one patch.
    it('when a legacy shell migration of the same run stamps version: in the patch of its record', function()
      local ns = runner.new_ns()
      must(runner.run(fixture.tree({ batches = { { '00001-v1.0.0', { 'first' } } },
        scripts = { first = { body = 'return' } } }), ns))
      local rv0 = runner.get_ledger(ns).metadata.resourceVersion
      local k = 'kubectl --namespace "$NAMESPACE"'
      local dir = fixture.tree({
        batches = { { '00000-legacy', { 'stamp' } }, { '00001-v1.0.0', { 'first', 'after' } } },
        legacy = { { 6, 'stamp' } },
        scripts = {
          first = { body = 'return' },
          stamp = { shell = true, body = string.format(
            '%s create configmap %s --from-literal=version=7 --dry-run=client -o yaml | %s apply -f-',
            k, runner.LEDGER, k) },
          after = { body = 'return' },
        },
      })
      local env = { env = { PATH = h.root .. '/build/testenv/bin:' .. os.getenv('PATH') } }
      local res = must(runner.run(dir, ns, env))
      local recs, _, cm = runner.records(ns)
      assert.are.equal('ok', recs.stamp.state, res.err)
      assert.are.equal('version=7', recs.stamp.stamp, 'the record says so')
      assert.are.equal('ok', recs.after.state, res.err)
      assert.are.equal('7', cm.data.version)
      assert.is_nil(cm.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'],
        'kubectl apply never reached the ledger')
      assert.are_not.equal(rv0, cm.metadata.resourceVersion)
      h.contains(res.err, 'the runner takes over this script\'s stamp of ' .. ns .. '/' .. runner.LEDGER ..
        ' version=7', 'the script\'s output')
    end)

    -- Every record write is conditional on the ledger's resourceVersion as
    -- the runner last saw it (so a write that reaches the apiserver late,
    -- after another runner took the lock over and wrote, is refused). A
    -- person's apply of version between two records (here the script
    -- stands for them, with the cluster's own kubeconfig, past the
    -- gateway) changes it: the runner asks the Lease, reads it afresh, writes.
    it('when someone applies version between two records', function()
      local ns = runner.new_ns()
      must(runner.run(fixture.tree({ batches = { { '00001-v1.0.0', { 'first' } } },
        scripts = { first = { body = 'return' } } }), ns))
      local bin = h.root .. '/build/testenv/bin/kubectl'
      local f = io.open(bin, 'rb')
      if f then f:close() else bin = 'kubectl' end
      -- someone else (not the script: a confined script reaches the cluster
      -- through its gateway only) applies version while `stamp` runs
      local k = h.q(bin) .. ' --kubeconfig ' .. h.q(os.getenv('KUBECONFIG')) .. ' --namespace ' .. ns
      local out = h.tmpdir()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'first', 'stamp', 'after' } } },
        scripts = {
          first = { body = 'return' },
          stamp = { shell = true, body = 'echo started >' .. h.q(out .. '/at') .. '\nfor i in $(seq 600); do ' ..
            '[ -e ' .. h.q(out .. '/done') .. ' ] && break; sleep 0.05; done' },
          after = { body = 'return' },
        },
      })
      local f = runner.alongside(runner.cmd(dir, ns, ''), 0, runner.until_line(out .. '/at', 'started') .. '; ' ..
        string.format('%s create configmap %s --from-literal=version=7 --dry-run=client -o yaml | %s apply -f- ' ..
          '>/dev/null; touch %s', k, runner.LEDGER, k, h.q(out .. '/done')))
      assert.are.equal('0\n', f.r1, f.e1)
      local res = { err = f.e1 }
      local recs, _, cm = runner.records(ns)
      assert.are.equal('ok', recs.stamp.state, res.err)
      assert.are.equal('ok', recs.after.state, res.err)
      assert.are.equal('7', cm.data.version)
      h.contains(res.err, 'recording stamp: the ledger changed since this runner last read it', 'the run')
    end)

    it('on a ledger the runner created (fresh install)', function()
      local cm = run_then_apply(runner.new_ns())
      assert.are.equal('true', cm.metadata.labels['platform.cozystack.io/no-delete'])
      assert.are.equal('keep', cm.metadata.annotations['helm.sh/resource-policy'])
    end)
  end)

  describe('given an untrustworthy ledger', function()
    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = runner.lua_gen_marker(ns, 'alpha') },
                    beta = { body = runner.lua_marker(ns, 'beta') } },
      })
    end

    for _, case in ipairs({
      { 'an unparseable record', '{not json', 'm.alpha cannot be read (not JSON)' },
      { 'a record with an unknown state', '{"state":"done"}', "m.alpha cannot be read (unknown state 'done')" },
    }) do
      it('refuses ' .. case[1] .. ' before anything runs, naming the key and its repair, exit 7', function()
        local ns = runner.new_ns()
        local dir = tree(ns)
        runner.make_ledger(ns, { ['m.alpha'] = case[2] })
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        local res = runner.run(dir, ns)
        assert.are.equal(7, res.code, res.err)
        one_line(res.err)
        contains(res.err, 'ledger ' .. ns .. '/' .. runner.LEDGER .. ': the ledger cannot be trusted, so nothing runs: ' ..
          case[3] .. ": repair it with 'cozy-migrate run --only alpha' or 'cozy-migrate skip alpha --reason TEXT'")
        assert.are.equal('', res.out)
        assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion, 'nothing was written')
        assert.are.same({}, (runner.markers(ns)), 'beta did not run')
        -- plan says the same, and so does --only of another slug
        res = runner.plan(dir, ns)
        assert.are.equal(7, res.code)
        contains(res.err, case[3] .. ": repair it with 'cozy-migrate run --only alpha'")
        res = runner.run(dir, ns, '--only', 'beta')
        assert.are.equal(7, res.code, res.err)
        assert.are.same({}, (runner.markers(ns)))
        -- status shows it as unknown
        local st = runner.status(dir, ns)
        assert.are.equal('unknown', st[1].state)
        assert.are.equal('alpha', st[1].migration)
      end)
    end

    it('names every bad key on one line: the version and each record', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, { version = '99999999999999999999', ['m.alpha'] = '{not json', ['m.beta'] = '[]' })
      local res = runner.run(dir, ns)
      assert.are.equal(7, res.code, res.err)
      one_line(res.err)
      contains(res.err, 'key \'version\' is "99999999999999999999", not a plain decimal from 0 to 100000')
      contains(res.err, 'm.alpha cannot be read (not JSON)')
      contains(res.err, 'm.beta cannot be read (not a JSON object)')
      assert.are.same({}, (runner.markers(ns)))
    end)

    it('lets an explicit --only re-run rewrite an unreadable record', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, { ['m.alpha'] = '{not json' })
      local res = runner.run(dir, ns, '--only', 'alpha')
      contains(res.out, 'alpha ... ok')
      local r = runner.records(ns).alpha
      assert.are.equal('ok', r.state)
      assert.are.equal(1, r.attempts)
      local _, gen = runner.markers(ns)
      assert.are.equal(1, gen.alpha)
      assert.is_nil(runner.records(ns).beta, '--only runs nothing else')
      -- nothing unreadable is left, so the repair exits 0, and the next run runs the rest
      assert.are.equal(0, res.code, res.err)
      must(runner.run(dir, ns))
      assert.are.equal('ok', runner.records(ns).beta.state)
    end)

    it('lets --only repair one unreadable record while another stays, reporting it', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, { ['m.alpha'] = '{not json', ['m.beta'] = '{"state":"done"}' })
      local res = must(runner.run(dir, ns, '--only', 'alpha'))
      contains(res.err, "record m.beta cannot be read (unknown state 'done'); it stays as it is")
      assert.are.equal('ok', runner.records(ns).alpha.state)
      assert.are.equal(7, runner.run(dir, ns).code, 'the walk is still refused')
    end)

    it('lets skip rewrite an unreadable record', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, { ['m.alpha'] = '{not json' })
      must(h.cozy('skip', 'alpha', '--reason', 'rewritten by hand', '--dir', dir, '--namespace', ns))
      local r = runner.records(ns).alpha
      assert.are.same({ 'skipped', 'Operator', 'rewritten by hand' }, { r.state, r.reason, r.message })
      -- the rest now runs
      must(runner.run(dir, ns))
      assert.are.equal('ok', runner.records(ns).beta.state)
    end)

    for _, v in ipairs({ 'abc', '99999999999999999999', ' 3', '+2', '3\n', '0x10' }) do
      it(string.format('refuses version %q before anything runs (exit 7)', v), function()
        local ns = runner.new_ns()
        local dir = tree(ns)
        runner.make_ledger(ns, { version = v })
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        local res = runner.run(dir, ns)
        assert.are.equal(7, res.code, res.err)
        one_line(res.err)
        contains(res.err, string.format('key \'version\' is "%s", not a plain decimal from 0 to 100000', (v:gsub('\n', '\\n'))))
        assert.are.equal('', res.out)
        local cm = runner.get_ledger(ns)
        assert.are.equal(rv, cm.metadata.resourceVersion)
        assert.are.same({ version = v }, cm.data)
        assert.are.same({}, (runner.markers(ns)))
        assert.are.equal('', runner.get_lease(ns).spec.holderIdentity or '')
        assert.are.equal(7, runner.plan(dir, ns).code)
      end)
    end

    it('refuses a version above the legacy map plus one: nothing is seeded as legacy', function()
      local ns = runner.new_ns()
      local log = os.tmpname()
      local dir = fixture.tree({
        batches = { { '00000-legacy', { 'one', 'two' } } },
        scripts = { one = { shell = true, body = runner.sh_append(log) }, two = { shell = true, body = runner.sh_append(log) } },
        legacy = { { 1, 'one' }, { 2, 'two' } },
      })
      runner.make_ledger(ns, { version = '4' })
      local res = runner.run(dir, ns)
      assert.are.equal(7, res.code, res.err)
      contains(res.err, "key 'version' is 4, above the last legacy migration (2) plus one")
      assert.is_nil(runner.records(ns).one)
      -- 3 is the top: both are seeded legacy, none runs
      local ns2 = runner.new_ns()
      runner.make_ledger(ns2, { version = '3' })
      must(runner.run(dir, ns2))
      local recs = runner.records(ns2)
      assert.are.same({ 'legacy', 'legacy' }, { recs.one.state, recs.two.state })
    end)
  end)

  it('keeps migrations away from the ledger and the Lease, whatever --ledger names them', function()
    local ns = runner.new_ns()
    local function try(what)
      return string.format([[
local kube = require('kube')
local ok, err = pcall(function() %s end)
assert(not ok, 'the write went through')
print('refused: ' .. tostring(kube.is_ledger_protected(err)))
error(err)]], what)
    end
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'patch-ledger', 'delete-lease', 'other-cm' } } },
      scripts = {
        ['patch-ledger'] = { on_error = 'warn', body = try(string.format(
          "kube.patch('configmaps', 'alt', {data={['m.evil']='x', version='99'}}, {namespace=%q})", ns)) },
        ['delete-lease'] = { on_error = 'warn', body = try(string.format(
          "kube.delete('leases', 'alt-lock', {namespace=%q})", ns)) },
        -- the default name is an ordinary ConfigMap when --ledger names another
        ['other-cm'] = { body = string.format(
          "require('kube').create('configmaps', {metadata={name='cozystack-version'}, data={x='y'}}, {namespace=%q})", ns) },
      },
    })
    runner.make_ledger(ns, { version = '1' }, 'alt')
    local res = must(runner.run(dir, ns, '--ledger', 'alt', '--lease-duration', '60s'))
    contains(res.err, '[patch-ledger] refused: true')
    contains(res.err, '[delete-lease] refused: true')
    local cm = h.kubectl_json('get configmap alt -n ' .. ns)
    assert.is_nil(cm.data['m.evil'])
    assert.are.equal('1', cm.data.version)
    local r1 = json.decode(cm.data['m.patch-ledger'])
    assert.are.equal('failed', r1.state)
    contains(r1.message, 'the ledger is written by the runner', 'message')
    assert.are.equal('failed', json.decode(cm.data['m.delete-lease']).state)
    assert.are.equal('ok', json.decode(cm.data['m.other-cm']).state)
    assert.are.equal('y', h.kubectl_json('get configmap cozystack-version -n ' .. ns).data.x)
    local lease = h.kubectl_json('get lease alt-lock -n ' .. ns)
    assert.are.equal('', lease.spec.holderIdentity or '')
    assert.is_nil(runner.get_lease(ns))
  end)

  it('warns when the ledger passes 80% of the 1 MiB object limit', function()
    local function small(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'small' } } },
        scripts = { small = { body = runner.lua_marker(ns, 'small') } },
      })
    end
    local ns = runner.new_ns()
    -- an unrelated key already holding ~830 KiB: one more record crosses 80%
    runner.make_ledger(ns, { padding = string.rep('x', 830 * 1024) })
    local res = must(runner.run(small(ns), ns))
    contains(res.err, 'past 80% of the 1 MiB object limit', 'stderr')
    assert.are.equal('ok', runner.records(ns).small.state)
    local ns2 = runner.new_ns()
    runner.make_ledger(ns2, {})
    lacks(must(runner.run(small(ns2), ns2)).err, 'object limit', 'stderr of a small ledger')
  end)

  for _, reason in ipairs { 'Forbidden', 'Invalid' } do
    it('says a ledger write was denied by admission (' .. reason .. '), with the server\'s message (exit 14), ' ..
      'not "forbidden"', function()
      local cluster = require('support.cluster')
      local ns = runner.new_ns()
      runner.make_ledger(ns, {})
      must(h.kubectl('label configmap ' .. runner.LEDGER .. ' -n ' .. ns .. ' cozy-migrate.spec/frozen=' .. ns))
      local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'first' } } },
        scripts = { first = { body = runner.lua_gen_marker(ns, 'first') } } })
      local p = cluster.deny { resource = 'configmaps', selector = { ['cozy-migrate.spec/frozen'] = ns },
        message = 'the ledger is frozen by a policy', reason = reason,
        probe = { name = runner.LEDGER, namespace = ns } }
      local res = runner.run(dir, ns)
      cluster.allow(p)
      assert.are.equal(14, res.code, res.out .. res.err)
      contains(res.err, 'denied by admission or policy', 'stderr')
      contains(res.err, 'the ledger is frozen by a policy', 'stderr')
      assert.is_nil(runner.records(ns).first, 'nothing was recorded')
      -- once the policy is gone, the run records it (it runs again: it is idempotent)
      must(runner.run(dir, ns))
      assert.are.equal('ok', runner.records(ns).first.state)
    end)
  end
end)
