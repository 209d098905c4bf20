-- `cozy-migrate index`: the migrations index of a packaged tree, read with
-- the runner's loader (a tree the runner refuses has no index), each slug
-- of both tiers with its timeout, on-error and requires; --check of the
-- chart's copy, of its rendering as a ConfigMap and of the live ConfigMap
-- on the local apiserver, comparing every field (the image and the retry
-- policy whatever flags are given) and naming each difference (exit 9);
-- --image and --require-digest; an index that cannot be read whole (a NUL
-- byte, trailing bytes, a second object or YAML document) is refused
-- (exit 3, naming the byte offset), never taken for a smaller one.
local h = require('support.helpers')
local fixture = require('support.fixture')
local json = require('json')

local DIGEST = 'reg.example/cozy/cozy-migrate@sha256:' .. string.rep('0123abcd', 8)

local function index(dir, ...) return h.cozy('index', '--dir', dir, ...) end

-- The tree: two batches, legacy shell first, a revoked slug still shipped.
local function release_tree(extra, also)
  local scripts = {
    old = { shell = true, body = 'true' },
    alpha = { timeout = '90s', body = "require('log').info('a')" },
    zeta = { body = "require('log').info('z')" },
    ['bg-one'] = { tier = 'background', on_error = 'warn', timeout = '2m', body = "require('log').info('1')" },
    ['bg-two'] = { tier = 'background', header = '-- cozystack-migration: on-error=abort\n' ..
      '-- cozystack-migration: requires=bg-one', body = "require('log').info('2')" },
    faulty = { body = "error('never')" },
  }
  for k, v in pairs(extra or {}) do scripts[k] = v end
  return fixture.tree({
    batches = { { '00001-v1.0.0', { 'old', 'zeta', 'bg-one', 'faulty', 'gone retired' } },
      { '00002-v1.1.0', { 'alpha', 'bg-two', also } } },
    scripts = scripts,
    revoked = { 'faulty' },
  })
end

local function write_index(t)
  local f = os.tmpname() .. '.json'
  h.write(f, json.encode(t))
  return f
end

describe('cozy-migrate index', function()
  local dir, want

  setup(function()
    dir = release_tree()
    want = json.decode(h.must(index(dir)).out)
  end)

  it('lists each tier in manifest order with the runner loader and each slug\'s timeout, revoked slugs apart and retired ones left out', function()
    assert.are.equal(2, want.version)
    assert.are.equal(json.null, want.image)
    -- the legacy shell slug runs in the pre-apply tier, first (00000-legacy);
    -- each pre-apply slug carries its header's timeout, as a background one does
    assert.are.same({
      { slug = 'old', timeout_s = 600, on_error = 'abort', requires = {}, legacy = 1 },
      { slug = 'zeta', timeout_s = 600, on_error = 'abort', requires = {} },
      { slug = 'alpha', timeout_s = 90, on_error = 'abort', requires = {} },
    }, want['pre-apply'])
    assert.are.same({
      { slug = 'bg-one', timeout_s = 120, on_error = 'warn', requires = {} },
      { slug = 'bg-two', timeout_s = 600, on_error = 'abort', requires = { 'bg-one' } },
    }, want.background)
    assert.are.same({ 'faulty' }, want.revoked)
  end)

  it('carries each legacy slug\'s legacy-map number, so a chart leaves out of the hook\'s deadline what `version` seeds, and --check names a number that differs', function()
    local t = fixture.tree({
      batches = { { '00000-legacy', { 'first', 'second' } }, { '00001-v1.0.0', { 'lua-one' } } },
      scripts = { first = { shell = true, body = 'true' }, second = { shell = true, timeout = '2m', body = 'true' },
        ['lua-one'] = { body = "require('log').info('x')" } },
      legacy = { { 7, 'first' }, { 12, 'second' } },
    })
    local ix = json.decode(h.must(index(t)).out)
    local by = {}
    for _, g in ipairs(ix['pre-apply']) do by[g.slug] = g end
    assert.are.equal(7, by.first.legacy)
    assert.are.equal(12, by.second.legacy)
    assert.is_nil(by['lua-one'].legacy, 'a migration that is not legacy has no number')
    local stale = json.decode(h.must(index(t)).out)
    stale['pre-apply'][2].legacy = 13
    local res = index(t, '--check', write_index(stale))
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.out, "pre-apply slug 'second': legacy number 13 in the index, 12 in the tree's legacy-map")
    stale['pre-apply'][2].legacy = 'twelve'
    res = index(t, '--check', write_index(stale))
    assert.are.equal(3, res.code, res.out .. res.err)
    h.contains(res.err, "pre-apply slug 'second': 'legacy' is not a legacy-map number")
  end)

  it('--check-chart refuses a chart rendering that still holds the ledger or a numbered hook, or lacks the index, naming each document (exit 9)', function()
    local cm = h.must(index(dir, '-o', 'configmap', '--image', DIGEST)).out
    local engine_hook = table.concat({ '# Source: platform/templates/migrations-hook.yaml', 'apiVersion: batch/v1',
      'kind: Job', 'metadata:', '  name: cozystack-migrations', '  annotations:', '    helm.sh/hook: pre-upgrade,pre-install',
      'spec:', '  template:', '    spec:', '      containers:', '      - name: migrate', '        image: x:v1', '        env:',
      '        - {name: MIGRATIONS_INDEX, value: "{}"}' }, '\n')
    local workload = '# Source: platform/templates/workload.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n'
    local wired = h.write(os.tmpname() .. '.yaml', '---\n' .. workload .. '---\n# Source: platform/templates/migrations-index.yaml\n' ..
      cm .. '---\n' .. engine_hook .. '\n')
    local ok = h.must(index(dir, '--check-chart', wired, '--image', DIGEST))
    h.contains(ok.out, 'the chart renders the engine\'s index, agreeing with the tree')
    local ledger = '# Source: platform/templates/cozystack-version.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n' ..
      '  name: cozystack-version\n  annotations: {helm.sh/resource-policy: keep}\ndata:\n  version: "56"\n'
    local old_hook = table.concat({ '# Source: platform/templates/migration-hook.yaml', 'apiVersion: batch/v1', 'kind: Job',
      'metadata:', '  name: cozystack-migration-hook', '  annotations:', '    helm.sh/hook: pre-upgrade,pre-install',
      'spec:', '  backoffLimit: 3', '  template:', '    spec:', '      containers:', '      - name: migration',
      '        image: old:v1' }, '\n')
    local old = h.write(os.tmpname() .. '.yaml', h.slurp(wired) .. '---\n' .. ledger .. '---\n' .. old_hook .. '\n')
    local res = index(dir, '--check-chart', old, '--image', DIGEST)
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.out, 'document 4 (platform/templates/cozystack-version.yaml): ConfigMap cozystack-version: the chart renders the ledger')
    h.contains(res.out, 'document 5 (platform/templates/migration-hook.yaml): Job cozystack-migration-hook: a pre-install/pre-upgrade hook that is not the engine\'s')
    h.lacks(res.out, 'Job cozystack-migrations:')
    h.contains(res.err, '2 problems')
    -- another ledger name is the one refused when given
    res = index(dir, '--check-chart', old, '--image', DIGEST, '--ledger', 'other-ledger')
    assert.are.equal(9, res.code)
    h.lacks(res.out, 'ConfigMap cozystack-version')
    -- the snippet's stand-in for a replaced hook is not a hook of another runner
    local standin = old_hook:gsub('helm.sh/hook: pre%-upgrade,pre%-install',
      'helm.sh/hook: pre-upgrade,pre-install\n    platform.cozystack.io/replaces: the numbered migration hook')
    h.must(index(dir, '--check-chart', h.write(os.tmpname() .. '.yaml', h.slurp(wired) .. '---\n' .. standin .. '\n'),
      '--image', DIGEST))
    -- no index (the snippet missing, or migrations off), or one that differs
    res = index(dir, '--check-chart', h.write(os.tmpname() .. '.yaml', workload), '--image', DIGEST)
    assert.are.equal(9, res.code)
    h.contains(res.out, 'renders no ConfigMap cozystack-migrations-index')
    res = index(dir, '--check-chart', wired, '--image', 'reg.example/other:v2')
    assert.are.equal(9, res.code)
    h.contains(res.out, 'document 2 (platform/templates/migrations-index.yaml): the index:')
    -- a document that does not parse is refused as unreadable (exit 3)
    res = index(dir, '--check-chart', h.write(os.tmpname() .. '.yaml', workload .. '---\nkind: [unclosed\n'))
    assert.are.equal(3, res.code, res.out .. res.err)
  end)

  it('has no index for a tree the runner refuses (exit 3, naming the file)', function()
    local bad = release_tree({ broken = { header = '-- cozystack-migration: on-error=sometimes' } })
    local res = index(bad)
    assert.are.equal(3, res.code, res.err)
    assert.matches('broken.lua', res.err, 1, true)
    assert.are.equal('', res.out)
  end)

  it('takes --image by tag or digest, and with --require-digest refuses a tag (exit 2)', function()
    assert.are.equal(DIGEST, json.decode(h.must(index(dir, '--image', DIGEST, '--require-digest')).out).image)
    assert.are.equal('reg.example/x:v1.2.0', json.decode(h.must(index(dir, '--image', 'reg.example/x:v1.2.0')).out).image)
    local res = index(dir, '--image', 'reg.example/x:v1.2.0', '--require-digest')
    assert.are.equal(2, res.code)
    assert.matches('--require-digest asks for a digest', res.err, 1, true)
    for ref, why in pairs({ ['x'] = 'give a tag or a digest', ['x:latest'] = 'the tag latest',
      ['x@sha256:abc'] = 'a digest is @sha256:' }) do
      res = index(dir, '--image', ref)
      assert.are.equal(2, res.code, ref)
      assert.matches(why, res.err, 1, true)
    end
    res = index(dir, '--require-digest')
    assert.are.equal(2, res.code)
  end)

  it('names a long image reference whole when it refuses it, not its first 80 bytes (exit 2)', function()
    local ref = 'registry.example/' .. string.rep('deep/', 30) .. 'engine:latest'
    assert.is_true(#ref > 80 and #ref <= 255)
    local res = index(dir, '--image', ref)
    assert.are.equal(2, res.code)
    assert.matches("'" .. ref .. "': the tag latest names no fixed image", res.err, 1, true)
  end)

  it('--check passes a copy that agrees and names every slug of one that does not (exit 9)', function()
    local same = h.write(os.tmpname() .. '.json', h.must(index(dir)).out)
    local ok = h.must(index(dir, '--check', same))
    assert.matches('agrees with the tree', ok.out, 1, true)
    local stale = json.decode(h.slurp(same))
    local pre = stale['pre-apply']
    stale['pre-apply'] = { pre[1], pre[3], pre[2],                  -- reordered, one too many
      { slug = 'extra-one', timeout_s = 600, on_error = 'abort', requires = json.array({}) } }
    stale.background[1].timeout_s = 600
    stale.background[2].requires = json.array({})
    table.remove(stale.background, 1)                                -- bg-one missing
    stale.revoked = json.array({})
    local res = index(dir, '--check', write_index(stale))
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.out, "pre-apply slug 'extra-one' is in the index but the tree")
    h.contains(res.out, "pre-apply slug 'alpha' is at place 2")
    h.contains(res.out, "background slug 'bg-one' is shipped by the tree")
    h.contains(res.out, "background slug 'bg-two': its requires differ")
    h.contains(res.out, "revoked slug 'faulty' is shipped by the tree")
    h.contains(res.err, 'does not agree with the tree')
    h.contains(res.err, '5 differences')
    -- a changed timeout and on-error are differences too, in either tier
    stale = json.decode(h.slurp(same))
    stale.background[1].timeout_s, stale.background[2].on_error = 60, 'warn'
    stale['pre-apply'][3].timeout_s = 3600
    res = index(dir, '--check', write_index(stale))
    assert.are.equal(9, res.code)
    h.contains(res.out, "background slug 'bg-one': timeout 60s in the index, 120s in the tree")
    h.contains(res.out, "background slug 'bg-two': on-error=warn in the index, abort in the tree")
    h.contains(res.out, "pre-apply slug 'alpha': timeout 3600s in the index, 90s in the tree")
  end)

  it('keeps a timeout of part of a second exactly, so the index of a tree agrees with that tree', function()
    local frac = release_tree({ quick = { timeout = '1500ms', body = "require('log').info('q')" } }, 'quick')
    local out = h.must(index(frac)).out
    h.contains(out, '{"slug": "quick", "timeout_s": 1.5,')
    local ok = h.must(index(frac, '--check', h.write(os.tmpname() .. '.json', out)))
    h.contains(ok.out, 'agrees with the tree')
    local stale = json.decode(out)
    for _, g in ipairs(stale['pre-apply']) do if g.slug == 'quick' then g.timeout_s = 2 end end
    local res = index(frac, '--check', write_index(stale))
    assert.are.equal(9, res.code)
    h.contains(res.out, "pre-apply slug 'quick': timeout 2s in the index, 1.5s in the tree")
  end)

  it('--check compares the image whatever flags are given: --image, else the MIGRATIONS_IMAGE it runs in, else none', function()
    local tagged = h.write(os.tmpname() .. '.json', h.must(index(dir, '--image', 'reg.example/x:v1')).out)
    h.must(index(dir, '--check', tagged, '--image', 'reg.example/x:v1'))
    local res = index(dir, '--check', tagged, '--image', DIGEST)
    assert.are.equal(9, res.code)
    h.contains(res.out, "the index names the image 'reg.example/x:v1', not the '" .. DIGEST .. "' this check runs for")
    -- without --image: the image this runs in
    h.must(index(dir, '--check', tagged, { env = { MIGRATIONS_IMAGE = 'reg.example/x:v1' } }))
    res = index(dir, '--check', tagged, { env = { MIGRATIONS_IMAGE = 'reg.example/x:v2' } })
    assert.are.equal(9, res.code)
    h.contains(res.out, "the index names the image 'reg.example/x:v1', not the 'reg.example/x:v2' this check runs for")
    -- with neither, an image named is a difference: nothing is left unchecked
    res = index(dir, '--check', tagged)
    assert.are.equal(9, res.code)
    h.contains(res.out, "the index names the image 'reg.example/x:v1', and no image was given to compare it with")
    -- an index naming none differs from an image expected
    local bare = h.write(os.tmpname() .. '.json', h.must(index(dir)).out)
    res = index(dir, '--check', bare, '--image', 'reg.example/x:v1')
    assert.are.equal(9, res.code)
    h.contains(res.out, "the index names no image, not the 'reg.example/x:v1'")
    -- a mirror of the same digest is the same image
    local pinned = h.write(os.tmpname() .. '.json', h.must(index(dir, '--image', DIGEST)).out)
    h.must(index(dir, '--check', pinned, '--image', 'mirror.local/m@' .. DIGEST:match('(sha256:%x+)$')))
    res = index(dir, '--check', tagged, '--require-digest', { env = { MIGRATIONS_IMAGE = 'reg.example/x:v1' } })
    assert.are.equal(9, res.code)
    h.contains(res.out, 'does not name its image by digest')
    h.must(index(dir, '--check', pinned, '--image', DIGEST, '--require-digest'))
  end)

  it('--check of a ConfigMap compares its retry policy with the flags, or the defaults', function()
    local cm = h.must(index(dir, '-o', 'configmap', '--namespace', 'x')).out
    h.contains(cm, "max-attempts: '3'")
    h.contains(cm, 'retry-backoff: 10m')
    local f = h.write(os.tmpname() .. '.yaml', cm)
    h.must(index(dir, '--check', f))
    local res = index(dir, '--check', f, '--max-attempts', '5', '--retry-backoff', '30s')
    assert.are.equal(9, res.code)
    h.contains(res.out, 'key max-attempts is 3 in the index, 5 expected')
    h.contains(res.out, 'key retry-backoff is 10m in the index, 30s expected')
    f = h.write(os.tmpname() .. '.yaml', h.must(index(dir, '-o', 'configmap', '--namespace', 'x', '--max-attempts', '5',
      '--retry-backoff', '30s', '--retry-backoff-max', '5m')).out)
    h.must(index(dir, '--check', f, '--max-attempts', '5', '--retry-backoff', '30s', '--retry-backoff-max', '5m'))
    res = index(dir, '--check', f)
    assert.are.equal(9, res.code)
    h.contains(res.out, 'key retry-backoff-max is 5m in the index, 2h expected')
    -- a key it does not know is refused, as in the file
    local t = h.write(os.tmpname() .. '.yaml', cm .. '  job.json: "{}"\n')
    res = index(dir, '--check', t)
    assert.are.equal(3, res.code)
    h.contains(res.err, "the ConfigMap's data: unknown key 'job.json'")
  end)

  it('reads the index whole: a NUL byte, trailing bytes, a second object or YAML document is refused, naming the byte offset (exit 3)', function()
    local text = h.must(index(dir)).out
    local n = #text
    for what, c in pairs({
      ['second object'] = { text .. '{"version": 2}\n', 'a second object at byte offset ' .. n },
      ['trailing bytes'] = { text .. 'x', 'trailing bytes at byte offset ' .. n },
      ['NUL then an object'] = { text .. '\0{}', 'a NUL byte at byte offset ' .. n },
    }) do
      local f = h.write(os.tmpname() .. '.json', c[1])
      local res = index(dir, '--check', f)
      assert.are.equal(3, res.code, what .. ': ' .. res.out .. res.err)
      h.contains(res.err, c[2], what)
    end
    -- a two-document YAML file: the real index, then a tampered copy of the
    -- same name (what `kubectl apply -f` leaves live is the second)
    local cm = h.must(index(dir, '-o', 'configmap', '--namespace', 'x')).out
    local tampered = cm:gsub('"bg%-one"', '"bg-evil"')
    local f = h.write(os.tmpname() .. '.yaml', cm .. '---\n' .. tampered)
    local res = index(dir, '--check', f)
    assert.are.equal(3, res.code, res.out .. res.err)
    h.contains(res.err, 'a second document begins at byte offset ' .. #cm)
    -- a JSON ConfigMap whose index.json carries \u0000 then a second object
    -- (cJSON's string would end at the NUL: the first object alone)
    local obj = json.decode(json.encode({ apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'x' },
      data = { ['index.json'] = text } }))
    local body = json.encode(obj):gsub('(\\n}\\n)"', '%1\\u0000{\\"version\\": 2}"', 1)
    f = h.write(os.tmpname() .. '.json', body)
    res = index(dir, '--check', f)
    assert.are.equal(3, res.code, body .. res.out .. res.err)
    h.contains(res.err, 'key index.json: a NUL byte at byte offset ' .. n)
    -- a second object inside the ConfigMap's index.json
    obj.data['index.json'] = text .. '{}'
    f = h.write(os.tmpname() .. '.json', json.encode(obj))
    res = index(dir, '--check', f)
    assert.are.equal(3, res.code)
    h.contains(res.err, 'key index.json: a second object at byte offset ' .. n)
  end)

  it('refuses an index it cannot read fully (exit 3, naming the file and what is wrong)', function()
    local base = json.decode(h.must(index(dir)).out)
    local cases = {
      { function(t) t.extra = true end, "unknown key 'extra'" },
      { function(t) t.version = 1 end, "'version' is not 2" },
      { function(t) t['pre-apply'][2].slug = 'Not_A_Slug' end, "'pre-apply': an entry without a valid 'slug'" },
      { function(t) t['pre-apply'][2] = 'zeta' end, "'pre-apply': an entry is not an object" },
      { function(t) t['pre-apply'][1].timeout_s = nil end, "pre-apply slug 'old': 'timeout_s' is not a number" },
      { function(t) t.revoked = { 'zeta' } end, "slug 'zeta' is listed twice" },
      { function(t) t.image = nil end, "'image' is missing" },
      { function(t) t.background[1].on_error = 'maybe' end, "'on_error' is not abort or warn" },
      { function(t) t.background[1].timeout_s = -1 end, "'timeout_s' is not a number of seconds" },
      { function(t) t.background = nil end, "'background' is missing" },
    }
    for _, c in ipairs(cases) do
      local t = json.decode(json.encode(base))
      c[1](t)
      local f = write_index(t)
      local res = index(dir, '--check', f)
      assert.are.equal(3, res.code, c[2] .. ': ' .. res.out .. res.err)
      h.contains(res.err, f)
      h.contains(res.err, c[2])
    end
    -- a key given twice reads two ways
    local f = h.write(os.tmpname() .. '.json', (h.slurp(write_index(base)):gsub('^{', '{"revoked":[],')))
    local res = index(dir, '--check', f)
    assert.are.equal(3, res.code)
    h.contains(res.err, "key 'revoked' given twice")
  end)

  it('writes a ConfigMap the apiserver accepts, and --check reads it rendered or live from the cluster', function()
    h.need_cluster()
    local ns = 'ix-' .. h.unique()
    h.must(h.kubectl('create namespace ' .. ns))
    local res = h.must(index(dir, '-o', 'configmap', '--namespace', ns, '--image', DIGEST))
    local manifest = h.write(os.tmpname() .. '.yaml', res.out)
    h.must(index(dir, '--check', manifest, '--image', DIGEST))
    h.must(h.kubectl('apply -f ' .. h.q(manifest)))
    local json_live = h.write(os.tmpname() .. '.json',
      h.must(h.kubectl('get configmap cozystack-migrations-index -n ' .. ns .. ' -o json')).out)
    h.must(index(dir, '--check', json_live, '--image', DIGEST))
    local live = h.write(os.tmpname() .. '.yaml',
      h.must(h.kubectl('get configmap cozystack-migrations-index -n ' .. ns .. ' -o yaml')).out)
    local ok = h.must(index(dir, '--check', live, '--image', DIGEST, '--require-digest'))
    h.contains(ok.out, '3 pre-apply, 2 background, 1 revoked')
    -- the live copy edited on the cluster no longer agrees: the slug is named
    local cm = h.kubectl_json('get configmap cozystack-migrations-index -n ' .. ns)
    local ix = json.decode(cm.data['index.json'])
    table.remove(ix['pre-apply'], 2)
    cm.data['index.json'] = json.encode(ix)
    h.kapply(cm)
    live = h.write(os.tmpname() .. '.yaml',
      h.must(h.kubectl('get configmap cozystack-migrations-index -n ' .. ns .. ' -o yaml')).out)
    res = index(dir, '--check', live, '--image', DIGEST)
    assert.are.equal(9, res.code)
    h.contains(res.out, "pre-apply slug 'zeta' is shipped by the tree")
    -- a ConfigMap without the index is not one
    local other = h.write(os.tmpname() .. '.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n')
    res = index(dir, '--check', other)
    assert.are.equal(3, res.code)
    h.contains(res.err, 'has no key index.json')
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end)

  it('is run by make install against the chart copy it is given, which must agree', function()
    local dest = h.tmpdir()
    local copy = h.write(os.tmpname() .. '.json', h.must(index(dir)).out)
    -- order.d is prepared (no git history): make install takes it as it is
    local res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s',
      h.q(h.root), h.q(dest), h.q(dir), h.q(copy)))
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'agrees with the tree')
    local stale = json.decode(h.slurp(copy))
    table.remove(stale.background, 2)
    res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s',
      h.q(h.root), h.q(dest), h.q(dir), h.q(write_index(stale))))
    assert.are_not.equal(0, res.code)
    h.contains(res.out, "background slug 'bg-two' is shipped by the tree")
  end)

  it('takes the prepared order.d of a copy made inside this checkout (build/...), never the checkout\'s history', function()
    local inside = h.root .. '/build/index-spec-' .. tostring(os.time()) .. '-' .. tostring(math.random(1e6))
    h.must(h.run(string.format('mkdir -p %s && cp -R %s/. %s', h.q(inside), h.q(dir), h.q(inside))))
    local copy = h.write(os.tmpname() .. '.json', h.must(index(dir)).out)
    local res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s',
      h.q(h.root), h.q(h.tmpdir()), h.q(inside), h.q(copy)))
    h.run('rm -rf ' .. h.q(inside))
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'has no git history of its own; using its prepared migrations/order.d')
    h.contains(res.out, 'agrees with the tree')
  end)

  it("keeps this repository's chart copy (deploy/helm/files) in agreement with its own tree", function()
    local dest = h.tmpdir()
    local res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=.', h.q(h.root), h.q(dest)))
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'deploy/helm/files/cozy-migrate-index.json agrees with the tree')
  end)

  it('checks a digest-pinned chart copy against the image make install is told (INDEX_IMAGE), never against none', function()
    local dest = h.tmpdir()
    local copy = h.write(os.tmpname() .. '.json', h.must(index(dir, '--image', DIGEST, '--require-digest')).out)
    -- the build cannot know its own digest: without INDEX_IMAGE the index
    -- names an image the check was not given, and it says which
    local res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s',
      h.q(h.root), h.q(dest), h.q(dir), h.q(copy)))
    assert.are_not.equal(0, res.code)
    h.contains(res.out .. res.err, DIGEST)
    h.contains(res.out, 'no image was given to compare it with (--image REF, or the MIGRATIONS_IMAGE of the image ' ..
      'this runs in; make install: INDEX_IMAGE=REF)')
    res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s INDEX_IMAGE=%s',
      h.q(h.root), h.q(dest), h.q(dir), h.q(copy), h.q(DIGEST)))
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.out, 'agrees with the tree')
    -- another image is still a difference
    res = h.run(string.format('make -s -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s INDEX_FILE=%s INDEX_IMAGE=%s',
      h.q(h.root), h.q(dest), h.q(dir), h.q(copy), h.q((DIGEST:gsub('0123abcd$', 'ffffffff')))))
    assert.are_not.equal(0, res.code)
  end)
end)
