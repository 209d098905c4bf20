-- The planner is a pure function from (tree, ledger, options) to steps;
-- these specs pin every rule of DESIGN.md "What run does" on data alone.
local migrate = require('migrate')
local fixture = require('support.fixture')

local function kinds(plan)
  local out = {}
  for _, s in ipairs(plan.steps) do out[#out + 1] = s.kind .. ':' .. s.slug end
  return out
end

local function runs(plan)
  local out = {}
  for _, s in ipairs(plan.steps) do
    if s.kind == 'run' then out[#out + 1] = s.slug end
  end
  return out
end

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

    it('treats an unparseable record as recorded, state unknown, and reports it by slug', function()
      local l = fixture.ledger({ ['old-one'] = { state = 'legacy' }, ['old-two'] = { state = 'legacy' },
        ['old-gone'] = { state = 'legacy' }, gamma = { state = 'ok' } })
      l['m.alpha'] = '{not json'
      l['m.beta'] = '{"state":"done"}'
      local p = assert(migrate.plan(dir, l, {}))
      assert.is_true(p.corrupt)
      assert.are.same({ 'delta' }, runs(p))
      local all = table.concat(p.warnings, '\n')
      assert.matches('m%.alpha cannot be read %(not JSON%)', all)
      assert.matches("m%.beta cannot be read %(unknown state 'done'%)", all)
    end)
  end)
end)
