-- `cozy-migrate import-legacy`: numbered shell migrations become
-- legacy-sh/<slug>.sh (one header line inserted, nothing else changed),
-- lib/ is copied, legacy-map written; bad input is refused with one line
-- naming the file, number or slug. Then the imported set runs through the
-- engine against the local apiserver, stamping `version` with kubectl apply
-- as the old scripts do.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local json = require('json')

local HEADER = '# cozystack-migration: on-error=abort\n'

-- A numbered set as a platform has it: each script marks that it ran and
-- stamps the version the way the old runner's scripts did.
local function numbered(files)
  local dir = h.tmpdir()
  for name, content in pairs(files) do
    local p = dir .. '/' .. name
    assert(os.execute('mkdir -p ' .. h.q(p:match('^(.*)/[^/]*$'))))
    h.write(p, content)
  end
  return dir
end

local function stamp(n, extra)
  return '#!/bin/bash\nset -euo pipefail\n# shellcheck source=lib/common.sh\nsource lib/common.sh\n' ..
    (extra or '') .. 'mark ' .. n .. '\n' ..
    'kubectl create configmap -n "$NAMESPACE" cozystack-version --from-literal=version=' .. (n + 1) ..
    ' --dry-run=client -o yaml | kubectl apply -f-\n'
end

local COMMON = '# shellcheck shell=bash\nmark() {\n  kubectl -n "$NAMESPACE" create configmap "ran-legacy-$1" --from-literal=n="$1" >/dev/null\n}\n'

local function fails(res, code, text)
  assert.are.equal(code, res.code, 'stdout: ' .. res.out .. '\nstderr: ' .. res.err)
  local msg = res.err:gsub('\n$', '')
  assert.is_nil(msg:find('\n'), 'expected one line, got:\n' .. res.err)
  assert.is_truthy(msg:find(text, 1, true), ('expected %q in %q'):format(text, msg))
end

local function import(from, names, dest)
  local nf = h.write(os.tmpname(), names)
  return h.cozy('import-legacy', '--from', from, '--names', nf, '--dir', dest)
end

describe('import-legacy', function()
  it('imports byte-identical scripts with one header line, lib/ and legacy-map; the tree lints clean', function()
    local src = numbered({ ['1'] = stamp(1), ['2'] = stamp(2, '# second\n'), ['lib/common.sh'] = COMMON })
    local dest = h.tmpdir()
    local res = import(src, '1 first-step\n2 second-step\n', dest)
    assert.are.equal(0, res.code, res.err)
    for n, slug in ipairs({ 'first-step', 'second-step' }) do
      local orig = h.slurp(src .. '/' .. n)
      local shebang, rest = orig:match('^([^\n]*\n)(.*)$')
      assert.are.equal(shebang .. HEADER .. rest, h.slurp(dest .. '/legacy-sh/' .. slug .. '.sh'))
    end
    assert.are.equal(COMMON, h.slurp(dest .. '/legacy-sh/lib/common.sh'))
    assert.matches('\n1 first%-step\n2 second%-step\n$', h.slurp(dest .. '/legacy-sh/legacy-map'))
    res = h.cozy('lint', '--dir', dest)
    assert.are.equal(0, res.code, res.out .. res.err)
    -- once only
    fails(import(src, '1 first-step\n2 second-step\n', dest), 9, 'already holds legacy migrations')
  end)

  describe('refuses, naming the cause (3)', function()
    it('a missing number', function()
      fails(import(numbered({ ['1'] = stamp(1), ['3'] = stamp(3) }), '1 a\n2 b\n3 c\n', h.tmpdir()), 3,
        '/2 is missing: the numbered migrations run 1 .. 3 without a gap')
    end)
    it('a missing name', function()
      fails(import(numbered({ ['1'] = stamp(1), ['2'] = stamp(2) }), '1 a\n', h.tmpdir()), 3,
        "no name for migration 2")
    end)
    it('a name for a number that has no file', function()
      fails(import(numbered({ ['1'] = stamp(1) }), '1 a\n5 e\n', h.tmpdir()), 3, ':2: names migration 5, but ')
    end)
    it('a file without a shebang', function()
      fails(import(numbered({ ['1'] = 'echo no shebang\n' }), '1 a\n', h.tmpdir()), 3, '/1:1: no shebang line')
    end)
    it('a name that is not a valid slug', function()
      fails(import(numbered({ ['1'] = stamp(1) }), '1 Not_Valid\n', h.tmpdir()), 3, ":1: 'Not_Valid' is not a valid slug")
    end)
    it('a script that already carries a header', function()
      fails(import(numbered({ ['1'] = '#!/bin/sh\n# cozystack-migration: on-error=warn\n' }), '1 a\n', h.tmpdir()), 3,
        "header key 'on-error' given twice")
    end)
    it('missing flags (2)', function()
      fails(h.cozy('import-legacy', '--from', h.tmpdir()), 2, '--from DIR and --names FILE are required')
    end)
  end)

  it('runs the imported set through the engine, the scripts stamping version with kubectl apply', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local src = numbered({ ['1'] = stamp(1), ['2'] = stamp(2), ['lib/common.sh'] = COMMON })
    local r = gitrepo.new()
    assert.are.equal(0, import(src, '1 first-step\n2 second-step\n', r.dir).code)
    r:commit('import the legacy set')
    assert.are.equal(0, r:order().code)
    assert.are.equal('first-step\nsecond-step\n', h.slurp(r:path('migrations/order.d/00000-legacy')))

    local ns = 'imp-' .. os.time() % 100000 .. math.random(100, 999)
    h.must(h.kubectl('create namespace ' .. ns))
    -- a cluster the old runner left at version 1: both scripts are pending
    h.must(h.kubectl('create configmap cozystack-version -n ' .. ns .. ' --from-literal=version=1'))
    local path = h.root .. '/build/testenv/bin:' .. os.getenv('PATH')
    local function run()
      return h.cozy('run', '--local', '--dir', r.dir, '--namespace', ns, { env = { PATH = path } })
    end
    local res = run()
    assert.are.equal(0, res.code, res.out .. res.err)
    local cm = h.kubectl_json('get configmap cozystack-version -n ' .. ns)
    assert.are.equal('3', cm.data.version)
    for _, slug in ipairs({ 'first-step', 'second-step' }) do
      local rec = json.decode(cm.data['m.' .. slug])
      assert.are.equal('ok', rec.state)
      assert.are.equal('00000-legacy', rec.batch)
    end
    h.must(h.kubectl('get configmap ran-legacy-1 ran-legacy-2 -n ' .. ns))
    -- recorded: a second run executes nothing, and version stays
    res = run()
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_nil(res.out:find('running', 1, true), res.out)
    assert.are.equal('3', h.kubectl_json('get configmap cozystack-version -n ' .. ns).data.version)
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end)
end)
