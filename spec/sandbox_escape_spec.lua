-- Every way out of the migration sandbox we have tried, as a hostile
-- migration author would, each with its exact outcome. A script runs through
-- `cozy-migrate lua` (a supervised child, like a migration under `run`), and
-- ends one of four ways: ok, or "cozy-migrate: FILE: REASON: message" on
-- stderr with exit 1, REASON being ScriptError, Timeout or MemoryLimit.
-- Never a crash (SIGABRT, a core), never a hang, never an exit 0 past a
-- limit.
local h = require('support.helpers')
local json = require('json')

-- case{source, reason, pattern [, flags...]}: reason 'ok' means exit 0 and
-- pattern matched against stdout.
local CASES = {
  -- libraries and globals that are not there
  { 'io is absent', [[io.open('/etc/passwd')]], 'ScriptError', "global 'io'" },
  { 'os.execute is absent', [[os.execute('id')]], 'ScriptError', "field 'execute'" },
  { 'os.getenv is absent', [[return os.getenv('HOME')]], 'ScriptError', "field 'getenv'" },
  { 'os.remove is absent', [[os.remove('/tmp/x')]], 'ScriptError', "field 'remove'" },
  { 'os.exit is absent', [[os.exit(0)]], 'ScriptError', "field 'exit'" },
  { 'os.rename and os.tmpname are absent', [[print(os.rename, os.tmpname)]], 'ok', '^nil\tnil\n$' },
  { 'package is absent', [[package.loadlib('libc.so.6', 'system')]], 'ScriptError', "global 'package'" },
  { 'debug is absent', [[debug.sethook()]], 'ScriptError', "global 'debug'" },
  { 'dofile is absent', [[dofile('/etc/passwd')]], 'ScriptError', "global 'dofile'" },
  { 'loadfile is absent', [[loadfile('/etc/passwd')]], 'ScriptError', "global 'loadfile'" },
  { 'collectgarbage is absent', [[collectgarbage('stop')]], 'ScriptError', "global 'collectgarbage'" },
  { 'rawget cannot find a hidden global', [[print(rawget(_G, 'io'), rawget(_G, 'debug'))]], 'ok', '^nil\tnil\n$' },
  -- require
  { 'require of a C library', [[require('lfs')]], 'ScriptError', "module 'lfs' not found" },
  { 'require of io', [[require('io')]], 'ScriptError', "module 'io' not found" },
  { 'require of debug', [[require('debug')]], 'ScriptError', "module 'debug' not found" },
  { 'require of a relative path', [[require('../../etc/passwd')]], 'ScriptError', 'not found' },
  { 'require of the test framework', [[require('busted')]], 'ScriptError', "module 'busted' not found" },
  { 'the raw request function', [[require('kube.core').request{ method = 'GET', path = '/api' }]],
    'ScriptError', "field 'request'" },
  { 'the kube module loaded as a file', [[require('kube.lua')]], 'ScriptError', 'not found' },
  -- binary chunks and loaders
  { 'string.dump is gone, also through the string metatable',
    [[print(string.dump, ('').dump, getmetatable('').__index.dump)]], 'ok', '^nil\tnil\tnil\n$' },
  { 'load of a binary chunk', [[assert(load(string.char(27) .. 'LuaT\0\25\147\13\10\26\10'))]],
    'ScriptError', 'binary chunks are not allowed' },
  { 'load with mode "b" still reads text only', [[assert(load(string.char(27) .. 'Lua', 'x', 'b'))]],
    'ScriptError', 'binary chunks are not allowed' },
  { 'load from a reader function', [[load(function() return string.char(27) .. 'Lua' end)]],
    'ScriptError', 'string expected, got function' },
  { 'a custom environment grants nothing', [[print(load('return io, os.execute', 'x', 't', { os = os })())]],
    'ok', '^nil\tnil\n$' },
  { 'a replaced _ENV grants nothing',
    [[local _ENV = setmetatable({}, { __index = function(_, k) return k end }); print(type(io))]],
    'ScriptError', 'attempt to call a string value' },
  -- hostile error values
  { 'error(nil)', [[error(nil)]], 'ScriptError', 'nil' },
  { 'an error whose __tostring raises',
    [[error(setmetatable({}, { __tostring = function() error('inner') end }))]],
    'ScriptError', 'an error value of type table that cannot be shown as text' },
  { 'an error whose __tostring returns a table',
    [[error(setmetatable({}, { __tostring = function() return {} end }))]],
    'ScriptError', 'an error value of type table that cannot be shown as text' },
  { 'an error whose __tostring loops',
    [[error(setmetatable({}, { __tostring = function() while true do end end }))]],
    'ScriptError', 'an error value of type table that cannot be shown as text' },
  { 'an error whose __tostring raises an error whose __tostring raises',
    [[error(setmetatable({}, { __tostring = function()
        error(setmetatable({}, { __tostring = function() error('x') end })) end }))]],
    'ScriptError', 'cannot be shown as text' },
  { 'a hostile error out of a coroutine',
    [[coroutine.wrap(function() error(setmetatable({}, { __tostring = function() return {} end })) end)()]],
    'ScriptError', 'cannot be shown as text' },
  { 'print of a value whose __tostring raises',
    [[print(setmetatable({}, { __tostring = function() error('no text for you') end }))]],
    'ScriptError', 'no text for you' },
  { 'a __close that raises', [[do local x <close> = setmetatable({}, { __close = function() error('closing') end }) end]],
    'ScriptError', 'closing' },
  { 'a recursion bomb', [[local function f() return f() + 1 end f()]], 'ScriptError', 'stack overflow' },
  { 'a cycle handed to json.encode', [[local t = {}; t.t = t; require('json').encode(t)]],
    'ScriptError', 'nesting deeper than' },
  { 'a bad os.date format', [[os.date('%Ez')]], 'ScriptError', 'invalid conversion specifier' },
  -- time
  { 'an endless loop', [[while true do end]], 'Timeout', 'timed out after 1s', '--timeout', '1s' },
  { 'an endless loop inside pcall, retried', [[while true do pcall(function() while true do end end) end]],
    'Timeout', 'timed out after 1s', '--timeout', '1s' },
  { 'a timeout replaced by another error',
    [[pcall(function() while true do end end); error('something else')]], 'Timeout', 'timed out', '--timeout', '1s' },
  { 'a spin inside a coroutine', [[coroutine.wrap(function() while true do end end)()]], 'Timeout', 'timed out',
    '--timeout', '1s' },
  { 'a spin inside a __close', [[do local x <close> = setmetatable({}, { __close = function() while true do end end }) end]],
    'Timeout', 'timed out', '--timeout', '1s' },
  { 'a catastrophic pattern, all in C', [[string.find(string.rep('a', 10000), '.-.-.-b')]], 'Timeout',
    'timed out after 1s', '--timeout', '1s' },
  { 'a __gc that loops when the state closes', [[setmetatable({}, { __gc = function() while true do end end })]],
    'Timeout', 'timed out after 1s', '--timeout', '1s' },
  { 'kube.sleep past the deadline', [[require('kube').sleep(30)]], 'Timeout', 'timed out after 1s', '--timeout', '1s' },
  -- memory
  { 'a table bomb', [[local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end]], 'MemoryLimit',
    'memory', '--memory', '32' },
  { 'a string.rep bomb', [[local s = string.rep('x', 1 << 30)]], 'MemoryLimit', 'memory', '--memory', '32' },
  { 'a string.rep too large to count', [[local s = string.rep('x', 1 << 62)]], 'ScriptError',
    'resulting string too large', '--memory', '32' },
  { 'a memory bomb caught by pcall', [[pcall(string.rep, 'x', 1 << 30); print('went on')]], 'MemoryLimit',
    'memory cap', '--memory', '32' },
  { 'json.encode of 100 references to 1 MiB', [[local s = string.rep('x', 1 << 20); local t = {}
      for i = 1, 100 do t[i] = s end; require('json').encode(t)]], 'MemoryLimit', 'memory', '--memory', '16' },
  { 'yaml.encode of 100 references to 1 MiB', [[local s = string.rep('x', 1 << 20); local t = {}
      for i = 1, 100 do t[i] = s end; assert(require('yaml').encode(t))]], 'MemoryLimit', 'memory', '--memory', '16' },
  { 'json.decode of a huge document', [[require('json').decode('[' .. string.rep('"xxxxxxxxxxxxxxxx",', 1e6) .. '1]')]],
    'MemoryLimit', 'memory', '--memory', '16' },
}

describe('an escape from the sandbox', function()
  it('has at least 40 cases tried', function()
    assert.is_true(#CASES >= 40, #CASES .. ' cases')
  end)

  for _, c in ipairs(CASES) do
    local name, source, reason, pattern = c[1], c[2], c[3], c[4]
    local flags = { table.unpack(c, 5) }
    it('ends cleanly: ' .. name, function()
      local started = os.time()
      local res = h.lua(source, table.unpack(flags))
      assert.is_true(os.time() - started < 15, 'took too long')
      if reason == 'ok' then
        assert.are.equal(0, res.code, res.err)
        assert.matches(pattern, res.out)
        return
      end
      assert.are.equal(1, res.code, 'exit code (never a crash); stderr: ' .. res.err)
      local line = res.err:match('cozy%-migrate: [^\n]*%.lua: (.-)\n') or ''
      assert.are.equal(reason, line:match('^(%a+):'), 'reason in: ' .. res.err)
      assert.matches(pattern, line, 1, true)
    end)
  end
end)

describe('a finalizer when the state closes', function()
  it('cannot talk to the cluster any more', function()
    h.need_cluster()
    local ns = 'gc-' .. os.time() .. math.random(1000, 9999)
    h.must(h.kubectl('create namespace ' .. ns))
    local res = h.lua(string.format([[
      local kube = require('kube')
      kube.resource('cm') -- connected and discovered while the script runs
      setmetatable({}, { __gc = function()
        kube.create('cm', { metadata = { name = 'from-gc' } }, { namespace = %q })
      end })
      print('done')
    ]], ns))
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('done\n', res.out)
    local got = h.kubectl('get configmap from-gc -n ' .. ns)
    assert.are_not.equal(0, got.code, 'the finalizer created an object')
  end)

  it('never shows a secret through kube.config', function()
    local res = h.lua([[print(require('json').encode(require('kube').config()))]])
    assert.are.equal(0, res.code, res.err)
    local c = json.decode(res.out)
    assert.is_nil(c.token)
    assert.is_falsy(res.out:find('BEGIN', 1, true), 'no key material')
  end)
end)
