-- Strict inputs (issue 19), the formats: a script header, order.d/ lines,
-- `revoked`, `legacy-map` and a ledger record are refused, never cut or
-- guessed, when they are not exactly what their grammar says. Each case
-- calls the runner's own parser (the spec-only `migrate` module).
local migrate = require('migrate')

local function refused(fn, pattern)
  local v, err = fn()
  assert.is_nil(v)
  assert.is_string(err)
  assert.matches(pattern, err)
  assert.is_nil(err:find('\n'), 'one line')
end

describe('a script header', function()
  local VALID = '-- cozystack-migration: on-error=abort\n'

  local misspelt = {
    { 'three dashes', '--- cozystack-migration: requires=x\n', 2 },
    { 'another case', '-- Cozystack-Migration: timeout=1s\n', 2 },
    { 'a space before the colon', '-- cozystack-migration : timeout=1s\n', 2 },
    { 'an underscore', '-- cozystack_migration: timeout=1s\n', 2 },
  }
  for _, case in ipairs(misspelt) do
    it('refuses a line spelt with ' .. case[1] .. ' beside a valid one, naming file and line', function()
      refused(function() return migrate.header(VALID .. case[2] .. 'local x = 1\n', 'x.lua') end,
        '^x%.lua:' .. case[3] .. ": '.*' looks like a header line but is not spelt '%-%- cozystack%-migration: key=value'")
    end)
  end

  it('refuses a misspelt shell header line (## or a capital)', function()
    refused(function() return migrate.header('#!/bin/bash\n# cozystack-migration: on-error=abort\n## cozystack-migration: timeout=1s\n', 'x.sh', false) end,
      "^x%.sh:3: .* looks like a header line but is not spelt '# cozystack%-migration: key=value'")
    refused(function() return migrate.header('#!/bin/bash\n# cozystack-migration: on-error=abort\n# Cozystack-migration: timeout=1s\n', 'x.sh', false) end,
      '^x%.sh:3: .* looks like a header line')
  end)

  it('refuses a header line over 1023 bytes instead of cutting it', function()
    refused(function()
      return migrate.header('-- cozystack-migration: on-error=abort' .. string.rep(' ', 1100) .. 'garbage\n', 'x.lua')
    end, '^x%.lua:1: header line is longer than 1023 bytes')
  end)

  it('refuses a long requires instead of dropping its last slug', function()
    local slugs = {}
    for i = 1, 70 do slugs[i] = string.format('slug-number-%02d', i) end
    refused(function()
      return migrate.header(VALID .. '-- cozystack-migration: requires=' .. table.concat(slugs, ',') .. '\n', 'x.lua')
    end, '^x%.lua:2: header line is longer than 1023 bytes')
  end)

  it('refuses a NUL byte in a header line', function()
    refused(function() return migrate.header('-- cozystack-migration: on-error=abort\0 garbage\n', 'x.lua') end,
      '^x%.lua:1: header line holds a NUL byte')
    refused(function() return migrate.header(VALID .. '-- requires=x\0\nlocal x\n', 'x.lua') end,
      '^x%.lua:2: comment line holds a NUL byte')
  end)

  it('says what a UTF-8 byte order mark is instead of "missing header"', function()
    refused(function() return migrate.header('\239\187\191' .. VALID, 'x.lua') end,
      '^x%.lua:1: the file starts with a UTF%-8 byte order mark %(EF BB BF%): save it without one')
  end)

  it('still reads long code and comment lines that are no header lines', function()
    local h = assert(migrate.header(VALID .. '-- ' .. string.rep('x', 3000) .. '\nlocal s = "' ..
      string.rep('y', 3000) .. '"\n', 'x.lua'))
    assert.are.equal('abort', h.on_error)
  end)
end)

describe('an order.d batch, revoked and legacy-map', function()
  it('refuse a line holding a NUL byte instead of reading the part before it', function()
    refused(function() return migrate.batch('00001-v1', 'alpha\0 retired\nbeta\n') end,
      '^order%.d/00001%-v1:1: the line holds a NUL byte')
    refused(function() return migrate.revoked('alpha\0beta\n') end, '^revoked:1: the line holds a NUL byte')
    refused(function() return migrate.legacy_map('1 one\0two\n') end, '^legacy%-map:1: the line holds a NUL byte')
  end)

  it('refuse a line longer than 511 bytes by saying so', function()
    refused(function() return migrate.batch('00001-v1', string.rep('a', 600) .. '\n') end,
      '^order%.d/00001%-v1:1: the line is longer than 511 bytes')
  end)

  it('read a long comment after a revoked slug', function()
    assert.are.same({ 'alpha' }, assert(migrate.revoked('alpha # ' .. string.rep('why ', 300) .. '\n')))
  end)

  it('say what a byte order mark is', function()
    refused(function() return migrate.revoked('\239\187\191alpha\n') end,
      '^revoked:1: the line starts the file with a UTF%-8 byte order mark')
  end)

  it("name 'Alpha' in revoked as not a valid slug", function()
    refused(function() return migrate.revoked('alpha\nAlpha\n') end,
      "^revoked:2: 'Alpha' is not a valid slug %(lower%-case letters, digits and single dashes")
  end)

  it('name a long bad slug in revoked whole, not its first 80 bytes', function()
    local slug = 'Long' .. string.rep('x', 296)
    local _, err = migrate.revoked('alpha\n' .. slug .. '\n')
    assert.is_truthy(err:find("revoked:2: '" .. slug .. "' is not a valid slug (lower-case letters, digits and "
      .. 'single dashes, at most 60 characters)', 1, true), err)
  end)
end)

describe('a ledger record', function()
  local unreadable = {
    { 'with text after the object', '{"state":"ok"} trailing', 'not one JSON object: text follows it' },
    { 'with a NUL byte after the object', '{"state":"ok"}\0{"x":1}', 'holds a NUL byte' },
    { 'with a key given twice', '{"state":"failed","state":"ok"}', "key 'state' appears twice" },
    { 'with a key given twice inside its journal', '{"state":"failed","journal":{"writes":1,"writes":0}}',
      "key 'writes' appears twice" },
    { 'with an at that is no time', '{"state":"ok","at":"yesterday"}', [[field 'at' is "yesterday", not a UTC time]] },
    { 'with an at on a day that does not exist', '{"state":"ok","at":"2026-02-29T10:00:00Z"}', "field 'at'" },
    { 'with an at in another zone', '{"state":"ok","at":"2026-08-12T10:04:00+02:00"}', "field 'at'" },
    { 'with an at that is not a string', '{"state":"ok","at":5}', "field 'at' is not a string" },
    { 'with an empty at', '{"state":"ok","at":""}', "field 'at'" },
  }
  for _, case in ipairs(unreadable) do
    it('is unreadable ' .. case[1], function()
      local r, problem = migrate.record(case[2])
      assert.is_nil(r)
      assert.is_truthy(problem:find(case[3], 1, true), problem)
    end)
  end

  it('reads an RFC 3339 UTC at with a fraction, a leap day, and white space after the object', function()
    for _, at in ipairs({ '2026-08-12T10:04:00Z', '2026-08-12T10:04:00.123456789Z', '2028-02-29T23:59:60Z' }) do
      local r = assert(migrate.record('{"state":"ok","at":"' .. at .. '"}\n '))
      assert.are.equal(at, r.at)
    end
  end)
end)

describe('a migrations tree', function()
  local fixture = require('support.fixture')

  local function tree_refused(spec, pattern, prepare)
    local dir = fixture.tree(spec)
    if prepare then prepare(dir) end
    refused(function() return migrate.plan(dir, nil, {}) end, pattern)
  end

  it('is refused without migrations/revoked, which a packaged tree always has', function()
    tree_refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} }, revoked = false },
      '/migrations/revoked: missing: a packaged tree has this file')
  end)

  it('is refused with a dotfile in a tier directory', function()
    tree_refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} },
      raw = { ['migrations/pre-apply/.hidden.lua'] = '-- cozystack-migration: on-error=abort\n' } },
      '/migrations/pre%-apply/%.hidden%.lua: not a migration %(a dotfile%)')
  end)

  it('is refused with a dotfile in order.d/', function()
    tree_refused({ batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} },
      raw = { ['migrations/order.d/.00002-v2'] = 'ghost\n' } },
      '/migrations/order%.d/%.00002%-v2: not a batch file')
  end)

  it('is refused when a legacy script is listed in 00000-legacy but not in legacy-map', function()
    tree_refused({ batches = { { '00000-legacy', { 'one', 'two' } } },
      scripts = { one = { shell = true }, two = { shell = true } }, legacy = { { 1, 'one' } } },
      "/legacy%-sh/two%.sh: 'two' is not in legacy%-sh/legacy%-map")
  end)

  it("is refused when 00000-legacy is not in the map's numeric order", function()
    tree_refused({ batches = { { '00000-legacy', { 'two', 'one' } } },
      scripts = { one = { shell = true }, two = { shell = true } }, legacy = { { 1, 'one' }, { 2, 'two' } } },
      "00000%-legacy:1: 'two' where legacy%-map has 'one' %(line 1, number 1%)")
  end)

  it('is refused when a legacy script sits in another batch than 00000-legacy', function()
    tree_refused({ batches = { { '00000-legacy', { 'one' } }, { '00001-v1', { 'two' } } },
      scripts = { one = { shell = true }, two = { shell = true } }, legacy = { { 1, 'one' }, { 2, 'two' } } },
      "00000%-legacy: ends before 'two' %(legacy%-map line 2, number 2%)")
  end)

  it('is read when 00000-legacy is the legacy map in order', function()
    local dir = fixture.tree({ batches = { { '00000-legacy', { 'one', 'two' } } },
      scripts = { one = { shell = true }, two = { shell = true } }, legacy = { { 1, 'one' }, { 2, 'two' } } })
    local p = assert(migrate.plan(dir, nil, {}))
    assert.are.equal(0, p.refuse, p.refuse_msg)
  end)
end)
