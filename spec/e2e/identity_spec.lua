-- The shared code a migration ran with is part of what it was (issue 19,
-- DESIGN.md "Checksums"), end to end: a record names the stdlib that
-- actually runs, and `status` and `plan` report an ok record whose
-- lib_sha256 differs from the shared code shipped now.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

-- The digest sha256_dir (host/formats/tree.c) makes of a directory: each regular
-- file in bytewise order of its relative path, the path, a NUL, the bytes.
local function dir_digest(dir)
  return h.must(h.run(string.format(
    "cd %s && find . -type f -printf '%%P\\n' | LC_ALL=C sort | " ..
    "while IFS= read -r f; do printf '%%s\\0' \"$f\"; cat -- \"$f\"; done | sha256sum | cut -d' ' -f1",
    h.q(dir)))).out:gsub('%s+$', '')
end

local function patch_record(ns, slug, fields)
  local rec = runner.records(ns)[slug]
  for k, v in pairs(fields) do rec[k] = v end
  local f = h.write(h.tmpdir() .. '/patch.json', json.encode({ data = { ['m.' .. slug] = json.encode(rec) } }))
  h.must(h.kubectl(string.format('patch configmap %s -n %s --type=merge --patch-file %s', runner.LEDGER, ns, h.q(f))))
end

local function row(status, slug)
  for _, r in ipairs(status) do if r.migration == slug then return r end end
  error('no status row for ' .. slug)
end

describe('#e2e the shared code a migration ran with', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('is recorded as the stdlib that runs, not a stdlib/ inside --dir', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'uses-kube' } } },
      scripts = { ['uses-kube'] = { body = "local kube = require('kube')\n" .. runner.lua_marker(ns, 'uses-kube') } },
      raw = { ['stdlib/kube.lua'] = "error('this stdlib never runs')\n" } })
    runner.make_ledger(ns, { ['m.seen'] = '{"state":"ok"}' })
    h.must(runner.run(dir, ns))
    local rec = runner.records(ns)['uses-kube']
    assert.are.equal('ok', rec.state)
    local running = os.getenv('COZY_STDLIB') or (h.root .. '/stdlib')
    assert.are.equal(dir_digest(running), rec.lib_sha256)
    assert.are_not.equal(dir_digest(dir .. '/stdlib'), rec.lib_sha256)
    assert.are.equal('match', row(runner.status(dir, ns), 'uses-kube').lib_checksum)
  end)

  it('is reported by status and plan when an ok record names other shared code (shell and Lua)', function()
    local ns = runner.new_ns()
    local f = os.tmpname()
    local dir = fixture.tree({ batches = { { '00000-legacy', { 'old' } }, { '00001-v1.0.0', { 'new-one' } } },
      scripts = { old = { shell = true, body = runner.sh_append(f) }, ['new-one'] = {} },
      legacy = { { 1, 'old' } }, raw = { ['legacy-sh/lib/common.sh'] = 'say() { echo said; }\n' } })
    runner.make_ledger(ns, { version = '1' })
    h.must(runner.run(dir, ns))
    local st = runner.status(dir, ns)
    assert.are.same({ 'match', 'match' }, { row(st, 'old').lib_checksum, row(st, 'new-one').lib_checksum })
    patch_record(ns, 'old', { lib_sha256 = string.rep('a', 64) })
    patch_record(ns, 'new-one', { lib_sha256 = string.rep('b', 64) })
    st = runner.status(dir, ns)
    assert.are.same({ 'DIFFERS', 'match' }, { row(st, 'old').lib_checksum, row(st, 'old').checksum })
    assert.are.equal('DIFFERS', row(st, 'new-one').lib_checksum)
    local table_out = h.must(h.cozy('status', '--dir', dir, '--namespace', ns)).out
    assert.truthy(table_out:match('\nold%s+ok[^\n]+LIB DIFFERS'), table_out)
    local one = h.must(h.cozy('status', 'old', '--dir', dir, '--namespace', ns)).out
    h.contains(one, 'lib_sha256:  ' .. string.rep('a', 64) .. ' (checksum DIFFERS)')
    local plan = h.must(runner.plan(dir, ns))
    h.contains(plan.err, '1 ok record (old) ran with shared code other than the legacy-sh/lib/ shipped now')
    h.contains(plan.err, '1 ok record (new-one) ran with shared code other than the stdlib/ shipped now')
    -- reported, not re-run: repair is a new slug
    h.contains(plan.out, '0 to run for the pre-apply tier')
  end)
end)
