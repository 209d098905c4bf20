-- The image without Docker: `make install DESTDIR= PREFIX=/usr` lays out the
-- image's filesystem; an end-to-end run from that layout, as the
-- unprivileged user the image runs as (nobody, 65534), with a PATH holding
-- only what the image holds, against the local apiserver. And the
-- Dockerfile only COPYs paths that exist and calls make targets that exist.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local json = require('json')

-- What the runtime stage installs (bash, sh -> bash, jq, coreutils, sed,
-- awk) and kubectl: the shell migrations may call these and nothing else.
local IMAGE_TOOLS = { 'bash', 'jq', 'sed', 'awk', 'base64', 'timeout', 'env', 'cat', 'id', 'printf',
  'tr', 'head', 'tail', 'grep', 'sleep', 'mktemp', 'rm', 'ls' }

local function sh(cmd) return h.must(h.run(cmd)) end

describe('make install (the image filesystem)', function()
  local dest, repo

  setup(function()
    repo = gitrepo.new()
    repo:write('legacy-sh/legacy-map', '1 tool-check\n')
    repo:write('legacy-sh/tool-check.sh', [[#!/bin/bash
# cozystack-migration: on-error=abort
set -euo pipefail
v=$(kubectl get configmap cozystack-version -n "$NAMESPACE" -o json | jq -r .data.version)
enc=$(printf '%s' "$v" | base64)
seen=$(printf '%s' "$enc" | base64 -d | sed 's/^/v/' | awk '{print $1}')
timeout 20 sh -c 'set -o pipefail; true | cat'
kubectl create configmap smoke-sh -n "$NAMESPACE" --from-literal=seen="$seen" --from-literal=uid="$(id -u)"
]])
    -- lib/ may keep a placeholder; a script directory may not (the runner refuses dotfiles there)
    repo:write('legacy-sh/lib/.keep', '')
    repo:commit():tag('v1.0.0')
    dest = h.tmpdir()
    local res = h.run(string.format('make -C %s install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s',
      h.q(h.root), h.q(dest), h.q(repo.dir)))
    assert(res.code == 0, res.out .. res.err)
    sh('chmod 755 ' .. h.q(dest))
  end)

  it('lays out the binary, stdlib, migrations with order.d, and legacy-sh under PREFIX', function()
    local share = dest .. '/usr/share/cozy-migrate'
    for _, p in ipairs({ '/usr/bin/cozy-migrate', '/usr/share/cozy-migrate/bin/cozy-migrate' }) do
      assert.are.equal(0, h.run('test -x ' .. h.q(dest .. p)).code, p)
    end
    assert.are.equal('../share/cozy-migrate/bin/cozy-migrate', sh('readlink ' .. h.q(dest .. '/usr/bin/cozy-migrate')).out:gsub('\n', ''))
    assert.are.equal(h.slurp(h.root .. '/stdlib/kube.lua'), h.slurp(share .. '/stdlib/kube.lua'))
    assert.are.equal('tool-check\n', h.slurp(share .. '/migrations/order.d/00000-legacy'))
    assert.are.equal(h.slurp(repo:path('legacy-sh/tool-check.sh')), h.slurp(share .. '/legacy-sh/tool-check.sh'))
  end)

  it('installs a man page per command and the main page in share/man/man1', function()
    local man1 = dest .. '/usr/share/man/man1/'
    h.contains(h.slurp(man1 .. 'cozy-migrate.1') or '', '.TH COZY\\-MIGRATE 1', 'the main page')
    local list = h.must(h.cozy('man', '--list')).out
    for name in list:gmatch('([%w-]+)[^\n]*\n') do
      assert.are.equal(0, h.run('test -s ' .. h.q(man1 .. 'cozy-migrate-' .. name .. '.1')).code, name)
    end
  end)

  it('leaves the migrations tree as it was: order.d is generated into DESTDIR only', function()
    assert.are.equal(1, h.run('test -e ' .. h.q(repo:path('migrations/order.d'))).code, 'order.d written into the tree')
    assert.are.equal('', sh('git -C ' .. h.q(repo.dir) .. ' status --porcelain --ignored').out)
    assert.are.equal(1, h.run('test -e ' .. h.q(h.root .. '/migrations/order.d')).code, 'order.d written into the checkout')
  end)

  it('runs end to end as nobody with only the image tools on PATH', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    if sh('id -u').out ~= '0\n' then
      pending('needs root to switch to the unprivileged user (setpriv)')
      return
    end
    local bin = h.tmpdir()
    sh('chmod 755 ' .. h.q(bin))
    for _, t in ipairs(IMAGE_TOOLS) do
      sh(string.format('ln -s "$(command -v %s)" %s', t, h.q(bin .. '/' .. t)))
    end
    sh(string.format('ln -s "$(command -v bash)" %s', h.q(bin .. '/sh')))
    -- a link, not a symlink: a confined shell executes from the PATH's
    -- directories only, wherever a symlink points (host/proc/confine.h)
    sh(string.format('ln %s %s || cp %s %s', h.q(h.root .. '/build/testenv/bin/kubectl'), h.q(bin .. '/kubectl'),
      h.q(h.root .. '/build/testenv/bin/kubectl'), h.q(bin .. '/kubectl')))
    -- the credentials a hook Job would have, readable by nobody, outside
    -- what a shell may read (a PATH directory holding them would be left out)
    local kdir = h.tmpdir()
    sh('chmod 755 ' .. h.q(kdir))
    local kc = kdir .. '/kubeconfig'
    h.write(kc, h.must(h.kubectl('config view --raw --minify --flatten')).out)
    sh('chmod 644 ' .. h.q(kc))
    local ns = 'smoke-' .. os.time() % 100000 .. math.random(100, 999)
    h.must(h.kubectl('create namespace ' .. ns))
    h.must(h.kubectl('create configmap cozystack-version -n ' .. ns .. ' --from-literal=version=1'))

    local res = h.run(string.format('setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=%s ' ..
      'HOME=/tmp KUBECONFIG=%s NAMESPACE=%s MIGRATIONS_IMAGE=smoke:1 %s run',
      h.q(bin), h.q(kc), ns, h.q(dest .. '/usr/bin/cozy-migrate')))
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.matches('pre-apply tool-check ... ok', res.out, 1, true)
    local cm = h.kubectl_json('get configmap smoke-sh -n ' .. ns)
    assert.are.same({ seen = 'v1', uid = '65534' }, cm.data)
    local rec = json.decode(h.kubectl_json('get configmap cozystack-version -n ' .. ns).data['m.tool-check'])
    assert.are.equal('ok', rec.state)
    assert.are.equal('smoke:1', rec.image)
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end)

  it("and the Dockerfile copies only paths that exist and calls only make targets that exist", function()
    local stage = 'preamble'
    local stages, copies, targets = {}, {}, {}
    for line in io.lines(h.root .. '/Dockerfile') do
      local s = line:match('^FROM%s+%S+%s+AS%s+(%S+)')
      if line:match('^FROM%s') then stage = s or 'final' end
      stages[stage] = (stages[stage] or '') .. line .. '\n'
      if line:match('^COPY%s') then copies[#copies + 1] = { stage = stage, line = line } end
      -- make as a command: after RUN or &&, not a package name in a list
      local cmds = { line:match('^RUN%s+make%s+([^&]+)') }
      for args in line:gmatch('&&%s*make%s+([^&]+)') do cmds[#cmds + 1] = args end
      do
        for _, args in ipairs(cmds) do
          for w in args:gmatch('%S+') do
            if not w:find('=', 1, true) and w ~= '\\' then targets[#targets + 1] = w end
          end
        end
      end
    end
    assert.is_true(#copies >= 4)
    for _, c in ipairs(copies) do
      local words = {}
      for w in c.line:gmatch('%S+') do words[#words + 1] = w end
      local from = words[2]:match('^%-%-from=(.+)$')
      local first = from and 3 or 2
      for i = first, #words - 1 do
        local src = words[i]
        if not from then
          assert.are.equal(0, h.run('test -e ' .. h.q(h.root .. '/' .. src)).code, c.line .. ': ' .. src .. ' does not exist')
        elseif from == 'build' then
          -- the build stage's `make install DESTDIR=/out PREFIX=/usr`: the same layout as ours
          assert.is_truthy(stages.build:find('DESTDIR=/out PREFIX=/usr', 1, true))
          local rel = src:match('^/out/(.*)$')
          assert.is_truthy(rel, src)
          assert.are.equal(0, h.run('test -e ' .. h.q(dest .. '/' .. rel)).code, src)
        else
          assert.is_truthy(stages[from], 'no stage ' .. from)
          assert.is_truthy(stages[from]:find('-o ' .. src, 1, true), src .. ' is not built in stage ' .. from)
        end
      end
    end
    assert.are.same({ 'build/cozy-migrate', 'install' }, targets)
    for _, t in ipairs(targets) do
      local res = h.run(string.format('make -C %s -n %s DESTDIR=/nonexistent', h.q(h.root), h.q(t)))
      assert.are.equal(0, res.code, 'make target ' .. t .. ': ' .. res.err)
    end
  end)
end)

-- A workstation install: the engine and its harness, no migrations; and no
-- binary takes a tree nobody named (issue 36).
describe('make install without MIGRATIONS_TREE (a workstation)', function()
  local dest, share, bin

  setup(function()
    dest = h.tmpdir()
    local res = h.run(string.format('env -u MIGRATIONS_TREE make -s -C %s install DESTDIR=%s PREFIX=/usr',
      h.q(h.root), h.q(dest)))
    assert(res.code == 0, res.out .. res.err)
    share = dest .. '/usr/share/cozy-migrate'
    bin = dest .. '/usr/bin/cozy-migrate'
  end)

  it('installs the engine, its stdlib and harness, and no migrations', function()
    assert.are.equal(0, h.run('test -x ' .. h.q(share .. '/bin/cozy-migrate')).code)
    assert.are.equal(h.slurp(h.root .. '/stdlib/kube.lua'), h.slurp(share .. '/stdlib/kube.lua'))
    assert.are.equal(0, h.run('test -s ' .. h.q(share .. '/spec/support/migration.lua')).code)
    for _, p in ipairs({ 'migrations', 'legacy-sh' }) do
      assert.are.equal(1, h.run('test -e ' .. h.q(share .. '/' .. p)).code, p .. ' was installed')
    end
  end)

  it('refuses every command that needs a tree in one line naming --dir and MIGRATIONS_TREE, exit 16', function()
    for _, args in ipairs({ { 'run' }, { 'plan' }, { 'preview' }, { 'dispatch' }, { 'index' },
      { 'skip', 'some-slug', '--reason', 'r' } }) do
      local res = h.run(string.format('env -u COZY_MIGRATIONS_DIR MIGRATIONS_IMAGE=x:1 %s %s', h.q(bin),
        table.concat(args, ' ')))
      assert.are.equal(16, res.code, args[1] .. ': ' .. res.out .. res.err)
      assert.are.equal('', res.out, args[1])
      local _, lines = res.err:gsub('\n', '')
      assert.are.equal(1, lines, args[1] .. ': ' .. res.err)
      h.contains(res.err, 'cozy-migrate: ' .. args[1] .. ': no migrations tree: give --dir DIR')
      h.contains(res.err, 'make install MIGRATIONS_TREE=')
    end
  end)

  it('runs a tree it is given with --dir', function()
    local repo = gitrepo.new()
    repo:write('legacy-sh/legacy-map', '')
    repo:write('migrations/revoked', '')
    repo:write('migrations/pre-apply/given-one.lua', '-- cozystack-migration: on-error=abort\n')
    repo:commit():tag('v1.0.0')
    h.must(h.run(string.format('%s order --repo %s', h.q(h.bin), h.q(repo.dir))))
    local res = h.must(h.run(string.format('env -u COZY_MIGRATIONS_DIR %s index --dir %s', h.q(bin), h.q(repo.dir))))
    h.contains(res.out, '"given-one"')
  end)

  it("and the checkout's own binary takes no tree unasked: this repository's samples only by name", function()
    local res = h.run('cd / && env -u COZY_MIGRATIONS_DIR ' .. h.q(h.bin) .. ' index')
    assert.are.equal(16, res.code, res.out .. res.err)
    res = h.run('cd / && env -u COZY_MIGRATIONS_DIR ' .. h.q(h.bin) .. ' plan --namespace default')
    assert.are.equal(16, res.code, res.out .. res.err)
  end)

  it('reads the ledger alone for status, as it does where there is no tree', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local ns = 'notree-' .. os.time() % 100000 .. math.random(100, 999)
    h.must(h.kubectl('create namespace ' .. ns))
    h.must(h.kubectl('create configmap cozystack-version -n ' .. ns ..
      [[ --from-literal=version=56 --from-literal=m.platform-one='{"state":"ok","at":"2026-01-01T00:00:00Z"}']]))
    local res = h.run(string.format('env -u COZY_MIGRATIONS_DIR %s status --namespace %s', h.q(bin), ns))
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('', res.err)
    h.contains(res.out, 'platform-one')
    h.lacks(res.out, 'absent')
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end)
end)
