-- The editor files: LuaLS stubs of the modules a migration requires, made
-- from the modules as the sandbox loads them (so they cannot drift: each
-- stub declares exactly the fields the module has), a .luarc.json that
-- points LuaLS at them, and a .luacheckrc holding the sandbox's globals.
local h = require('support.helpers')
local json = require('json')

local MODULES = { 'kube', 'helm', 'fleet', 'flux', 'log', 'json', 'yaml' }

-- the fields a stub declares
local function declared(text, m)
  local out = {}
  for name in text:gmatch('\nfunction ' .. m .. '%.([%w_]+)%(') do out[name] = true end
  for name in text:gmatch('\n' .. m .. '%.([%w_]+) = ') do out[name] = true end
  return out
end

describe('stubs', function()
  local dir
  setup(function()
    dir = h.tmpdir()
    h.must(h.cozy('stubs', '--dir', dir))
  end)

  for _, m in ipairs(MODULES) do
    it('declares exactly the fields of ' .. m .. ', as a LuaLS meta file', function()
      local text = h.slurp(dir .. '/.cozy-migrate/meta/' .. m .. '.lua')
      assert.matches('^%-%-%-@meta ' .. m .. '\n', text)
      assert.matches('\nreturn ' .. m .. '\n$', text)
      assert.is_truthy(load(text, '=' .. m), 'the stub of ' .. m .. ' is not Lua')
      local want = {}
      for k in pairs(require(m)) do want[k] = true end
      assert.are.same(want, declared(text, m))
    end)
  end

  it("gives a Lua function its parameters and the comment above it", function()
    local text = h.slurp(dir .. '/.cozy-migrate/meta/kube.lua')
    h.contains(text, '--- get(resource, name [, {namespace=, subresource=}]) -> object | nil (NotFound)\n' ..
      'function kube.get(resource, name, opts) end\n')
    h.contains(h.slurp(dir .. '/.cozy-migrate/meta/fleet.lua'), 'function fleet.each(resource, opts, fn) end')
    h.contains(h.slurp(dir .. '/.cozy-migrate/meta/log.lua'), 'function log.info(...) end')
  end)

  it('writes a .luarc.json pointing LuaLS at the stubs', function()
    local rc = json.decode(h.slurp(dir .. '/.luarc.json'))
    assert.are.equal('Lua 5.4', rc['runtime.version'])
    assert.are.same({ '.cozy-migrate/meta' }, rc['workspace.library'])
  end)

  it("writes a .luacheckrc with the sandbox's globals for migrations and busted's for specs", function()
    os.execute('mkdir -p ' .. h.q(dir .. '/migrations/pre-apply'))
    h.write(dir .. '/migrations/pre-apply/reads-files.lua', 'local f = io.open("/etc/passwd")\nreturn f\n')
    os.execute('mkdir -p ' .. h.q(dir .. '/spec/migrations'))
    h.write(dir .. '/spec/migrations/reads-files_spec.lua',
      'describe("x", function() it("y", function() assert(io.open("/dev/null")) end) end)\n')
    local res = h.run('cd ' .. h.q(dir) .. ' && luacheck --no-color --formatter plain --codes .')
    assert.are.equal(1, res.code, res.out .. res.err)
    assert.are.same({ "migrations/pre-apply/reads-files.lua:1:11: (W113) accessing undefined variable 'io'" },
      (function()
        local l = {}
        for line in res.out:gmatch('[^\n]+') do l[#l + 1] = line end
        return l
      end)())
  end)

  it('replaces the stubs when run again, and keeps the configuration an author edited', function()
    h.write(dir .. '/.cozy-migrate/meta/kube.lua', 'stale')
    h.write(dir .. '/.luarc.json', '{"mine": true}\n')
    h.must(h.cozy('stubs', '--dir', dir))
    assert.matches('^%-%-%-@meta kube\n', h.slurp(dir .. '/.cozy-migrate/meta/kube.lua'))
    assert.are.equal('{"mine": true}\n', h.slurp(dir .. '/.luarc.json'))
  end)

  it('is written by new when missing, and never overwritten by it', function()
    local tree = h.tmpdir()
    h.must(h.cozy('new', 'first-one', '--dir', tree))
    assert.matches('^%-%-%-@meta helm\n', h.slurp(tree .. '/.cozy-migrate/meta/helm.lua'))
    h.write(tree .. '/.cozy-migrate/meta/helm.lua', 'mine')
    h.write(tree .. '/.luacheckrc', 'mine')
    h.must(h.cozy('new', 'second-one', '--dir', tree))
    assert.are.same({ 'mine', 'mine' }, { h.slurp(tree .. '/.cozy-migrate/meta/helm.lua'),
      h.slurp(tree .. '/.luacheckrc') })
  end)
end)
