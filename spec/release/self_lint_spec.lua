-- The project's own tree keeps the authoring contract: `make test` runs
-- `cozy-migrate lint --history` on it (the same as `make lint`).
local h = require('support.helpers')

describe('the repository', function()
  it('passes cozy-migrate lint --history', function()
    local res = h.cozy('lint', '--dir', h.root, '--history')
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.matches('no problems', res.err, 1, true)
  end)
end)
