-- Executing migrations end to end against the real local kube-apiserver
-- (tools/testenv): Lua and shell migrations that succeed, fail with
-- on-error=abort or warn, crash or time out (with their children), re-runs
-- with --only, the background tier's retries, dry run, and what a failure's
-- record keeps of its message and output. Every case has its own namespace;
-- helpers are in spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local must, contains, lacks, has, sleep = h.must, h.contains, h.lacks, h.has, h.sleep
local eventually, alive = h.eventually, h.alive

describe('#e2e the runner', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('stops at an on-error=abort failure, records nothing for it, and attempts it again next time', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'first', 'boom', 'after' } } },
      scripts = {
        first = { body = runner.lua_marker(ns, 'first') },
        boom = { on_error = 'abort', body = runner.lua_gen_marker(ns, 'boom') .. "\nerror('boom exploded')" },
        after = { body = runner.lua_marker(ns, 'after') },
      },
    })
    runner.make_ledger(ns, {})
    local res = runner.run(dir, ns)
    assert.are.equal(1, res.code, res.err)
    contains(res.out, 'boom ... FAILED (abort)')
    contains(res.out, 'boom exploded')
    contains(res.err, 'boom failed and its on-error is abort')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs.first.state)
    assert.is_nil(recs.boom)
    assert.is_nil(recs.after)
    local set, gen = runner.markers(ns)
    assert.is_true(set['ran-first'])
    assert.is_nil(set['ran-after'])
    assert.are.equal(1, gen.boom)

    res = runner.run(dir, ns)
    assert.are.equal(1, res.code, res.err)
    lacks(res.out, 'first ... running')
    contains(res.out, 'boom ... running')
    recs = runner.records(ns)
    assert.is_nil(recs.boom)
    assert.is_nil(recs.after)
    assert.are.equal(1, recs.first.attempts)
    set, gen = runner.markers(ns)
    assert.are.equal(2, gen.boom)
    assert.is_nil(set['ran-after'])
  end)

  it('records an on-error=warn failure with reason, message and output, and goes on', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'warny', 'later' } } },
      scripts = {
        warny = { on_error = 'warn', body = "for i = 1, 30 do print('line ' .. i) end\nerror('warned failure')" },
        later = { body = runner.lua_marker(ns, 'later') },
      },
    })
    runner.make_ledger(ns, {})
    local res = must(runner.run(dir, ns))
    contains(res.out, 'warny ... FAILED (warn)')
    local r = runner.records(ns).warny
    assert.are.equal('failed', r.state)
    assert.are.equal('ScriptError', r.reason)
    contains(r.message, 'warned failure', 'message')
    contains(r.output, 'line 30\n', 'output')
    contains(r.output, 'line 11\n', 'output')
    lacks(r.output, 'line 5\n', 'output (only the last lines)')
    assert.are.equal(1, r.attempts)
    assert.are.equal('pre-apply', r.tier)
    assert.are.equal(64, #r.sha256)
    local later = runner.records(ns).later
    assert.are.equal('ok', later.state)
    assert.is_true(runner.markers(ns)['ran-later'])
    -- a failed pre-apply warn migration is not retried
    res = must(runner.run(dir, ns))
    contains(res.out, 'nothing to run')
    assert.are.equal(1, runner.records(ns).warny.attempts)
  end)

  it('retries a failed background migration up to --max-attempts, then leaves it', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'pre', 'bg-fail', 'bg-ok' } } },
      scripts = {
        pre = { body = runner.lua_marker(ns, 'pre') },
        ['bg-fail'] = { tier = 'background', on_error = 'warn',
          body = runner.lua_gen_marker(ns, 'bg-fail') .. "\nerror('still broken')" },
        ['bg-ok'] = { tier = 'background', body = runner.lua_gen_marker(ns, 'bg-ok') },
      },
    })
    runner.make_ledger(ns, {})
    for i = 1, 3 do
      local res = must(runner.run(dir, ns, '--tier', 'background'))
      contains(res.out, 'bg-fail ... FAILED (warn)')
      local r = runner.records(ns)['bg-fail']
      assert.are.equal('failed', r.state)
      assert.are.equal(i, r.attempts)
      assert.are.equal('background', r.tier)
    end
    local res = must(runner.run(dir, ns, '--tier', 'background'))
    contains(res.out, 'nothing to run for the background tier')
    assert.are.equal(3, runner.records(ns)['bg-fail'].attempts)
    local _, gen = runner.markers(ns)
    assert.are.equal(3, gen['bg-fail'])
    assert.are.equal(1, gen['bg-ok'])
    assert.are.equal(1, runner.records(ns)['bg-ok'].attempts)

    -- a larger bound lets it run once more; a bound already reached does not
    res = must(runner.run(dir, ns, '--tier', 'background', '--max-attempts', '4'))
    contains(res.out, 'bg-fail ... running (retry 4 of 4)')
    assert.are.equal(4, runner.records(ns)['bg-fail'].attempts)
    res = must(runner.run(dir, ns, '--tier', 'background', '--max-attempts', '4'))
    contains(res.out, 'nothing to run')
    res = must(runner.run(dir, ns, '--tier', 'background', '--max-attempts', '2'))
    contains(res.out, 'nothing to run')
    assert.are.equal(4, runner.records(ns)['bg-fail'].attempts)
    _, gen = runner.markers(ns)
    assert.are.equal(4, gen['bg-fail'])
    -- the pre-apply tier was never touched by the background runs
    assert.is_nil(runner.records(ns).pre)
    assert.is_nil(runner.markers(ns)['ran-pre'])
  end)

  it('with --only re-runs a recorded slug (also from env ONLY) and refuses revoked or absent slugs', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'rev', 'beta' } } },
      scripts = {
        alpha = { body = runner.lua_gen_marker(ns, 'alpha') },
        rev = { body = runner.lua_marker(ns, 'rev') },
        beta = { body = runner.lua_gen_marker(ns, 'beta') },
      },
      revoked = { 'rev' },
    })
    runner.make_ledger(ns, {})
    must(runner.run(dir, ns))
    local first = runner.records(ns)
    assert.are.equal(1, first.alpha.attempts)
    sleep(1.1) -- `at` has a one-second resolution
    local res = must(runner.run(dir, ns, '--only', 'alpha'))
    contains(res.out, 'alpha ... running (re-run requested (--only), was ok)')
    lacks(res.out, 'beta')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs.alpha.state)
    assert.are.equal(2, recs.alpha.attempts)
    assert.are_not.equal(first.alpha.at, recs.alpha.at)
    assert.are.same(first.beta, recs.beta)
    must(runner.run(dir, ns, { env = { ONLY = 'alpha' } }))
    assert.are.equal(3, runner.records(ns).alpha.attempts)
    local _, gen = runner.markers(ns)
    assert.are.equal(3, gen.alpha)
    assert.are.equal(1, gen.beta)

    local rv = runner.get_ledger(ns).metadata.resourceVersion
    res = runner.run(dir, ns, '--only', 'rev')
    assert.are.equal(2, res.code, res.err)
    contains(res.err, '--only rev: the slug is revoked')
    res = runner.run(dir, ns, '--only', 'nope')
    assert.are.equal(2, res.code, res.err)
    contains(res.err, '--only nope: no such migration in this image')
    res = runner.run(dir, ns, { env = { ONLY = 'rev' } })
    assert.are.equal(2, res.code, res.err)
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    assert.is_nil(runner.markers(ns)['ran-rev'])
  end)

  describe('times out migrations', function()
    it('a shell one with its children at the header timeout, and a spinning Lua one', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'sleeper', 'spin', 'after' } } },
        scripts = {
          sleeper = { shell = true, on_error = 'warn', timeout = '2s',
                      body = 'sleep 1000.4242 &\nsleep 1000.4243\necho never' },
          spin = { on_error = 'warn', timeout = '1s', body = 'while true do end' },
          after = { body = runner.lua_marker(ns, 'after') },
        },
      })
      runner.make_ledger(ns, {})
      local t0 = os.time()
      local res = must(runner.run(dir, ns, '--grace', '1s'))
      assert.is_true(os.time() - t0 < 15, 'took ' .. (os.time() - t0) .. 's')
      local recs = runner.records(ns)
      assert.are.equal('failed', recs.sleeper.state)
      assert.are.equal('Timeout', recs.sleeper.reason)
      contains(recs.sleeper.message, 'timed out after 2s', 'message')
      assert.is_true(recs.sleeper.duration_ms >= 1900, tostring(recs.sleeper.duration_ms))
      assert.are.equal('failed', recs.spin.state)
      assert.are.equal('Timeout', recs.spin.reason)
      contains(recs.spin.message, 'timed out after 1s', 'message')
      assert.are.equal('ok', recs.after.state)
      lacks(res.err, 'never')
      assert.is_true(eventually(1.5, function()
        return not alive('sleep 1000.4242') and not alive('sleep 1000.4243')
      end), 'a child of the timed-out migration survived: ' .. select(2, alive('sleep 1000.424')))
    end)

    it('at --timeout rather than the header timeout', function()
      local ns = runner.new_ns()
      local dir = fixture.tree({
        batches = { { '00001-v1.0.0', { 'slow' } } },
        scripts = { slow = { shell = true, on_error = 'warn', timeout = '10m', body = 'sleep 1000.4244' } },
      })
      runner.make_ledger(ns, {})
      local t0 = os.time()
      must(runner.run(dir, ns, '--timeout', '1s', '--grace', '1s'))
      assert.is_true(os.time() - t0 < 10)
      local r = runner.records(ns).slow
      assert.are.equal('Timeout', r.reason)
      contains(r.message, 'timed out after 1s', 'message')
      assert.is_true(eventually(1.5, function() return not alive('sleep 1000.4244') end))
    end)
  end)

  it('records a crashing child as failed with reason Crashed', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'crasher', 'after' } } },
      scripts = {
        crasher = { shell = true, on_error = 'warn', body = 'echo about to crash\nkill -SEGV $$' },
        after = { body = runner.lua_marker(ns, 'after') },
      },
    })
    runner.make_ledger(ns, {})
    local res = must(runner.run(dir, ns))
    contains(res.out, 'crasher ... FAILED (warn)')
    local r = runner.records(ns).crasher
    assert.are.equal('failed', r.state)
    assert.are.equal('Crashed', r.reason)
    contains(r.message, 'SIGSEGV', 'message')
    contains(r.output, 'about to crash', 'output')
    assert.are.equal(1, r.attempts)
    assert.are.equal('ok', runner.records(ns).after.state)
  end)

  it('in dry run sends Lua and shell writes with dryRun, records nothing, takes no lease', function()
    local ns = runner.new_ns()
    local log = os.tmpname()
    os.remove(log)
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'lua-one', 'sh-one' } } },
      scripts = {
        ['lua-one'] = { body = string.format(
          "local c = require('kube').create('configmaps', {metadata={name='ran-lua-one'}}, {namespace=%q})\n" ..
          "print('server returned ' .. c.metadata.name .. ' uid=' .. tostring(c.metadata.uid))", ns) },
        ['sh-one'] = { shell = true, body = runner.sh_append(log) },
      },
    })
    runner.make_ledger(ns, { version = '1' })
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = must(runner.run(dir, ns, '--dry-run'))
    contains(res.out, 'lua-one ... ok (dry run)')
    contains(res.out, 'sh-one ... ok (dry run)')
    contains(res.err, '[lua-one] server returned ran-lua-one uid=', 'the apiserver answered the create')
    assert.is_nil(runner.markers(ns)['ran-lua-one'], 'a dry-run create persisted')
    assert.is_not_nil(io.open(log), 'the shell migration ran (its writes to the cluster as dry runs)')
    os.remove(log)
    local cm = runner.get_ledger(ns)
    assert.are.equal(rv, cm.metadata.resourceVersion)
    assert.are.same({ version = '1' }, cm.data)
    assert.is_nil(runner.get_lease(ns))
    assert.are.same({}, runner.events(ns))

    -- DRY_RUN=1 in the environment does the same; and a fresh install in
    -- dry run creates no ledger
    res = must(runner.run(dir, ns, { env = { DRY_RUN = '1' } }))
    contains(res.out, 'lua-one ... ok (dry run)')
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    local ns2 = runner.new_ns()
    res = must(runner.run(dir, ns2, '--dry-run'))
    contains(res.out, 'fresh install: would create the ledger ' .. ns2 .. '/' .. runner.LEDGER)
    assert.is_nil(runner.get_ledger(ns2))
    assert.is_nil(runner.get_lease(ns2))
  end)

  it('stores a long non-ASCII failure message as valid text (no cut UTF-8 sequence)', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'accents' } } },
      -- 2-byte characters after an even-length prefix: a cut after 1023
      -- bytes lands inside one
      scripts = { accents = { on_error = 'warn', body = "error('xy' .. string.rep('\u{e9}', 700), 0)" } },
    })
    runner.make_ledger(ns, {})
    must(runner.run(dir, ns))
    local _, raw = runner.records(ns)
    local r = json.decode(raw.accents)
    assert.are.equal('failed', r.state)
    contains(r.message, 'xy\u{e9}\u{e9}', 'message')
    if has(raw.accents, '\u{fffd}') then
      pending('bug: a failure message longer than its buffer (child.c run_lua_child err[1024], ' ..
        'child_result.message[1024], record.message[1024]) is cut mid UTF-8 sequence; the ' ..
        'apiserver stores the stray byte as U+FFFD')
    end
    lacks(raw.accents, '\u{fffd}', 'record')
  end)

  it("gives a shell migration the old hook's environment, what --pass-env names, and nothing else", function()
    local ns = runner.new_ns()
    local out = h.tmpdir() .. '/env'
    local dir = fixture.tree({
      batches = { { '00000-legacy', { 'old-one', 'old-two' } } },
      scripts = { ['old-one'] = { shell = true, body = 'true' },
                  ['old-two'] = { shell = true, body = 'env | sort >' .. h.q(out) } },
      legacy = { { 1, 'old-one' }, { 2, 'old-two' } },
    })
    runner.make_ledger(ns, { version = '2' })
    local res = runner.run(dir, ns, '--pass-env', 'SKIP_BACKUP', { env = { SKIP_BACKUP = 'yes', SECRET_TOKEN = 'x',
      PASS_ENV = 'ALSO' , ALSO = 'too' } })
    assert.are.equal(0, res.code, res.err)
    local env = {}
    for k, v in h.slurp(out):gmatch('([%w_]+)=([^\n]*)') do env[k] = v end
    assert.are.equal(ns, env.NAMESPACE)
    assert.are.equal('old-two', env.MIGRATION_SLUG)
    assert.are.equal('2', env.CURRENT_VERSION)
    assert.are.equal('3', env.TARGET_VERSION)
    assert.are.equal('yes', env.SKIP_BACKUP)
    assert.is_nil(env.SECRET_TOKEN, 'a variable nobody passed reached the script')
    assert.is_nil(env.ALSO, '--pass-env replaces PASS_ENV')
    assert.is_truthy(env.PATH)
    res = runner.run(dir, ns, '--only', 'old-two', { env = { PASS_ENV = 'ALSO', ALSO = 'too' } })
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('too', h.slurp(out):match('ALSO=(%w+)'))
  end)

  it('gives a shell migration the chart\'s extraEnv and named hatches with the env the chart renders, in the hook and in a background Job alike', function()
    h.must(h.run(h.q(h.testenv) .. ' build helm'))
    local rendered = h.must(h.run(string.format('%s template x %s --set migrations.hatches.ETCD_ADOPT_SKIP_BACKUP=etcdAdoptSkipBackup ' ..
      '--set-string migrations.etcdAdoptSkipBackup=true', h.q(h.root .. '/build/testenv/bin/helm'), h.q(h.root .. '/deploy/helm')))).out
    local yaml = require('yaml')
    local hook, bg
    for doc in ('\n' .. rendered .. '\n---\n'):gmatch('\n(.-)\n%-%-%-') do
      local d = yaml.decode(doc)
      if type(d) == 'table' and d.kind == 'Job' then hook = d.spec.template.spec.containers[1].env end
      if type(d) == 'table' and d.kind == 'CronJob' then
        for _, e in ipairs(d.spec.jobTemplate.spec.template.spec.containers[1].env) do
          if e.name == 'MIGRATIONS_JOB_TEMPLATE' then bg = json.decode(e.value).spec.template.spec.containers[1].env end
        end
      end
    end
    -- the literal values of a pod's env, as the kubelet gives them (the
    -- runner's own, NAMESPACE, MIGRATIONS_IMAGE, MIGRATIONS_INDEX and SKIP, left out)
    local function chart_env(list)
      local env = {}
      for _, e in ipairs(list) do
        if e.value and not e.name:match('^MIGRATIONS_') and not e.name:match('^SKIP') then env[e.name] = e.value end
      end
      return env
    end
    local ns = runner.new_ns()
    local out = h.tmpdir() .. '/env'
    local dir = fixture.tree({
      batches = { { '00000-legacy', { 'old-one' } } },
      scripts = { ['old-one'] = { shell = true, body = 'env | sort >' .. h.q(out .. '.hook') } },
      legacy = { { 1, 'old-one' } },
    })
    runner.make_ledger(ns, { version = '1' })
    local res = runner.run(dir, ns, { env = chart_env(hook) })
    assert.are.equal(0, res.code, res.err)
    local got = {}
    for k, v in h.slurp(out .. '.hook'):gmatch('([%w_]+)=([^\n]*)') do got[k] = v end
    assert.are.equal('cozy.local', got.CLUSTER_DOMAIN)
    assert.are.equal('1', got.ETCD_ADOPT_SKIP_BACKUP, 'the hatch as the exact string the script tests')
    -- a background Job's env, with the same script re-run by --only
    res = runner.run(dir, ns, '--only', 'old-one', { env = chart_env(bg) })
    assert.are.equal(0, res.code, res.err)
    got = {}
    for k, v in h.slurp(out .. '.hook'):gmatch('([%w_]+)=([^\n]*)') do got[k] = v end
    assert.are.equal('cozy.local', got.CLUSTER_DOMAIN)
    assert.are.equal('1', got.ETCD_ADOPT_SKIP_BACKUP)
  end)

  it('runs every shell migration in dry run, setting the variable a header names', function()
    local ns = runner.new_ns()
    local dir0 = h.tmpdir()
    local dir = fixture.tree({
      batches = { { '00001-v1', { 'careful', 'careless' } } },
      scripts = {
        careful = { shell = true, header = '# cozystack-migration: on-error=abort\n# cozystack-migration: dry-run=PREVIEW',
          body = 'echo "careful PREVIEW=${PREVIEW:-unset}" >>' .. h.q(dir0 .. '/log') },
        careless = { shell = true, body = 'echo careless >>' .. h.q(dir0 .. '/log') },
      },
    })
    runner.make_ledger(ns, {})
    local res = runner.run(dir, ns, '--dry-run')
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('careful PREVIEW=1\ncareless\n', h.slurp(dir0 .. '/log'))
    contains(res.out, 'careless ... ok (dry run)')
    assert.is_nil(runner.records(ns).careful, 'a dry run records nothing')
    res = runner.run(dir, ns)
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('careful PREVIEW=1\ncareless\ncareful PREVIEW=unset\ncareless\n', h.slurp(dir0 .. '/log'))
  end)
end)
