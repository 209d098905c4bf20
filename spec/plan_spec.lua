-- The planner is a pure function from (tree, ledger, options) to steps;
-- these specs pin every rule of DESIGN.md "What run does" on data alone.
local migrate = require('migrate')
local fixture = require('support.fixture')

local function kinds(plan)
  local out = {}
  for _, s in ipairs(plan.steps) do out[#out + 1] = s.kind .. ':' .. s.slug end
  return out
end

local runs = fixture.runs

local function seeded(plan)
  local json = require('json')
  local out = {}
  for slug, rec in pairs(plan.seed) do out[slug] = rec.state end
  return out
end

local basic = {
  batches = {
    { '00000-legacy', { 'old-one', 'old-two', 'old-gone retired' } },
    { '00001-v1.0.0', { 'alpha', 'beta', 'gamma retired' } },
    { '00002-v1.1.0', { 'delta', 'bg-task' } },
  },
  scripts = {
    ['old-one'] = { shell = true }, ['old-two'] = { shell = true },
    alpha = {}, beta = { on_error = 'warn' }, delta = {},
    ['bg-task'] = { tier = 'background' },
  },
  legacy = { { 1, 'old-one' }, { 2, 'old-two' }, { 3, 'old-gone' } },
}

describe('the planner', function()
  local dir
  setup(function() dir = fixture.tree(basic) end)

  describe('on a fresh install (no ledger)', function()
    it('records every manifest slug of both tiers, retired included, and runs nothing', function()
      local p = assert(migrate.plan(dir, nil, {}))
      assert.is_true(p.fresh_install)
      assert.are.same({
        ['old-one'] = 'skipped-fresh-install', ['old-two'] = 'skipped-fresh-install',
        ['old-gone'] = 'skipped-fresh-install', alpha = 'skipped-fresh-install',
        beta = 'skipped-fresh-install', gamma = 'skipped-fresh-install',
        delta = 'skipped-fresh-install', ['bg-task'] = 'skipped-fresh-install',
      }, seeded(p))
      assert.are.same({}, runs(p))
    end)
  end)

  describe('on a cluster without a ledger, for a local run told how it was installed (--as-installed-at)', function()
    it('seeds the batches up to that release skipped-fresh-install and runs what follows', function()
      local p = assert(migrate.plan(dir, nil, { installed_at = 'v1.0.0' }))
      assert.is_true(p.fresh_install)
      assert.are.equal('00001-v1.0.0', p.installed_at)
      assert.are.same({
        ['old-one'] = 'skipped-fresh-install', ['old-two'] = 'skipped-fresh-install',
        ['old-gone'] = 'skipped-fresh-install', alpha = 'skipped-fresh-install',
        beta = 'skipped-fresh-install', gamma = 'skipped-fresh-install',
      }, seeded(p))
      assert.are.same({ 'delta' }, runs(p))
      assert.are.equal('00001-v1.0.0', p.seed.alpha.batch)
      -- the whole batch name says the same
      assert.are.same({ 'delta' }, runs(assert(migrate.plan(dir, nil, { installed_at = '00001-v1.0.0' }))))
    end)

    it('takes latest for the last batch but the untagged one, and none for an empty ledger', function()
      local p = assert(migrate.plan(dir, nil, { installed_at = 'latest' }))
      assert.are.equal('00002-v1.1.0', p.installed_at)
      assert.are.same({}, runs(p))
      local with_untagged = fixture.tree({
        batches = { { '00001-v1.0.0', { 'alpha' } }, { '99999-untagged', { 'mine' } } },
        scripts = { alpha = {}, mine = {} },
      })
      p = assert(migrate.plan(with_untagged, nil, { installed_at = 'latest' }))
      assert.are.same({ alpha = 'skipped-fresh-install' }, seeded(p))
      assert.are.same({ 'mine' }, runs(p))
      p = assert(migrate.plan(with_untagged, nil, { installed_at = 'none' }))
      assert.are.equal('none', p.installed_at)
      assert.are.same({}, seeded(p))
      assert.are.same({ 'alpha', 'mine' }, runs(p))
    end)

    it('refuses a release older than the retention floor, as an upgrade from it would be', function()
      -- gamma shipped in v1.0.0 and is retired now: a cluster installed at legacy never ran it
      local p = assert(migrate.plan(dir, nil, { installed_at = 'legacy' }))
      assert.are.equal(4, p.refuse)
      assert.matches("no record of 'gamma'", p.refuse_msg)
    end)

    it('refuses a release the manifest does not have, naming those it has (2)', function()
      local p = assert(migrate.plan(dir, nil, { installed_at = 'v9.9.9' }))
      assert.are.equal(2, p.refuse)
      assert.matches('--as-installed-at v9.9.9: no batch of the manifest is that release; it has: ' ..
        'legacy, v1.0.0, v1.1.0, latest', p.refuse_msg, 1, true)
      assert.are.same({}, seeded(p))
    end)

    it('changes nothing once the ledger exists', function()
      local p = assert(migrate.plan(dir, fixture.ledger({}, 4), { installed_at = 'v1.1.0' }))
      assert.is_false(p.fresh_install)
      assert.is_nil(p.installed_at)
    end)
  end)

  describe('with a legacy version', function()
    it('seeds every legacy-map entry below the version and refuses a cluster below the floor', function()
      local p = assert(migrate.plan(dir, fixture.ledger({}, 3), {}))
      assert.are.same({ ['old-one'] = 'legacy', ['old-two'] = 'legacy' }, seeded(p))
      -- old-gone (legacy 3, retired) never ran: the cluster is too old
      assert.are.equal(4, p.refuse)
      assert.matches("no record of 'old%-gone', retired in 00000%-legacy", p.refuse_msg)
      p = assert(migrate.plan(dir, fixture.ledger({}, 4), {}))
      assert.matches("no record of 'gamma', retired in 00001%-v1%.0%.0", p.refuse_msg)
      assert.matches('upgrade through v1%.0%.0 first', p.refuse_msg)
    end)

    it('seeds before the floor check, so a legacy retired slug is satisfied by its seed', function()
      local p = assert(migrate.plan(dir, fixture.ledger({ gamma = { state = 'ok' } }, 4), {}))
      assert.are.equal(0, p.refuse)
      assert.are.same({ ['old-one'] = 'legacy', ['old-two'] = 'legacy', ['old-gone'] = 'legacy' }, seeded(p))
      assert.are.same({ 'alpha', 'beta', 'delta' }, runs(p))
    end)

    it('is idempotent: already recorded legacy keys are not seeded again', function()
      local p = assert(migrate.plan(dir, fixture.ledger({
        ['old-one'] = { state = 'legacy' }, ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' },
      }, 4), {}))
      assert.are.same({ ['old-two'] = 'legacy' }, seeded(p))
    end)

    it('runs legacy scripts at or above the version, in map order', function()
      local p = assert(migrate.plan(dir, fixture.ledger({
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' } }, 1), {}))
      assert.are.same({ 'old-one', 'old-two', 'alpha', 'beta', 'delta' }, runs(p))
    end)
  end)

  describe('walking the manifest', function()
    local led = fixture.ledger({
      ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' }, ['old-gone'] = { state = 'legacy' },
      alpha = { state = 'ok', attempts = 1 }, gamma = { state = 'ok' },
    })

    it('skips recorded and retired slugs and runs the pending ones of the tier', function()
      local p = assert(migrate.plan(dir, led, {}))
      assert.are.same({ 'beta', 'delta' }, runs(p))
      assert.are.same({ 'skip:old-one', 'skip:old-two', 'skip:old-gone', 'skip:alpha', 'run:beta',
        'skip:gamma', 'run:delta', 'skip:bg-task' }, kinds(p))
    end)

    it('runs the background tier only when asked', function()
      local p = assert(migrate.plan(dir, led, { tier = 'background' }))
      assert.are.same({ 'bg-task' }, runs(p))
    end)

    it('retries a failed background migration until the attempts bound', function()
      local l2 = fixture.ledger({
        ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' }, ['old-gone'] = { state = 'legacy' },
        gamma = { state = 'ok' }, ['bg-task'] = { state = 'failed', attempts = 2 } })
      local p = assert(migrate.plan(dir, l2, { tier = 'background' }))
      assert.are.same({ 'bg-task' }, runs(p))
      assert.are.equal(2, p.steps[#p.steps].prev_attempts)
      l2['m.bg-task'] = '{"state":"failed","attempts":3}'
      p = assert(migrate.plan(dir, l2, { tier = 'background' }))
      assert.are.same({}, runs(p))
      assert.matches('only %-%-only re%-runs it', p.steps[#p.steps].why)
    end)

    it('lets a background abort slug past its attempts hold the background slugs after it, and a warn one not', function()
      local held = fixture.tree({
        batches = { { '00001-v1.0.0', { 'bg-a', 'bg-b', 'bg-c' } } },
        scripts = { ['bg-a'] = { tier = 'background', on_error = 'abort' },
          ['bg-b'] = { tier = 'background', on_error = 'warn' }, ['bg-c'] = { tier = 'background' } },
      })
      local l2 = fixture.ledger({ ['bg-a'] = { state = 'failed', attempts = 3 }, ['bg-c'] = { state = 'ok' } })
      local p = assert(migrate.plan(held, l2, { tier = 'background' }))
      assert.are.same({ 'skip:bg-a', 'blocked:bg-b', 'skip:bg-c' }, kinds(p))
      assert.matches('held: bg%-a failed 3 times, on%-error=abort', p.steps[2].why)
      -- under the bound it is retried first; the others wait behind it in the run
      l2['m.bg-a'] = '{"state":"failed","attempts":1}'
      assert.are.same({ 'bg-a', 'bg-b' }, runs(assert(migrate.plan(held, l2, { tier = 'background' }))))
      -- recorded ok or skipped, it holds nothing
      l2['m.bg-a'] = '{"state":"skipped","reason":"Operator","message":"m"}'
      assert.are.same({ 'bg-b' }, runs(assert(migrate.plan(held, l2, { tier = 'background' }))))
      -- a warn slug past its attempts lets the others go on
      local warn = fixture.tree({
        batches = { { '00001-v1.0.0', { 'bg-a', 'bg-b' } } },
        scripts = { ['bg-a'] = { tier = 'background', on_error = 'warn' }, ['bg-b'] = { tier = 'background' } },
      })
      p = assert(migrate.plan(warn, fixture.ledger({ ['bg-a'] = { state = 'failed', attempts = 3 } }), { tier = 'background' }))
      assert.are.same({ 'bg-b' }, runs(p))
    end)

    it('never retries a failed pre-apply (warn) migration', function()
      local l2 = fixture.ledger({ ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' },
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' },
        alpha = { state = 'ok' }, beta = { state = 'failed', attempts = 1 } })
      assert.are.same({ 'delta' }, runs(assert(migrate.plan(dir, l2, {}))))
    end)
  end)

  describe('revoked slugs', function()
    local rdir
    setup(function()
      rdir = fixture.tree({
        batches = { { '00001-v1', { 'bad', 'bad-too', 'good' } } },
        scripts = { bad = {}, ['bad-too'] = {}, good = {} },
        revoked = { 'bad', 'bad-too' },
      })
    end)

    it('records revoked when no record exists, and never overwrites an ok', function()
      local p = assert(migrate.plan(rdir, fixture.ledger({ ['bad-too'] = { state = 'ok' } }), {}))
      assert.are.same({ 'record-revoked:bad', 'skip:bad-too', 'run:good' }, kinds(p))
      assert.matches('recorded ok', p.steps[2].why)
    end)

    it('refuses --only on a revoked slug', function()
      local p = assert(migrate.plan(rdir, fixture.ledger({}), { only = 'bad' }))
      assert.are.equal(2, p.refuse)
      assert.matches('revoked', p.refuse_msg)
    end)
  end)

  describe('--only', function()
    it('re-runs a recorded slug with its previous attempts', function()
      local p = assert(migrate.plan(dir, fixture.ledger({ alpha = { state = 'ok', attempts = 2 },
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' } }), { only = 'alpha' }))
      assert.are.same({ 'run:alpha' }, kinds(p))
      assert.are.equal(2, p.steps[1].prev_attempts)
    end)

    it('refuses a slug absent from the image', function()
      local p = assert(migrate.plan(dir, fixture.ledger({}), { only = 'gamma' }))
      assert.are.equal(2, p.refuse)
      assert.matches('no such migration', p.refuse_msg)
    end)
  end)

  describe('checksums and unreadable records', function()
    it('reports an ok record whose sha256 differs, without re-running it', function()
      local p = assert(migrate.plan(dir, fixture.ledger({ ['old-one'] = { state = 'legacy' },
        ['old-two'] = { state = 'legacy' }, ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' },
        alpha = { state = 'ok', sha256 = 'deadbeef' } }), {}))
      assert.are.same({ 'beta', 'delta' }, runs(p))
      assert.matches('alpha: recorded sha256 deadbeef differs', p.warnings[1])
    end)

    it('refuses to walk a ledger with unreadable records, naming each key and its repair', function()
      local l = fixture.ledger({ ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' },
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' } })
      l['m.alpha'] = '{not json'
      l['m.beta'] = '{"state":"done"}'
      local p = assert(migrate.plan(dir, l, {}))
      assert.is_true(p.corrupt)
      assert.are.equal(7, p.refuse)
      assert.are.same({}, runs(p))
      assert.are.equal(2, #p.problems)
      assert.matches("m%.alpha cannot be read %(not JSON%): repair it with 'cozy%-migrate run %-%-only alpha' " ..
        "or 'cozy%-migrate skip alpha %-%-reason TEXT'", p.refuse_msg)
      assert.matches("m%.beta cannot be read %(unknown state 'done'%)", p.refuse_msg)
      assert.is_nil(p.refuse_msg:find('\n'), 'one line')
      -- --only of another slug is refused too; --only of a bad one repairs it and reports the other
      p = assert(migrate.plan(dir, l, { only = 'delta' }))
      assert.are.equal(7, p.refuse)
      p = assert(migrate.plan(dir, l, { only = 'alpha' }))
      assert.are.equal(0, p.refuse)
      assert.are.same({ 'run:alpha' }, kinds(p))
      assert.matches("m%.beta cannot be read %(unknown state 'done'%)", table.concat(p.warnings, '\n'))
      assert.is_nil(table.concat(p.warnings, '\n'):find('m.alpha', 1, true))
      -- the skip command of any slug runs nothing, so it is not refused
      p = assert(migrate.plan(dir, l, { skip = { 'alpha' }, skip_reason = 'x', skip_only = true }))
      assert.are.equal(0, p.refuse)
      assert.are.same({ 'record-skipped:alpha' }, kinds(p))
    end)
  end)

  describe('an untrustworthy version', function()
    -- the map runs to 3, so a version from 0 to 4 means something
    for _, v in ipairs({ 'abc', '99999999999999999999', ' 3', '3 ', '+2', '-1', '0x3', '1e1', '3.0', '' , '03' }) do
      it(string.format('refuses %q before anything, naming the value', v), function()
        local l = fixture.ledger({})
        l.version = v
        local p = assert(migrate.plan(dir, l, {}))
        assert.are.equal(7, p.refuse)
        assert.are.same({}, p.steps)
        assert.are.same({}, seeded(p), 'nothing is seeded from a version it cannot read')
        assert.truthy(p.refuse_msg:find(string.format('key \'version\' is "%s", not a plain decimal from 0 to 4', v), 1, true),
          p.refuse_msg)
        -- --only does not get past it either; the skip command does (it runs nothing)
        assert.are.equal(7, assert(migrate.plan(dir, l, { only = 'alpha' })).refuse)
        assert.are.equal(0, assert(migrate.plan(dir, l, { skip = { 'alpha' }, skip_reason = 'r', skip_only = true })).refuse)
      end)
    end

    it('refuses a version above the last legacy number plus one, and takes every value up to it', function()
      local p = assert(migrate.plan(dir, fixture.ledger({}, 5), {}))
      assert.are.equal(7, p.refuse)
      assert.matches("key 'version' is 5, above the last legacy migration %(3%) plus one", p.refuse_msg)
      for v = 0, 4 do
        p = assert(migrate.plan(dir, fixture.ledger({ gamma = { state = 'ok' }, ['old-gone'] = { state = 'legacy' } }, v), {}))
        assert.are.equal(0, p.refuse, p.refuse_msg)
      end
    end)
  end)

  describe('requires', function()
    local function hdr(on_error, req)
      return '-- cozystack-migration: on-error=' .. on_error .. '\n-- cozystack-migration: requires=' .. req
    end
    local rdir
    setup(function()
      rdir = fixture.tree({
        batches = { { '00000-legacy', { 'old' } }, { '00001-v1', { 'base', 'needs-base', 'needs-both', 'needs-old', 'bg', 'bg-needs' } } },
        scripts = {
          old = { shell = true },
          base = { on_error = 'warn' },
          ['needs-base'] = { header = hdr('abort', 'base') },
          ['needs-both'] = { header = hdr('warn', 'base, needs-base') },
          ['needs-old'] = { header = hdr('abort', 'old') },
          bg = { tier = 'background', on_error = 'warn' },
          ['bg-needs'] = { tier = 'background', header = hdr('warn', 'bg') },
        },
        legacy = { { 1, 'old' } },
      })
    end)

    it('runs a slug whose requires run earlier in the same run', function()
      local p = assert(migrate.plan(rdir, fixture.ledger({}, 0), {}))
      assert.are.same({ 'run:old', 'run:base', 'run:needs-base', 'run:needs-both', 'run:needs-old', 'skip:bg', 'skip:bg-needs' }, kinds(p))
    end)

    it('counts ok, legacy and skipped-fresh-install as done', function()
      for _, st in ipairs({ 'ok', 'legacy', 'skipped-fresh-install' }) do
        local p = assert(migrate.plan(rdir, fixture.ledger({ old = { state = 'legacy' }, base = { state = st } }), {}))
        assert.are.same({ 'skip:old', 'skip:base', 'run:needs-base', 'run:needs-both', 'run:needs-old', 'skip:bg', 'skip:bg-needs' }, kinds(p), st)
      end
    end)

    for _, case in ipairs({
      { 'failed', { state = 'failed', attempts = 1 }, 'blocked: requires base (failed)' },
      { 'skipped', { state = 'skipped', reason = 'Operator', message = 'm' }, 'blocked: requires base (skipped)' },
    }) do
      it('blocks a slug whose required slug is ' .. case[1] .. ', and what requires that', function()
        local l = fixture.ledger({ old = { state = 'legacy' }, base = case[2] })
        local p = assert(migrate.plan(rdir, l, {}))
        assert.are.same({ 'skip:old', 'skip:base', 'blocked:needs-base', 'blocked:needs-both', 'run:needs-old', 'skip:bg', 'skip:bg-needs' }, kinds(p))
        assert.are.equal(case[3], p.steps[3].why)
        -- needs-both names the first it lacks
        assert.are.equal(case[3], p.steps[4].why)
        p = assert(migrate.plan(rdir, l, { only = 'needs-base' }))
        assert.are.same({ 'blocked:needs-base' }, kinds(p))
        assert.are.equal(case[3], p.steps[1].why)
        -- --force runs it anyway, and says so
        p = assert(migrate.plan(rdir, l, { only = 'needs-base', force = true }))
        assert.are.same({ 'run:needs-base' }, kinds(p))
        assert.matches('%-%-force past its requires', p.steps[1].why)
      end)
    end

    it('blocks a slug whose required slug is itself blocked', function()
      local p = assert(migrate.plan(rdir, fixture.ledger({ old = { state = 'legacy' }, base = { state = 'failed' },
        ['needs-base'] = nil }), {}))
      assert.are.equal('blocked: requires base (failed)', p.steps[3].why)
      local l = fixture.ledger({ old = { state = 'legacy' }, base = { state = 'ok' }, ['needs-base'] = { state = 'skipped' } })
      p = assert(migrate.plan(rdir, l, {}))
      assert.are.same({ 'skip:old', 'skip:base', 'skip:needs-base', 'blocked:needs-both', 'run:needs-old', 'skip:bg', 'skip:bg-needs' }, kinds(p))
      assert.are.equal('blocked: requires needs-base (skipped)', p.steps[4].why)
    end)

    it('blocks a background retry whose required slug failed its last attempt', function()
      local l = fixture.ledger({ old = { state = 'legacy' }, base = { state = 'ok' }, ['needs-base'] = { state = 'ok' },
        ['needs-both'] = { state = 'ok' }, ['needs-old'] = { state = 'ok' },
        bg = { state = 'failed', attempts = 3 }, ['bg-needs'] = { state = 'failed', attempts = 1 } })
      local p = assert(migrate.plan(rdir, l, { tier = 'background' }))
      assert.are.same({ 'skip:bg', 'blocked:bg-needs' }, { kinds(p)[6], kinds(p)[7] })
      assert.are.equal('blocked: requires bg (failed)', p.steps[7].why)
      -- while bg is still retried, bg-needs is planned after it
      l['m.bg'] = '{"state":"failed","attempts":1}'
      p = assert(migrate.plan(rdir, l, { tier = 'background' }))
      assert.are.same({ 'run:bg', 'run:bg-needs' }, { kinds(p)[6], kinds(p)[7] })
    end)

    for _, case in ipairs({
      { 'itself', { a = { header = hdr('abort', 'a') } }, nil, "a.lua: requires 'a', itself" },
      { 'a revoked slug', { a = {}, b = { header = hdr('abort', 'a') } }, { 'a' }, "b.lua: requires 'a', which is revoked and never runs" },
      { 'a slug of the other tier', { a = { tier = 'background' }, b = { header = hdr('abort', 'a') } }, nil,
        "b.lua: requires 'a', which is in the background tier, not pre-apply" },
    }) do
      it('is refused at load time when it names ' .. case[1], function()
        local d = fixture.tree({ batches = { { '00001-v1', { 'a', 'b' } } }, scripts = case[2], revoked = case[3] })
        if not case[2].b then
          d = fixture.tree({ batches = { { '00001-v1', { 'a' } } }, scripts = case[2] })
        end
        local p, err = migrate.plan(d, fixture.ledger({}), {})
        assert.is_nil(p)
        assert.truthy(err:find(case[4], 1, true), err)
      end)
    end
  end)

  describe('operator skips', function()
    local sdir
    setup(function()
      sdir = fixture.tree({
        batches = { { '00000-legacy', { 'older', 'old' } }, { '00001-v1', { 'a', 'b', 'bg', 'rev' } } },
        scripts = { old = { shell = true }, older = { shell = true }, a = {}, b = {}, bg = { tier = 'background' }, rev = {} },
        legacy = { { 1, 'older' }, { 2, 'old' } },
        revoked = { 'rev' },
      })
    end)
    local function opts(slugs, extra)
      local o = { skip = slugs, skip_reason = 'broken upstream' }
      for k, v in pairs(extra or {}) do o[k] = v end
      return o
    end

    it('plans a skipped record first and treats the slug as recorded in the walk', function()
      local p = assert(migrate.plan(sdir, fixture.ledger({ a = { state = 'failed', attempts = 2 } }, 2), opts({ 'b', 'a' })))
      assert.are.equal(0, p.refuse, p.refuse_msg)
      assert.are.same({ 'record-skipped:b', 'record-skipped:a', 'skip:older', 'run:old', 'skip:bg', 'record-revoked:rev' },
        kinds(p))
      assert.are.equal(2, p.steps[2].prev_attempts, 'attempts count executions: a skip keeps them')
      assert.matches('skipped by the operator, was failed', p.steps[2].why)
      -- the skip command plans the skip alone
      p = assert(migrate.plan(sdir, fixture.ledger({}, 1), opts({ 'bg' }, { skip_only = true })))
      assert.are.same({ 'record-skipped:bg' }, kinds(p))
      assert.are.same({}, seeded(p))
    end)

    it('leaves a slug already skipped with the same message alone, and rewrites another message', function()
      local l = fixture.ledger({ a = { state = 'skipped', reason = 'Operator', message = 'broken upstream', by = 'me' } }, 1)
      local p = assert(migrate.plan(sdir, l, opts({ 'a' }, { skip_only = true })))
      assert.are.same({ 'skip:a' }, kinds(p))
      assert.matches('recorded skipped, by me', p.steps[1].why)
      p = assert(migrate.plan(sdir, l, { skip = { 'a' }, skip_reason = 'another', skip_only = true }))
      assert.are.same({ 'record-skipped:a' }, kinds(p))
    end)

    for _, case in ipairs({
      { 'recorded ok', fixture.ledger({ a = { state = 'ok' } }, 1), 'a', 11, 'skip a: it is recorded ok' },
      { 'recorded legacy', fixture.ledger({ older = { state = 'legacy' } }, 1), 'older', 11, 'skip older: it is recorded legacy' },
      { 'below the version (legacy by seeding)', fixture.ledger({}, 3), 'old', 11, 'skip old: it is recorded legacy' },
      { 'recorded skipped-fresh-install', fixture.ledger({ a = { state = 'skipped-fresh-install' } }, 1), 'a', 11,
        'skip a: it is recorded skipped-fresh-install' },
      { 'revoked', fixture.ledger({}, 1), 'rev', 2, 'skip rev: the slug is revoked' },
      { 'absent from the image', fixture.ledger({}, 1), 'ghost', 2, 'skip ghost: no such migration in this image' },
    }) do
      it('refuses a slug ' .. case[1], function()
        for _, only in ipairs({ true, false }) do
          local p = assert(migrate.plan(sdir, case[2], opts({ case[3] }, { skip_only = only })))
          assert.are.equal(case[4], p.refuse)
          assert.truthy(p.refuse_msg:find(case[5], 1, true), p.refuse_msg)
          assert.are.same({}, p.steps)
        end
      end)
    end

    it('refuses a slug both skipped and re-run with --only', function()
      local p = assert(migrate.plan(sdir, fixture.ledger({}, 1), opts({ 'a' }, { only = 'a' })))
      assert.are.equal(2, p.refuse)
    end)

    it('has nothing to skip on a fresh install, and the skip command refuses one', function()
      local p = assert(migrate.plan(sdir, nil, opts({ 'a' })))
      assert.are.equal(0, p.refuse)
      assert.is_true(p.fresh_install)
      assert.matches('SKIP has nothing to skip', p.warnings[1])
      p = assert(migrate.plan(sdir, nil, opts({ 'a' }, { skip_only = true })))
      assert.are.equal(11, p.refuse)
      assert.matches('there is no ledger yet', p.refuse_msg)
    end)
  end)

  describe('--only of a legacy slug', function()
    it('needs --force when its script would stamp a version older than the ledger\'s', function()
      local l = fixture.ledger({ ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' },
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' } }, 4)
      local p = assert(migrate.plan(dir, l, { only = 'old-one' }))
      assert.are.equal(11, p.refuse)
      assert.are.equal("--only old-one: legacy migration 1 stamps version 2 when it runs, older than the ledger's 4 " ..
        '(older tooling reads it); add --force to run it anyway', p.refuse_msg)
      p = assert(migrate.plan(dir, l, { only = 'old-one', force = true }))
      assert.are.same({ 'run:old-one' }, kinds(p))
      -- number 3 stamps 4: nothing older, no --force needed
      l.version = '3'
      p = assert(migrate.plan(dir, l, { only = 'old-two' }))
      assert.are.same({ 'run:old-two' }, kinds(p))
    end)
  end)
end)
