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

  it('see a difference in the objects a run left', function()
    local a, b = c.new_ns('rel-ctl'), c.new_ns('rel-ctl')
    h.must(c.kubectl('create configmap chain -n ' .. a .. ' --from-literal=s01=root'))
    h.must(c.kubectl('create configmap chain -n ' .. b .. ' --from-literal=s01=root2'))
    assert.are_not.equal(T.snapshot(c, a), T.snapshot(c, b))
  end)
end)
