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
    { 'a legacy-map number past the bound (1e20)', function(ns)
      return { batches = { { '00000-legacy', { 'first', 'old' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') }, old = { shell = true } },
               raw = { ['legacy-sh/legacy-map'] = '1e20 old\n' } }
    end, "legacy-sh/legacy-map:1: expected '<number> <slug>', the number decimal from 1 to 99999" },
    { 'timeout=5s5s', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'twice' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') },
                           twice = { header = '-- cozystack-migration: on-error=warn\n-- cozystack-migration: timeout=5s5s' } } }
    end, 'twice.lua:2: timeout=5s5s: not a duration' },
    { 'a script in a subdirectory of a tier', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               raw = { ['migrations/pre-apply/sub/x.lua'] = '-- cozystack-migration: on-error=warn\n' } }
    end, '/migrations/pre-apply/sub: a directory; migrations sit directly in migrations/pre-apply/ as <slug>.lua' },
    { 'a dangling *.lua symlink', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               links = { ['migrations/background/gone.lua'] = 'nowhere.lua' } }
    end, '/migrations/background/gone.lua: dangling symlink' },
    { 'a looping *.lua symlink', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               links = { ['migrations/pre-apply/loop.lua'] = 'loop.lua' } }
    end, '/migrations/pre-apply/loop.lua: symlink loop' },
    { 'a legacy-sh/lib that cannot be read', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') } },
               links = { ['legacy-sh/lib/helpers.sh'] = '/nonexistent/helpers.sh' } }
    end, '/legacy-sh/lib/helpers.sh: dangling symlink' },
    { 'a requires naming itself', function(ns)
      return { batches = { { '00001-v1.0.0', { 'first', 'selfish' } } },
               scripts = { first = { body = runner.lua_marker(ns, 'first') },
                           selfish = { header = '-- cozystack-migration: on-error=warn\n-- cozystack-migration: requires=selfish' } } }
    end, "selfish.lua: requires 'selfish', itself" },
  }
  for _, case in ipairs(cases) do
    it('given ' .. case[1], function()
      local ns = runner.new_ns()
      local spec = case[2](ns)
      local dir = fixture.tree(spec)
      for path, target in pairs(spec.links or {}) do
        assert(os.execute(string.format('ln -s %s %s', h.q(target), h.q(dir .. '/' .. path))))
      end
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

  it('given a script it cannot read (as the unprivileged user the image runs as)', function()
    if h.run('id -u').out ~= '0\n' then
      pending('needs root to switch to the unprivileged user (setpriv)')
      return
    end
    local ns = runner.new_ns()
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'first', 'secret' } } },
      scripts = { first = { body = runner.lua_marker(ns, 'first') }, secret = {} } })
    h.must(h.run(string.format('chmod -R a+rX %s && chmod 000 %s/migrations/pre-apply/secret.lua', h.q(dir), h.q(dir))))
    local res = h.run(string.format('setpriv --reuid=65534 --regid=65534 --clear-groups %s plan --dir %s --local',
      h.q(h.bin), h.q(dir)))
    assert.are.equal(3, res.code, res.err)
    one_line(res.err)
    contains(res.err, dir .. '/migrations/pre-apply/secret.lua: Permission denied')
  end)
end)
