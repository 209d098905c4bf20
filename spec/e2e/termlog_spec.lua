-- The container's termination message: the runner writes its fatal line,
-- then each failed migration (slug, tier, reason, message), to the file
-- the kubelet reads (/dev/termination-log; COZY_TERMINATION_LOG here), so
-- `kubectl describe pod` and Helm's error show why the hook failed. One
-- line per item, at most 4096 bytes (Kubernetes keeps no more), and only
-- into a file that exists.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')

local contains = h.contains

local function termfile()
  local f = os.tmpname()
  h.write(f, '')
  return f
end

describe('#e2e the termination message', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('holds the fatal line first, then the failed migration with its reason and message', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'soft', 'hard' } } },
      scripts = { soft = { on_error = 'warn', body = 'error("the soft one\\nsecond line", 0)' },
        hard = { body = 'error("tenant-a/settings is missing", 0)' } },
    })
    runner.make_ledger(ns, {})
    local f = termfile()
    local res = runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } })
    assert.are.equal(1, res.code, res.out .. res.err)
    local lines = h.lines_of(f)
    assert.are.equal(3, #lines, h.slurp(f))
    assert.matches('^cozy%-migrate: hard failed and its on%-error is abort: stopping', lines[1])
    assert.are.equal('failed: soft (pre-apply): ScriptError: the soft one second line', lines[2])
    assert.are.equal('failed: hard (pre-apply): ScriptError: tenant-a/settings is missing', lines[3])
  end)

  it('holds a warn failure of a run that succeeded, and a usage error', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'soft' } } },
      scripts = { soft = { on_error = 'warn', body = 'error("boom", 0)' } },
    })
    runner.make_ledger(ns, {})
    local f = termfile()
    h.must(runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } }))
    assert.are.equal('failed: soft (pre-apply): ScriptError: boom\n', h.slurp(f))
    f = termfile()
    local res = runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f, SKIP = 'soft' } })
    assert.are.equal(2, res.code)
    contains(h.slurp(f), 'cozy-migrate: SKIP=soft needs SKIP_REASON')
  end)

  it('stays within 4096 bytes, keeping the fatal line and the latest failures', function()
    local ns = runner.new_ns()
    local slugs, scripts = {}, {}
    local long = string.rep('x', 900)
    for i = 1, 12 do
      local s = string.format('warn-%02d', i)
      slugs[#slugs + 1] = s
      scripts[s] = { on_error = 'warn', body = string.format('error(%q, 0)', s .. ' ' .. long) }
    end
    slugs[#slugs + 1] = 'last'
    scripts.last = { body = 'error("the last one", 0)' }
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', slugs } }, scripts = scripts })
    runner.make_ledger(ns, {})
    local f = termfile()
    local res = runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } })
    assert.are.equal(1, res.code)
    local text = h.slurp(f)
    assert.is_true(#text <= 4096, #text .. ' bytes')
    local lines = h.lines_of(f)
    assert.matches('^cozy%-migrate: last failed', lines[1])
    assert.matches('^%(%d+ earlier failed migrations not shown%)$', lines[2])
    assert.are.equal('failed: last (pre-apply): ScriptError: the last one', lines[#lines])
    contains(text, 'warn-12 ')
  end)

  it('writes nothing where the file does not exist', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'hard' } } },
      scripts = { hard = { body = 'error("x", 0)' } } })
    runner.make_ledger(ns, {})
    local f = os.tmpname()
    os.remove(f)
    assert.are.equal(1, runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } }).code)
    assert.is_nil(io.open(f), 'the runner created ' .. f)
  end)
end)
