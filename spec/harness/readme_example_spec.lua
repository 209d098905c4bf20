-- The documented example of a migration spec (docs/writing-migrations.md,
-- "The spec harness") is a spec that runs: taken from the doc as it is and
-- run with `cozy-migrate spec` against the cluster, so the documented
-- harness cannot drift from the real one.
local h = require('support.helpers')

describe('#e2e the documented example of the spec harness', function()
  it('runs green as written', function()
    assert.is_true(h.has_cluster(), 'needs the local apiserver (KUBECONFIG)')
    local doc = h.slurp(h.root .. '/docs/writing-migrations.md')
    local code = doc:match('<!%-%- harness%-example %-%->\n```lua\n(.-)\n```\n')
    assert.is_truthy(code, 'no <!-- harness-example --> block in docs/writing-migrations.md')
    local f = h.write(h.tmpdir() .. '/readme_example_spec.lua', code .. '\n')
    local res = h.run(string.format('cd %s && %s spec %s', h.q(h.root), h.q(h.bin), h.q(f)))
    assert.are.equal(0, res.code, res.out .. res.err)
    local passed, failed = res.out:match('(%d+) passed, (%d+) failed')
    assert.are.equal('0', failed, res.out)
    assert.is_true(tonumber(passed) >= 4, res.out)
  end)
end)
