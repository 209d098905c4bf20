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

-- A numbered set as a platform has it ({name = content} in a scratch
-- directory): each script marks that it ran and stamps the version the way
-- the old runner's scripts did.
local numbered = require('support.fixture').files

local function stamp(n, extra)
  return '#!/bin/bash\nset -euo pipefail\n# shellcheck source=lib/common.sh\nsource lib/common.sh\n' ..
    (extra or '') .. 'mark ' .. n .. '\n' ..
    'kubectl create configmap -n "$NAMESPACE" cozystack-version --from-literal=version=' .. (n + 1) ..
    ' --dry-run=client -o yaml | kubectl apply -f-\n'
end

local COMMON = '# shellcheck shell=bash\nmark() {\n  kubectl -n "$NAMESPACE" create configmap "ran-legacy-$1" --from-literal=n="$1" >/dev/null\n}\n'

local fails = h.fails

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

  it('writes the .gitignore line for the generated order.d/, as a scaffolded tree has, once', function()
    local src = numbered({ ['1'] = stamp(1), ['lib/common.sh'] = COMMON })
    local r = gitrepo.new()
    r:write('.gitignore', '/build/')               -- a platform's own, without a final newline
    h.must(import(src, '1 first-step\n', r.dir))
    local ignore = h.slurp(r:path('.gitignore'))
    assert.are.equal('/build/\n', ignore:sub(1, 8))
    assert.are.equal('\n/migrations/order.d/\n', ignore:sub(-22))
    assert.are.equal(1, select(2, ignore:gsub('order%.d', '')), ignore)
    r:commit('import the legacy set')
    h.must(r:order())
    -- the generated manifest is not something to commit
    assert.are.equal('', r:git('status --porcelain'))
    assert.are.equal(0, h.cozy('lint', '--dir', r.dir).code)
    -- into a tree without one, the import makes it; one that has the line is left as it is
    local dest = h.tmpdir()
    h.must(import(src, '1 first-step\n', dest))
    h.contains(h.slurp(dest .. '/.gitignore'), '/migrations/order.d/\n')
    local kept = h.tmpdir()
    h.write(kept .. '/.gitignore', 'migrations/order.d/\n')
    h.must(import(src, '1 first-step\n', kept))
    assert.are.equal('migrations/order.d/\n', h.slurp(kept .. '/.gitignore'))
  end)

  describe('the variable a script reads for its own dry run', function()
    local function reads(n)
      return '#!/bin/bash\nset -euo pipefail\necho "script ' .. n .. ' dry=${MIGRATION_DRY_RUN:-unset}"\n' ..
        'if [ "${MIGRATION_DRY_RUN:-}" = 1 ]; then exit 0; fi\n' ..
        'kubectl create configmap -n "$NAMESPACE" cozystack-version --from-literal=version=' .. (n + 1) ..
        ' --dry-run=client -o yaml | kubectl apply -f-\n'
    end

    it('is a second header line written at import, part of the digest the frozen rule keeps', function()
      local src = numbered({ ['1'] = reads(1), ['2'] = reads(2), ['3'] = reads(3) })
      local dest = h.tmpdir()
      local nf = h.write(os.tmpname(), '1 first-step\n2 second-step\n3 third-step\n')
      local res = h.cozy('import-legacy', '--from', src, '--names', nf, '--dir', dest,
        '--dry-run-var', '1=MIGRATION_DRY_RUN', '--dry-run-var', 'third-step=MIGRATION_DRY_RUN')
      assert.are.equal(0, res.code, res.err)
      h.contains(res.out, '2 declaring the variable of their own dry run')
      for n, slug in ipairs({ 'first-step', 'second-step', 'third-step' }) do
        local shebang, rest = h.slurp(src .. '/' .. n):match('^([^\n]*\n)(.*)$')
        local dry = n ~= 2 and '# cozystack-migration: dry-run=MIGRATION_DRY_RUN\n' or ''
        assert.are.equal(shebang .. HEADER .. dry .. rest, h.slurp(dest .. '/legacy-sh/' .. slug .. '.sh'))
      end
      h.must(h.run('cd ' .. h.q(dest .. '/legacy-sh') .. ' && sha256sum --strict -c legacy-sha256sums'))
      res = h.cozy('lint', '--dir', dest)
      assert.are.equal(0, res.code, res.out .. res.err)
      -- declared by hand afterwards, it is a change to a frozen script
      local late = dest .. '/legacy-sh/second-step.sh'
      h.write(late, (h.slurp(late):gsub('\n', '\n# cozystack-migration: dry-run=MIGRATION_DRY_RUN\n', 1)))
      h.contains(h.cozy('lint', '--dir', dest).out, 'legacy-sh/second-step.sh:1: frozen: differs from what import-legacy imported')
    end)

    it('is set to 1 in a dry run of the imported script, and only where declared', function()
      if not h.has_cluster() then
        pending('needs the local apiserver (KUBECONFIG)')
        return
      end
      local src = numbered({ ['1'] = reads(1), ['2'] = reads(2) })
      local r = gitrepo.new()
      local nf = h.write(os.tmpname(), '1 first-step\n2 second-step\n')
      h.must(h.cozy('import-legacy', '--from', src, '--names', nf, '--dir', r.dir,
        '--dry-run-var', 'first-step=MIGRATION_DRY_RUN'))
      r:commit('import the legacy set')
      local ns = 'impdry-' .. os.time() % 100000 .. math.random(100, 999)
      h.must(h.kubectl('create namespace ' .. ns))
      h.must(h.kubectl('create configmap cozystack-version -n ' .. ns .. ' --from-literal=version=1'))
      local path = h.root .. '/build/testenv/bin:' .. os.getenv('PATH')
      local res = h.cozy('run', '--local', '--dry-run', '--dir', r.dir, '--namespace', ns, { env = { PATH = path } })
      assert.are.equal(0, res.code, res.out .. res.err)
      local all = res.out .. res.err
      h.contains(all, 'script 1 dry=1')
      h.contains(all, 'script 2 dry=unset')
      -- a dry run persists nothing: version is where it was
      assert.are.equal('1', h.kubectl_json('get configmap cozystack-version -n ' .. ns).data.version)
      h.kubectl('delete namespace ' .. ns .. ' --wait=false')
    end)

    it('refuses, naming the flag, a script it does not name, one named twice, and no variable name (2); nothing is written', function()
      local src = numbered({ ['1'] = reads(1), ['2'] = reads(2) })
      local nf = h.write(os.tmpname(), '1 first-step\n2 second-step\n')
      local function imp(...)
        local dest = h.tmpdir()
        local res = h.cozy('import-legacy', '--from', src, '--names', nf, '--dir', dest, ...)
        assert.is_nil(io.open(dest .. '/legacy-sh/legacy-map'), 'written despite the refusal')
        return res
      end
      fails(imp('--dry-run-var', 'nowhere=MIGRATION_DRY_RUN'), 2,
        "--dry-run-var nowhere=MIGRATION_DRY_RUN: 'nowhere' is no script of")
      fails(imp('--dry-run-var', '7=MIGRATION_DRY_RUN'), 2, "'7' is no script of")
      fails(imp('--dry-run-var', '1=MIGRATION_DRY_RUN', '--dry-run-var', 'first-step=DRY'), 2,
        'first-step (1) already reads MIGRATION_DRY_RUN for its dry run')
      fails(imp('--dry-run-var', '2=1BAD'), 2, "'1BAD' is not a shell variable name")
      fails(imp('--dry-run-var', 'MIGRATION_DRY_RUN'), 2, "'MIGRATION_DRY_RUN' is not SCRIPT=VAR")
    end)
  end)

  describe('a real-shaped chain, frozen', function()
    -- Shaped like a platform's numbered chain: POSIX sh shebangs under
    -- pipefail (SC3040), unquoted expansions (SC2086), read without -r
    -- (SC2162), variables set and never used (SC2034), helpers sourced from
    -- lib/. Style findings none of them may ever fix: they are frozen.
    local CHAIN = {
      ['1'] = '#!/bin/sh\n# Migration 1 --> 2\nset -euo pipefail\n\nkubectl get ns cozy-system\n' ..
        'kubectl create configmap -n $NAMESPACE cozystack-version --from-literal=version=2 --dry-run=client -o yaml | kubectl apply -f-\n',
      ['2'] = '#!/bin/sh\n# Migration 2 --> 3\nset -euo pipefail\n\nTARGET=3\n' ..
        'kubectl get hr -A --no-headers | while read namespace name rest; do\n' ..
        '  kubectl annotate hr -n $namespace $name cozystack.io/migrated=true --overwrite\ndone\n',
      ['3'] = '#!/bin/bash\nset -euo pipefail\n. lib/common.sh\n\nfor ns in $(kubectl get ns -o name); do\n' ..
        '  label_ns $ns\ndone\nOLD_VERSION=$CURRENT_VERSION\n',
      ['4'] = '#!/bin/sh\nset -euo pipefail\nkubectl delete deployment -n $NAMESPACE old-operator --ignore-not-found\n',
      ['5'] = '#!/bin/sh\nset -euo pipefail\nread -p "" answer < /dev/null || true\necho $answer\n',
      ['lib/common.sh'] = '# shellcheck shell=bash\nlabel_ns() {\n  kubectl label $1 cozystack.io/system=true --overwrite\n}\nUNUSED=1\n',
    }
    local NAMES = '1 stamp-version\n2 annotate-releases\n3 label-namespaces\n4 drop-old-operator\n5 read-answer\n'

    local function imported()
      local dest = h.tmpdir()
      h.must(import(numbered(CHAIN), NAMES, dest))
      return dest
    end

    local function finding(res, dest, prefix, fragment)
      assert.are.equal(3, res.code, res.out .. res.err)
      for line in res.out:gmatch('[^\n]+') do
        if line:sub(1, #dest + 1 + #prefix) == dest .. '/' .. prefix and line:find(fragment, 1, true) then
          return line
        end
      end
      error(('no finding %q with %q in:\n%s'):format(prefix, fragment, res.out))
    end

    it('lints clean once imported: its digest list proves it is what was imported, and style is not judged', function()
      local dest = imported()
      local res = h.cozy('lint', '--dir', dest)
      assert.are.equal(0, res.code, res.out .. res.err)
      assert.are.equal('', res.out)
      -- sha256sum reads the same list and agrees, file by file
      local sums = h.slurp(dest .. '/legacy-sh/legacy-sha256sums')
      assert.are.equal(6, select(2, sums:gsub('\n', '')))
      h.contains(sums, '  lib/common.sh\n')
      h.must(h.run('cd ' .. h.q(dest .. '/legacy-sh') .. ' && sha256sum --strict -c legacy-sha256sums'))
      -- without the list, the same scripts are linted as new shell is: every style finding
      os.remove(dest .. '/legacy-sh/legacy-sha256sums')
      res = h.cozy('lint', '--dir', dest)
      for _, code in ipairs({ 'SC3040', 'SC2086', 'SC2162', 'SC2034' }) do h.contains(res.out, code) end
      assert.are.equal(3, res.code)
    end)

    it('fails naming the file when one byte of a frozen script or helper changes', function()
      local dest = imported()
      local script = dest .. '/legacy-sh/annotate-releases.sh'
      h.write(script, (h.slurp(script):gsub('migrated=true', 'migrated=True')))
      local helper = dest .. '/legacy-sh/lib/common.sh'
      h.write(helper, h.slurp(helper) .. '\n')
      local res = h.cozy('lint', '--dir', dest)
      finding(res, dest, 'legacy-sh/annotate-releases.sh:1: frozen: ', 'differs from what import-legacy imported')
      finding(res, dest, 'legacy-sh/lib/common.sh:1: frozen: ', 'differs from what import-legacy imported')
      assert.are.equal(2, select(2, res.out:gsub('\n', '')), res.out)
    end)

    it('fails for a legacy script or helper added after the import, and a listed helper gone', function()
      local dest = imported()
      h.write(dest .. '/legacy-sh/late-addition.sh', '#!/bin/bash\n# cozystack-migration: on-error=abort\necho late\n')
      h.write(dest .. '/legacy-sh/legacy-map', h.slurp(dest .. '/legacy-sh/legacy-map') .. '6 late-addition\n')
      h.write(dest .. '/legacy-sh/lib/extra.sh', '# shellcheck shell=bash\n')
      local res = h.cozy('lint', '--dir', dest)
      finding(res, dest, 'legacy-sh/late-addition.sh:1: frozen: ', 'not in legacy-sh/legacy-sha256sums')
      finding(res, dest, 'legacy-sh/lib/extra.sh:1: frozen: ', 'not in legacy-sh/legacy-sha256sums')
      os.remove(dest .. '/legacy-sh/lib/common.sh')
      res = h.cozy('lint', '--dir', dest)
      finding(res, dest, 'legacy-sh/legacy-sha256sums:', 'lists legacy-sh/lib/common.sh, which is gone')
    end)

    it('accepts a listed script deleted at the retention floor', function()
      local dest = imported()
      os.remove(dest .. '/legacy-sh/read-answer.sh')
      local res = h.cozy('lint', '--dir', dest)
      assert.are.equal(0, res.code, res.out .. res.err)
    end)

    it('still fails on a shellcheck error, which breaks a run, in a frozen script', function()
      local chain = {}
      for k, v in pairs(CHAIN) do chain[k] = v end
      chain['6'] = '#!/bin/sh\nset -euo pipefail\nif [ -n "$NAMESPACE" ]; then\n  echo "$NAMESPACE"\n'
      local dest = h.tmpdir()
      h.must(import(numbered(chain), NAMES .. '6 broken-if\n', dest))
      local res = h.cozy('lint', '--dir', dest)
      local line = finding(res, dest, 'legacy-sh/broken-if.sh:', ': shellcheck: ')
      assert.matches('error', line)
      assert.is_nil(res.out:find('SC2086', 1, true), res.out)
    end)

    it('fails on a digest list that is not sha256sum output, naming its line', function()
      local dest = imported()
      local list = dest .. '/legacy-sh/legacy-sha256sums'
      local text = h.slurp(list)
      h.write(list, text .. 'not-a-digest  stamp-version.sh\n')
      finding(h.cozy('lint', '--dir', dest), dest, 'legacy-sh/legacy-sha256sums:7: frozen: ',
        "expected '<sha256>  <path>'")
      h.write(list, text .. text:match('^[^\n]*\n'))
      finding(h.cozy('lint', '--dir', dest), dest, 'legacy-sh/legacy-sha256sums:7: frozen: ', 'repeats line 1')
      h.write(list, (text:gsub('  ', '  ../', 1)))
      finding(h.cozy('lint', '--dir', dest), dest, 'legacy-sh/legacy-sha256sums:1: frozen: ', 'a path inside legacy-sh/')
    end)
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
