-- Failures never vanish from status: an on-error=abort failure of the
-- upgrade records nothing (it runs again next time), so the runner keeps
-- its last failure on the ledger (annotation
-- platform.cozystack.io/pending-failures) while the slug is pending, and
-- `status --failed` (and -o json) shows it, saying where it came from,
-- until the slug is recorded. End to end against the real local apiserver.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, lacks = h.contains, h.lacks

local FAILURES = 'platform.cozystack.io/pending-failures'

local function status(dir, ns, ...)
  return h.cozy('status', '--dir', dir, '--namespace', ns, ...)
end

-- pre-apply `fine`, `breaks` (abort, failing while the ConfigMap `fixed`
-- is absent), `other` (abort, always failing)
local function tree(ns)
  return fixture.tree({
    batches = { { '00001-v1.0.0', { 'fine', 'breaks', 'other' } } },
    scripts = {
      fine = { body = runner.lua_marker(ns, 'fine') },
      breaks = { body = string.format([[
if not require('kube').get('configmaps', 'fixed', { namespace = %q }) then
  error('tenant-a/settings is missing\nsecond line', 0)
end]], ns) },
      other = { body = 'error("other: no quota", 0)' },
    },
  })
end

describe('#e2e status after an abort', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('lists the last failure of each pending slug with --failed, in one line, with where it came from, and exits 1', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local run = runner.run(dir, ns)
    assert.are.equal(1, run.code, run.out .. run.err)
    assert.is_nil(runner.records(ns).breaks, 'an abort failure records nothing')
    -- the other slug fails too, run on its own
    assert.are.equal(1, runner.run(dir, ns, '--only', 'other').code)
    local res = status(dir, ns, '--failed')
    assert.are.equal(1, res.code, res.out .. res.err)
    local rows = {}
    for line in res.out:gmatch('[^\n]+') do
      local slug = line:match('^(%S+)%s')
      if slug then rows[slug] = line end
    end
    contains(rows.breaks or '', 'pending')
    contains(rows.breaks or '', 'ScriptError: tenant-a/settings is missing second line')
    contains(rows.breaks or '', "kept by runner ")
    contains(rows.breaks or '', "in the ledger's annotation " .. FAILURES)
    contains(rows.other or '', 'ScriptError: other: no quota')
    assert.is_nil(rows.fine, 'fine ran ok')
    -- the same as JSON
    local js = status(dir, ns, '--failed', '-o', 'json')
    assert.are.equal(1, js.code, js.err)
    local by = {}
    for _, r in ipairs(json.decode(js.out)) do by[r.migration] = r end
    assert.are.equal('pending', by.breaks.state)
    assert.are.equal('ScriptError', by.breaks.last_failure.reason)
    assert.are.equal('tenant-a/settings is missing second line', by.breaks.last_failure.message)
    assert.are.equal("the ledger's annotation " .. FAILURES, by.breaks.last_failure.source)
    assert.matches('^%d%d%d%d%-%d%d%-%d%dT', by.breaks.last_failure.at)
    assert.is_string(by.breaks.last_failure.runner)
    assert.are.equal('no quota', by.other.last_failure.message:match('no quota'))
    -- status SLUG says it too
    local one = h.must(status(dir, ns, 'breaks'))
    contains(one.out, 'last failure: not recorded (on-error=abort), last failed at ')
  end)

  it('drops it once the slug is recorded', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    assert.are.equal(1, runner.run(dir, ns).code)
    assert.are.equal(1, status(dir, ns, '--failed').code)
    h.must(h.kubectl('create configmap fixed -n ' .. ns))
    assert.are.equal(1, runner.run(dir, ns).code, 'other still fails')
    local res = status(dir, ns, '--failed', '-o', 'json')
    local slugs = {}
    for _, r in ipairs(json.decode(res.out)) do slugs[#slugs + 1] = r.migration end
    assert.are.same({ 'other' }, slugs)
    assert.are.equal('ok', runner.records(ns).breaks.state)
    -- the annotation keeps pending slugs only
    local kept = json.decode(runner.get_ledger(ns).metadata.annotations[FAILURES])
    assert.is_nil(kept.breaks)
    assert.is_table(kept.other)
  end)

  it('shows what the annotation holds on one line, control bytes escaped', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local forged = json.encode({ breaks = { tier = 'pre-apply', at = '2026-01-01T00:00:00Z', reason = 'ScriptError',
      message = 'x\nfine                                     failed', runner = 'r\r' } })
    h.must(h.kubectl(string.format('annotate --overwrite configmap %s -n %s %s', runner.LEDGER, ns,
      h.q(FAILURES .. '=' .. forged))))
    local res = status(dir, ns, '--failed')
    assert.are.equal(1, res.code, res.out .. res.err)
    contains(res.out, 'ScriptError: x\\x0afine ')
    contains(res.out, 'kept by runner r\\x0d ')
    local lines = 0
    for _ in res.out:gmatch('[^\n]+') do lines = lines + 1 end
    assert.are.equal(2, lines, res.out)
  end)

  it('ignores a hand-edited annotation it cannot read, and entries that are not slugs', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    for _, bad in ipairs({ 'not json', '{"../x":{"tier":"pre-apply","at":"a","reason":"r","message":"m","runner":"x"}}',
      '{"breaks":{"reason":1}}' }) do
      h.must(h.kubectl(string.format('annotate --overwrite configmap %s -n %s %s', runner.LEDGER, ns,
        h.q(FAILURES .. '=' .. bad))))
      local res = status(dir, ns, '--failed', '-o', 'json')
      assert.are.equal(0, res.code, bad .. ': ' .. res.out .. res.err)
      assert.are.same({}, json.decode(res.out), bad)
    end
  end)
end)
