-- A deleted Lease, as repeated trials. Runner A (the default 90 s lease)
-- runs 8 shell migrations of 1 s that log their spans; at a random moment a
-- person deletes the Lease: plainly (kubectl delete: the runner's finalizer
-- keeps it, terminating), or by force (the finalizer removed first, as an
-- operator does when `kubectl delete` hangs on it: the Lease is gone at
-- once). Runner B starts right after. A watches its Lease: it notices
-- within a round trip of the event, its migration in flight is killed at
-- once (lock.h "watch"), and it exits 5, starting and recording nothing
-- after the deletion. With the finalizer kept, B gets in only once A let go,
-- and at once (A leaves nothing terminating); by force, B creates the Lease
-- anew and, since the ledger shows earlier runs, waits LOCK_NEW_LEASE_GRACE_S
-- before its first migration. Either way no migration of B overlaps one of
-- A: the trial counts the overlap, which must be nil (20 trials of the
-- force-deleted case in `make reliability`). Every migration ends up
-- recorded ok by the runner that ran it last.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local SLUGS = { 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8' }
local LEASE = 'cozystack-version-lock'
local SLACK = 1.0 -- a round trip by the watch, far less; a read-back (0.5 s) when it is broken

describe('#reliability a deleted Lease', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function trial(force)
    local ns = c.new_ns('rel-lease')
    c.empty_ledger(ns)
    local log = h.tmpdir() .. '/log'
    local dir = T.beats(SLUGS, log, { secs = 1 })
    local a = T.start(T.with_runner_pid(c.run_cmd(dir, ns, '')))
    assert.is_true(h.eventually(20, function() return h.has(h.slurp(log), 'start') end), 'A did not start: ' .. T.err(a))
    h.sleep(string.format('%.3f', math.random() * 4))
    if force then
      h.must(c.kubectl(string.format('patch lease %s -n %s --type merge -p %s', LEASE, ns,
        h.q('{"metadata":{"finalizers":null}}'))), 'remove the finalizer')
    end
    h.must(c.kubectl(string.format('delete lease %s -n %s --wait=false', LEASE, ns)), 'delete the Lease')
    local td = T.wall()
    local b = T.start(T.with_runner_pid(c.run_cmd(dir, ns, '--lock-timeout 60s')))
    local rca, rcb = T.wait(a, 60), T.wait(b, 120)
    local spans = T.beat_spans(log)
    local problems = {}
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    if rca ~= 5 or not h.has(T.err(a), 'lost the runner lock') then
      problems[#problems + 1] = string.format('A exited %s without saying it lost the lock: %s', tostring(rca),
        T.err(a):sub(-300))
    end
    if not force and not h.has(T.err(a), 'deleted while held') then
      problems[#problems + 1] = 'A did not say the Lease was deleted: ' .. T.err(a):sub(-300)
    end
    if rcb ~= 0 then problems[#problems + 1] = 'B exited ' .. tostring(rcb) .. ': ' .. T.err(b):sub(-300) end
    add(T.after_problems(spans, a.pid, td, SLACK))
    add(T.overlaps(spans, nil, td, td))
    local recs = T.records(c, ns) or {}
    add(T.writer_problems(recs, spans))
    for _, slug in ipairs(SLUGS) do
      if not recs[slug] or recs[slug].state ~= 'ok' then problems[#problems + 1] = slug .. ' is not recorded ok' end
    end
    add(T.release_problems(T.lease(c, ns)))
    -- B got in without waiting out a lease duration (nothing left terminating)
    local b_first
    for _, sp in ipairs(spans) do
      if sp.runner == b.pid and not b_first then b_first = sp.from end
    end
    if b_first and b_first - td > 15 then
      problems[#problems + 1] = string.format('B waited %.1fs after the deletion', b_first - td)
    end
    local a_last, overlap = 0, 0
    for _, sp in ipairs(spans) do
      if sp.runner == a.pid then a_last = math.max(a_last, sp.to) end
    end
    if b_first then overlap = math.max(0, a_last - b_first) end
    T.note(string.format('%s: A exit %s, its last span ended %.2fs after the deletion; B in after %s; overlap %.2fs',
      force and 'force' or 'plain', tostring(rca), a_last - td, b_first and string.format('%.2fs', b_first - td) or '-',
      overlap))
    T.check(problems, (force and 'the Lease force-deleted' or 'the Lease deleted') ..
      ' (A said: ' .. T.err(a):sub(-300) .. ')')
  end

  for _, force in ipairs({ false, true }) do
    local n = T.count(force and 'lease-force' or 'lease-delete', 1, force and 20 or 3)
    for i = 1, n do
      T.trial(force and 'Lease force-deleted' or 'Lease deleted', string.format(
        'a runner whose Lease is %s stops at once, overlaps no other runner and records nothing more (trial %d/%d)',
        force and 'deleted with its finalizer removed' or 'deleted (finalizer kept)', i, n),
        function() trial(force) end)
    end
  end
end)
