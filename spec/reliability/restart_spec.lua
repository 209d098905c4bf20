-- Surviving an apiserver restart, as repeated trials, on an apiserver of
-- this file's own (tools/testenv, its own state directory: the shared one
-- is never restarted): a 20-migration sequence runs while
-- `tools/testenv restart-apiserver 1 KILL` kills kube-apiserver at a random
-- moment and starts it again (etcd keeps the data). The run must complete
-- or fail cleanly (an exit code of docs/operating.md's table, never a signal),
-- with every ledger value parsing and no ok without its end marker; a
-- re-run then completes, every step recorded ok once, the objects equal to
-- a clean run's, no process left.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 20
local DELAY = 0.1
local TRIALS = T.count('restart', 1, 5)
local FLAGS = '--lease-duration 3s --lock-timeout 60s'

describe('#reliability an apiserver restart', function()
  local c, env, clean, clean_s

  setup(function()
    env = 'env TESTENV_DIR=' .. h.q(h.root .. '/build/testenv/reliability-restart-' .. h.unique())
    h.must(h.run(env .. ' ' .. h.q(h.testenv) .. ' up'), 'a testenv of its own')
    local kc = h.must(h.run(env .. ' ' .. h.q(h.testenv) .. ' env')).out:match('KUBECONFIG=(%S+)')
    c = T.cluster(kc)
    clean, clean_s = T.clean_run(c, 'rel-restart-clean', STEPS, DELAY, FLAGS)
  end)

  teardown(function()
    if env then h.run(env .. ' ' .. h.q(h.testenv) .. ' down') end
  end)

  for i = 1, TRIALS do
    local title = string.format('a run through an apiserver restart, then a re-run (trial %d/%d)', i, TRIALS)
    T.trial('apiserver restart', title, function()
      local ns = T.sequence_ns(c, 'rel-restart')
      local dir = T.sequence(ns, STEPS, DELAY)
      local at = 0.2 + math.random() * clean_s * 0.7
      local p = T.start(c.run_cmd(dir, ns, FLAGS))
      h.sleep(string.format('%.3f', at))
      local r = T.start(env .. ' ' .. h.q(h.testenv) .. ' restart-apiserver 1 KILL')
      local rc = T.wait(p, 180)
      assert.is_not_nil(rc, 'the run did not end within 180 s')
      assert.are.equal(0, T.wait(r, 120), 'restart-apiserver: ' .. T.err(r))
      local last = T.err(p):gsub('%s+$', ''):match('([^\n]*)$')
      T.note(string.format('restart at %.2fs of %.2fs; the run exited %d%s', at, clean_s, rc,
        rc ~= 0 and (' (' .. last:sub(1, 160) .. ')') or ''))
      assert.is_true(rc >= 0 and rc <= 7, 'the run ended with ' .. rc .. ', not a clean exit: ' .. T.err(p))
      local recs, problems = T.ledger(c, ns)
      T.check(problems, 'the ledger after the restart')
      T.check(T.ok_without_marker(recs, T.labelled(c, ns, 'trial/end')), 'after the restart')

      local again = h.run(c.run_cmd(dir, ns, FLAGS))
      assert.are.equal(0, again.code, 'the re-run: ' .. again.err)
      recs, problems = T.ledger(c, ns)
      T.check(problems, 'the ledger at the end')
      T.check(T.ok_without_marker(recs, T.labelled(c, ns, 'trial/end')), 'at the end')
      local bad = {}
      for k = 1, STEPS do
        local slug = string.format('seq-%02d', k)
        local rec = recs[slug]
        if not rec or rec.state ~= 'ok' or rec.attempts ~= 1 then bad[#bad + 1] = slug end
      end
      T.check(bad, 'steps not recorded ok once')
      assert.are.equal(clean, T.snapshot(c, ns), 'the objects differ from a clean run\'s')
      T.check(T.orphans(dir), 'processes left')
    end)
  end
end)
