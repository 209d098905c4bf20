-- `cozy-migrate new`: the scaffold passes lint and its own spec as
-- generated; invalid, existing and reused slugs are refused; and the spec's
-- idempotence check does catch a migration that is not safe to run twice.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local migration = require('support.migration')

local fails = h.fails

describe('new', function()
  it('writes a migration with its header and a spec, which pass lint', function()
    local dir = h.tmpdir()
    local res = h.cozy('new', 'label-things', '--dir', dir)
    assert.are.equal(0, res.code, res.err)
    local script = h.slurp(dir .. '/migrations/pre-apply/label-things.lua')
    assert.matches('^%-%- cozystack%-migration: on%-error=abort\n', script)
    assert.is_truthy(h.slurp(dir .. '/spec/migrations/label-things_spec.lua'):find("migration.assert_idempotent(script)", 1, true))
    res = h.cozy('new', '--tier', 'background', '--on-error', 'warn', 'later-work', '--dir', dir)
    assert.are.equal(0, res.code, res.err)
    assert.matches('^%-%- cozystack%-migration: on%-error=warn\n', h.slurp(dir .. '/migrations/background/later-work.lua'))
    res = h.cozy('lint', '--dir', dir)
    assert.are.equal(0, res.code, res.out .. res.err)
  end)

  it('writes a spec that runs green against the cluster', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local dir = h.tmpdir()
    assert.are.equal(0, h.cozy('new', 'scaffolded-one', '--dir', dir).code)
    local res = h.run('cd ' .. h.q(h.root) .. ' && ' .. h.q(h.bin) .. ' spec ' ..
      h.q(dir .. '/spec/migrations/scaffolded-one_spec.lua'))
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.matches('1 passed, 0 failed, 0 skipped', res.out, 1, true)
    -- and before that line each file's wall time (spec/support/output.lua)
    assert.matches('spec files by wall time %(1 files, [%d.]+ s%):\n +[%d.]+ s +1 tests  [^\n]*/scaffolded%-one_spec%.lua\n' ..
      '1 passed, 0 failed, 0 skipped\n', res.out)
  end)

  it("catches a migration that is not safe to run twice", function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local ns = 'idem-' .. os.time() % 100000 .. math.random(100, 999)
    h.must(h.kubectl('create namespace ' .. ns))
    local f = h.write(os.tmpname() .. '.lua', string.format([[
-- cozystack-migration: on-error=abort
local kube = require('kube')
local cm = kube.get('configmaps', 'counter', { namespace = %q })
if not cm then
  kube.create('configmaps', { metadata = { name = 'counter', namespace = %q }, data = { n = '0' } })
else
  kube.patch('configmaps', 'counter', { data = { n = tostring(tonumber(cm.data.n) + 1) } }, { namespace = %q })
end
]], ns, ns, ns))
    local ok, err = pcall(migration.assert_idempotent, f)
    assert.is_false(ok)
    -- named by the write journal of the second run
    h.contains(tostring(err), 'changed 1 object(s) (write journal):\n  patch configmaps ' .. ns .. '/counter (200)')
    os.remove(f)
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end)

  describe('refuses', function()
    it('an invalid slug (2)', function()
      fails(h.cozy('new', 'Not_A_Slug', '--dir', h.tmpdir()), 2, "'Not_A_Slug' is not a valid slug")
      fails(h.cozy('new', string.rep('x', 61), '--dir', h.tmpdir()), 2, 'at most 60 characters')
      fails(h.cozy('new', '--dir', h.tmpdir()), 2, 'expected a SLUG')
      fails(h.cozy('new', 'ok-slug', '--tier', 'later'), 2, "--tier: 'later' is not pre-apply or background")
    end)

    it('an existing slug in any tier, legacy-sh/ or revoked (9)', function()
      local dir = h.tmpdir()
      assert.are.equal(0, h.cozy('new', 'taken', '--dir', dir).code)
      fails(h.cozy('new', 'taken', '--tier', 'background', '--dir', dir), 9, "slug 'taken' already exists: ")
      h.write(dir .. '/migrations/revoked', 'gone-bad\n')
      fails(h.cozy('new', 'gone-bad', '--dir', dir), 9, "migrations/revoked:1: slug 'gone-bad' is revoked")
      os.execute('mkdir -p ' .. h.q(dir .. '/legacy-sh'))
      h.write(dir .. '/legacy-sh/legacy-map', '7 old-seven\n')
      fails(h.cozy('new', 'old-seven', '--dir', dir), 9, "legacy-map:1: slug 'old-seven' is a legacy migration's")
    end)

    it('a slug a release tag carried, even one since deleted (9)', function()
      local r = gitrepo.new()
      r:lua('once-upon'):commit():tag('v1.0.0')
      r:rm('migrations/pre-apply/once-upon.lua'):commit()
      fails(h.cozy('new', 'once-upon', '--dir', r.dir), 9,
        "slug 'once-upon' was shipped in v1.0.0 as migrations/pre-apply/once-upon.lua: a slug is never reused")
      assert.are.equal(0, h.cozy('new', 'brand-new', '--dir', r.dir).code)
    end)
  end)
end)
