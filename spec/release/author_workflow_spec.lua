-- The author's workflow in a platform repository of its own, outside this
-- checkout: cozy-migrate installed (`make install`, the image's layout),
-- then new -> spec -> lint in a fresh git repository, then `make install`
-- of that tree. Nothing of this checkout is reachable from the commands
-- (no COZY_ROOT, COZY_MIGRATE, COZY_HARNESS or COZY_STDLIB; the checkout
-- is not their working directory): the harness must come with the engine.
local h = require('support.helpers')

-- env -u for every variable that would point back into this checkout
local CLEAN = 'env -u COZY_ROOT -u COZY_MIGRATE -u COZY_HARNESS -u COZY_STDLIB -u COZY_MIGRATIONS_DIR '

describe('#e2e the author workflow in a repository of its own', function()
  local engine, repo, bin, path

  setup(function()
    engine = h.tmpdir()
    h.must(h.run(string.format('make -C %s --no-print-directory install DESTDIR=%s PREFIX=/usr',
      h.q(h.root), h.q(engine))), 'make install of the engine')
    bin = engine .. '/usr/bin/cozy-migrate'
    -- kubectl for the harness: this checkout's build of it, alone in a
    -- directory of its own on PATH (nothing else of the checkout is)
    path = h.tmpdir()
    h.must(h.run(string.format('ln -s %s %s', h.q(h.root .. '/build/testenv/bin/kubectl'), h.q(path .. '/kubectl'))))
    repo = h.tmpdir()
    h.must(h.run('cd ' .. h.q(repo) .. ' && git init -q . && git config user.email a@b.c && git config user.name author'))
  end)

  teardown(function()
    h.run('rm -rf ' .. h.q(engine) .. ' ' .. h.q(repo) .. ' ' .. h.q(path))
  end)

  -- in(cmd): cmd run in the scratch repository, cozy-migrate the installed one
  local function within(cmd)
    return h.run(string.format('cd %s && %sPATH=%s:$PATH %s', h.q(repo), CLEAN, h.q(path), cmd))
  end

  it('installs the spec harness beside the binary', function()
    for _, m in ipairs({ 'helpers', 'cluster', 'migration', 'disposable' }) do
      assert.are.equal(h.slurp(h.root .. '/spec/support/' .. m .. '.lua'),
        h.slurp(engine .. '/usr/share/cozy-migrate/spec/support/' .. m .. '.lua'), m)
    end
  end)

  it('new scaffolds a tree whose spec passes against the cluster, with nothing else', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    h.must(within(h.q(bin) .. ' new label-things'), 'new')
    for _, f in ipairs({ 'migrations/pre-apply/label-things.lua', 'spec/migrations/label-things_spec.lua',
      'migrations/revoked', 'legacy-sh/legacy-map', '.gitignore', '.luarc.json', '.luacheckrc',
      '.cozy-migrate/meta/kube.lua' }) do
      assert.are.equal(0, h.run('test -f ' .. h.q(repo .. '/' .. f)).code, f .. ' was not written')
    end
    local res = h.must(within(h.q(bin) .. ' spec'), 'spec')
    h.contains(res.out, '1 success / 0 failures / 0 errors / 0 pending')
  end)

  it('says which package brings busted when it is missing (exit 10)', function()
    local res = within('env LUA_PATH_5_4=/nonexistent/?.lua ' .. h.q(bin) .. ' spec')
    assert.are.equal(10, res.code, res.out .. res.err)
    h.one_line(res.err)
    h.contains(res.err, 'busted is not installed for Lua 5.4 (Debian and Ubuntu: apt-get install lua-busted')
  end)

  it('lint passes the scaffolded tree', function()
    local res = h.must(within(h.q(bin) .. ' lint'), 'lint')
    h.contains(res.err, 'lint: 1 script, no problems')
  end)

  it('keeps the generated order.d/ out of git', function()
    h.must(within('git add -A && git commit -qm "label things"'), 'commit')
    h.must(within(h.q(bin) .. ' order'), 'order')
    assert.are.equal('label-things\n', h.slurp(repo .. '/migrations/order.d/99999-untagged'))
    assert.are.equal('', h.must(within('git status --porcelain')).out)
  end)

  it('make install lays out the tree, its manifest generated from its history', function()
    local dest = h.tmpdir()
    h.must(h.run(string.format('make -C %s --no-print-directory install DESTDIR=%s PREFIX=/usr MIGRATIONS_TREE=%s',
      h.q(h.root), h.q(dest), h.q(repo))), 'make install of the scaffolded tree')
    local share = dest .. '/usr/share/cozy-migrate'
    assert.are.equal(h.slurp(repo .. '/migrations/pre-apply/label-things.lua'),
      h.slurp(share .. '/migrations/pre-apply/label-things.lua'))
    assert.are.equal('label-things\n', h.slurp(share .. '/migrations/order.d/99999-untagged'))
    h.run('rm -rf ' .. h.q(dest))
  end)
end)
