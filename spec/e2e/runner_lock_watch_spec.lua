-- The runner watches its Lease, end to end against the real local
-- kube-apiserver, through tools/cluster/faultproxy (which counts what it
-- forwards, and holds back the answers of the Lease's read-backs here): the
-- happy path sends no GET of the Lease per migration, and losing the lock
-- (the Lease force-deleted, another holder written into it) stops the
-- migration in flight within a round trip of the event, without waiting for
-- a read-back (the read-backs are the ones held back 8 s).
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local proxy = require('support.proxy')

local contains = h.contains

local function lease_path(ns) return '/apis/coordination.k8s.io/v1/namespaces/' .. ns .. '/leases/' .. runner.LEASE end

-- n empty Lua migrations, the first of which waits a second: the watch is
-- open before the others run, however slowly the machine opens it
local function empties(n)
  local slugs, scripts = {}, {}
  for i = 1, n do
    local s = string.format('e-%02d', i)
    slugs[i] = s
    scripts[s] = { body = i == 1 and "require('kube').sleep(1)\n" or '' }
  end
  return fixture.tree({ batches = { { '00001-v1.0.0', slugs } }, scripts = scripts })
end

-- a shell migration stamping the time every 20 ms for 30 s
local function beating(log)
  return fixture.tree({ batches = { { '00001-v1.0.0', { 'beats' } } }, scripts = { beats = { shell = true,
    body = string.format('for _ in $(seq 1500); do date +%%s.%%N >>%s; sleep 0.02; done', h.q(log)) } } })
end

local function last_beat(log)
  local last
  for t in h.slurp(log):gmatch('([%d.]+)\n') do last = tonumber(t) end
  return last
end

describe('#e2e the watched Lease', function()
  local p
  setup(function()
    h.need_cluster()
    p = proxy.start('')
  end)
  teardown(function()
    proxy.stop(p)
    runner.delete_namespaces()
  end)

  it('sends no GET of the Lease per migration: 20 migrations read it no more than 2 do', function()
    local gets = {}
    for _, n in ipairs({ 2, 20 }) do
      local ns = runner.new_ns()
      runner.make_ledger(ns, {})
      proxy.faults(p, {}) -- counters from zero
      h.must(runner.run(empties(n), ns, '--kubeconfig', p.kubeconfig))
      local c = proxy.counts(p)
      gets[n] = c.forwarded['GET ' .. lease_path(ns)] or 0
    end
    -- (a confirmation before the watch is open still reads it back: one or two)
    local said = 'GETs of the Lease: ' .. gets[2] .. ' for 2 migrations, ' .. gets[20] .. ' for 20'
    assert.is_true(gets[20] <= gets[2] + 2, said)
    assert.is_true(gets[20] <= 4, said)
  end)

  for _, case in ipairs({
    { what = 'force-deleted', said = 'the Lease was deleted (its finalizer removed)',
      act = function(ns)
        h.must(h.kubectl(string.format('patch lease %s -n %s --type merge -p %s', runner.LEASE, ns,
          h.q('{"metadata":{"finalizers":null}}'))))
        h.must(h.kubectl(string.format('delete lease %s -n %s --wait=false', runner.LEASE, ns)))
      end },
    { what = 'taken by another holder', said = 'it is held by thief now',
      act = function(ns)
        h.must(h.kubectl(string.format('patch lease %s -n %s --type merge -p %s', runner.LEASE, ns,
          h.q('{"spec":{"holderIdentity":"thief","leaseDurationSeconds":300}}'))))
      end },
    { what = 'force-deleted after someone killed its watcher (a new one is started)',
      said = 'the Lease was deleted (its finalizer removed)',
      before = function(runner_pid)
        local r = h.must(h.run('pgrep -P ' .. runner_pid .. ' -x cozy-lockwatch'))
        h.must(h.run('kill -9 ' .. r.out:match('%d+')))
        h.sleep(2)
      end,
      act = function(ns)
        h.must(h.kubectl(string.format('patch lease %s -n %s --type merge -p %s', runner.LEASE, ns,
          h.q('{"metadata":{"finalizers":null}}'))))
        h.must(h.kubectl(string.format('delete lease %s -n %s --wait=false', runner.LEASE, ns)))
      end },
  }) do
    it('stops the migration in flight within a round trip when its Lease is ' .. case.what, function()
      local ns = runner.new_ns()
      runner.make_ledger(ns, {})
      local log = os.tmpname()
      local dir = beating(log)
      -- every read-back of the Lease answers 8 s late: only the watch can tell
      proxy.faults(p, { 'method=GET,path=' .. lease_path(ns) .. ',action=slow-after,delay=8' })
      local out = h.tmpdir()
      os.execute(string.format('%s run --dir %s --namespace %s --kubeconfig %s >%s/o 2>%s/e & echo $! >%s/pid',
        h.q(h.bin), h.q(dir), ns, h.q(p.kubeconfig), out, out, out))
      assert.is_true(h.eventually(60, function() return (last_beat(log) or 0) > 0 end), 'the migration did not start')
      h.sleep(2) -- well into it, the watch long open
      if case.before then case.before(h.slurp(out .. '/pid'):match('%d+')) end
      case.act(ns)
      local acted = tonumber(h.must(h.run('date +%s.%N')).out)
      assert.is_true(h.eventually(30, function() return h.slurp(out .. '/e'):find('cozy-migrate:', 1, true) ~= nil end),
        'the runner did not stop: ' .. h.slurp(out .. '/e'))
      local stopped_after = last_beat(log) - acted
      contains(h.slurp(out .. '/e'), case.said)
      contains(h.slurp(out .. '/e'), 'lost the runner lock while beats ran: it was stopped and is not recorded')
      -- the last stamp came before the change was even acted on, or within
      -- a round trip after (a read-back would have taken 8 s; 1.5 s leaves
      -- a loaded machine room for the event's way to the runner)
      assert.is_true(stopped_after < 1.5, string.format('the migration ran on %.2fs after the Lease was %s',
        stopped_after, case.what))
      os.remove(log)
      h.run('kill ' .. (h.slurp(out .. '/pid'):match('%d+') or '0') .. ' 2>/dev/null')
    end)
  end
end)
