-- Crash safety, as repeated trials (make reliability prints the counts): a
-- 20-migration sequence run, the runner killed with kill -9 at a random
-- moment, then run again to completion. After the kill and after the end:
-- every ledger value parses (jq), no migration is recorded ok without its
-- end marker; after the kill, no process of the killed run is left; at the
-- end, every step is recorded ok exactly once (attempts 1) and the objects
-- equal those of a clean run. Then the same with the migration's child
-- killed instead of the runner: the runner must report it (on-error=abort:
-- exit 1, nothing recorded) and the re-run complete.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 20
local DELAY = 0.03
local RUNNER_KILLS = T.count('crash', 2, 30)
local CHILD_KILLS = T.count('crash-child', 1, 10)
local FLAGS = '--lease-duration 2s --lock-timeout 30s'

describe('#reliability crash safety', function()
  local c, clean, clean_s

  setup(function()
    c = T.default_cluster()
    -- the reference: one clean run, and how long it takes
    clean, clean_s = T.clean_run(c, 'rel-crash-clean', STEPS, DELAY, FLAGS)
  end)

  teardown(function() c.cleanup() end)

  -- The checks after a run ended (killed or not), then the re-run and the
  -- checks at the end. killed: what was killed, for the notes.
  local function finish(ns, dir, rc)
    local recs, problems = T.ledger(c, ns)
    T.check(problems, 'the ledger after the kill')
    local markers = T.labelled(c, ns, 'trial/end')
    T.check(T.ok_without_marker(recs, markers), 'after the kill')
    local done = 0
    for _, r in pairs(recs) do if r.state == 'ok' then done = done + 1 end end
    T.note(string.format('killed run: exit %s, %d of %d recorded', tostring(rc), done, STEPS))

    local again = h.run(c.run_cmd(dir, ns, FLAGS))
    assert.are.equal(0, again.code, 'the re-run: ' .. again.err)
    recs, problems = T.ledger(c, ns)
    T.check(problems, 'the ledger at the end')
    markers = T.labelled(c, ns, 'trial/end')
    T.check(T.ok_without_marker(recs, markers), 'at the end')
    local bad = {}
    for k = 1, STEPS do
      local slug = string.format('seq-%02d', k)
      local r = recs[slug]
      if not r or r.state ~= 'ok' or r.attempts ~= 1 then
        bad[#bad + 1] = string.format('%s: %s', slug,
          r and (r.state .. ' attempts ' .. tostring(r.attempts)) or 'no record')
      end
    end
    T.check(bad, 'the records at the end')
    assert.are.equal(clean, T.snapshot(c, ns), 'the objects differ from a clean run\'s')
    T.check(T.orphans(dir), 'processes left after the re-run')
  end

  for i = 1, RUNNER_KILLS do
    local title = string.format('survives kill -9 of the runner (trial %d/%d)', i, RUNNER_KILLS)
    T.trial('crash: runner kill -9', title, function()
      local ns = T.sequence_ns(c, 'rel-crash')
      local dir = T.sequence(ns, STEPS, DELAY)
      local at = math.random() * clean_s
      local p = T.start(c.run_cmd(dir, ns, FLAGS))
      h.sleep(string.format('%.3f', at))
      T.signal(p, 'KILL')
      local rc = T.wait(p, 60)
      assert.is_not_nil(rc, 'the killed runner did not end')
      assert.is_true(rc == 137 or rc == 0, 'the killed run exited ' .. tostring(rc) .. ': ' .. T.err(p))
      -- PR_SET_PDEATHSIG: the Lua child dies with its runner
      local gone = h.eventually(2, function() return #T.orphans(dir) == 0 end)
      T.check(gone and {} or T.orphans(dir), 'processes of the killed run still alive 2 s later')
      T.note(string.format('kill at %.2fs of %.2fs', at, clean_s))
      finish(ns, dir, rc)
    end)
  end

  for i = 1, CHILD_KILLS do
    local title = string.format('survives kill -9 of a migration\'s child (trial %d/%d)', i, CHILD_KILLS)
    T.trial('crash: child kill -9', title, function()
      local ns = T.sequence_ns(c, 'rel-crash-child')
      local dir = T.sequence(ns, STEPS, DELAY)
      local at = math.random() * clean_s * 0.9
      local p = T.start(c.run_cmd(dir, ns, FLAGS))
      h.sleep(string.format('%.3f', at))
      -- the child alive at that moment, or the next one to start: stopped
      -- first, so that it cannot end (and be reaped) before the kill lands,
      -- then killed once it is seen stopped and still the runner's child
      local victim
      local deadline = T.now() + 5
      repeat
        local pid = T.children(p.pid)[1]
        if pid then
          os.execute('kill -STOP ' .. pid .. ' 2>/dev/null')
          local state, ppid
          for _ = 1, 100 do
            state, ppid = T.stat(pid)
            if state ~= 'R' and state ~= 'S' and state ~= 'D' then break end
            h.sleep(0.002)
          end
          if state == 'T' and ppid == p.pid then victim = pid end
        else
          h.sleep(0.005)
        end
      until victim or T.now() > deadline or h.slurp(p.dir .. '/rc') ~= ''
      assert.is_not_nil(victim, 'no migration child to kill')
      os.execute('kill -9 ' .. victim)
      local rc = T.wait(p, 60)
      assert.are.equal(1, rc, 'the runner whose child was killed: ' .. T.err(p))
      h.contains(T.out(p), 'FAILED (abort)', 'stdout')
      h.contains(T.out(p), 'Killed', 'stdout')
      T.check(T.orphans(dir), 'processes left after the runner ended')
      finish(ns, dir, rc)
    end)
  end
end)
