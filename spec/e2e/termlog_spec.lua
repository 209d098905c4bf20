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

  -- n warn failures with messages of `size` bytes, then an abort one
  local function failing(n, size)
    local ns = runner.new_ns()
    local slugs, scripts = {}, {}
    for i = 1, n do
      local s = string.format('warn-%03d', i)
      slugs[#slugs + 1] = s
      scripts[s] = { on_error = 'warn', body = string.format('error(%q, 0)', s .. ' ' .. string.rep('x', size)) }
    end
    slugs[#slugs + 1] = 'last'
    scripts.last = { body = 'error("the last one", 0)' }
    runner.make_ledger(ns, {})
    local f = termfile()
    local res = runner.run(fixture.tree({ batches = { { '00001-v1.0.0', slugs } }, scripts = scripts }), ns,
      { env = { COZY_TERMINATION_LOG = f } })
    assert.are.equal(1, res.code, res.err)
    return h.slurp(f), h.lines_of(f)
  end

  -- what the file says: {fatal=, hidden=, shown={slug...}}
  local function account(lines)
    local a = { fatal = lines[1], hidden = 0, shown = {} }
    for i = 2, #lines do
      local n = lines[i]:match('^%((%d+) earlier failed migrations? not shown%)$') or
        lines[i]:match('^%((%d+) failed migrations? not shown%)$')
      if n then
        assert.are.equal(2, i, 'the count comes right after the fatal line')
        a.hidden = tonumber(n)
      else
        a.shown[#a.shown + 1] = assert(lines[i]:match('^failed: (%S+) %(pre%-apply%): ScriptError: '), lines[i])
      end
    end
    return a
  end

  it('shows every failure that fits: 20 small ones and the fatal one, nothing left out', function()
    local text, lines = failing(20, 10)
    assert.is_true(#text <= 4096, #text .. ' bytes')
    local a = account(lines)
    assert.matches('^cozy%-migrate: last failed', a.fatal)
    assert.are.equal(0, a.hidden)
    assert.are.equal(21, #a.shown, text)
    assert.are.equal('warn-001', a.shown[1])
    assert.are.equal('last', a.shown[21])
  end)

  it('keeps the fatal line, the newest failures and the exact count of the rest, within 4096 bytes, whatever their sizes', function()
    -- sizes that leave the fatal line, three failures and the newest just
    -- under the bound: the count line must still find room (it is part of
    -- the fit), and the newest must not be the one left out
    local fatal = #'cozy-migrate: last failed and its on-error is abort: stopping; nothing is recorded, so it runs again next time' + 1
    local last = #'failed: last (pre-apply): ScriptError: the last one' + 1
    local tight = (4096 - 15 - fatal - last) // 3 - 52
    for _, case in ipairs({ { n = 5, size = 969 }, { n = 4, size = tight }, { n = 90, size = 20 } }) do
      local text, lines = failing(case.n, case.size)
      local what = case.n .. ' of ' .. case.size .. ' bytes'
      assert.is_true(#text <= 4096, what .. ': ' .. #text .. ' bytes')
      local a = account(lines)
      assert.matches('^cozy%-migrate: last failed', a.fatal, what)
      assert.is_true(a.hidden > 0, what .. ': nothing left out?\n' .. text)
      assert.are.equal(case.n + 1, a.hidden + #a.shown, what .. ': shown and counted do not add up\n' .. text)
      -- the newest, in order, down to the oldest that fits
      assert.are.equal('last', a.shown[#a.shown], what)
      for i = 1, #a.shown - 1 do
        assert.are.equal(string.format('warn-%03d', case.n - (#a.shown - 1) + i), a.shown[i], what)
      end
      -- and the next older one would not have fit
      local function count_line(n)
        return n > 0 and #string.format('(%d earlier failed migration%s not shown)', n, n == 1 and '' or 's') + 1 or 0
      end
      local line = #string.format('failed: warn-000 (pre-apply): ScriptError: warn-000 %s', string.rep('x', case.size)) + 1
      local with_one_more = #text - count_line(a.hidden) + count_line(a.hidden - 1) + line
      assert.is_true(with_one_more > 4096, what .. ': room was left for one more (' .. with_one_more .. ' bytes)')
    end
  end)

  it('says where a successful run\'s seconds went, from the process\'s start, when nothing failed', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'quick', 'slow' } } },
      scripts = { quick = { body = 'return' }, slow = { body = "require('kube').sleep(0.3)" } },
    })
    runner.make_ledger(ns, {})
    local f = termfile()
    h.must(runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } }))
    local text = h.slurp(f)
    local total, startup, migrations, rest = text:match(
      "^cozy%-migrate: ok: 2 steps in ([%d.]+) s from the process's start: start%-up ([%d.]+) s %(configuration, " ..
      "tree, index, ledger, lock%), migrations ([%d.]+) s, the rest ([%d.]+) s\n$")
    assert.is_truthy(total, text)
    total, startup, migrations, rest = tonumber(total), tonumber(startup), tonumber(migrations), tonumber(rest)
    -- the parts make the whole, and the migrations hold the 0.3 s sleep
    assert.is_true(math.abs(startup + migrations + rest - total) <= 0.002, text)
    assert.is_true(migrations >= 0.3, text)
    -- nothing to run: the account says so; a run with a failure keeps the failure alone
    f = termfile()
    h.must(runner.run(dir, ns, { env = { COZY_TERMINATION_LOG = f } }))
    assert.matches("^cozy%-migrate: ok: 0 steps in [%d.]+ s from the process's start: .*migrations 0%.000 s", h.slurp(f))
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
