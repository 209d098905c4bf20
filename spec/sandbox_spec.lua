-- The migration sandbox, seen from the outside: each script runs through
-- `cozy-migrate lua` and the host must refuse the dangerous parts, stop
-- runaway scripts, and survive every case with a clean exit code.
local h = require('support.helpers')

local function refused(source, pattern, ...)
  local res = h.lua(source, ...)
  assert.are.equal(1, res.code, 'exit code; stderr: ' .. res.err)
  assert.matches(pattern, res.err)
  return res
end

describe('the sandbox', function()
  it('runs a script using the allowed libraries', function()
    local res = h.lua([[
      local json = require('json')
      local t = { string.upper('a'), table.concat({ 'b', 'c' }), math.max(1, 2),
                  utf8.char(72), coroutine.wrap(function() coroutine.yield(5) end)(),
                  type(os.time()), type(os.clock()), os.date('!%Y', 0) }
      print(json.encode(t))
    ]])
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('["A","bc",2,"H",5,"number","number","1970"]\n', res.out)
  end)

  it('has yaml.decode say why whole, a long document name and all (it was cut at 512 bytes)', function()
    local res = h.lua([[
      local name = 'doc-' .. string.rep('n', 600)
      local v, err = require('yaml').decode('a: [1, 2', name)
      print(tostring(v) .. ' ' .. err)
    ]])
    assert.are.equal(0, res.code, res.err)
    local name = 'doc-' .. string.rep('n', 600)
    assert.are.equal('nil ' .. name .. ':', res.out:sub(1, #name + 5))
    assert.matches("did not find expected ',' or ']'", res.out, 1, true)
  end)

  it("lints against exactly the globals it gives: lint's luacheck std is made from its allow-list", function()
    -- what a migration really sees: each global, and each field of a table
    local res = h.lua([[
      local out = {}
      for k, v in pairs(_G) do
        out[#out + 1] = k
        if type(v) == 'table' and k ~= '_G' then
          for f in pairs(v) do out[#out + 1] = k .. '.' .. f end
        end
      end
      table.sort(out)
      print(table.concat(out, '\n'))
    ]])
    assert.are.equal(0, res.code, res.err)
    local seen = {}
    for line in res.out:gmatch('[^\n]+') do seen[line] = true end
    -- what lint tells luacheck (the `migrate` module hands over the same text)
    local env = { stds = {} }
    assert(load(require('migrate').luacheck_std(), 'luacheckrc', 't', env))()
    assert.are.equal('cozy_sandbox', env.std)
    local std, want = env.stds.cozy_sandbox.read_globals, {}
    for k, v in pairs(std) do
      if type(k) == 'number' then
        want[v] = true
      else
        want[k] = true
        if v.other_fields then
          for name in pairs(seen) do
            if name:sub(1, #k + 1) == k .. '.' then want[name] = true end
          end
        else
          for _, f in ipairs(v.fields) do want[k .. '.' .. f] = true end
        end
      end
    end
    assert.are.same(want, seen)
    assert.is_nil(seen.io)
    assert.is_nil(seen['string.dump'])
    assert.is_true(seen['os.time'])
  end)

  it('has no io library', function()
    refused([[io.open('/etc/passwd')]], "global 'io'")
  end)

  it('has no os.execute, os.getenv or os.remove', function()
    refused([[os.execute('true')]], "field 'execute'")
    refused([[os.remove('/tmp/x')]], "field 'remove'")
    refused([[return os.getenv('HOME')]], "field 'getenv'")
  end)

  it('has no package library, so no package.loadlib', function()
    refused([[package.loadlib('libc.so.6', 'system')]], "global 'package'")
  end)

  it('refuses binary chunks', function()
    refused([[
      assert(string.dump == nil, 'string.dump is reachable')
      assert(("").dump == nil, 'string.dump is reachable through the metatable')
      local f, err = load(string.char(27) .. 'LuaT\0\25\147\13\10\26\10')
      assert(f == nil)
      error(err)
    ]], 'binary chunks are not allowed')
  end)

  it('has no debug library', function()
    refused([[debug.sethook()]], "global 'debug'")
  end)

  it('has no dofile, loadfile or collectgarbage', function()
    refused([[dofile('/etc/passwd')]], "global 'dofile'")
    refused([[loadfile('/etc/passwd')]], "global 'loadfile'")
    refused([[collectgarbage('stop')]], "global 'collectgarbage'")
  end)

  it('only requires the stdlib', function()
    refused([[require('socket')]], "module 'socket' not found: a migration can require only the stdlib")
    refused([[require('busted')]], "module 'busted' not found")
    refused([[require('../../etc/passwd')]], 'not found')
    refused([[require('io')]], "module 'io' not found")
  end)

  it('stops an endless loop at the deadline with a timeout error', function()
    local started = os.time()
    refused([[while true do end]], 'Timeout: timed out after 1s', '--timeout', '1s')
    assert.is_true(os.time() - started < 10)
  end)

  it('stops an endless loop even when pcall catches the timeout', function()
    refused([[
      while true do
        pcall(function() while true do end end)
      end
    ]], 'Timeout', '--timeout', '1s')
  end)

  it('reports a timeout even when the script replaces the error', function()
    refused([[
      local ok = pcall(function() while true do end end)
      error('something else')
    ]], 'Timeout', '--timeout', '1s')
  end)

  it('fails a script that allocates past the memory cap', function()
    refused([[
      local t = {}
      for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end
    ]], 'MemoryLimit', '--memory', '32')
  end)

  it('reports a script error with its location', function()
    local res = refused([[local x = nil; return x.y]], 'ScriptError')
    assert.matches('%.lua:1:', res.err)
  end)

  it('rejects a bad --timeout with a usage error', function()
    local res = h.lua('return 1', '--timeout', 'abc')
    assert.are.equal(2, res.code)
    assert.matches("'abc' is not a duration", res.err)
  end)
end)

describe('the command line', function()
  it('exits 2 with one line for an unknown command', function()
    local res = h.cozy('frobnicate')
    assert.are.equal(2, res.code)
    assert.matches("unknown command 'frobnicate'", res.err)
    assert.are.equal(1, select(2, res.err:gsub('\n', '')))
  end)

  it('exits 2 with one line for an unknown flag', function()
    local res = h.cozy('lua', '--frobnicate', 'x.lua')
    assert.are.equal(2, res.code)
    assert.matches("unknown flag", res.err)
    assert.are.equal(1, select(2, res.err:gsub('\n', '')))
  end)

  it('prints help for each command', function()
    for _, cmd in ipairs({ 'lua', 'config', 'spec' }) do
      local res = h.cozy(cmd, '--help')
      assert.are.equal(0, res.code, cmd)
      assert.matches('Usage: cozy%-migrate ' .. cmd, res.out)
    end
  end)
end)
