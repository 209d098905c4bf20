-- Stop signals end every command that holds the runner lock or a
-- migration's child the same way (docs/operating.md "Exit codes": 128 + the signal):
-- the child's process group gets TERM (then KILL after --grace), nothing is
-- recorded for it, the lock is released, and one line names the signal and
-- what it stopped. The runner as PID 1 is tried in spec/reliability/
-- signals_spec.lua; here: exec, lua, a run waiting for the lock, skip, and a
-- migration that ended well after the signal came.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')

local contains = h.contains

-- The one line of stderr that says the command was stopped.
local function stop_lines(err)
  local n = 0
  for l in err:gmatch('[^\n]+') do if l:find('stopped by SIG', 1, true) then n = n + 1 end end
  return n
end

describe('#e2e a stop signal', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('stops exec\'s shell script and its children: exit 143, the outcome stopped', function()
    local dir = h.tmpdir()
    local script = h.write(dir .. '/s.sh', 'trap "" TERM\necho up >&2\nsleep 30.3131 &\nwait\n')
    local base = string.format('%s exec --grace 1s s %s', h.q(h.bin), h.q(script))
    -- the signal once the script runs (its first line on stderr)
    local f = runner.alongside(base, 0, runner.until_line('e1', 'up') .. '; kill -TERM $p')
    assert.are.equal('143\n', f.r1, f.e1)
    assert.are.equal('stopped', require('json').decode(f.o1).outcome)
    contains(f.e1, 'stopped by SIGTERM while s ran: it was stopped (exit 143)')
    assert.are.equal(1, stop_lines(f.e1))
    assert.is_true(h.eventually(2, function() return not h.alive('sleep 30.3131') end), 'its child outlived it')
  end)

  it('stops a lua script on SIGINT: exit 130', function()
    local f0 = h.write(os.tmpname() .. '.lua', "print('up')\nrequire('kube').sleep(30)\n")
    -- a shell's background job starts with SIGINT ignored: give it the default
    local f = runner.alongside(string.format('env --default-signal=INT %s lua %s', h.q(h.bin), h.q(f0)), 0,
      runner.until_line('o1', 'up') .. '; kill -INT $p')
    assert.are.equal('130\n', f.r1, f.e1)
    contains(f.e1, 'stopped by SIGINT while ' .. f0 .. ' ran: it was stopped (exit 130)')
    assert.are.equal(1, stop_lines(f.e1))
  end)

  it('leaves SIGHUP ignored when the command started with it ignored (nohup)', function()
    local f0 = h.write(os.tmpname() .. '.lua', "require('kube').sleep(1.5)\n")
    local f = runner.alongside(string.format("sh -c %s", h.q(string.format("trap '' HUP; exec %s lua %s",
      h.q(h.bin), h.q(f0)))), 0.5, 'kill -HUP $p')
    assert.are.equal('0\n', f.r1, f.e1)
    assert.are.equal(0, stop_lines(f.e1))
  end)

  it('ends a run waiting for the lock on SIGHUP: exit 129, nothing ran, the holder\'s Lease untouched', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns },
      spec = { holderIdentity = 'ghost', leaseDurationSeconds = 300 } }, 'create lease')
    local rv = runner.get_lease(ns).metadata.resourceVersion
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'alpha' } } },
      scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') } } })
    -- under nohup (or any caller that ignores HUP) the runner rightly keeps
    -- it ignored: give it the default
    local f = runner.alongside('env --default-signal=HUP ' .. runner.cmd(dir, ns, '--lock-timeout 60s'), 0,
      runner.until_line('e1', 'waiting up to') .. '; kill -HUP $p')
    assert.are.equal('129\n', f.r1, f.e1)
    contains(f.e1, 'stopped by SIGHUP while waiting for the runner lock ' .. ns .. '/' .. runner.LEASE ..
      ': nothing ran (exit 129)')
    assert.are.equal(1, stop_lines(f.e1))
    assert.are.same({}, (runner.markers(ns)))
    assert.is_nil(runner.get_ledger(ns).data)
    assert.are.equal(rv, runner.get_lease(ns).metadata.resourceVersion)
  end)

  it('ends skip waiting for the lock: exit 143, nothing recorded', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns },
      spec = { holderIdentity = 'ghost', leaseDurationSeconds = 300 } }, 'create lease')
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'alpha' } } },
      scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') } } })
    local base = string.format('%s skip alpha --reason because --dir %s --namespace %s --lock-timeout 60s',
      h.q(h.bin), h.q(dir), ns)
    local f = runner.alongside(base, 0, runner.until_line('e1', 'waiting up to') .. '; kill -TERM $p')
    assert.are.equal('143\n', f.r1, f.e1)
    contains(f.e1, 'stopped by SIGTERM while waiting for the runner lock')
    assert.is_nil(runner.get_ledger(ns).data)
  end)

  it('records nothing for a migration that exited 0 after the signal came, and releases the lock', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    -- the runner is signalled while the script runs (a confined script may
    -- not signal it itself: host/proc/confine.h), and the script goes on
    -- to succeed
    local at = h.tmpdir() .. '/at'
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'first', 'second' } } },
      scripts = { first = { shell = true, body = 'echo started >' .. h.q(at) ..
        '\nsleep 0.8\necho still here\nexit 0' },
                  second = { body = runner.lua_marker(ns, 'second') } } })
    local f = runner.alongside(runner.cmd(dir, ns, ''), 0, runner.until_line(at, 'started') .. '; kill -TERM $p')
    local res = { code = tonumber(f.r1), err = f.e1 }
    assert.are.equal(143, res.code, res.err)
    contains(res.err, 'stopped by SIGTERM while pre-apply first ran: it was stopped and is not recorded ' ..
      '(it runs again next time); the runner lock is released (exit 143)')
    assert.are.equal(1, stop_lines(res.err))
    assert.is_nil(runner.get_ledger(ns).data)
    assert.are.same({}, (runner.markers(ns)))
    assert.are.equal('', runner.get_lease(ns).spec.holderIdentity or '')
  end)
end)
