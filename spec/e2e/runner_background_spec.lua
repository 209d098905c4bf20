-- The background tier in the runner, against the real local apiserver:
-- every failure is recorded `failed` with its attempts counted, whatever
-- on-error says (the dispatcher retries it, dispatch_spec.lua); on-error
-- decides what waits behind it: abort stops the run and, once past its
-- attempts, holds the background slugs after it; warn lets them go on.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')

local contains = h.contains

describe('#e2e the background tier in the runner', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  local function tree(ns)
    return fixture.tree({
      batches = { { '00001-v1.0.0', { 'bg-hard', 'bg-next' } } },
      scripts = {
        ['bg-hard'] = { tier = 'background', on_error = 'abort', body = 'error("backend gone", 0)' },
        ['bg-next'] = { tier = 'background', on_error = 'warn', body = runner.lua_gen_marker(ns, 'bg-next') },
      },
    })
  end

  it('records a failed on-error=abort background migration, counting attempts, and stops the run there', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local res = runner.run(dir, ns, '--tier', 'background')
    assert.are.equal(1, res.code, res.out .. res.err)
    contains(res.err, 'bg-hard failed and its on-error is abort: recorded failed (attempt 1); stopping')
    local r = runner.records(ns)['bg-hard']
    assert.are.equal('failed', r.state)
    assert.are.equal(1, r.attempts)
    assert.are.equal('ScriptError', r.reason)
    assert.are.equal('backend gone', r.message)
    assert.is_nil(runner.records(ns)['bg-next'], 'ran behind a failed abort slug')
    -- the dispatched Job's run (ONLY) counts the next attempt
    res = runner.run(dir, ns, '--tier', 'background', { env = { ONLY = 'bg-hard' } })
    assert.are.equal(1, res.code)
    assert.are.equal(2, runner.records(ns)['bg-hard'].attempts)
  end)

  it('holds the background slugs after an abort slug past its attempts; a warn one lets them go on', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, fixture.ledger({ ['bg-hard'] = { state = 'failed', attempts = 3, reason = 'ScriptError' } }))
    local res = h.must(runner.run(dir, ns, '--tier', 'background'))
    contains(res.out, 'bg-next ... NOT RUN (warn): held: bg-hard failed 3 times, on-error=abort, until recorded ok or skipped')
    assert.is_nil(runner.records(ns)['bg-next'])
    -- skipped by the operator, it holds nothing
    h.must(h.cozy('skip', 'bg-hard', '--reason', 'backend retired', '--dir', dir, '--namespace', ns))
    h.must(runner.run(dir, ns, '--tier', 'background'))
    assert.are.equal('ok', runner.records(ns)['bg-next'].state)
  end)
end)
