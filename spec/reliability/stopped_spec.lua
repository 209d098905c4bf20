-- A runner stopped past its lease, as repeated trials. Runner A (lease 2 s)
-- runs 8 Lua migrations of 0.4 s that each record their span; at a random
-- moment it gets SIGSTOP: in odd trials while a migration's child runs, in
-- even trials between two migrations (no child alive). 3 s later runner B
-- takes the expired lease over and runs what is pending to the end. Then A
-- gets SIGCONT. A must notice that it lost the lock and record nothing more:
-- the ledger is byte for byte what B left, and A exits 5 saying it lost the
-- runner lock.
--
-- The runner confirms its lock before each migration and each record, and
-- the migration's own process group dies when the runner's hold lapses
-- (lock.h), so neither a resumed runner nor its child overlaps B.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 8
local SECS = 0.4
local TRIALS = T.count('stopped', 2, 6)

describe('#reliability a stopped runner', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function data_of(ns)
    local cm = c.json('get configmap cozystack-version -n ' .. ns)
    return require('json').encode(cm.data or {}), cm.metadata.resourceVersion
  end

  for i = 1, TRIALS do
    local inside = i % 2 == 1
    T.trial('stopped runner', string.format(
      'a runner stopped %s past its lease records nothing once resumed (trial %d/%d)',
      inside and 'inside a migration' or 'between migrations', i, TRIALS), function()
      local ns = c.new_ns('rel-stop')
      c.empty_ledger(ns)
      local dir = T.spans(ns, STEPS, SECS, 'stop')
      local a = T.start(c.run_cmd(dir, ns, '--lease-duration 2s --lock-timeout 1s'))
      h.sleep(string.format('%.3f', 0.3 + math.random() * (STEPS * SECS * 0.5)))
      -- the moment: a migration's child alive (inside), or none (between;
      -- the Lease's watcher, a child of A while it holds the lock, is none)
      local deadline, ok = T.now() + 10, false
      repeat
        if (#T.children(a.pid) > 0) == inside then
          os.execute('kill -STOP ' .. a.pid)
          ok = true
        end
      until ok or T.now() > deadline or h.slurp(a.dir .. '/rc') ~= ''
      assert.is_true(ok, 'could not stop A ' .. (inside and 'inside' or 'between') .. ' migrations')
      local before = #T.span_list(c, ns)
      h.sleep(3)
      local b = h.run(c.run_cmd(dir, ns, '--lease-duration 2s --lock-timeout 30s'))
      assert.are.equal(0, b.code, 'runner B: ' .. b.err)
      h.contains(b.err, 'taking over the expired lease', 'runner B')
      local data, rv = data_of(ns)
      os.execute('kill -CONT ' .. a.pid)
      local rc = T.wait(a, 60)
      assert.is_not_nil(rc, 'runner A did not end after SIGCONT')
      local after_data, after_rv = data_of(ns)
      local spans = T.span_list(c, ns)
      local runs, twice = {}, {}
      for _, s in ipairs(spans) do runs[s.slug] = (runs[s.slug] or 0) + 1 end
      for slug, n in pairs(runs) do if n > 1 then twice[#twice + 1] = slug end end
      table.sort(twice)
      T.note(string.format('A stopped %s after %d spans; A exited %d; ran twice: %s; overlaps: %d',
        inside and 'inside' or 'between', before, rc, #twice > 0 and table.concat(twice, ',') or 'none',
        #T.span_problems(spans)))
      -- B's work is complete whatever A did
      local recs, problems = T.ledger(c, ns)
      T.check(problems, 'the ledger')
      local missing = {}
      for k = 1, STEPS do
        local slug = string.format('stop-%02d', k)
        if not recs[slug] or recs[slug].state ~= 'ok' then missing[#missing + 1] = slug end
      end
      T.check(missing, 'steps not recorded ok')
      -- the property under test
      local noticed = rc == 5 and h.has(T.err(a), 'lost the runner lock')
      local quiet = after_data == data and after_rv == rv
      T.check(T.span_problems(spans), 'migrations of the two runners overlap')
      if not (noticed and quiet) then
        error(string.format('resumed runner A exited %d%s and %s; A said:\n%s', rc,
          noticed and ' (it said it lost the lock)' or ' without saying it lost the lock',
          quiet and 'left the ledger alone' or ('wrote the ledger after losing the lock (resourceVersion ' ..
            rv .. ' -> ' .. after_rv .. ')'), T.err(a):sub(-600)))
      end
    end)
  end
end)
