-- `cozy-migrate lint`: one failing fixture per rule of the authoring
-- contract, each finding one line "file:line: rule: what", exit 3; a clean
-- tree passes; missing tools and unanswerable git questions are errors.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')

local GOOD_LUA = "-- cozystack-migration: on-error=abort\nlocal log = require('log')\nlog.info('ok')\n"
local GOOD_SH = '#!/bin/bash\n# cozystack-migration: on-error=abort\nset -euo pipefail\necho ok\n'

-- tree{path = content} -> dir (a spec for every Lua migration unless nospec)
local function tree(files, nospec)
  local dir = h.tmpdir()
  for path, content in pairs(files) do
    local full = dir .. '/' .. path
    assert(os.execute('mkdir -p ' .. h.q(full:match('^(.*)/[^/]*$'))))
    h.write(full, content)
    local slug = path:match('^migrations/[^/]+/([^/]+)%.lua$')
    if slug and not nospec then
      assert(os.execute('mkdir -p ' .. h.q(dir .. '/spec/migrations')))
      h.write(dir .. '/spec/migrations/' .. slug .. '_spec.lua', '-- spec\n')
    end
  end
  return dir
end

local function lint(dir, ...)
  return h.cozy('lint', '--dir', dir, ...)
end

-- finding(res, dir, 'rel:line: rule: ', fragment): exit 3 and a line so
local function finding(res, dir, prefix, fragment)
  assert.are.equal(3, res.code, 'stdout: ' .. res.out .. '\nstderr: ' .. res.err)
  for line in res.out:gmatch('[^\n]+') do
    if line:sub(1, #dir + 1 + #prefix) == dir .. '/' .. prefix and
        (not fragment or line:find(fragment, 1, true)) then
      return line
    end
  end
  error(('no finding %q%s in:\n%s'):format(prefix, fragment and (' with ' .. fragment) or '', res.out))
end

describe('lint', function()
  it('passes a tree that keeps every rule, and says so', function()
    local dir = tree({
      ['migrations/pre-apply/one.lua'] = GOOD_LUA,
      ['migrations/background/two.lua'] = GOOD_LUA,
      ['migrations/pre-apply/three.lua'] = "-- cozystack-migration: on-error=warn\n" ..
        "-- cozystack-migration: requires=one\nlocal kube = require('kube')\nlocal _ = kube.get('namespaces', 'x')\n",
      ['migrations/revoked'] = '# none\none\n',
      ['legacy-sh/old.sh'] = GOOD_SH .. 'source lib/common.sh\nsay\n',
      ['legacy-sh/lib/common.sh'] = 'say() { echo "said"; }\n',
      ['legacy-sh/legacy-map'] = '1 old\n',
    })
    local res = lint(dir)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('', res.out)
    assert.matches('lint: 4 scripts, no problems', res.err, 1, true)
  end)

  it('slug: grammar and length', function()
    local dir = tree({ ['migrations/pre-apply/Bad_Name.lua'] = GOOD_LUA,
      ['migrations/pre-apply/' .. string.rep('a', 61) .. '.lua'] = GOOD_LUA,
      ['migrations/pre-apply/notes.txt'] = 'x' }, true)
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/Bad_Name.lua:1: slug: ', "'Bad_Name' is not a valid slug")
    finding(res, dir, 'migrations/pre-apply/' .. string.rep('a', 61) .. '.lua:1: slug: ', 'is 61 characters long')
    finding(res, dir, 'migrations/pre-apply/notes.txt:1: slug: ', 'not a migration')
  end)

  it("slug: every entry of a script directory the runner's loader refuses, the runner refusing it too", function()
    local dir = tree({ ['migrations/pre-apply/one.lua'] = GOOD_LUA,
      ['migrations/pre-apply/sub/two.lua'] = GOOD_LUA,
      ['migrations/revoked'] = '',
      ['legacy-sh/old.sh'] = GOOD_SH, ['legacy-sh/legacy-map'] = '1 old\n',
      ['legacy-sh/notes.txt'] = 'x' })
    assert(os.execute('mkdir -p ' .. h.q(dir .. '/migrations/background') .. ' && ln -s nowhere.lua ' ..
      h.q(dir .. '/migrations/background/gone.lua')))
    assert(os.execute('mkfifo ' .. h.q(dir .. '/migrations/pre-apply/pipe.lua')))
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/sub:1: slug: ', 'a directory; migrations sit directly in')
    finding(res, dir, 'migrations/background/gone.lua:1: slug: ', 'dangling symlink')
    finding(res, dir, 'migrations/pre-apply/pipe.lua:1: slug: ', 'not a regular file')
    finding(res, dir, 'legacy-sh/notes.txt:1: slug: ', 'not a migration (expected <slug>.sh)')
    -- each is what the runner's loader stops at, one at a time
    local run = h.cozy('plan', '--dir', dir, '--kubeconfig', '/nonexistent')
    assert.are.equal(3, run.code, run.err)
    h.contains(run.err, dir .. '/migrations/pre-apply/')
  end)

  it('header: missing, without on-error, with an unknown key, after code', function()
    local dir = tree({
      ['migrations/pre-apply/none.lua'] = 'return\n',
      ['migrations/pre-apply/no-onerror.lua'] = '-- cozystack-migration: timeout=5m\nreturn\n',
      ['migrations/pre-apply/unknown.lua'] = '-- cozystack-migration: on-error=abort\n-- cozystack-migration: colour=blue\n',
      ['legacy-sh/late.sh'] = '#!/bin/bash\necho hi\n# cozystack-migration: on-error=abort\n',
      ['legacy-sh/legacy-map'] = '1 late\n',
    })
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/none.lua:1: header: ', 'missing header')
    finding(res, dir, 'migrations/pre-apply/no-onerror.lua:1: header: ', 'header has no on-error')
    finding(res, dir, 'migrations/pre-apply/unknown.lua:2: header: ', "unknown header key 'colour'")
    finding(res, dir, 'legacy-sh/late.sh:3: header: ', 'header line after the first line of code')
  end)

  it('duplicate: one slug in two tiers', function()
    local dir = tree({ ['migrations/pre-apply/twice.lua'] = GOOD_LUA, ['migrations/background/twice.lua'] = GOOD_LUA })
    finding(lint(dir), dir, 'migrations/background/twice.lua:1: duplicate: ', 'also migrations/pre-apply/twice.lua')
  end)

  it('requires: names a slug that exists', function()
    local dir = tree({ ['migrations/pre-apply/a.lua'] =
      '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=ghost\nreturn\n' })
    finding(lint(dir), dir, 'migrations/pre-apply/a.lua:2: requires: ', "requires 'ghost', which no script")
  end)

  it('cycle: requires are acyclic, reported once from the first member', function()
    local function req(r) return '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=' .. r .. '\nreturn\n' end
    local dir = tree({ ['migrations/pre-apply/b.lua'] = req('c'), ['migrations/pre-apply/c.lua'] = req('d'),
      ['migrations/pre-apply/d.lua'] = req('b') })
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/b.lua:2: cycle: ', 'requires form a cycle: b -> c -> d -> b')
    local _, n = res.out:gsub(': cycle: ', '')
    assert.are.equal(1, n)
  end)

  it('batch: not in a later batch (order.d/, or legacy before new)', function()
    local dir = tree({
      ['migrations/pre-apply/early.lua'] = '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=late\nreturn\n',
      ['migrations/pre-apply/late.lua'] = GOOD_LUA,
      ['migrations/order.d/00001-v1.0.0'] = 'early\n', ['migrations/order.d/00002-v1.1.0'] = 'late\n',
      ['legacy-sh/old.sh'] = '#!/bin/bash\n# cozystack-migration: on-error=abort\n# cozystack-migration: requires=late\ntrue\n',
      ['legacy-sh/legacy-map'] = '1 old\n',
    })
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/early.lua:2: batch: ', "requires 'late', which ships in a later batch")
    finding(res, dir, 'legacy-sh/old.sh:3: batch: ', "requires 'late'")
  end)

  it('batch: from the tag history when there is no order.d/', function()
    local r = gitrepo.new()
    r:lua('early', { requires = 'late' }):write('spec/migrations/early_spec.lua', '--\n'):commit():tag('v1.0.0')
    r:lua('late'):write('spec/migrations/late_spec.lua', '--\n'):commit()
    finding(lint(r.dir), r.dir, 'migrations/pre-apply/early.lua:2: batch: ', "requires 'late'")
  end)

  it('tier: requires never cross tiers', function()
    local dir = tree({
      ['migrations/pre-apply/a.lua'] = '-- cozystack-migration: on-error=abort\n-- cozystack-migration: requires=b\nreturn\n',
      ['migrations/background/b.lua'] = GOOD_LUA })
    finding(lint(dir), dir, 'migrations/pre-apply/a.lua:2: tier: ', "requires 'b' of the background tier from the pre-apply tier")
  end)

  it('spec: every Lua migration has spec/migrations/<slug>_spec.lua', function()
    local dir = tree({ ['migrations/background/untested.lua'] = GOOD_LUA }, true)
    finding(lint(dir), dir, 'migrations/background/untested.lua:1: spec: ', 'spec/migrations/untested_spec.lua')
  end)

  it('legacy: legacy-map parses and agrees with legacy-sh/', function()
    local dir = tree({ ['legacy-sh/stray.sh'] = GOOD_SH, ['legacy-sh/legacy-map'] = '1 one\n1 two\n' })
    local res = lint(dir)
    finding(res, dir, 'legacy-sh/legacy-map:2: legacy: ', 'the number repeats line 1')
    finding(res, dir, 'legacy-sh/stray.sh:1: legacy: ', "'stray' is not in legacy-sh/legacy-map")
  end)

  it('revoked: parses, and names a known slug', function()
    local dir = tree({ ['migrations/pre-apply/a.lua'] = GOOD_LUA, ['migrations/revoked'] = 'a\nnobody\n' })
    finding(lint(dir), dir, 'migrations/revoked:2: revoked: ', "revoked slug 'nobody'")
    local bad = tree({ ['migrations/revoked'] = 'not a slug\n' })
    finding(lint(bad), bad, 'migrations/revoked:1: revoked: ', 'expected one slug per line')
  end)

  it('order-d: no order.d/ tracked in git', function()
    local r = gitrepo.new()
    r:lua('a'):write('spec/migrations/a_spec.lua', '--\n'):write('migrations/order.d/99999-untagged', 'a\n'):commit()
    finding(lint(r.dir), r.dir, 'migrations/order.d:1: order-d: ', '1 file tracked in git')
  end)

  it('history: a slug is never reused, as another kind of script or after it was retired', function()
    local r = gitrepo.new()
    r:lua('relived'):lua('comeback'):write('spec/migrations/relived_spec.lua', '--\n')
      :write('spec/migrations/comeback_spec.lua', '--\n'):commit():tag('v1.0.0')
    r:rm('migrations/pre-apply/comeback.lua'):commit():tag('v1.1.0')
    r:rm('migrations/pre-apply/relived.lua'):sh('relived'):write('legacy-sh/legacy-map', '1 relived\n')
      :lua('comeback', { body = '-- again' }):commit()
    local res = lint(r.dir, '--history')
    finding(res, r.dir, 'legacy-sh/relived.sh:1: history: ',
      "slug 'relived' was shipped as migrations/pre-apply/relived.lua in v1.0.0")
    finding(res, r.dir, 'migrations/pre-apply/comeback.lua:1: history: ',
      "slug 'comeback' was retired: shipped in v1.0.0, absent from v1.1.0")
    -- without --history these are not checked
    assert.is_nil(lint(r.dir).out:find('history:', 1, true))
  end)

  it('changed: a shipped script is unchanged against REV and every release tag', function()
    local r = gitrepo.new()
    r:lua('shipped'):write('spec/migrations/shipped_spec.lua', '--\n'):commit():tag('v1.0.0')
    r:lua('pending'):write('spec/migrations/pending_spec.lua', '--\n'):commit()
    r:lua('pending', { body = '-- edited before release: fine' })
    assert.are.equal(0, lint(r.dir, '--against', 'HEAD~1').code)
    r:lua('shipped', { body = '-- edited after release' })
    local res = lint(r.dir, '--against', 'HEAD~1')
    finding(res, r.dir, 'migrations/pre-apply/shipped.lua:1: changed: ', 'differs from the script at HEAD~1')
    assert.is_nil(res.out:find('pending.lua', 1, true))
    -- committed: HEAD agrees, the tag does not
    r:commit()
    finding(lint(r.dir, '--against', 'HEAD'), r.dir, 'migrations/pre-apply/shipped.lua:1: changed: ',
      'differs from the script shipped in v1.0.0')
  end)

  it('shebang: shell migrations start with a bash or sh shebang', function()
    local dir = tree({ ['legacy-sh/nobang.sh'] = '# cozystack-migration: on-error=abort\necho hi\n',
      ['legacy-sh/zsh.sh'] = '#!/bin/zsh\n# cozystack-migration: on-error=abort\necho hi\n',
      ['legacy-sh/envsh.sh'] = '#!/usr/bin/env sh\n# cozystack-migration: on-error=abort\necho hi\n',
      ['legacy-sh/legacy-map'] = '1 nobang\n2 zsh\n3 envsh\n' })
    local res = lint(dir)
    finding(res, dir, 'legacy-sh/nobang.sh:1: shebang: ', 'bash or sh shebang')
    finding(res, dir, 'legacy-sh/zsh.sh:1: shebang: ')
    assert.is_nil(res.out:find('envsh.sh:1: shebang', 1, true))
  end)

  it('shellcheck: shell migrations and lib/ pass shellcheck', function()
    local dir = tree({ ['legacy-sh/unquoted.sh'] = '#!/bin/bash\n# cozystack-migration: on-error=abort\nrm -rf $1/data\n',
      ['legacy-sh/lib/helpers.sh'] = 'cd $HOME\n',
      ['legacy-sh/legacy-map'] = '1 unquoted\n' })
    local res = lint(dir)
    finding(res, dir, 'legacy-sh/unquoted.sh:3: shellcheck: ', 'SC2086')
    finding(res, dir, 'legacy-sh/lib/helpers.sh:1: shellcheck: ', 'SC2086')
  end)

  it("luacheck: Lua migrations pass luacheck with the sandbox's globals", function()
    local dir = tree({ ['migrations/pre-apply/escape.lua'] =
      "-- cozystack-migration: on-error=abort\nlocal f = io.open('/etc/passwd')\nos.execute('id')\nlocal unused = 1\nreturn f\n" })
    local res = lint(dir)
    finding(res, dir, 'migrations/pre-apply/escape.lua:2: luacheck: ', "(W113) accessing undefined variable 'io'")
    finding(res, dir, 'migrations/pre-apply/escape.lua:3: luacheck: ', "undefined field 'execute'")
    finding(res, dir, 'migrations/pre-apply/escape.lua:4: luacheck: ', "unused variable 'unused'")
  end)

  it('fails when a tool it needs is missing (10), and --history outside git (8)', function()
    local dir = tree({ ['legacy-sh/a.sh'] = GOOD_SH, ['legacy-sh/legacy-map'] = '1 a\n' })
    local bin = h.tmpdir()
    assert(os.execute('ln -s "$(command -v git)" ' .. h.q(bin .. '/git')))
    local res = h.run('env PATH=' .. h.q(bin) .. ' ' .. h.q(h.bin) .. ' lint --dir ' .. h.q(dir))
    assert.are.equal(10, res.code, res.err)
    assert.matches('shellcheck is not installed', res.err, 1, true)
    res = lint(dir, '--history')
    assert.are.equal(8, res.code, res.err)
    assert.matches('not in a git repository', res.err, 1, true)
  end)

  it("lists its rules in --help from its own table, and the docs' table is that list", function()
    local help = h.must(h.cozy('lint', '--help')).out
    local listed, cur = {}, nil
    -- the rules run to the first blank line (the options every release
    -- command shares follow them)
    local rules = help:match("Rules %(docs/writing%-migrations%.md's table is this list%):\n(.-)\n\n")
    assert.is_truthy(rules, help)
    for line in rules:gmatch('[^\n]+') do
      local doc = line:match('^      (.*)$')
      if doc then
        cur.doc = cur.doc and (cur.doc .. ' ' .. doc) or doc
      else
        local name, when = line:match('^  (%S+) %((.*)%)$')
        cur = { name = name or line:match('^  (%S+)$'), when = when }
        listed[#listed + 1] = cur
      end
    end
    local doc = h.slurp(h.root .. '/docs/writing-migrations.md')
    local tbl = doc:match('\n| rule | checks |\n|%-%-%-|%-%-%-|\n(.-)\n\n')
    assert.is_truthy(tbl, 'the rules table in docs/writing-migrations.md')
    local rows = {}
    for row in tbl:gmatch('[^\n]+') do
      local name, rest, doc = row:match('^| `([^`]+)`(.-) | (.*) |$')
      rows[#rows + 1] = { name = name, when = rest:match('^ %((.*)%)$'), doc = doc }
    end
    assert.are.equal(19, #listed)
    assert.are.same(listed, rows)
  end)
end)
