-- Operator control end to end against the real local kube-apiserver
-- (tools/testenv): the escape hatch (`skip SLUG --reason`, env SKIP in the
-- hook), `requires` honoured at run time, --only of a legacy slug that would
-- rewind `version`, `status` (the ledger alone, one whole record, --failed)
-- and messages that say truly what happens next. Each case reproduces what an
-- operator found; every case has its own namespace (so its own ledger and
-- Lease); helpers are in spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local must, contains, lacks, one_line = h.must, h.contains, h.lacks, h.one_line

-- The identity the testenv kubeconfig resolves to (current context testenv).
local ME = 'testenv-admin (context testenv)'

local function skip(dir, ns, ...)
  return h.cozy('skip', '--dir', dir, '--namespace', ns, ...)
end

local function status(dir, ns, ...)
  return h.cozy('status', '--dir', dir, '--namespace', ns, ...)
end

local function hdr(on_error, requires)
  return '-- cozystack-migration: on-error=' .. on_error ..
    (requires and ('\n-- cozystack-migration: requires=' .. requires) or '')
end

describe('#e2e operator control', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  describe('the escape hatch', function()
    -- A failing abort migration `stuck` in front of `later`: every run stops.
    local function tree(ns)
      return fixture.tree({
        batches = { { '00001-v1.0.0', { 'first', 'stuck', 'later', 'needs-stuck', 'rev' } } },
        scripts = {
          first = { body = runner.lua_marker(ns, 'first') },
          stuck = { body = runner.lua_gen_marker(ns, 'stuck') .. "\nerror('the operator cannot fix this today')" },
          later = { body = runner.lua_marker(ns, 'later') },
          ['needs-stuck'] = { header = hdr('warn', 'stuck'), body = runner.lua_marker(ns, 'needs-stuck') },
          rev = {},
        },
        revoked = { 'rev' },
      })
    end

    it('skip SLUG --reason records it skipped by the operator, under the lock; it is no longer pending', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, {})
      local res = runner.run(dir, ns)
      assert.are.equal(1, res.code, 'one failing migration blocks every upgrade')
      res = must(skip(dir, ns, 'stuck', '--reason', 'CRD gone upstream, see #1234'))
      contains(res.out, 'stuck ... skipped by the operator, recorded: CRD gone upstream, see #1234')
      local r = runner.records(ns).stuck
      assert.are.same({ 'skipped', 'Operator', 'CRD gone upstream, see #1234', ME, 0, '00001-v1.0.0', 'pre-apply' },
        { r.state, r.reason, r.message, r.by, r.attempts, r.batch, r.tier })
      assert.matches('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$', r.at)
      -- it took the runner lock and gave it back
      local lease = runner.get_lease(ns)
      assert.is_not_nil(lease, 'skip takes the runner lock')
      assert.are.equal('', lease.spec.holderIdentity or '')
      -- the next run goes past it; what requires it is blocked, not run
      res = must(runner.run(dir, ns))
      lacks(res.out, 'stuck ... running')
      contains(res.out, 'later ... ok')
      contains(res.out, 'needs-stuck ... NOT RUN (warn): blocked: requires stuck (skipped)')
      local recs = runner.records(ns)
      assert.are.equal('ok', recs.later.state)
      assert.is_nil(recs['needs-stuck'], 'a blocked migration records nothing')
      local set, gen = runner.markers(ns)
      assert.are.equal(1, gen.stuck, 'the skipped slug did not run again')
      assert.is_nil(set['ran-needs-stuck'])
      res = must(runner.plan(dir, ns))
      assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +stuck +recorded skipped', res.out)
      assert.matches('\nblocked +pre%-apply +00001%-v1%.0%.0 +needs%-stuck +blocked: requires stuck %(skipped%)', res.out)
      -- skipping again with the same reason writes nothing
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      res = must(skip(dir, ns, 'stuck', '--reason', 'CRD gone upstream, see #1234'))
      contains(res.out, 'stuck is already recorded skipped')
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    end)

    it('--only runs a skipped slug later and rewrites its record', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'fixed' } } },
        scripts = { fixed = { body = runner.lua_gen_marker(ns, 'fixed') } },
      })
      runner.make_ledger(ns, { ['m.fixed'] = json.encode({ state = 'failed', attempts = 2, reason = 'ScriptError' }) })
      must(skip(dir, ns, 'fixed', '--reason', 'later'))
      assert.are.equal(2, runner.records(ns).fixed.attempts, 'a skip keeps the count of executions')
      local res = must(runner.run(dir, ns, '--only', 'fixed'))
      contains(res.out, 'fixed ... running (re-run requested (--only), was skipped)')
      local r = runner.records(ns).fixed
      assert.are.same({ 'ok', 3 }, { r.state, r.attempts })
      assert.is_nil(r.by)
      assert.is_nil(r.message)
    end)

    for _, case in ipairs({
      { 'a slug absent from the image', 'ghost', {}, 2, 'skip ghost: no such migration in this image' },
      { 'a revoked slug', 'rev', {}, 2, 'skip rev: the slug is revoked' },
      { 'a slug recorded ok', 'first', { ['m.first'] = '{"state":"ok","attempts":1}' }, 11,
        'skip first: it is recorded ok; a migration that ran (or counts as run) is never skipped' },
    }) do
      it('refuses ' .. case[1] .. ' with exit ' .. case[4] .. ', one line, writing nothing', function()
        local ns = runner.new_ns()
        local dir = tree(ns)
        runner.make_ledger(ns, case[3])
        local rv = runner.get_ledger(ns).metadata.resourceVersion
        local res = skip(dir, ns, case[2], '--reason', 'x')
        assert.are.equal(case[4], res.code, res.err)
        one_line(res.err)
        contains(res.err, case[5])
        assert.are.equal('', res.out)
        assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
      end)
    end

    it('needs a reason, and with --dry-run says what it would record, writing nothing', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, {})
      local res = skip(dir, ns, 'stuck')
      assert.are.equal(2, res.code)
      contains(res.err, '--reason TEXT is required')
      res = skip(dir, ns, 'stuck', '--reason', '')
      assert.are.equal(2, res.code)
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      res = must(skip(dir, ns, 'stuck', '--reason', 'try', '--dry-run'))
      contains(res.out, 'stuck ... would record skipped (dry run): try')
      lacks(res.out, 'recorded')
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
      assert.is_nil(runner.get_lease(ns), 'a dry run takes no lock')
    end)

    it('waits for another runner\'s lock and gives up with exit 5', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, {})
      local now = os.date('!%Y-%m-%dT%H:%M:%S.000000Z')
      h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
        metadata = { name = runner.LEASE, namespace = ns },
        spec = { holderIdentity = 'other-runner', leaseDurationSeconds = 300, renewTime = now, acquireTime = now } })
      local res = skip(dir, ns, 'stuck', '--reason', 'x', '--lock-timeout', '1s')
      assert.are.equal(5, res.code, res.err)
      contains(res.err, 'other-runner')
      assert.is_nil(runner.records(ns).stuck)
    end)

    it('in the hook: SKIP=slug[,slug] with SKIP_REASON records each skipped, then runs the rest', function()
      local ns = runner.new_ns()
      local dir = tree(ns)
      runner.make_ledger(ns, {})
      local env = { env = { SKIP = 'stuck, needs-stuck', SKIP_REASON = 'upgrade now, fix in 1.8' } }
      local res = must(runner.run(dir, ns, env))
      contains(res.out, 'stuck ... skipped by the operator, recorded: upgrade now, fix in 1.8')
      contains(res.out, 'needs-stuck ... skipped by the operator, recorded')
      contains(res.out, 'later ... ok')
      local recs = runner.records(ns)
      for _, slug in ipairs({ 'stuck', 'needs-stuck' }) do
        assert.are.same({ 'skipped', 'Operator', 'upgrade now, fix in 1.8', ME },
          { recs[slug].state, recs[slug].reason, recs[slug].message, recs[slug].by }, slug)
      end
      assert.are.same({ 'ok', 'ok' }, { recs.first.state, recs.later.state })
      local _, gen = runner.markers(ns)
      assert.is_nil(gen.stuck)
      -- the value left in the chart: the next upgrade writes nothing again
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      res = must(runner.run(dir, ns, env))
      contains(res.out, 'nothing to run')
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
      -- refused, before anything runs: without a reason, a bad slug, a slug recorded ok
      res = runner.run(dir, ns, { env = { SKIP = 'stuck' } })
      assert.are.equal(2, res.code)
      contains(res.err, 'SKIP=stuck needs SKIP_REASON')
      res = runner.run(dir, ns, { env = { SKIP = 'Stuck!', SKIP_REASON = 'x' } })
      assert.are.equal(2, res.code)
      contains(res.err, "SKIP: 'Stuck!' is not a valid slug")
      res = runner.run(dir, ns, { env = { SKIP = 'first', SKIP_REASON = 'x' } })
      assert.are.equal(11, res.code)
      one_line(res.err)
      contains(res.err, 'skip first: it is recorded ok')
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    end)

    it('the Helm values migrations.skip and skipReason set SKIP and SKIP_REASON in the hook Job', function()
      local yaml = require('yaml')
      local values = yaml.decode(h.slurp(h.root .. '/deploy/helm/values.yaml'))
      assert.are.same({}, values.migrations.skip)
      assert.are.equal('', values.migrations.skipReason)
      -- rendered by real helm (spec/release/deploy_spec.lua has the rest)
      must(h.run(h.q(h.testenv) .. ' build helm'))
      local out = must(h.run(string.format("%s template x %s --show-only templates/migrations-hook.yaml " ..
        "--set 'migrations.skip={first,second}' --set migrations.skipReason=why",
        h.q(h.root .. '/build/testenv/bin/helm'), h.q(h.root .. '/deploy/helm')))).out
      contains(out, '- name: SKIP\n          value: first,second')
      contains(out, '- name: SKIP_REASON\n          value: why')
      -- the hook's entrypoint is `run`, which reads them
      contains(h.slurp(h.root .. '/Dockerfile'), 'ENTRYPOINT ["/usr/bin/cozy-migrate", "run"]')
    end)
  end)

  describe('requires at run time', function()
    it('does not run a slug whose required slug failed (warn) earlier in the same run; an abort one stops the run', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'base', 'soft', 'hard', 'other' } } },
        scripts = {
          base = { on_error = 'warn', body = "error('base broke')" },
          soft = { header = hdr('warn', 'base'), body = runner.lua_marker(ns, 'soft') },
          hard = { header = hdr('abort', 'base'), body = runner.lua_marker(ns, 'hard') },
          other = { body = runner.lua_marker(ns, 'other') },
        },
      })
      runner.make_ledger(ns, {})
      -- the plan cannot know base will fail: it plans all four
      local res = must(runner.plan(dir, ns))
      contains(res.out, '4 to run for the pre-apply tier:')
      res = runner.run(dir, ns)
      assert.are.equal(1, res.code, res.err)
      contains(res.out, 'base ... FAILED (warn)')
      contains(res.out, 'soft ... NOT RUN (warn): blocked: requires base (failed in this run)')
      contains(res.out, 'hard ... NOT RUN (abort): blocked: requires base (failed in this run)')
      contains(res.err, 'hard is blocked: requires base (failed in this run) and its on-error is abort: stopping; ' ..
        'nothing is recorded, so it runs again next time')
      lacks(res.out, 'other')
      local recs = runner.records(ns)
      assert.are.equal('failed', recs.base.state)
      assert.is_nil(recs.soft)
      assert.is_nil(recs.hard)
      assert.is_nil(recs.other)
      assert.are.same({}, (runner.markers(ns)))
      -- next time the plan says why, and the run stops at hard again
      res = must(runner.plan(dir, ns))
      contains(res.out, '1 to run for the pre-apply tier, 2 blocked:')
      assert.matches('\nblocked +pre%-apply +00001%-v1%.0%.0 +soft +blocked: requires base %(failed%)', res.out)
      assert.matches('\nblocked +pre%-apply +00001%-v1%.0%.0 +hard +blocked: requires base %(failed%)', res.out)
      res = runner.run(dir, ns)
      assert.are.equal(1, res.code)
      assert.is_nil(runner.records(ns).other)
      -- --only of a blocked slug is refused to run, exit 1
      res = runner.run(dir, ns, '--only', 'soft')
      assert.are.equal(1, res.code)
      contains(res.out, 'soft ... NOT RUN (warn): blocked: requires base (failed)')
      assert.is_nil(runner.records(ns).soft)
      local evs = runner.events(ns)
      local blocked = 0
      for _, e in ipairs(evs) do if e.reason == 'MigrationBlocked' then blocked = blocked + 1 end end
      assert.is_true(blocked >= 3)
    end)

    it('runs a slug whose required slug runs ok earlier in the same run', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'base' } }, { '00002-v1.1.0', { 'next' } } },
        scripts = {
          base = { body = runner.lua_marker(ns, 'base') },
          next = { header = hdr('abort', 'base'), body = runner.lua_marker(ns, 'next') },
        },
      })
      runner.make_ledger(ns, {})
      must(runner.run(dir, ns))
      assert.are.same({ ['ran-base'] = true, ['ran-next'] = true }, (runner.markers(ns)))
    end)

    it('refuses at load time (exit 3) a requires naming itself, a revoked slug or the other tier', function()
      for _, case in ipairs({
        { { a = { header = hdr('abort', 'a') } }, nil, "a.lua: requires 'a', itself" },
        { { a = {}, b = { header = hdr('abort', 'a') } }, { 'a' }, "b.lua: requires 'a', which is revoked and never runs" },
        { { a = { tier = 'background' }, b = { header = hdr('abort', 'a') } }, nil,
          "b.lua: requires 'a', which is in the background tier, not pre-apply" },
      }) do
        local ns = runner.new_ns()
        local batch = case[1].b and { 'a', 'b' } or { 'a' }
        local dir = fixture.tree({ batches = { { '00001-v1.0.0', batch } }, scripts = case[1], revoked = case[2] })
        runner.make_ledger(ns, {})
        local res = runner.run(dir, ns)
        assert.are.equal(3, res.code, res.err)
        one_line(res.err)
        contains(res.err, case[3])
        assert.is_nil(runner.get_lease(ns))
      end
    end)
  end)

  describe('--only of a legacy slug', function()
    it('needs --force when the script would stamp an older version, and says so', function()
      local ns = runner.new_ns()
      -- as the platform's script 1 does: it stamps version 2 with kubectl apply
      local stamp = string.format('kubectl -n "$NAMESPACE" create configmap %s --from-literal=version=2 ' ..
        '--dry-run=client -o yaml | kubectl apply -f - >/dev/null', runner.LEDGER)
      local dir = fixture.tree({
        batches = { { '00000-legacy', { 'one', 'two', 'three' } } },
        scripts = { one = { shell = true, body = stamp }, two = { shell = true }, three = { shell = true } },
        legacy = { { 1, 'one' }, { 2, 'two' }, { 3, 'three' } },
      })
      runner.make_ledger(ns, { version = '4' })
      local env = { env = { PATH = h.root .. '/build/testenv/bin:' .. os.getenv('PATH') } }
      must(runner.run(dir, ns, env))
      assert.are.equal('legacy', runner.records(ns).one.state)
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      local res = runner.run(dir, ns, '--only', 'one', env)
      assert.are.equal(11, res.code, res.err)
      one_line(res.err)
      contains(res.err, "--only one: legacy migration 1 stamps version 2 when it runs, older than the ledger's 4 " ..
        '(older tooling reads it); add --force to run it anyway')
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
      assert.are.equal(11, runner.plan(dir, ns, '--only', 'one').code)
      res = must(runner.run(dir, ns, '--only', 'one', '--force', env))
      contains(res.out, 'one ... ok')
      local recs, _, cm = runner.records(ns)
      assert.are.equal('2', cm.data.version, 'what --force warned about')
      assert.are.same({ 'ok', 1 }, { recs.one.state, recs.one.attempts })
      assert.are.same({ 'legacy', 'legacy' }, { recs.two.state, recs.three.state }, 'the records survive the apply')
    end)
  end)

  describe('status', function()
    local function at(t) return os.date('!%Y-%m-%dT%H:%M:%SZ', t) end

    it('reads the ledger alone without a tree: no warning, ordered by time, checksums n/a', function()
      local ns = runner.new_ns()
      local t = os.time()
      runner.make_ledger(ns, fixture.ledger({
        zeta = { state = 'ok', at = at(t - 300), attempts = 1, batch = '00001-v1.0.0', tier = 'pre-apply', sha256 = 'ab' },
        alpha = { state = 'failed', at = at(t - 100), attempts = 1, reason = 'ScriptError', message = 'boom' },
        mid = { state = 'legacy', at = at(t - 200) },
      }, 3))
      local empty = h.tmpdir()
      local res = must(status(empty, ns))
      assert.are.equal('', res.err, 'no tree is not a problem worth a warning')
      local rows = {}
      for line in res.out:gmatch('[^\n]+') do rows[#rows + 1] = line end
      assert.matches('^MIGRATION', rows[1])
      assert.matches('^zeta .* n/a$', rows[2])
      assert.matches('^mid ', rows[3])
      assert.matches('^alpha ', rows[4])
      local st = json.decode(must(status(empty, ns, '-o', 'json')).out)
      assert.are.same({ 'zeta', 'mid', 'alpha' }, { st[1].migration, st[2].migration, st[3].migration })
      assert.are.equal('n/a', st[1].checksum)
      -- without --dir: --local reads "." (here a directory with no tree), and
      -- the default (the binary's own checkout or image) warns of nothing either
      res = must(h.run(string.format('cd %s && %s status --local --namespace %s -o json', h.q(empty), h.q(h.bin), ns)))
      assert.are.equal('', res.err)
      st = json.decode(res.out)
      assert.are.same({ 'zeta', 'mid', 'alpha' }, { st[1].migration, st[2].migration, st[3].migration })
      res = must(h.cozy('status', '--namespace', ns))
      assert.are.equal('', res.err)
      -- a tree that is there but broken is said, and the ledger still shown
      local broken = fixture.tree({ batches = { { '00001-v1.0.0', { 'ghost' } } } })
      res = must(status(broken, ns))
      contains(res.err, "'ghost' is neither shipped nor retired (showing the ledger alone)")
      contains(res.out, 'zeta')
    end)

    it('status SLUG prints the whole record: message, output tail, journal', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'noisy', 'quiet' } } },
        scripts = {
          noisy = { on_error = 'warn', body = "print('line one')\nprint('line two')\nerror('it went wrong')" },
          quiet = { tier = 'background' },
        },
      })
      runner.make_ledger(ns, {})
      must(runner.run(dir, ns))
      local res = must(status(dir, ns, 'noisy'))
      contains(res.out, 'migration:   noisy')
      contains(res.out, 'state:       failed')
      contains(res.out, 'reason:      ScriptError')
      contains(res.out, 'message:     ')
      contains(res.out, 'it went wrong')
      contains(res.out, 'output:\n  line one\n  line two\n')
      contains(res.out, '(checksum match)')
      local j = json.decode(must(status(dir, ns, 'noisy', '-o', 'json')).out)
      assert.are.same({ 'noisy', 'failed', 'ScriptError', 'match' }, { j.migration, j.state, j.reason, j.checksum })
      assert.matches('line one\nline two\n', j.output)
      -- a journal, when the record has one
      local rec = runner.records(ns).noisy
      rec.journal = { writes = 1, changed = 1, entries = { { verb = 'patch', resource = 'configmaps',
        namespace = 'x', name = 'y', status = 200, changed = true } } }
      h.must(h.kubectl(string.format('patch configmap %s -n %s --type merge -p %s', runner.LEDGER, ns,
        h.q(json.encode({ data = { ['m.noisy'] = json.encode(rec) } })))))
      res = must(status(dir, ns, 'noisy'))
      contains(res.out, 'journal:\n')
      contains(res.out, '"name":\t"y"')
      j = json.decode(must(status(dir, ns, 'noisy', '-o', 'json')).out)
      assert.are.equal('patch', j.journal.entries[1].verb)
      -- a pending slug, and one nobody knows
      contains(must(status(dir, ns, 'quiet')).out, 'record:      none')
      res = status(dir, ns, 'ghost')
      assert.are.equal(1, res.code)
      contains(res.err, 'ghost: no record in the ledger')
    end)

    it('status --failed lists only what needs a person and exits 1 when there is any', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'good', 'bad', 'after-bad', 'fine', 'garbled' } } },
        scripts = {
          good = {}, fine = {}, garbled = {},
          bad = { on_error = 'warn' },
          ['after-bad'] = { header = hdr('warn', 'bad') },
        },
      })
      runner.make_ledger(ns, fixture.ledger({ good = { state = 'ok', attempts = 1 } }))
      local res = must(status(dir, ns, '--failed'))
      assert.are.equal(1, select(2, res.out:gsub('\n', '')), 'only the header: ' .. res.out)
      h.must(h.kubectl(string.format('patch configmap %s -n %s --type merge -p %s', runner.LEDGER, ns,
        h.q(json.encode({ data = {
          ['m.bad'] = json.encode({ state = 'failed', attempts = 1, reason = 'ScriptError', message = 'it broke' }),
          ['m.fine'] = json.encode({ state = 'skipped', reason = 'Operator', message = 'x', by = 'me' }),
          ['m.garbled'] = '{not json' } })))))
      res = status(dir, ns, '--failed')
      assert.are.equal(1, res.code, res.err)
      assert.matches('\nbad +failed .*ScriptError: it broke', res.out)
      assert.matches('\nafter%-bad +blocked .*blocked: requires bad %(failed%)', res.out)
      assert.matches("\ngarbled +unknown .*cannot be read %(not JSON%): repair it with 'cozy%-migrate run %-%-only garbled' or 'cozy%-migrate skip garbled %-%-reason TEXT'", res.out)
      lacks(res.out, '\ngood ')
      lacks(res.out, '\nfine ')
      local st = json.decode(status(dir, ns, '--failed', '-o', 'json').out)
      assert.are.same({ 'bad', 'after-bad', 'garbled' }, { st[1].migration, st[2].migration, st[3].migration })
      assert.are.equal('blocked: requires bad (failed)', st[2].blocked)
      -- the full table shows the pending slug as blocked too
      local all = runner.status(dir, ns)
      assert.are.equal('blocked', all[3].state)
      -- a bad version is a thing a person must fix
      local ns2 = runner.new_ns()
      runner.make_ledger(ns2, { version = 'x1' })
      res = status(h.tmpdir(), ns2, '--failed')
      assert.are.equal(1, res.code)
      contains(res.err, 'key \'version\' is "x1", not a plain decimal')
    end)
  end)

  describe('messages say truly what happens next', function()
    it('a dry run says what it would record for a revoked slug', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'rev', 'ok-one' } } },
        scripts = { rev = {}, ['ok-one'] = { body = runner.lua_marker(ns, 'ok-one') } },
        revoked = { 'rev' },
      })
      runner.make_ledger(ns, {})
      local res = must(runner.run(dir, ns, '--dry-run'))
      contains(res.out, 'rev ... revoked, would record revoked (dry run)')
      lacks(res.out, 'revoked, recorded')
      assert.is_nil(runner.records(ns).rev)
      res = must(runner.run(dir, ns))
      contains(res.out, 'rev ... revoked, recorded')
      assert.are.equal('revoked', runner.records(ns).rev.state)
    end)

    it('a fresh install with --only says it runs that one', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
        scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') }, beta = { body = runner.lua_marker(ns, 'beta') } },
      })
      local res = must(runner.run(dir, ns, '--only', 'alpha'))
      contains(res.out, 'recorded 2 migrations as skipped-fresh-install; running only --only alpha')
      lacks(res.out, 'nothing to run')
      assert.are.same({ ['ran-alpha'] = true }, (runner.markers(ns)))
      assert.are.equal('ok', runner.records(ns).alpha.state)
    end)

    it('a failed --only re-run of an ok slug says the ok record stays, and it does', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'flaky' } } },
        scripts = { flaky = { body = "error('not today')" } },
      })
      local before = { state = 'ok', attempts = 1, at = '2026-01-01T00:00:00Z' }
      runner.make_ledger(ns, fixture.ledger({ flaky = before }))
      local res = runner.run(dir, ns, '--only', 'flaky')
      assert.are.equal(1, res.code)
      one_line(res.err)
      contains(res.err, 'flaky failed and its on-error is abort: stopping; its earlier record (ok) is left as it was')
      lacks(res.err, 'runs again next time')
      assert.are.same(before, runner.records(ns).flaky)
      -- without a record, the old message is the true one
      local ns2 = runner.new_ns()
      runner.make_ledger(ns2, {})
      res = runner.run(dir, ns2)
      contains(res.err, 'flaky failed and its on-error is abort: stopping; nothing is recorded, so it runs again next time')
    end)
  end)
end)
