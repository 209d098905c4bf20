-- What the runner tells an operator, end to end against the real local
-- kube-apiserver (tools/testenv): `cozy-migrate plan` explains each step and
-- writes nothing, `status -o json` lists every slug, Events land on the
-- ledger, and --log-format json prints one object per progress line.
-- Helpers are in spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local must, contains = h.must, h.contains

describe('#e2e the runner', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('leaves MigrationSucceeded and MigrationFailed Events on the ledger', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'good', 'bad' } } },
      scripts = { good = {}, bad = { on_error = 'warn', body = "error('bad things')" } },
    })
    runner.make_ledger(ns, {})
    local uid = runner.get_ledger(ns).metadata.uid
    must(runner.run(dir, ns))
    local by = {}
    for _, e in ipairs(runner.events(ns)) do
      assert.are.equal('ConfigMap', e.involvedObject.kind)
      assert.are.equal(runner.LEDGER, e.involvedObject.name)
      assert.are.equal(uid, e.involvedObject.uid)
      by[e.reason] = e
    end
    assert.is_table(by.MigrationSucceeded, 'no MigrationSucceeded event')
    assert.are.equal('Normal', by.MigrationSucceeded.type)
    contains(by.MigrationSucceeded.message, 'good (pre-apply, batch 00001-v1.0.0) succeeded')
    assert.is_table(by.MigrationFailed, 'no MigrationFailed event')
    assert.are.equal('Warning', by.MigrationFailed.type)
    contains(by.MigrationFailed.message, 'bad (pre-apply) failed, on-error=warn: ScriptError')
    contains(by.MigrationFailed.message, 'bad things')
  end)

  it('lists every slug in status -o json; plan explains each step and writes nothing', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = {
        { '00001-v1.0.0', { 'alpha', 'beta', 'rev' } },
        { '00002-v1.1.0', { 'bg' } },
      },
      scripts = {
        alpha = { body = runner.lua_marker(ns, 'alpha') },
        beta = { on_error = 'warn', body = "error('nope')" },
        rev = {},
        bg = { tier = 'background', body = runner.lua_marker(ns, 'bg') },
      },
      revoked = { 'rev' },
    })
    runner.make_ledger(ns, {})
    local rv = runner.get_ledger(ns).metadata.resourceVersion
    local res = must(runner.plan(dir, ns))
    contains(res.out, '3 to run for the pre-apply tier:')
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +alpha +pending', res.out)
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +beta +pending', res.out)
    assert.matches('\nrevoke +pre%-apply +00001%-v1%.0%.0 +rev +revoked, no record', res.out)
    assert.matches('\nskip +background +00002%-v1%.1%.0 +bg +background tier', res.out)
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    assert.is_nil(runner.get_lease(ns), 'plan takes no lock')
    assert.are.same({}, (runner.markers(ns)))

    must(runner.run(dir, ns))
    local st = runner.status(dir, ns)
    local by = {}
    for i, e in ipairs(st) do by[e.migration] = e; e.i = i end
    assert.are.same({ 'alpha', 'beta', 'rev', 'bg' }, { st[1].migration, st[2].migration, st[3].migration, st[4].migration })
    assert.are.same({ 'ok', 1, '00001-v1.0.0', 'pre-apply', 'match' },
      { by.alpha.state, by.alpha.attempts, by.alpha.batch, by.alpha.tier, by.alpha.checksum })
    assert.are.same({ 'failed', 1, '00001-v1.0.0', 'pre-apply', 'match', 'ScriptError' },
      { by.beta.state, by.beta.attempts, by.beta.batch, by.beta.tier, by.beta.checksum, by.beta.reason })
    assert.are.same({ 'revoked', 0, 'match' }, { by.rev.state, by.rev.attempts, by.rev.checksum })
    assert.are.same({ 'pending', 0, '00002-v1.1.0', 'background', '-' },
      { by.bg.state, by.bg.attempts, by.bg.batch, by.bg.tier, by.bg.checksum })

    rv = runner.get_ledger(ns).metadata.resourceVersion
    res = must(runner.plan(dir, ns))
    contains(res.out, '0 to run for the pre-apply tier:')
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +alpha +recorded ok', res.out)
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +beta +recorded failed', res.out)
    assert.matches('\nskip +pre%-apply +00001%-v1%.0%.0 +rev +revoked; recorded revoked', res.out)
    res = must(runner.plan(dir, ns, '--tier', 'background'))
    contains(res.out, '1 to run for the background tier:')
    assert.matches('\nrun +background +00002%-v1%.1%.0 +bg +pending', res.out)
    res = must(runner.plan(dir, ns, '--only', 'alpha'))
    assert.matches('\nrun +pre%-apply +00001%-v1%.0%.0 +alpha +re%-run requested %(%-%-only%), was ok', res.out)
    assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
    assert.are.same({ ['ran-alpha'] = true }, (runner.markers(ns)))
  end)

  it('prints one JSON object per progress line with --log-format json', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'alpha', 'beta' } } },
      scripts = { alpha = {}, beta = { on_error = 'warn', body = "error('x')" } },
    })
    runner.make_ledger(ns, {})
    local res = must(runner.run(dir, ns, '--log-format', 'json'))
    local got = {}
    for l in res.out:gmatch('[^\n]+') do
      local ok, j = pcall(json.decode, l)
      assert(ok and type(j) == 'table', 'not JSON: ' .. l)
      got[#got + 1] = { j.step, j.steps, j.tier, j.migration, j.outcome }
      assert.is_string(j.ts)
    end
    assert.are.same({
      { 1, 2, 'pre-apply', 'alpha', 'ok' },
      { 2, 2, 'pre-apply', 'beta', 'FAILED (warn)' },
    }, got)
  end)
end)

-- The Event after each migration goes out without the next migration
-- waiting for its answer (run/ledger.c): none may be lost for that.
describe('#e2e the runner\'s Events, sent while the next migration runs', function()
  local proxy = require('support.proxy')
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  local function tree(n)
    local slugs, scripts = {}, {}
    for i = 1, n do
      slugs[i] = string.format('quick-%02d', i)
      scripts[slugs[i]] = {}
    end
    return fixture.tree({ batches = { { '00001-v1.0.0', slugs } }, scripts = scripts })
  end

  it('leaves one MigrationSucceeded Event for each of 30 migrations', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    must(runner.run(tree(30), ns))
    local seen = {}
    for _, e in ipairs(runner.events(ns)) do
      if e.reason == 'MigrationSucceeded' then
        local slug = e.message:match('^(quick%-%d+) ')
        assert.is_string(slug, e.message)
        assert.is_nil(seen[slug], slug .. ' has two Events')
        seen[slug] = true
      end
    end
    assert.are.equal(30, h.count(seen))
  end)

  it('says so for each Event the apiserver refused, and the run still succeeds', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    local p = proxy.start('-seed 3')
    proxy.faults(p, { 'method=POST,path=/api/v1/namespaces/' .. ns .. '/events,action=status,code=500' })
    local res = runner.run(tree(5), ns, '--kubeconfig', p.kubeconfig)
    local c = proxy.counts(p)
    proxy.stop(p)
    must(res)
    local told = 0
    local said, at = 'could not record an Event on ConfigMap ' .. ns .. '/' .. runner.LEDGER, 1
    while true do
      local i = (res.out .. res.err):find(said, at, true)
      if not i then break end
      told, at = told + 1, i + 1
    end
    -- one per migration, and the run's own (the batch) when it makes one
    local posted = c.received['POST /api/v1/namespaces/' .. ns .. '/events']
    assert.is_true(posted >= 5, 'Events posted: ' .. tostring(posted))
    assert.are.equal(posted, told, res.out .. res.err)
    assert.are.same({}, runner.events(ns))
    local recs = runner.records(ns)
    for i = 1, 5 do assert.are.equal('ok', recs[string.format('quick-%02d', i)].state) end
  end)
end)
