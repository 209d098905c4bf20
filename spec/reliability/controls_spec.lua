-- The reliability trials' checks fail when what they look at is wrong: each
-- one is shown a state made wrong on purpose (a trial that cannot fail
-- would prove nothing).
local h = require('support.helpers')
local T = require('support.trials')
local json = require('json')

describe('#reliability the trials\' checks', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  it('flag a ledger value that does not parse, or has no known state', function()
    local ns = c.new_ns('rel-ctl')
    h.must(c.kubectl('create configmap cozystack-version -n ' .. ns ..
      [[ --from-literal=m.good='{"state":"ok","attempts":1}' --from-literal=m.bad='{"state":"ok",' ]] ..
      [[ --from-literal=m.odd='{"state":"done","attempts":1}' --from-literal=version=3]]))
    local recs, problems = T.ledger(c, ns)
    assert.are.same({ state = 'ok', attempts = 1 }, recs.good)
    table.sort(problems)
    assert.are.same({ 'm.bad does not parse as JSON', 'm.odd has unknown state done' }, problems)
    local _, none = T.ledger(c, c.new_ns('rel-ctl'))
    assert.are.equal(1, #none, 'an absent ledger is a problem')
  end)

  it('flag an ok record without its end marker', function()
    local recs = { ['seq-01'] = { state = 'ok' }, ['seq-02'] = { state = 'ok' }, ['seq-03'] = { state = 'failed' } }
    assert.are.same({ 'seq-02 is recorded ok but its end marker is missing' },
      T.ok_without_marker(recs, { ['01'] = 1 }))
    assert.are.same({}, T.ok_without_marker(recs, { ['01'] = 1, ['02'] = 2 }))
  end)

  it('flag a process left with the tree in its command line, and not a finished one', function()
    local marker = h.tmpdir()
    local p = T.start(string.format('sh -c %s x %s', h.q('sleep 30; :'), h.q(marker)))
    assert.is_true(h.eventually(2, function() return #T.orphans(marker) == 1 end), 'the orphan is not seen')
    T.signal(p, 'KILL')
    T.wait(p, 5)
    assert.is_true(h.eventually(2, function() return #T.orphans(marker) == 0 end), 'a dead process is seen')
  end)

  it('flag overlapping spans and a migration run twice or never', function()
    local spans = {
      { slug = 'a', from = 1.0, to = 2.0 }, { slug = 'b', from = 1.5, to = 2.5 }, { slug = 'b', from = 3, to = 4 },
    }
    local problems = T.span_problems(spans, { 'a', 'b', 'c' })
    assert.are.equal(3, #problems, json.encode(problems))
    h.contains(problems[1], 'a [1.000, 2.000] overlaps b [1.500, 2.500]')
    h.contains(table.concat(problems, '\n'), 'b ran 2 times')
    h.contains(table.concat(problems, '\n'), 'c ran 0 times')
    assert.are.same({}, T.span_problems({ spans[1], spans[3] }, { 'a', 'b' }))
  end)

  it('count two objects made for one create as a duplicate', function()
    local ns = c.new_ns('rel-ctl')
    for _ = 1, 2 do
      h.must(c.kubectl('create -f ' .. h.write(os.tmpname() .. '.json', json.encode({
        apiVersion = 'v1', kind = 'ConfigMap',
        metadata = { generateName = 'made-', namespace = ns, labels = { ['trial/made'] = '007' } } }))))
    end
    assert.are.same({ ['007'] = 2 }, T.labelled(c, ns, 'trial/made'))
  end)

  it('flag a stopped run that did not exit 128+signal or say which signal stopped which migration', function()
    assert.are.same({}, T.stop_problems(143,
      'cozy-migrate: stopped by SIGTERM while pre-apply seq-03 ran: it was stopped and is not recorded\n', 'TERM', 'seq-03'))
    assert.are.same({ 'exit 0, not 143', '0 lines say the run was stopped by SIGTERM in seq-03' },
      T.stop_problems(0, '', 'TERM', 'seq-03'))
    assert.are.same({ '0 lines say the run was stopped by SIGTERM in seq-03' },
      T.stop_problems(143, 'cozy-migrate: stopped by SIGTERM while pre-apply seq-04 ran\n', 'TERM', 'seq-03'))
    assert.are.same({ 'exit 143, not 129' }, T.stop_problems(143, 'stopped by SIGHUP before seq-01 started\n', 'HUP'))
  end)

  it('flag a Lease left held, terminating or with a finalizer, and not a released one', function()
    assert.are.same({}, T.release_problems({ metadata = {}, spec = { holderIdentity = '' } }))
    assert.are.same({}, T.release_problems(nil))
    local left = T.release_problems({ metadata = { deletionTimestamp = 'x', finalizers = { 'platform.cozystack.io/runner-lock' } },
      spec = { holderIdentity = 'h/1/2/ab' } })
    assert.are.same({ 'the Lease is still held by h/1/2/ab', 'the Lease is left terminating',
      'the Lease keeps the finalizer platform.cozystack.io/runner-lock' }, left)
  end)

  it('read spans from a beat log, a killed one ending a beat of its own cadence after its last line', function()
    local log = h.write(os.tmpname(), 'start 7 a 10.0\nbeat 7 a 10.1\nend 7 a 10.2\nstart 8 b 10.5\nbeat 8 b 10.6\n' ..
      'start 9 c 11.0\nbeat 9 c 11.3\n')
    local sp = T.beat_spans(log)
    for _, s in ipairs(sp) do s.to = math.floor(s.to * 1000 + 0.5) / 1000 end
    -- b beat every 0.1 s: dead by 0.12 s after its last beat; c's cadence
    -- was slower than a beat, so the widest pad (0.15 s) applies
    assert.are.same({ { runner = '7', slug = 'a', from = 10.0, to = 10.2, ended = true },
      { runner = '8', slug = 'b', from = 10.5, to = 10.72, ended = false },
      { runner = '9', slug = 'c', from = 11.0, to = 11.45, ended = false } }, sp)
  end)

  it('flag overlapping runners, excusing only the lost runner\'s migration in flight within its grace', function()
    local sp = { { runner = 'A', slug = 'm2', from = 1, to = 3.4, ended = false },
      { runner = 'B', slug = 'm2', from = 2.5, to = 4, ended = true } }
    assert.are.equal(1, #T.overlaps(sp))
    assert.are.same({}, T.overlaps(sp, 'A', 2.2, 3.5))
    assert.are.equal(1, #T.overlaps(sp, 'A', 2.2, 3.0), 'past its grace')
    assert.are.equal(1, #T.overlaps(sp, 'B', 2.2, 3.5), 'another runner is not excused')
    sp[1].from = 2.3
    assert.are.equal(1, #T.overlaps(sp, 'A', 2.2, 3.5), 'a migration begun after the loss is not excused')
  end)

  it('flag a migration begun, or run on, after its runner lost the lock', function()
    local sp = { { runner = 'A', slug = 'm1', from = 1, to = 2 }, { runner = 'A', slug = 'm2', from = 2.1, to = 3.5 },
      { runner = 'A', slug = 'm3', from = 3.6, to = 4 }, { runner = 'B', slug = 'm4', from = 5, to = 6 } }
    local p = T.after_problems(sp, 'A', 2.5, 0.5)
    assert.are.equal(2, #p, table.concat(p, '; '))
    h.contains(p[1], 'm2 ran on')
    h.contains(p[2], 'm3 started')
    assert.are.same({}, T.after_problems(sp, 'A', 4.5, 0.5))
  end)

  it('flag a record written by a runner other than the one that ran it last', function()
    local sp = { { runner = '7', slug = 'a', ended = true }, { runner = '8', slug = 'a', ended = true },
      { runner = '7', slug = 'b', ended = false } }
    assert.are.same({}, T.writer_problems({ a = { runner = 'h/8/1/ff' } }, sp))
    assert.are.same({ 'a was recorded by runner 7, but runner 8 ran it last' },
      T.writer_problems({ a = { runner = 'h/7/1/ff' } }, sp))
    assert.are.same({ 'b is recorded but no run of it ended' }, T.writer_problems({ b = { runner = 'h/7/1/ff' } }, sp))
  end)

  it('flag a skipped-fresh-install record, and a migration that ran without a record', function()
    assert.are.same({ 'x is recorded skipped-fresh-install' },
      T.fresh_problems({ x = { state = 'skipped-fresh-install' }, y = { state = 'ok' } }))
    assert.are.same({}, T.fresh_problems(nil))
    assert.are.same({ 'b ran and is not recorded' }, T.unrecorded_problems({ a = {} }, { a = 1, b = 1 }))
  end)

  it('run a command as PID 1 of its own namespace, with a host name of its own', function()
    local r = h.must(h.run(T.pid1('sh -c ' .. h.q('echo $$ $(hostname)'), 'twin')))
    assert.are.equal('1 twin\n', r.out)
  end)

  it('shift a command\'s wall clock, and only that', function()
    local function clocks(cmd)
      local wall, up = h.must(h.run(cmd)).out:match('^(%d+)\n([%d.]+)')
      return tonumber(wall), tonumber(up)
    end
    local probe = 'sh -c ' .. h.q('date +%s; cat /proc/uptime')
    local wall0, up0 = clocks(probe)
    for _, skew in ipairs({ -120, -90, 120 }) do
      local wall, up = clocks(T.skewed(probe, skew))
      assert.is_true(math.abs(wall - wall0 - skew) <= 2, string.format('%+d: %d vs %d', skew, wall, wall0))
      assert.is_true(math.abs(up - up0) <= 2, 'the monotonic clock moved with it')
    end
    assert.are.equal(10.5, T.micro('1970-01-01T00:00:10.500000Z'))
    assert.are.equal(86400 + 3661, T.micro('1970-01-02T01:01:01Z'))
  end)

  it('see a difference in the objects a run left', function()
    local a, b = c.new_ns('rel-ctl'), c.new_ns('rel-ctl')
    h.must(c.kubectl('create configmap chain -n ' .. a .. ' --from-literal=s01=root'))
    h.must(c.kubectl('create configmap chain -n ' .. b .. ' --from-literal=s01=root2'))
    assert.are_not.equal(T.snapshot(c, a), T.snapshot(c, b))
  end)
end)
