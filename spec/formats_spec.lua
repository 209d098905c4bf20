-- Every format has one parser (header.c, manifest.c, record.c) and every way
-- an input can be wrong has a one-line message naming the file and line or
-- the slug. These specs call the same parsers the runner uses.
local migrate = require('migrate')
local fixture = require('support.fixture')

describe('a slug', function()
  it('is lower-case letters and digits in dash-separated words, at most 60 characters', function()
    for _, good in ipairs({ 'a', 'abc-123', 'redis-failover-operator-group', string.rep('a', 60) }) do
      assert.is_true(migrate.slug_valid(good), good)
    end
    for _, bad in ipairs({ '', 'A', 'a_b', '-a', 'a-', 'a--b', 'a.b', string.rep('a', 61), 'ä' }) do
      assert.is_false(migrate.slug_valid(bad), bad)
    end
  end)
end)

describe('a script header', function()
  it('reads on-error, requires and timeout', function()
    local h = assert(migrate.header([[
-- A comment before the header is fine.
-- cozystack-migration: on-error=warn
-- cozystack-migration: requires=alpha, beta
-- cozystack-migration: timeout=5m
local kube = require('kube')
]], 'x.lua'))
    assert.are.same({ on_error = 'warn', requires = { 'alpha', 'beta' }, timeout = 300 }, h)
  end)

  it('reads a shell header after a #! line', function()
    local h = assert(migrate.header('#!/bin/bash\n# cozystack-migration: on-error=abort\nset -e\n', 'x.sh', false))
    assert.are.equal('abort', h.on_error)
  end)

  local bad = {
    { 'is missing', 'local x = 1\n', "x.lua: missing header: a migration starts with the line '%-%- cozystack%-migration: on%-error=abort'" },
    { 'is spelled another way', '-- cozy-migration: on-error=abort\nlocal x\n', 'x.lua: missing header: .*other spellings are not a header' },
    { 'has no on-error', '-- cozystack-migration: timeout=1m\n', 'x.lua: header has no on%-error' },
    { 'has an unknown key', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: retries=3\n',
      "x.lua:2: unknown header key 'retries'" },
    { 'has timeout=abc', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: timeout=abc\n',
      'x.lua:2: timeout=abc: not a duration' },
    { 'has a bad on-error', '-- cozystack-migration: on-error=ignore\n', 'x.lua:1: on%-error=ignore: expected abort or warn' },
    { 'repeats a key', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: on-error=warn\n',
      "x.lua:2: header key 'on%-error' given twice" },
    { 'requires a bad slug', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=Bad_Slug\n',
      "x.lua:2: requires: 'Bad_Slug' is not a valid slug" },
    { 'is not key=value', '-- cozystack-migration: abort\n', "x.lua:1: header line 'abort' is not key=value" },
    { 'comes after code', 'local x\n-- cozystack-migration: on-error=abort\n', 'x.lua:2: header line after the first line of code' },
  }
  for _, case in ipairs(bad) do
    it('is refused when it ' .. case[1], function()
      local h, err = migrate.header(case[2], 'x.lua')
      assert.is_nil(h)
      assert.matches('^' .. case[3], err)
      assert.is_nil(err:find('\n'), 'one line')
    end)
  end
end)

describe('a manifest batch', function()
  it('reads slugs and retired slugs, skipping blank lines and comments', function()
    local b = assert(migrate.batch('00003-v1.7.0', '# generated\nalpha\n\nbeta retired\n'))
    assert.are.same({ { slug = 'alpha', retired = false, line = 2 }, { slug = 'beta', retired = true, line = 4 } }, b)
  end)

  it('refuses a malformed line with file and line', function()
    local b, err = migrate.batch('00003-v1.7.0', 'alpha\nbeta gone\n')
    assert.is_nil(b)
    assert.are.equal("order.d/00003-v1.7.0:2: malformed manifest line (expected '<slug>' or '<slug> retired')", err)
    b, err = migrate.batch('00003-v1.7.0', 'alpha retired extra\n')
    assert.matches('order.d/00003%-v1%.7%.0:1: malformed', err)
  end)

  it('refuses a bad slug and a bad batch name', function()
    local _, err = migrate.batch('00003-v1.7.0', 'Alpha\n')
    assert.are.equal("order.d/00003-v1.7.0:1: 'Alpha' is not a valid slug", err)
    _, err = migrate.batch('3-v1.7.0', 'alpha\n')
    assert.matches("'3%-v1%.7%.0' is not a batch name", err)
  end)
end)

describe('the revoked list', function()
  it('reads one slug a line with comments', function()
    assert.are.same({ 'a', 'b' }, assert(migrate.revoked('a # broke tenants\n\n# note\nb\n')))
  end)
  it('refuses two slugs on a line and a repeated slug', function()
    local _, err = migrate.revoked('a b\n')
    assert.are.equal('revoked:1: expected one slug per line', err)
    _, err = migrate.revoked('a\na\n')
    assert.are.equal("revoked:2: 'a' is already revoked at line 1", err)
  end)
end)

describe('the legacy map', function()
  it('reads "N slug" lines', function()
    assert.are.same({ { number = 1, slug = 'one' }, { number = 7, slug = 'seven' } },
      assert(migrate.legacy_map('1 one\n7 seven\n')))
  end)
  local bad = {
    { 'a missing number', 'one\n', 'legacy%-map:1: expected' },
    { 'a non-number', 'x one\n', 'legacy%-map:1: expected' },
    { 'zero', '0 one\n', 'legacy%-map:1: expected' },
    { 'a bad slug', '1 One\n', "legacy%-map:1: 'One' is not a valid slug" },
    { 'a repeated number', '1 one\n1 two\n', 'legacy%-map:2: the number repeats line 1' },
    { 'a repeated slug', '1 one\n2 one\n', 'legacy%-map:2: the slug repeats line 1' },
    { 'numbers out of order', '2 two\n1 one\n', 'legacy%-map:2: 1 comes after 2' },
    { 'an exponent', '1e20 one\n', "legacy%-map:1: expected '<number> <slug>', the number decimal from 1 to 99999" },
    { 'a number past the bound', '100000 one\n', 'legacy%-map:1: expected' },
    { 'a number that overflows', '99999999999999999999 one\n', 'legacy%-map:1: expected' },
    { 'a sign', '+1 one\n', 'legacy%-map:1: expected' },
    { 'a leading zero', '01 one\n', 'legacy%-map:1: expected' },
    { 'hex', '0x1 one\n', 'legacy%-map:1: expected' },
  }
  it('reads a number up to the bound', function()
    assert.are.same({ { number = 99999, slug = 'last' } }, assert(migrate.legacy_map('99999 last\n')))
  end)
  for _, case in ipairs(bad) do
    it('refuses ' .. case[1], function()
      local m, err = migrate.legacy_map(case[2])
      assert.is_nil(m)
      assert.matches('^' .. case[3], err)
    end)
  end
end)

describe('a duration', function()
  for _, case in ipairs({ { '90s', 90 }, { '5m', 300 }, { '1h30m', 5400 }, { '500ms', 0.5 },
    { '1h2m3s4ms', 3723.004 }, { '1m5ms', 60.005 }, { '168h', 604800 }, { '007s', 7 } }) do
    it('reads ' .. case[1], function()
      assert.are.equal(case[2], migrate.duration(case[1]))
    end)
  end
  for _, bad in ipairs({ '0x10s', '1e2s', '5s5s', '5m1h', '1h1h', '5ms5s', '90', '', ' 5s', '5s ', '+5s', '-5s',
    '1.5s', '0s', '0h0m', '5 s', '5S', '5sec', 'm', '1d', '169h', '1000000000s', '5m\n' }) do
    it(string.format('refuses %q', bad), function()
      assert.is_nil(migrate.duration(bad))
    end)
  end
  it('is what a header timeout and a flag are read with', function()
    local _, err = migrate.header('-- cozystack-migration: on-error=abort\n-- cozystack-migration: timeout=5s5s\n', 'x.lua')
    assert.matches('x%.lua:2: timeout=5s5s: not a duration', err)
    local res = require('support.helpers').cozy('run', '--timeout', '1e2s')
    assert.are.equal(2, res.code)
    assert.matches("%-%-timeout: '1e2s' is not a duration", res.err)
  end)
end)

describe('a ledger record', function()
  it('round-trips its fields in a fixed order', function()
    local r = assert(migrate.record('{"tier":"pre-apply","state":"ok","attempts":2,"duration_ms":812,"at":"2026-08-12T10:04:00Z"}'))
    assert.are.equal('ok', r.state)
    assert.are.equal(2, r.attempts)
    assert.are.equal(812, r.duration_ms)
  end)
  local bad = {
    { 'not JSON', '{"state":', 'not JSON' },
    { 'not an object', '["ok"]', 'not a JSON object' },
    { 'without a state', '{}', 'no state' },
    { 'with an unknown state', '{"state":"done"}', "unknown state 'done'" },
    { 'with attempts that are not an integer', '{"state":"ok","attempts":"2"}', "field 'attempts' is not a non%-negative integer" },
    { 'with a state that is not a string', '{"state":1}', "field 'state' is not a string" },
    { 'with a journal that is not an object', '{"state":"ok","journal":["x"]}', "field 'journal' is not an object" },
    { 'with a by that is not a string', '{"state":"skipped","by":1}', "field 'by' is not a string" },
  }
  it('reads an operator skip and a journal', function()
    local r = assert(migrate.record('{"state":"skipped","reason":"Operator","message":"why","by":"me (context c)",' ..
      '"journal":{"writes":1,"changed":1,"entries":[{"verb":"patch","resource":"configmaps","name":"x","status":200,"changed":true}]}}'))
    assert.are.same({ 'skipped', 'Operator', 'why', 'me (context c)' }, { r.state, r.reason, r.message, r.by })
    assert.are.equal(1, r.journal.writes)
    assert.are.equal('patch', r.journal.entries[1].verb)
  end)
  for _, case in ipairs(bad) do
    it('is unreadable ' .. case[1], function()
      local r, problem = migrate.record(case[2])
      assert.is_nil(r)
      assert.matches(case[3], problem)
    end)
  end
end)

describe('a migrations tree', function()
  local function refused(spec, pattern)
    local dir = fixture.tree(spec)
    local p, err = migrate.plan(dir, nil, {})
    assert.is_nil(p)
    assert.matches(pattern, err)
    assert.is_nil(err:find('\n'), 'one line')
  end

  it('is refused when a script is in no batch', function()
    refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {}, b = {} } },
      "pre%-apply/b%.lua: slug 'b' is in no batch of the manifest")
  end)
  it('is refused when a batch entry is neither shipped nor retired', function()
    refused({ batches = { { '00001-v1', { 'a', 'ghost' } } }, scripts = { a = {} } },
      "00001%-v1:2: 'ghost' is neither shipped nor retired")
  end)
  it('is refused when a slug is in two batches', function()
    refused({ batches = { { '00001-v1', { 'a' } }, { '00002-v2', { 'a' } } }, scripts = { a = {} } },
      "00002%-v2:1: slug 'a' is already listed at .*00001%-v1:1")
  end)
  it('is refused when a slug is shipped in two tiers', function()
    refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} },
      raw = { ['migrations/background/a.lua'] = '-- cozystack-migration: on-error=warn\n' } },
      "slug 'a' is shipped twice")
  end)
  it('is refused when a file name is not a valid slug', function()
    refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} },
      raw = { ['migrations/pre-apply/Bad_Name.lua'] = '-- cozystack-migration: on-error=warn\n' } },
      "'Bad_Name' is not a valid slug")
  end)
  it('is refused when a header does not parse', function()
    refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = { header = '-- cozystack-migration: on-error=maybe' } } },
      'a%.lua:1: on%-error=maybe')
  end)
  it('is refused when a revoked slug is unknown', function()
    refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} }, revoked = { 'nobody' } },
      "revoked slug 'nobody' is in no batch")
  end)
  it('is refused when a requires points to a later migration', function()
    refused({ batches = { { '00001-v1', { 'a', 'b' } } },
      scripts = { a = { header = '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=b' }, b = {} } },
      "requires 'b', which runs after it")
  end)
  it('is refused when the manifest is missing', function()
    refused({ scripts = { a = {} } }, 'order%.d: No such file or directory')
  end)

  local function with(setup_fn, pattern)
    local dir = fixture.tree({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} } })
    setup_fn(dir)
    local p, err = migrate.plan(dir, nil, {})
    assert.is_nil(p)
    assert.truthy(err:find(pattern:gsub('DIR', dir), 1, true), err)
  end
  local function sh(cmd) assert(os.execute(cmd)) end
  it('is refused when a tier directory holds a subdirectory', function()
    with(function(d) sh('mkdir -p ' .. d .. '/migrations/pre-apply/sub && touch ' .. d .. '/migrations/pre-apply/sub/x.lua') end,
      'DIR/migrations/pre-apply/sub: a directory; migrations sit directly in migrations/pre-apply/ as <slug>.lua')
  end)
  it('is refused when legacy-sh holds a directory other than lib', function()
    with(function(d) sh('mkdir -p ' .. d .. '/legacy-sh/old') end, 'DIR/legacy-sh/old: a directory')
  end)
  it('is refused when a script is a dangling symlink', function()
    with(function(d) sh('ln -s nowhere.lua ' .. d .. '/migrations/background/b.lua') end,
      'DIR/migrations/background/b.lua: dangling symlink')
  end)
  it('is refused when a script is a symlink loop', function()
    with(function(d) sh('ln -s c.lua ' .. d .. '/migrations/pre-apply/c.lua') end,
      'DIR/migrations/pre-apply/c.lua: symlink loop')
  end)
  it('is refused when legacy-sh/lib cannot be read', function()
    with(function(d) sh('ln -s gone ' .. d .. '/legacy-sh/lib/common.sh') end,
      'DIR/legacy-sh/lib/common.sh: dangling symlink')
  end)
  it('takes a symlink to a readable script', function()
    local dir = fixture.tree({ batches = { { '00001-v1', { 'a', 'b' } } }, scripts = { a = {} } })
    sh('ln -s a.lua ' .. dir .. '/migrations/pre-apply/b.lua')
    assert(migrate.plan(dir, nil, {}))
  end)
end)
