-- The write journal is never lost silently: however a migration ends (its
-- deadline's kill while it is stuck in C, its memory cap, a journal too
-- large for a record), the runner reports every write it sent, or a journal
-- cut explicitly ("truncated": true, `more`) that keeps the true counts.
local h = require('support.helpers')
local fixture = require('support.fixture')
local runner = require('support.runner')
local json = require('json')

-- exec's JSON result (decoded into res.doc) for a Lua body, with kube and
-- json required and NS defined.
local function exec_json(ns, body, ...)
  local f = h.write(h.tmpdir() .. '/m.lua', string.format(
    "local kube = require('kube')\nlocal json = require('json')\nlocal NS = %q\n%s", ns, body))
  local args = { 'exec', '--quiet', ... }
  args[#args + 1] = 'journaled'
  args[#args + 1] = f
  local res = h.cozy(table.unpack(args))
  res.doc = json.decode(res.out:match('[^\n]+') or 'null')
  return res
end

-- n ConfigMaps c1..cn in ns (names padded to pad characters), in one apply.
local function configmaps(ns, n, pad)
  local items = {}
  for i = 1, n do
    items[i] = { apiVersion = 'v1', kind = 'ConfigMap',
      metadata = { name = 'c' .. i .. (pad and ('-' .. ('x'):rep(pad)) or ''), namespace = ns }, data = { a = '1' } }
  end
  h.kcreate({ apiVersion = 'v1', kind = 'List', items = items }, 'configmaps')
  local names = {}
  for i = 1, n do names[i] = items[i].metadata.name end
  return names
end

describe('#e2e the write journal', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('survives a dry run whose changes pass 64 KiB (many fields full of quotes and backslashes)', function()
    local ns = runner.new_ns()
    local names = configmaps(ns, 50)
    local res = exec_json(ns, string.format([[
      local data = {}
      for i = 1, 20 do data['k' .. i] = string.rep('"\\', 12) end
      for _, n in ipairs(json.decode(%q)) do kube.patch('cm', n, { data = data }, { namespace = NS }) end
    ]], json.encode(names)), '--dry-run')
    assert.are.equal(0, res.code, res.err)
    local j = res.doc.journal
    assert.is_table(j, 'the journal was dropped: ' .. res.out:sub(1, 300))
    assert.are.equal(50, j.writes)
    assert.are.equal(50, j.changed)
    assert.are.equal(50, #j.entries)
    assert.is_true(#json.encode(j) > 65536, 'the case does not pass 64 KiB: ' .. #json.encode(j))
  end)

  it('keeps a failed record\'s journal past 16 KiB, cut with a marker and its true counts', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    local names = configmaps(ns, 50, 240)
    local dir = fixture.tree { batches = { { '00001-v1', { 'wide' } } }, scripts = { wide = { on_error = 'warn',
      body = string.format([[
local kube, json = require('kube'), require('json')
for _, n in ipairs(json.decode(%q)) do kube.patch('cm', n, { data = { b = '2' } }, { namespace = %q }) end
error('failed after 50 writes')
]], json.encode(names), ns) } } }
    local res = runner.run(dir, ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    local rec = runner.records(ns).wide
    assert.are.equal('failed', rec.state)
    assert.are.equal(50, rec.writes)
    assert.are.equal(50, rec.changed)
    local j = rec.journal
    assert.is_table(j, 'the record lost its journal')
    assert.is_true(j.truncated, 'the cut is not marked')
    assert.are.equal(50, j.writes)
    assert.are.equal(50, #j.entries + j.more, 'entries and more do not add up to the writes')
    assert.is_true(#j.entries > 0 and #j.entries < 50)
    assert.is_true(#json.encode(j) < 16384)
    assert.are.equal(names[1], j.entries[1].name, 'the first writes are the ones kept')
  end)

  it('survives the kill at the deadline of a script stuck inside C', function()
    local ns = runner.new_ns()
    local res = exec_json(ns, [[
      for i = 1, 3 do kube.create('cm', { metadata = { name = 'made-' .. i } }, { namespace = NS }) end
      string.find(string.rep('a', 100000), '.-.-.-.-b') -- never returns: no hook fires inside C
    ]], '--timeout', '1s', '--grace', '1s')
    assert.are.equal(1, res.code, res.err)
    assert.are.equal('Timeout', res.doc.reason)
    assert.is_table(res.doc.journal, 'a Timeout with no journal reads like "touched nothing"')
    assert.are.equal(3, res.doc.journal.writes)
    assert.are.equal(3, #res.doc.journal.entries)
  end)

  it('records the journal of a migration killed at its deadline', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    local dir = fixture.tree { batches = { { '00001-v1', { 'stuck' } } }, scripts = { stuck = { on_error = 'warn',
      timeout = '1s', body = string.format([[
local kube = require('kube')
for i = 1, 3 do kube.create('cm', { metadata = { name = 'made-' .. i } }, { namespace = %q }) end
string.find(string.rep('a', 100000), '.-.-.-.-b')
]], ns) } } }
    local res = runner.run(dir, ns, '--grace', '1s')
    assert.are.equal(0, res.code, res.out .. res.err)
    local rec = runner.records(ns).stuck
    assert.are.equal('Timeout', rec.reason)
    assert.are.equal(3, rec.writes)
    assert.is_table(rec.journal)
    assert.are.equal(3, #rec.journal.entries)
  end)

  it('survives a migration that ends with its memory all but exhausted', function()
    local ns = runner.new_ns()
    configmaps(ns, 3)
    local res = exec_json(ns, [[
      for i = 1, 3 do kube.patch('cm', 'c' .. i, { data = { b = tostring(i) } }, { namespace = NS }) end
      -- fill the cap to the last few bytes, and keep it filled
      local keep = {}
      for _, size in ipairs { 65536, 4096, 256, 16, 1 } do
        pcall(function() while true do keep = { keep, string.rep('x', size) .. #keep } end end)
      end
    ]], '--memory', '24')
    assert.are.equal('MemoryLimit', res.doc.reason, res.out .. res.err)
    assert.is_table(res.doc.journal, 'the journal was lost at the memory cap')
    assert.are.equal(3, res.doc.journal.writes)
    assert.are.equal(3, #res.doc.journal.entries)
  end)

  it('counts a request\'s path and query against the memory cap, as its body and answer', function()
    local ns = runner.new_ns()
    -- 6 MiB of '/' escape to an 18 MiB query: past a 24 MiB cap only when
    -- the path's own buffer is counted.
    local res = exec_json(ns, [[
      local sel = string.rep('/', 6 * 1024 * 1024)
      for _ in kube.list('configmaps', { namespace = NS, label_selector = sel }) do end
    ]], '--memory', '24')
    assert.are.equal('MemoryLimit', res.doc and res.doc.reason, res.out:sub(1, 600) .. res.err:sub(1, 600))
  end)
end)
