-- A migration's identity (issue 19, DESIGN.md "tier" and "Checksums"): a
-- move between the tiers keeps the slug and its record, and the shared
-- shell code (legacy-sh/lib/) is frozen like the scripts. The linter's
-- history and changed rules on scratch git repositories, and the planner on
-- data.
local h = require('support.helpers')
local gitrepo = require('support.gitrepo')
local fixture = require('support.fixture')
local migrate = require('migrate')

local function lint(dir, ...) return h.cozy('lint', '--dir', dir, ...) end

local function findings(res, rule)
  local out = {}
  for line in res.out:gmatch('[^\n]+') do
    if line:find(': ' .. rule .. ': ', 1, true) then out[#out + 1] = line end
  end
  return out
end

describe('a move between tiers', function()
  it('keeps the slug: lint --history passes a script moved from pre-apply to background', function()
    local r = gitrepo.new()
    r:lua('moved'):write('spec/migrations/moved_spec.lua', '--\n'):commit():tag('v1.0.0')
    local text = h.slurp(r:path('migrations/pre-apply/moved.lua'))
    r:rm('migrations/pre-apply/moved.lua'):write('migrations/background/moved.lua', text):commit()
    local res = lint(r.dir, '--history', '--against', 'HEAD')
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.same({}, findings(res, 'history'))
  end)

  it('still refuses a moved script that was edited (changed), naming where it shipped', function()
    local r = gitrepo.new()
    r:lua('moved'):write('spec/migrations/moved_spec.lua', '--\n'):commit():tag('v1.0.0')
    r:rm('migrations/pre-apply/moved.lua'):lua('moved', { tier = 'background', body = '-- edited' }):commit()
    local res = lint(r.dir, '--against', 'HEAD')
    assert.are.equal(3, res.code, res.out .. res.err)
    local c = findings(res, 'changed')
    assert.are.equal(1, #c, res.out)
    assert.truthy(c[1]:find('migrations/background/moved.lua:1: changed: differs from the script shipped in ' ..
      'v1.0.0 as migrations/pre-apply/moved.lua', 1, true), c[1])
  end)

  it('keeps the record: a recorded slug stays done in its new tier, an unrecorded one runs there', function()
    local dir = fixture.tree({ batches = { { '00001-v1', { 'moved', 'fresh-move' } } },
      scripts = { moved = { tier = 'background' }, ['fresh-move'] = { tier = 'background' } } })
    local p = assert(migrate.plan(dir, fixture.ledger({ moved = { state = 'ok', tier = 'pre-apply', attempts = 1 } }),
      { tier = 'background' }))
    local kinds = {}
    for _, s in ipairs(p.steps) do kinds[#kinds + 1] = s.kind .. ':' .. s.slug .. ':' .. (s.why or '') end
    assert.are.same({ 'skip:moved:recorded ok', 'run:fresh-move:' }, kinds)
  end)
end)

describe('legacy-sh/lib/ with lint --history', function()
  local function shipped()
    local r = gitrepo.new()
    r:sh('old', 'set -euo pipefail\n# shellcheck source=lib/common.sh\n. lib/common.sh\nsay')
      :write('legacy-sh/legacy-map', '1 old\n')
      :write('legacy-sh/lib/common.sh', 'say() { echo said; }\n'):commit():tag('v1.0.0')
    return r
  end

  it('passes when it is byte for byte what every release shipped', function()
    local r = shipped()
    r:lua('later'):write('spec/migrations/later_spec.lua', '--\n'):commit()
    local res = lint(r.dir, '--history')
    assert.are.same({}, findings(res, 'changed'), res.out)
  end)

  it('refuses a shipped helper that changed, by default with --history', function()
    local r = shipped()
    r:write('legacy-sh/lib/common.sh', 'say() { echo "said, differently"; }\n'):commit()
    local res = lint(r.dir, '--history')
    assert.are.equal(3, res.code, res.out .. res.err)
    local c = findings(res, 'changed')
    assert.are.equal(1, #c, res.out)
    assert.truthy(c[1]:find('legacy-sh/lib/common.sh:1: changed: differs from the file shipped in v1.0.0', 1, true), c[1])
  end)

  it('refuses a helper added to or removed from a shipped lib/', function()
    local r = shipped()
    r:write('legacy-sh/lib/extra.sh', 'more() { :; }\n'):commit()
    local c = findings(lint(r.dir, '--history'), 'changed')
    assert.truthy(c[1] and c[1]:find('legacy-sh/lib/extra.sh:1: changed: is not in legacy-sh/lib/ as shipped in v1.0.0', 1, true),
      table.concat(c, '\n'))
    r = shipped()
    r:rm('legacy-sh/lib/common.sh'):commit()
    c = findings(lint(r.dir, '--history'), 'changed')
    assert.truthy(c[1] and c[1]:find('legacy-sh/lib/common.sh:1: changed: shipped in v1.0.0 and removed since', 1, true),
      table.concat(c, '\n'))
  end)

  it('checks it against --against REV too', function()
    local r = shipped()
    r:write('legacy-sh/lib/common.sh', 'say() { echo edited; }\n')
    local c = findings(lint(r.dir, '--against', 'HEAD'), 'changed')
    assert.truthy(c[1] and c[1]:find('legacy-sh/lib/common.sh:1: changed: differs from the file at HEAD', 1, true),
      table.concat(c, '\n'))
  end)
end)
