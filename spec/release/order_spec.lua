-- `cozy-migrate order`: the manifest generator (DESIGN.md "The manifest
-- generator") on scratch git repositories: linear history, release
-- candidates, a maintenance line with a backport, retired and untagged
-- slugs, `requires` reordering, every failure with its exit code, and the
-- runner's loader (tree_load, through the planner) reading what it wrote.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local migrate = require('migrate')

local function ok(res)
  assert.are.equal(0, res.code, 'stdout: ' .. res.out .. '\nstderr: ' .. res.err)
  return res
end

local fails = h.fails

local function manifest_text(repo, dir)
  local parts = {}
  for _, f in ipairs(repo:manifest(dir)) do parts[#parts + 1] = '== ' .. f[1] .. '\n' .. f[2] end
  return table.concat(parts)
end

local runs = require('support.fixture').runs

local function seeded(plan)
  local out = {}
  for slug in pairs(plan.seed or {}) do out[#out + 1] = slug end
  table.sort(out)
  return out
end

describe('order', function()
  it('walks a linear history: one batch per tag that first carries a slug, alphabetical', function()
    local r = gitrepo.new()
    r:lua('zeta'):lua('alpha'):commit():tag('v1.0.0')
    r:commit('a release that ships nothing new'):tag('v1.0.1')
    r:lua('beta', { tier = 'background' }):lua('aardvark'):commit():tag('v1.1.0')
    ok(r:order())
    assert.are.equal('== 00001-v1.0.0\nalpha\nzeta\n' ..
      '== 00003-v1.1.0\naardvark\nbeta\n', manifest_text(r))
  end)

  it('orders release candidates before their release, versions numerically, and ignores other tags', function()
    local r = gitrepo.new()
    r:lua('one'):commit():tag('v1.9.0')
    r:lua('two'):commit():tag('v1.10.0-rc.1', true)
    r:lua('three'):commit():tag('v1.10.0-rc.2'):tag('latest'):tag('v1.10'):tag('v1.10.0-beta')
    r:lua('four'):commit():tag('v1.10.0')
    ok(r:order())
    assert.are.equal('== 00001-v1.9.0\none\n== 00002-v1.10.0-rc.1\ntwo\n' ..
      '== 00003-v1.10.0-rc.2\nthree\n== 00004-v1.10.0\nfour\n', manifest_text(r))
  end)

  it('emits a slug a tag carried and HEAD does not as retired, in its batch, and still passes the prefix check', function()
    local r = gitrepo.new()
    r:lua('keep'):lua('old'):commit():tag('v1.0.0')
    r:lua('next'):commit():tag('v1.1.0')
    r:rm('migrations/pre-apply/old.lua'):commit('retire old')
    local res = ok(r:order('--check-prefix'))
    assert.matches("v1.1.0's manifest (2 batches) is a prefix of this one", res.out, 1, true)
    assert.are.equal('== 00001-v1.0.0\nkeep\nold retired\n== 00002-v1.1.0\nnext\n', manifest_text(r))
  end)

  it('puts slugs no tag carries in 99999-untagged, and never when HEAD is a release tag', function()
    local r = gitrepo.new()
    r:lua('first'):commit():tag('v1.0.0')
    r:lua('wip'):commit()
    ok(r:order())
    assert.are.equal('== 00001-v1.0.0\nfirst\n== 99999-untagged\nwip\n', manifest_text(r))
    r:tag('v1.1.0')
    ok(r:order())
    assert.are.equal('== 00001-v1.0.0\nfirst\n== 00002-v1.1.0\nwip\n', manifest_text(r))
    -- without any tag, everything is untagged
    local fresh = gitrepo.new()
    fresh:lua('b'):lua('a'):commit()
    ok(fresh:order())
    assert.are.equal('== 99999-untagged\na\nb\n', manifest_text(fresh))
  end)

  it('reads HEAD, never the working tree', function()
    local r = gitrepo.new()
    r:lua('committed'):commit()
    r:lua('uncommitted')
    ok(r:order())
    assert.are.equal('== 99999-untagged\ncommitted\n', manifest_text(r))
  end)

  it('writes 00000-legacy from legacy-map, keeps its slugs out of the tag walk, and retires a deleted one', function()
    local r = gitrepo.new()
    r:write('legacy-sh/legacy-map', '# old numbers\n1 first-old\n2 second-old\n')
    r:sh('first-old'):sh('second-old'):write('legacy-sh/lib/common.sh', 'x=1\n')
    r:lua('new-one'):commit():tag('v1.0.0')
    ok(r:order())
    assert.are.equal('== 00000-legacy\nfirst-old\nsecond-old\n== 00001-v1.0.0\nnew-one\n', manifest_text(r))
    r:rm('legacy-sh/first-old.sh'):commit('retention floor')
    ok(r:order('--check-prefix'))
    assert.are.equal('== 00000-legacy\nfirst-old retired\nsecond-old\n== 00001-v1.0.0\nnew-one\n',
      manifest_text(r))
  end)

  it('reorders within a batch only where requires demand, with the header read at that tag', function()
    local r = gitrepo.new()
    r:lua('base'):commit():tag('v1.0.0')
    r:lua('apple', { requires = 'cherry' }):lua('banana'):lua('cherry', { requires = 'date,base' })
      :lua('date'):lua('elder'):commit():tag('v1.1.0')
    ok(r:order())
    assert.are.equal('== 00001-v1.0.0\nbase\n== 00002-v1.1.0\nbanana\ndate\ncherry\napple\nelder\n',
      manifest_text(r))
  end)

  it('writes exactly what the runner reads: tree_load accepts the generated manifest', function()
    local r = gitrepo.new()
    r:write('legacy-sh/legacy-map', '1 legacy-one\n'):sh('legacy-one')
    r:lua('a'):lua('gone'):commit():tag('v1.0.0')
    -- requires never cross tiers (the runner refuses that tree, as lint does)
    r:lua('b', { tier = 'background' }):lua('c', { requires = 'a' }):rm('migrations/pre-apply/gone.lua'):commit()
    ok(r:order())
    local plan = assert(migrate.plan(r.dir, nil, {}))
    assert.is_true(plan.fresh_install)
    assert.are.same({ 'a', 'b', 'c', 'gone', 'legacy-one' }, seeded(plan))
    -- and each file parses with the runner's batch parser to what was written
    for _, f in ipairs(r:manifest()) do
      local entries = assert(migrate.batch(f[1], f[2]))
      local lines = {}
      for _, e in ipairs(entries) do lines[#lines + 1] = e.slug .. (e.retired and ' retired' or '') end
      assert.are.equal(f[2], table.concat(lines, '\n') .. '\n')
    end
    -- a stale batch from an earlier generation is replaced, a foreign file refused
    h.write(r:path('migrations/order.d/00007-v0.0.1'), 'stale\n')
    ok(r:order())
    assert.is_nil(io.open(r:path('migrations/order.d/00007-v0.0.1')))
    h.write(r:path('migrations/order.d/README'), 'mine\n')
    fails(r:order(), 2, 'README: not a batch file; refusing to replace')
  end)

  describe('a maintenance line with a backport', function()
    -- main: v1.5.0 (base) -> fix + feature -> v1.6.0
    -- release-1.5: branched at v1.5.0, the fix cherry-picked -> v1.5.1
    local r
    setup(function()
      r = gitrepo.new()
      r:lua('base'):commit():tag('v1.5.0')
      r:git('branch release-1.5')
      r:lua('fix-x'):commit('fix x')
      local fix = r:git('rev-parse HEAD'):gsub('%s+$', '')
      r:lua('feature-y'):commit():tag('v1.6.0')
      r:checkout('release-1.5')
      r:git('cherry-pick -x ' .. fix)
      r:tag('v1.5.1')
    end)

    local function at(ref)
      r:checkout(ref)
      ok(r:order('--check-prefix'))
      return manifest_text(r)
    end

    it('puts the backport in one batch on each line', function()
      assert.are.equal('== 00001-v1.5.0\nbase\n== 00002-v1.5.1\nfix-x\n', at('v1.5.1'))
      assert.are.equal('== 00001-v1.5.0\nbase\n== 00002-v1.6.0\nfeature-y\nfix-x\n', at('v1.6.0'))
    end)

    it('runs it once on every upgrade path (the slug is the identity)', function()
      local function rec(batch) return { state = 'ok', batch = batch, attempts = 1 } end
      local fixture = require('support.fixture')
      -- 1.5.0 -> 1.6.0: both run on 1.6.0
      at('v1.6.0')
      local p = assert(migrate.plan(r.dir, fixture.ledger({ base = rec('00001-v1.5.0') }), {}))
      assert.are.same({ 'feature-y', 'fix-x' }, runs(p))
      -- 1.5.0 -> 1.5.1: the fix runs there ...
      at('v1.5.1')
      p = assert(migrate.plan(r.dir, fixture.ledger({ base = rec('00001-v1.5.0') }), {}))
      assert.are.same({ 'fix-x' }, runs(p))
      -- ... and 1.5.1 -> 1.6.0 runs only the feature: fix-x is recorded
      at('v1.6.0')
      p = assert(migrate.plan(r.dir, fixture.ledger({ base = rec('00001-v1.5.0'), ['fix-x'] = rec('00002-v1.5.1') }), {}))
      assert.are.same({ 'feature-y' }, runs(p))
      -- installed fresh at 1.5.1 -> 1.6.0: the seed covers the fix
      at('v1.5.1')
      p = assert(migrate.plan(r.dir, nil, {}))
      assert.are.same({ 'base', 'fix-x' }, seeded(p))
      at('v1.6.0')
      p = assert(migrate.plan(r.dir, fixture.ledger({
        base = { state = 'skipped-fresh-install' }, ['fix-x'] = { state = 'skipped-fresh-install' } }), {}))
      assert.are.same({ 'feature-y' }, runs(p))
    end)

    it('fails the prefix check when the maintenance line is merged back and renumbers a released batch', function()
      r:checkout('main')
      r:git('merge -q --no-edit release-1.5')
      r:lua('later'):commit()
      local msg = fails(r:order('--check-prefix'), 9, "order.d/00002-v1.6.0: v1.6.0's manifest has it as batch 2")
      assert.matches('rewrite a released one', msg, 1, true)
    end)
  end)

  -- The shapes of a platform's own repository (Cozystack's: 273 tags over
  -- years, the engine's tree added late in a subdirectory). Release flow:
  -- vX.Y.0-rc.1 is tagged on main and freezes release-X.Y; later rcs and
  -- patches are cut on that branch; CI tags; a stable tag is cut at the
  -- promote merge commit.
  describe("on a platform's real history", function()
    local TREE = 'packages/core/platform/images/migrations'

    -- the old numbered hook, as the platform kept it before the engine
    local function old_hook(r, n)
      r:write_root(TREE .. '/migrations/' .. n, '#!/bin/sh\necho ' .. n .. '\n')
      return r
    end

    -- a promote merge on branch: a no-ff merge of a one-commit branch, tagged
    local function promote(r, branch, tag)
      r:checkout(branch)
      r:git('checkout -q -b promote-' .. tag)
      r:write_root('RELEASE', tag .. '\n'):commit('promote to ' .. tag)
      r:checkout(branch)
      r:git('merge -q --no-ff --no-edit promote-' .. tag)
      r:tag(tag, true)
    end

    -- the engine's tree arrives (import-legacy's output)
    local function engine(r)
      r:write('migrations/revoked', '# nothing revoked\n')
      r:write('legacy-sh/legacy-map', '1 old-one\n'):sh('old-one')
      return r
    end

    it('leaves out the tags from before the engine tree: a first tag without predecessor, a patch whose predecessor is on a branch main lacks', function()
      local r = gitrepo.new(nil, { tree = TREE, engine = false })
      r:write_root('README', 'platform\n'):commit():tag('v0.0.1')     -- v0.0.0 never existed
      old_hook(r, 1):commit():tag('v0.1.0')
      r:git('branch release-0.38')
      r:checkout('release-0.38'):write_root('fix', '1\n'):commit():tag('v0.38.1')
      r:checkout('main'):write_root('fix', '2\n'):commit():tag('v0.38.2') -- cut from main
      engine(r):lua('first-new'):commit('the engine')
      local res = ok(r:order())
      assert.are.equal('', res.err)
      assert.are.equal('== 00000-legacy\nold-one\n== 99999-untagged\nfirst-new\n', manifest_text(r))
      -- the engine's first release is batch 1, however many tags came before
      r:tag('v1.7.0-rc.1')
      res = ok(r:order('--check-prefix'))
      assert.matches("no earlier release of this tree in HEAD's line: nothing to compare with", res.out, 1, true)
      assert.are.equal('== 00000-legacy\nold-one\n== 00001-v1.7.0-rc.1\nfirst-new\n', manifest_text(r))
      -- the tree is read where it sits in the repository
      assert.is_nil(io.open(r.root .. '/migrations/order.d'))
    end)

    it('follows the release flow: rc.1 freezes the branch, rcs and patches on it, stable tags at the promote merge, an old line before the engine', function()
      local r = gitrepo.new(nil, { tree = TREE, engine = false })
      -- an old line: v1.6.0 promoted on main, v1.6.1 on release-1.6 only,
      -- v1.6.2 promoted on a hotfix branch merged into main
      old_hook(r, 1):commit():tag('v1.6.0-rc.1')
      r:git('branch release-1.6')
      promote(r, 'main', 'v1.6.0')
      r:checkout('release-1.6'):write_root('fix', '1\n'):commit():tag('v1.6.1')
      r:checkout('main'):git('checkout -q -b hotfix-1.6')
      r:write_root('fix', '2\n'):commit()
      promote(r, 'hotfix-1.6', 'v1.6.2')
      r:checkout('main'):git('merge -q --no-ff --no-edit hotfix-1.6')
      -- the engine arrives; v1.7.0-rc.1 freezes release-1.7
      engine(r):lua('base'):commit('the engine'):tag('v1.7.0-rc.1')
      r:git('branch release-1.7')
      -- fixes land on main first and are cherry-picked onto the branch
      local function fix(slug)
        r:checkout('main'):lua(slug):commit('fix ' .. slug)
        local c = r:git('rev-parse HEAD'):gsub('%s+$', '')
        r:checkout('release-1.7'):git('cherry-pick -x ' .. c)
      end
      fix('fix-rc'); r:tag('v1.7.0-rc.2')
      promote(r, 'release-1.7', 'v1.7.0')
      fix('fix-patch'); r:tag('v1.7.1-rc.1')
      promote(r, 'release-1.7', 'v1.7.1')
      r:checkout('main'):lua('feature-next'):commit():tag('v1.8.0-rc.1')

      local function at(ref)
        r:checkout(ref)
        local res = ok(r:order('--check-prefix'))
        assert.are.equal('', res.err)
        return manifest_text(r)
      end
      local legacy = '== 00000-legacy\nold-one\n'
      assert.are.equal(legacy .. '== 00001-v1.7.0-rc.1\nbase\n', at('v1.7.0-rc.1'))
      assert.are.equal(legacy .. '== 00001-v1.7.0-rc.1\nbase\n== 00002-v1.7.0-rc.2\nfix-rc\n', at('v1.7.0-rc.2'))
      assert.are.equal(legacy .. '== 00001-v1.7.0-rc.1\nbase\n== 00002-v1.7.0-rc.2\nfix-rc\n', at('v1.7.0'))
      local patch = at('v1.7.1')
      assert.are.equal(legacy .. '== 00001-v1.7.0-rc.1\nbase\n== 00002-v1.7.0-rc.2\nfix-rc\n' ..
        '== 00004-v1.7.1-rc.1\nfix-patch\n', patch)
      -- each release's manifest is a byte prefix of every later one on its line
      for _, tag in ipairs({ 'v1.7.0-rc.1', 'v1.7.0-rc.2', 'v1.7.0', 'v1.7.1-rc.1' }) do
        local earlier = at(tag)
        assert.are.equal(earlier, patch:sub(1, #earlier), tag .. ' is not a prefix of v1.7.1')
      end
      -- main's line: the freeze tag, then its own release; the backports are its own slugs
      assert.are.equal(legacy .. '== 00001-v1.7.0-rc.1\nbase\n' ..
        '== 00002-v1.8.0-rc.1\nfeature-next\nfix-patch\nfix-rc\n', at('v1.8.0-rc.1'))
    end)

    it("takes a patch tag on a release branch HEAD does not contain as another line's", function()
      local r = gitrepo.new()
      r:lua('base'):commit():tag('v1.7.0')
      r:git('branch release-1.7')
      r:checkout('release-1.7'):lua('branch-fix'):commit():tag('v1.7.1')
      r:checkout('main'):lua('main-fix'):commit():tag('v1.7.2')   -- cut from main
      local res = ok(r:order('--check-prefix'))
      assert.are.equal('', res.err)
      assert.are.equal('== 00001-v1.7.0\nbase\n== 00002-v1.7.2\nmain-fix\n', manifest_text(r))
      r:checkout('v1.7.1')
      ok(r:order('--check-prefix'))
      assert.are.equal('== 00001-v1.7.0\nbase\n== 00002-v1.7.1\nbranch-fix\n', manifest_text(r))
    end)

    it('starts at a first tag without predecessor, with no hint to fetch, in a clone too', function()
      local r = gitrepo.new()
      r:lua('a'):commit():tag('v2.0.1')            -- v2.0.0 was never tagged
      local res = ok(r:order())
      assert.are.equal('', res.err)
      assert.are.equal('== 00001-v2.0.1\na\n', manifest_text(r))
      local clone = h.tmpdir() .. '/clone'
      assert.are.equal(0, h.run('git clone -q ' .. h.q(r.dir) .. ' ' .. h.q(clone)).code)
      res = ok(h.cozy('order', '--repo', clone))
      assert.are.equal('', res.err)
    end)

    it('takes a skipped number as skipped, and hints at fetching only where a fetch could bring the tag', function()
      local origin = gitrepo.new()
      origin:lua('a'):commit():tag('v1.0.0')
      origin:lua('b'):commit():tag('v1.0.1')
      origin:lua('c'):commit():tag('v1.0.2')
      origin:git('tag -d v1.0.1')                  -- the number was skipped
      -- no remote: no fetch could bring it, so nothing is said
      local res = ok(origin:order())
      assert.are.equal('', res.err)
      assert.are.equal('== 00001-v1.0.0\na\n== 00002-v1.0.2\nb\nc\n', manifest_text(origin))
      -- a clone of it: a fetch could, so one warning with the hint, and the manifest is written
      local clone = h.tmpdir() .. '/clone'
      assert.are.equal(0, h.run('git clone -q ' .. h.q(origin.dir) .. ' ' .. h.q(clone)).code)
      res = ok(h.cozy('order', '--repo', clone))
      local msg = res.err:gsub('\n$', '')
      assert.is_nil(msg:find('\n'), res.err)
      assert.matches("v1.0.2 follows v1.0.0 in HEAD's history, but v1.0.1 is not in this clone", msg, 1, true)
      assert.matches('git fetch --tags', msg, 1, true)
      -- where the tag does exist upstream, fetching it is what puts its slugs in its batch
      origin:git('tag v1.0.1 HEAD~1')
      local partial = h.tmpdir() .. '/partial'
      assert.are.equal(0, h.run('git clone -q --no-tags ' .. h.q(origin.dir) .. ' ' .. h.q(partial) ..
        ' && git -C ' .. h.q(partial) .. ' fetch -q --no-tags origin tag v1.0.0 tag v1.0.2').code)
      res = ok(h.cozy('order', '--repo', partial))
      assert.matches('v1.0.1 is not in this clone', res.err, 1, true)
      assert.are.equal(0, h.run('git -C ' .. h.q(partial) .. ' fetch -q --tags').code)
      res = ok(h.cozy('order', '--repo', partial))
      assert.are.equal('', res.err)
      assert.are.equal('== 00001-v1.0.0\na\n== 00002-v1.0.1\nb\n== 00003-v1.0.2\nc\n',
        manifest_text(origin, partial .. '/migrations/order.d'))
    end)

    it('lints --history on it with the same walk', function()
      local r = gitrepo.new(nil, { tree = TREE, engine = false })
      r:write_root('README', 'platform\n'):commit():tag('v0.0.1')
      old_hook(r, 1):commit():tag('v0.1.0')
      engine(r):lua('first-new'):write('spec/migrations/first-new_spec.lua', '-- spec\n')
      r:commit('the engine'):tag('v1.7.0-rc.1')
      r:lua('second'):write('spec/migrations/second_spec.lua', '-- spec\n'):commit()
      local res = h.cozy('lint', '--dir', r.dir, '--history')
      assert.are.equal(0, res.code, res.out .. res.err)
    end)
  end)

  describe('fails, naming the cause', function()
    it('on a shallow clone (8)', function()
      local r = gitrepo.new()
      r:lua('a'):commit():tag('v1.0.0')
      r:lua('b'):commit()
      local clone = h.tmpdir() .. '/shallow'
      assert.are.equal(0, h.run('git clone -q --depth 1 file://' .. r.dir .. ' ' .. clone).code)
      fails(h.cozy('order', '--repo', clone), 8, 'shallow clone')
    end)

    it('outside a git repository (8)', function()
      fails(h.cozy('order', '--repo', h.tmpdir()), 8, 'not in a git repository')
    end)

    it("never on release tags of another line: --check-prefix with none in HEAD's history compares with nothing", function()
      local r = gitrepo.new()
      r:lua('a'):commit()
      r:git('checkout -q -b other')
      r:lua('b'):commit():tag('v1.0.0')
      r:checkout('main')
      assert.matches("no earlier release of this tree in HEAD's line", ok(r:order('--check-prefix')).out, 1, true)
      -- the very first release has nothing to compare with
      local first = gitrepo.new()
      first:lua('a'):commit():tag('v0.1.0')
      assert.matches('nothing to compare', ok(first:order('--check-prefix')).out, 1, true)
    end)

    it('on a cycle (3)', function()
      local r = gitrepo.new()
      r:lua('a', { requires = 'b' }):lua('b', { requires = 'c' }):lua('c', { requires = 'a' }):lua('d'):commit()
      fails(r:order(), 3, 'requires form a cycle: a -> b -> c -> a')
      local s = gitrepo.new()
      s:lua('self', { requires = 'self' }):commit()
      fails(s:order(), 3, 'requires form a cycle: self -> self')
    end)

    it('names a long cycle whole, past the 1,024 bytes its chain was once cut at (3)', function()
      local r, names = gitrepo.new(), {}
      for i = 1, 30 do names[i] = ('link-%02d-'):format(i) .. ('x'):rep(45) end
      for i = 1, 30 do r:lua(names[i], { requires = names[i % 30 + 1] }) end
      r:commit()
      local chain = table.concat(names, ' -> ') .. ' -> ' .. names[1]
      assert.is_true(#chain > 1024)
      local msg = fails(r:order(), 3, 'requires form a cycle: ' .. chain)
      assert.are.equal(chain, msg:sub(-#chain))
    end)

    it('on a dangling requires (3)', function()
      local r = gitrepo.new()
      r:lua('a', { requires = 'nowhere' }):commit()
      fails(r:order(), 3, "HEAD:migrations/pre-apply/a.lua: requires 'nowhere', which no release carries")
    end)

    it('on a requires pointing to a later batch (3)', function()
      local r = gitrepo.new()
      r:lua('early', { requires = 'late' }):commit():tag('v1.0.0')
      r:lua('late'):commit()
      fails(r:order(), 3,
        "v1.0.0:migrations/pre-apply/early.lua: requires 'late', which first ships in a later batch (99999-untagged, after 00001-v1.0.0)")
    end)

    it('on a bad header or slug at a tag, and a legacy script missing from legacy-map (3)', function()
      local r = gitrepo.new()
      r:write('migrations/pre-apply/no-header.lua', 'return\n'):commit():tag('v1.0.0')
      fails(r:order(), 3, 'v1.0.0:migrations/pre-apply/no-header.lua: missing header')
      local s = gitrepo.new()
      s:lua('Bad_Slug'):commit()
      fails(s:order(), 3, "HEAD:migrations/pre-apply/Bad_Slug.lua: 'Bad_Slug' is not a valid slug")
      local t = gitrepo.new()
      t:write('legacy-sh/legacy-map', '1 one\n'):sh('one'):sh('stray'):commit()
      fails(t:order(), 3, 'HEAD:legacy-sh/stray.sh: not in legacy-sh/legacy-map')
      local u = gitrepo.new()
      u:write('legacy-sh/legacy-map', '2 one\n1 two\n'):commit()
      fails(u:order(), 3, 'HEAD:legacy-sh/legacy-map:2: 1 comes after 2')
    end)

    it('on a manifest that rewrites the previous release (9)', function()
      local r = gitrepo.new()
      r:write('legacy-sh/legacy-map', '1 one\n'):sh('one'):lua('a'):commit():tag('v1.0.0')
      r:write('legacy-sh/legacy-map', '1 one\n2 two\n'):sh('two'):commit()
      fails(r:order('--check-prefix'), 9,
        "order.d/00000-legacy:2: v1.0.0's manifest has nothing here, this one 'two'")
      -- without --check-prefix the manifest is written
      ok(r:order())
    end)

    it('on a bad flag (2)', function()
      fails(h.cozy('order', '--bogus'), 2, "unknown flag '--bogus'")
      fails(h.cozy('order', 'extra'), 2, "unexpected argument 'extra'")
    end)
  end)
end)
