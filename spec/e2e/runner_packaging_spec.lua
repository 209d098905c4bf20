-- The runner refusing a migration tree it cannot trust, end to end against
-- the real local kube-apiserver (tools/testenv): every defect of the
-- manifest (order.d/), the headers, file names, legacy-map and revoked ends
-- `run` and `plan` with exit 3 and one line naming it, before the lock is
-- taken or any script runs. Helpers are in spec/support/runner.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')

local contains, one_line = h.contains, h.one_line

describe('#e2e the runner refuses an invalid tree with exit 3 before any script runs', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  -- Each case: a tree where `first` (which creates a marker) sits before
  -- the defect in the manifest, and what stderr must name.
  local cases = {
    { 'a script in no batch', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, stray = {} } }
    end, "pre-apply/stray.lua: slug 'stray' is in no batch" },
    { 'a batch entry neither shipped nor retired', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'ghost' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } } }
    end, "order.d/00001-v1.0.0:2: 'ghost' is neither shipped nor retired" },
    { 'a slug in two batches', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'twice' } }, { '00002-v1.1.0', { 'twice' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, twice = {} } }
    end, "order.d/00002-v1.1.0:1: slug 'twice' is already listed at" },
    { 'a slug in two tiers', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'both' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, both = {} },
               raw = { ['migrations/background/both.lua'] = '-- cozystack-migration: on-error=warn\n' } }
    end, "slug 'both' is shipped twice" },
    { 'a file name that is not a slug', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               raw = { ['migrations/pre-apply/Bad_Name.lua'] = '-- cozystack-migration: on-error=warn\n' } }
    end, "pre-apply/Bad_Name.lua: 'Bad_Name' is not a valid slug" },
    { 'a header without on-error', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'noerr' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') },
                           noerr = { header = '-- cozystack-migration: timeout=5m' } } }
    end, 'noerr.lua: header has no on-error' },
    { 'an unknown header key', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'colour' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') },
                           colour = { header = '-- cozystack-migration: on-error=warn\n-- cozystack-migration: colour=blue' } } }
    end, "colour.lua:2: unknown header key 'colour'" },
    { 'timeout=abc', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'slowpoke' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') },
                           slowpoke = { shell = true, header = '# cozystack-migration: on-error=warn\n# cozystack-migration: timeout=abc' } } }
    end, 'slowpoke.sh:2: timeout=abc: not a duration' },
    { 'a malformed manifest line', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'second extra words' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, second = {} } }
    end, 'order.d/00001-v1.0.0:2: malformed manifest line' },
    { 'a malformed legacy-map line', function(ns)
      return { batches = { { '00000-legacy', { 'first', 'old' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, old = { shell = true } },
               raw = { ['legacy-sh/legacy-map'] = '1 first\nseven old\n' } }
    end, "legacy-sh/legacy-map:2: expected '<number> <slug>'" },
    { 'an unknown revoked slug', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               revoked = { '# comment', 'nobody' } }
    end, "migrations/revoked:2: revoked slug 'nobody' is in no batch" },
  }
  for _, case in ipairs(cases) do
    it('given ' .. case[1], function()
      local ns = runner.new_ns()
      local dir = fixture.tree(case[2](ns))
      runner.make_ledger(ns, {})
      local rv = runner.get_ledger(ns).metadata.resourceVersion
      local res = runner.run(dir, ns)
      assert.are.equal(3, res.code, res.out .. res.err)
      one_line(res.err)
      contains(res.err, case[3], 'stderr')
      assert.are.equal('', res.out)
      assert.are.same({}, (runner.markers(ns)))
      assert.are.equal(rv, runner.get_ledger(ns).metadata.resourceVersion)
      assert.is_nil(runner.get_lease(ns), 'the tree is validated before the lock is taken')
      -- plan refuses the same way
      res = runner.plan(dir, ns)
      assert.are.equal(3, res.code)
      contains(res.err, case[3], 'plan stderr')
    end)
  end
end)
