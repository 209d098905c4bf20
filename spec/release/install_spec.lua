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
