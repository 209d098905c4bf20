-- lint's api rule: a field a Lua migration uses of a module it required
-- must exist in that module, as the sandbox loads it. The rule errs on the
-- side of silence (a shadowed name, a field the script defines itself) and
-- never flags a field that exists.
local h = require('support.helpers')

-- every module a migration requires by name, as the modules are
local MODULES = { 'kube', 'helm', 'fleet', 'flux', 'log', 'json', 'yaml' }

-- lint a tree holding one migration with this body; the api lines only
local function api_lines(body)
  local dir = h.tmpdir()
  h.must(h.cozy('new', 'probe', '--dir', dir))
  h.write(dir .. '/migrations/pre-apply/probe.lua', '-- cozystack-migration: on-error=abort\n' .. body)
  local res = h.cozy('lint', '--dir', dir)
  local lines = {}
  for l in res.out:gmatch('[^\n]+') do
    if l:find(': api: ', 1, true) then lines[#lines + 1] = l:gsub('^.-migrations/', 'migrations/') end
  end
  return lines, res
end

describe('lint: the api rule', function()
  it('reports a field the module does not have, with the nearest one', function()
    local lines, res = api_lines([[
local kube = require('kube')
local log = require "log"
local k = require('kube')
kube.pach('configmaps', 'x', {})
log.inf('hello')
k.lst('pods')
]])
    assert.are.equal(3, res.code)
    assert.are.same({
      "migrations/pre-apply/probe.lua:5: api: kube.pach: the kube module has no field 'pach' (did you mean kube.patch?)",
      "migrations/pre-apply/probe.lua:6: api: log.inf: the log module has no field 'inf' (did you mean log.info?)",
      "migrations/pre-apply/probe.lua:7: api: k.lst: the kube module has no field 'lst' (did you mean k.list?)",
    }, lines)
  end)

  it('passes every field every module has', function()
    local body = {}
    for _, m in ipairs(MODULES) do
      body[#body + 1] = string.format("local %s = require('%s')", m, m)
      local names = {}
      for k in pairs(require(m)) do names[#names + 1] = k end
      table.sort(names)
      assert.is_true(#names > 0, m)
      for _, k in ipairs(names) do body[#body + 1] = string.format('local _ = %s.%s', m, k) end
    end
    assert.are.same({}, (api_lines(table.concat(body, '\n') .. '\n')))
  end)

  it('says nothing of what it cannot know', function()
    assert.are.same({}, (api_lines([[
local kube = require('kube')
local fleet = require('fleet')
-- kube.pach in a comment, and in a string: 'kube.pach'
local s = "kube.pach" .. [==[ kube.pach ]==]
kube.helper = function() return s end
kube.helper()
function fleet.mine() end
fleet.mine()
local function f(kube) return kube.anything end
for _, log in ipairs({}) do log.whatever() end
local json = { fields = 1 }
print(f({}), json.fields)
]])))
  end)
end)
