-- A migration author's loop against a development cluster (docs/writing-migrations.md "Running
-- against kind"): --local in a platform repository of their own (a scratch
-- git repository outside this checkout), on a cluster this engine never ran
-- on (the local apiserver stands in for a fresh kind cluster: no ledger, no
-- ledger namespace; each case names a namespace of its own with
-- --namespace, where a kind cluster would have cozy-system). Covers what a
-- local run says and does there (--as-installed-at, --create-namespace),
-- what plan, --dry-run and preview predict of it, and the manifest from the
-- working tree (edit, run, edit again, with no commit).
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local json = require('json')
local system = require('system')

local LEDGER = 'cozystack-version'
local made = {}

-- A namespace name of this file's own, not created (the runner may create it).
local function ns_name(prefix)
  local ns = prefix .. '-' .. h.unique()
  made[#made + 1] = ns
  return ns
end

local function ns_exists(ns)
  return h.kubectl('get namespace ' .. ns).code == 0
end

local function ledger(ns)
  local r = h.kubectl('get configmap ' .. LEDGER .. ' -n ' .. ns .. ' -o json')
  if r.code ~= 0 then return nil end
  local cm = json.decode(r.out)
  local recs = {}
  for k, v in pairs(cm.data or {}) do
    if k:sub(1, 2) == 'm.' then recs[k:sub(3)] = json.decode(v) end
  end
  return recs, cm
end

-- in_dir(dir, args...) runs the binary in dir, as an author in their
-- repository does (--local reads the working tree, --dir defaults to .).
local function in_dir(dir, ...)
  local parts = {}
  for i, a in ipairs({ ... }) do parts[i] = h.q(a) end
  return h.run(string.format('cd %s && %s %s', h.q(dir), h.q(h.bin), table.concat(parts, ' ')))
end

-- A migration that labels namespace app with walkthrough=<value>, once.
local function labeller(app, value)
  return table.concat({
    '-- cozystack-migration: on-error=abort',
    "local kube = require('kube')",
    string.format("local ns = kube.get('namespaces', %q)", app),
    string.format("if ns and (ns.metadata.labels or {}).walkthrough ~= %q then", value),
    string.format("  kube.patch('namespaces', %q, { metadata = { labels = { walkthrough = %q } } })", app, value),
    'end', '',
  }, '\n')
end

local function label_of(ns)
  return (h.kubectl_json('get namespace ' .. ns).metadata.labels or {}).walkthrough
end

describe('#e2e --local on a development cluster without a ledger', function()
  setup(h.need_cluster)
  teardown(function()
    for _, ns in ipairs(made) do h.kubectl('delete namespace ' .. ns .. ' --wait=false --ignore-not-found') end
  end)

  it('walks from `new` to the new migration recorded ok in 4 commands, under a minute, with no commit', function()
    local dir = h.tmpdir()                 -- the author's platform repository
    assert.is_nil(dir:find(h.root, 1, true), 'the walkthrough runs outside this checkout')
    local home = ns_name('walk')          -- cozy-system on a kind cluster
    local app = ns_name('walk-app')       -- what the migration fixes, already on the cluster
    h.must(h.kubectl('create namespace ' .. app))
    local steps, total = {}, 0
    local function step(label, cmd, edit)
      local t0 = system.monotime()
      local res = cmd and h.run(string.format('cd %s && %s', h.q(dir), cmd)) or nil
      if edit then edit() end
      local dt = system.monotime() - t0
      if cmd then
        local bin = h.q(h.bin)
        local shown = cmd:sub(1, #bin) == bin and ('cozy-migrate' .. cmd:sub(#bin + 1)) or cmd
        steps[#steps + 1] = string.format('  %-80s %6.2fs', shown, dt)
        total = total + dt
        h.must(res, label)
      end
      return res
    end
    local bin = h.q(h.bin)
    step('git init', 'git init -q')
    step('new', bin .. ' new label-walkthrough')
    -- the author writes the migration (an editor, not a command)
    step(nil, nil, function() h.write(dir .. '/migrations/pre-apply/label-walkthrough.lua', labeller(app, 'done')) end)
    local run = step('run', bin .. ' run --local --create-namespace --as-installed-at latest --namespace ' .. home)
    local st = step('status', bin .. ' status --local --namespace ' .. home)
    print(string.format('\nthe walkthrough (%d commands, %.2fs):\n%s', #steps, total, table.concat(steps, '\n')))
    assert.is_true(#steps <= 5, #steps .. ' commands')
    assert.is_true(total < 60, string.format('%.1fs', total))
    h.contains(run.out, 'created namespace ' .. home .. ' (--create-namespace)')
    h.contains(run.out, '[1/1] pre-apply label-walkthrough ... ok')
    h.contains(st.out, 'label-walkthrough')
    assert.are.equal('done', label_of(app))
    local recs = ledger(home)
    assert.are.same({ 'ok', '99999-untagged', 1 }, { recs['label-walkthrough'].state,
      recs['label-walkthrough'].batch, recs['label-walkthrough'].attempts })

    -- edit, run again: recorded, so nothing runs, and the run says how to re-run it
    h.write(dir .. '/migrations/pre-apply/label-walkthrough.lua', labeller(app, 'twice'))
    local again = h.must(in_dir(dir, 'run', '--local', '--namespace', home))
    h.contains(again.out, 'nothing to run')
    h.contains(again.err, "edited since it ran; no release carries it yet, so on a development cluster " ..
      "'cozy-migrate run --local --only label-walkthrough' runs it again")
    again = h.must(in_dir(dir, 'run', '--local', '--only', 'label-walkthrough', '--namespace', home))
    h.lacks(again.err, 'edited since it ran')
    assert.are.equal('twice', label_of(app))
    assert.are.equal(2, ledger(home)['label-walkthrough'].attempts)
    -- nothing of it was ever committed
    assert.are.equal('', h.run('git -C ' .. h.q(dir) .. ' log --oneline 2>/dev/null').out)
  end)

  describe('says what a run would do, and writes nothing until told how the cluster was installed', function()
    local r
    setup(function()
      r = gitrepo.new()
      r:lua('shipped-one'):lua('shipped-two'):commit('release')
      r:git('tag v1.0.0')
      r:lua('mine', { body = "require('log').info('mine ran')" }) -- uncommitted
    end)

    it('on a cluster without the ledger or its namespace: one line, exit 2, nothing created', function()
      local ns = ns_name('fresh')
      for _, args in ipairs({ { 'run' }, { 'plan' }, { 'run', '--dry-run' }, { 'preview' } }) do
        table.insert(args, '--local')
        table.insert(args, '--namespace')
        table.insert(args, ns)
        local res = in_dir(r.dir, table.unpack(args))
        assert.are.equal(2, res.code, table.concat(args, ' ') .. '\n' .. res.out .. res.err)
        local line = res.err:match('cozy%-migrate: (%-%-local: [^\n]*)')
        assert.is_truthy(line, res.err)
        for _, want in ipairs({
          'the ledger ' .. ns .. '/' .. LEDGER .. ' is absent, and so is its namespace ' .. ns,
          'The hook would record all 3 migrations there skipped-fresh-install and run none (the untagged too: mine)',
          '--as-installed-at latest records the 2 migrations of the batches up to 00001-v1.0.0 and runs the 1 after (mine)',
          '--as-installed-at none runs every one', 'or name a release (v1.0.0);',
          'add --create-namespace to create namespace ' .. ns, '(nothing was written)',
        }) do h.contains(line, want) end
      end
      assert.is_false(ns_exists(ns))
    end)

    it('where the namespace exists but the ledger does not, the same, without --create-namespace', function()
      local ns = ns_name('fresh-ns')
      h.must(h.kubectl('create namespace ' .. ns))
      local res = in_dir(r.dir, 'run', '--local', '--namespace', ns)
      assert.are.equal(2, res.code, res.err)
      h.contains(res.err, 'the ledger ' .. ns .. '/' .. LEDGER .. ' is absent: a cluster this engine never ran on')
      h.lacks(res.err, '--create-namespace')
      assert.is_nil(ledger(ns))
    end)

    it('needs --create-namespace to create the missing namespace', function()
      local ns = ns_name('fresh-nocreate')
      local res = in_dir(r.dir, 'run', '--local', '--as-installed-at', 'latest', '--namespace', ns)
      assert.are.equal(2, res.code, res.err)
      h.contains(res.err, '--local: namespace ' .. ns .. ' does not exist on this cluster')
      h.contains(res.err, 'add --create-namespace')
      assert.is_false(ns_exists(ns))
    end)

    it('predicts it in plan, --dry-run and preview when told, still creating nothing', function()
      local ns = ns_name('fresh-predict')
      local flags = { '--local', '--create-namespace', '--as-installed-at', 'latest', '--namespace', ns }
      local plan = h.must(in_dir(r.dir, 'plan', table.unpack(flags)))
      h.contains(plan.out, 'would create namespace ' .. ns .. ' (--create-namespace)')
      h.contains(plan.out, 'fresh install as installed at 00001-v1.0.0 (--as-installed-at): the ledger ' ..
        ns .. '/' .. LEDGER .. ' is absent; run would create it, record 2 migrations (the batches up to it)')
      assert.matches('run +pre%-apply +99999%-untagged +mine +pending', plan.out)
      assert.matches('skip +pre%-apply +00001%-v1%.0%.0 +shipped%-one +recorded skipped%-fresh%-install', plan.out)
      local dry = h.must(in_dir(r.dir, 'run', '--dry-run', table.unpack(flags)))
      h.contains(dry.out, 'would create the ledger ' .. ns .. '/' .. LEDGER .. ' recording 2 migrations')
      h.contains(dry.out, '[1/1] pre-apply mine ... ok (dry run)')
      local pv = h.must(in_dir(r.dir, 'preview', table.unpack(flags)))
      h.contains(pv.out, 'preview of the pre-apply tier: 1 pending')
      h.contains(pv.out, 'the run would succeed')
      assert.is_false(ns_exists(ns))
    end)

    it('seeds the batches up to the release named and runs the rest', function()
      local ns = ns_name('fresh-at')
      local res = h.must(in_dir(r.dir, 'run', '--local', '--create-namespace', '--as-installed-at', 'v1.0.0',
        '--namespace', ns))
      h.contains(res.out, 'fresh install as installed at 00001-v1.0.0 (--as-installed-at v1.0.0): created the ledger ' ..
        ns .. '/' .. LEDGER .. ', recorded 2 migrations as skipped-fresh-install; 1 to run')
      h.contains(res.err, '[mine] info: mine ran')
      local recs, cm = ledger(ns)
      assert.are.same({ 'skipped-fresh-install', '00001-v1.0.0' }, { recs['shipped-one'].state, recs['shipped-one'].batch })
      assert.are.same({ 'skipped-fresh-install', 'ok' }, { recs['shipped-two'].state, recs.mine.state })
      -- the ledger a fresh install makes: kept, never deleted
      assert.are.equal('true', cm.metadata.labels['platform.cozystack.io/no-delete'])
      -- once it exists, --as-installed-at changes nothing, and says so
      res = h.must(in_dir(r.dir, 'run', '--local', '--as-installed-at', 'none', '--namespace', ns))
      h.contains(res.err, 'exists: --as-installed-at applies to a cluster without one, and changes nothing here')
      h.contains(res.out, 'nothing to run')
    end)

    it('never takes a deleted ledger for a fresh cluster: the Lease remembers it (12)', function()
      local ns = ns_name('fresh-deleted')
      h.must(h.kubectl('create namespace ' .. ns))
      h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
        metadata = { name = LEDGER .. '-lock', namespace = ns,
          annotations = { ['platform.cozystack.io/ledger-uid'] = 'uid-of-the-deleted-ledger' } },
        spec = {} }, 'lease')
      for _, extra in ipairs({ {}, { '--as-installed-at', 'latest' } }) do
        local res = in_dir(r.dir, 'run', '--local', '--namespace', ns, table.unpack(extra))
        assert.are.equal(12, res.code, res.out .. res.err)
        h.lacks(res.err, 'a cluster this engine never ran on')
      end
      assert.is_nil(ledger(ns))
    end)

    it('refuses a release the manifest does not have, naming those it has, before writing anything', function()
      local ns = ns_name('fresh-bad')
      local res = in_dir(r.dir, 'run', '--local', '--create-namespace', '--as-installed-at', 'v2.0.0', '--namespace', ns)
      assert.are.equal(2, res.code, res.err)
      h.contains(res.err, '--as-installed-at v2.0.0: no batch of the manifest is that release; it has: v1.0.0, untagged')
      assert.is_nil(ledger(ns))
    end)
  end)

  describe('the options of a local run', function()
    it('are refused without --local, where the hook decides (2)', function()
      for _, args in ipairs({ { '--as-installed-at', 'latest' }, { '--create-namespace' } }) do
        local res = h.cozy('run', '--dir', h.tmpdir(), table.unpack(args))
        assert.are.equal(2, res.code, res.err)
        h.contains(res.err, args[1] .. ' is for a --local run against a development cluster')
      end
      local res = h.cozy('plan', '--local', '--as-installed-at', '', '--dir', h.tmpdir())
      assert.are.equal(2, res.code, res.err)
      h.contains(res.err, "--as-installed-at: '' is not a release")
    end)
  end)
end)

describe('#e2e the manifest of a --local run is the working tree', function()
  setup(h.need_cluster)
  teardown(function()
    for _, ns in ipairs(made) do h.kubectl('delete namespace ' .. ns .. ' --wait=false --ignore-not-found') end
  end)

  -- a cluster that ran the release: its ledger records what v1.0.0 shipped
  local function ran_release(r)
    local ns = ns_name('wt')
    h.must(in_dir(r.dir, 'run', '--local', '--create-namespace', '--as-installed-at', 'latest', '--namespace', ns))
    return ns
  end

  it('runs a script order.d does not list (uncommitted) in the untagged batch, where a run without --local refuses it', function()
    local r = gitrepo.new()
    r:lua('shipped'):commit('release')
    r:git('tag v1.0.0')
    assert.are.equal(0, r:order().code)
    local ns = ran_release(r)
    r:lua('new-work', { body = "require('log').info('new work ran')" })
    r:lua('after-it', { requires = 'new-work', body = "require('log').info('after it ran')" })
    local plain = h.cozy('plan', '--dir', r.dir, '--namespace', ns)
    assert.are.equal(3, plain.code, plain.err)
    h.contains(plain.err, "slug 'after-it' is in no batch of the manifest: `cozy-migrate order` makes " ..
      'migrations/order.d from HEAD, so commit the script, then run order again')
    local res = h.must(in_dir(r.dir, 'run', '--local', '--namespace', ns))
    h.contains(res.err, 'local: 2 scripts (new-work, after-it) that migrations/order.d does not list ' ..
      '(uncommitted, or made after `cozy-migrate order`) run in 99999-untagged')
    -- requires first, then the alphabet
    assert.is_truthy(res.out:find('[1/2] pre-apply new-work ... ok', 1, true), res.out)
    assert.is_truthy(res.out:find('[2/2] pre-apply after-it ... ok', 1, true), res.out)
    assert.are.same({ 'ok', '99999-untagged' }, { ledger(ns)['after-it'].state, ledger(ns)['after-it'].batch })
    -- order.d itself is left as it was
    assert.is_nil(io.open(r:path('migrations/order.d/99999-untagged')))
  end)

  it('without order.d, takes the release tags from git and the scripts from the working tree', function()
    local r = gitrepo.new()
    r:lua('shipped'):commit('release')
    r:git('tag v1.0.0')
    r:lua('shipped-later'):commit('more')
    r:lua('uncommitted')
    local ns = ns_name('wt-gen')
    local plan = h.must(in_dir(r.dir, 'plan', '--local', '--create-namespace', '--as-installed-at', 'v1.0.0',
      '--namespace', ns))
    h.contains(plan.err, 'local: no migrations/order.d, so the manifest is what `cozy-migrate order` would make ' ..
      'of the working tree: 2 batches, 2 untagged scripts (committed or not)')
    assert.matches('skip +pre%-apply +00001%-v1%.0%.0 +shipped ', plan.out)
    assert.matches('run +pre%-apply +99999%-untagged +shipped%-later +pending', plan.out)
    assert.matches('run +pre%-apply +99999%-untagged +uncommitted +pending', plan.out)
    assert.is_nil(io.open(r:path('migrations/order.d')))
  end)

  it('refuses a cycle among uncommitted scripts as order would (3)', function()
    local r = gitrepo.new()
    r:lua('a-one', { requires = 'b-two' }):lua('b-two', { requires = 'a-one' })
    local res = in_dir(r.dir, 'plan', '--local', '--namespace', ns_name('wt-cycle'))
    assert.are.equal(3, res.code, res.err)
    h.contains(res.err, '--local: migrations/pre-apply/a-one.lua: requires form a cycle: a-one -> b-two -> a-one')
  end)
end)
