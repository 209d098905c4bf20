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
  { 'the stdlib\'s private kube.core', [[require('kube.core')]], 'ScriptError', "module 'kube.core' not found" },
  { 'the stdlib\'s private kube.core, asked twice under pcall',
    [[pcall(require, 'kube.core'); print(pcall(require, 'kube.core'))]], 'ok', "^false\tmodule 'kube%.core' not found" },
  { 'kube.core through the stdlib\'s module tables',
    [[local seen = {}
      for _, m in ipairs({ 'kube', 'fleet', 'helm', 'flux', 'log', 'json', 'yaml' }) do
        for k, v in pairs(require(m)) do
          if k == 'core' or k == 'await' or k == 'request' or
            (type(v) == 'table' and (rawget(v, 'adopt') or rawget(v, 'await') or rawget(v, 'request'))) then
            seen[#seen + 1] = m .. '.' .. k
          end
        end
      end
      print(#seen, table.concat(seen, ' '))]], 'ok', '^0\t\n$' },
  { 'the raw request function, even with kube.core', [[require('kube.core').request{ method = 'GET', path = '/api' }]],
    'ScriptError', "field 'request'", '--stdlib-internals' },
  { 'the kube module loaded as a file', [[require('kube.lua')]], 'ScriptError', 'not found' },
  -- the stdlib runs on pristine functions, never on the script's globals
  { 'a replaced type() sees nothing of the stdlib\'s private handles',
    [[local real, seen = type, {}
      type = function(v) if real(v) == 'table' then seen[#seen + 1] = v end return real(v) end
      local kube = require('kube'); type = real
      local leaked = false
      for _, t in ipairs(seen) do if rawget(t, 'request') then leaked = true end end
      print(#seen, leaked)]], 'ok', '^0\tfalse\n$' },
  { 'replaced pairs, tostring, error and next see no stdlib call',
    [[local calls = 0
      local function spy(f) return function(...) calls = calls + 1; return f(...) end end
      pairs, tostring, error, next, rawget, select = spy(pairs), spy(tostring), spy(error), spy(next), spy(rawget), spy(select)
      local kube = require('kube'); local helm = require('helm'); require('fleet'); require('flux')
      local before = calls
      helm.patch_for({ metadata = { name = 'x', namespace = 'n' } }, 'r', 'n', true)
      pcall(kube.get, 'cm', '')
      print(before, calls)]], 'ok', '^0\t0\n$' },
  { 'a replaced require is not the one the stdlib uses',
    [[local real, asked = require, {}
      require = function(n) asked[#asked + 1] = n; return real(n) end
      local kube = real('kube'); real('helm'); real('fleet')
      print(#asked)]], 'ok', '^0\n$' },
  { 'an edited string table changes no stdlib string call',
    [[string.format = function() return 'hijacked' end
      local mt = getmetatable('')
      mt.__index.gsub = function() return 'hijacked' end
      print(('a-b'):gsub('-', '+'), require('log') ~= nil)
      require('log').info('%d widgets', 3)]], 'ok', '^a%+b\ttrue\n$' },
  { 'the real string metatable is out of reach',
    [[local mt = getmetatable('')
      mt.__index = { upper = function() return 'hijacked' end }
      print(('abc'):upper(), rawequal(mt.__index, string))]], 'ok', '^ABC\tfalse\n$' },
  { 'a module table the script edits is not the one the stdlib uses',
    [[local core = require('kube.core')
      core.resolve = function() return { kind = 'Hijacked', resource = 'x', prefix = '/api/v1' } end
      local ok, r = pcall(require('kube').resource, 'cm') -- the real discovery, or a config error without a cluster
      print(type(r) == 'table' and r.kind == 'Hijacked')]], 'ok', '^false\n$', '--stdlib-internals' },
  { "a kube error's metatable is not the script's to change",
    [[local e = require('kube.core').make_error({ reason = 'X', message = 'm' })
      print(getmetatable(e), tostring(e))]], 'ok', '^kube%.error\tX: m\n$', '--stdlib-internals' },
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
  -- every coroutine carries the deadline
  { 'a coroutine resumed after the deadline runs nothing',
    [[local function spin() while true do end end
      pcall(coroutine.wrap(function() while true do pcall(spin) end end)) -- the deadline fires in here
      io = nil
      local ran = 0
      local co = coroutine.wrap(function() while true do ran = ran + 1; print('ran ' .. ran); coroutine.yield() end end)
      while true do pcall(co) end]], 'Timeout', 'timed out after 1s', '--timeout', '1s', no_stdout = 'ran' },
  { 'a coroutine made before the deadline and resumed after it runs nothing',
    [[local ran = 0
      local co = coroutine.create(function() while true do ran = ran + 1; print('ran ' .. ran); coroutine.yield() end end)
      local function spin() while true do end end
      pcall(coroutine.wrap(function() while true do pcall(spin) end end))
      while true do pcall(coroutine.resume, co) end]], 'Timeout', 'timed out after 1s', '--timeout', '1s',
    no_stdout = 'ran' },
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
      if c.no_stdout then
        assert.is_falsy(res.out:find(c.no_stdout, 1, true), 'it went on running: ' .. res.out:sub(1, 200))
      end
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

describe('#e2e the sandbox against the apiserver', function()
  local ns
  setup(function()
    h.need_cluster()
    ns = 'esc-' .. h.unique()
    h.must(h.kubectl('create namespace ' .. ns))
    h.must(h.kubectl('create configmap stamp -n ' .. ns .. ' --from-literal=at=0'))
  end)
  teardown(function() h.kubectl('delete namespace ' .. ns .. ' --wait=false') end)

  it('sends no request once the deadline has passed, from any coroutine', function()
    local res = h.kube_script({ NS = ns }, [[
      kube.resource('cm') -- discovered (and connected) before the deadline
      print(string.format('start %.6f', core.now()))
      local function spin() while true do end end
      pcall(coroutine.wrap(function() while true do pcall(spin) end end)) -- the deadline fires in here
      local i = 0
      local writer = coroutine.wrap(function()
        while true do
          i = i + 1
          pcall(kube.patch, 'cm', 'stamp', { data = { at = string.format('%.6f', core.now()), n = tostring(i) } },
            { namespace = NS })
          coroutine.yield()
        end
      end)
      while true do pcall(writer) end
    ]], '--timeout', '1s')
    assert.are.equal(1, res.code, res.err)
    h.contains(res.err, 'Timeout: timed out after 1s')
    -- the writer starts only once the deadline has passed: none of its
    -- patches may have left
    local cm = h.kubectl_json('get configmap stamp -n ' .. ns)
    assert.is_nil(cm.data.n, string.format('patch %s of the writer landed, stamped %.3fs after the start',
      tostring(cm.data.n), (tonumber(cm.data.at) or 0) - tonumber(res.out:match('start ([%d.]+)') or 0)))
  end)

  it('survives a finalizer that refetches discovery while a resource is being converted', function()
    local res = h.kube_script({}, [[
      kube.resource('cm')
      local n = 0
      local function arm()
        if n >= 200 then return end
        setmetatable({}, { __gc = function() n = n + 1; pcall(kube.resource, 'nope' .. n); arm() end })
      end
      for _ = 1, 50 do arm() end
      for _ = 1, 20000 do assert(kube.resource('cm').kind == 'ConfigMap') end
      print(json.encode({ finalizers = n }))
    ]])
    assert.are.equal(0, res.code, 'never a crash: ' .. res.err)
    assert.is_true(res.json.finalizers > 0, 'the finalizers never ran, so nothing was tried')
  end)

  it('keeps its own json and kube.core: a script editing them changes no stdlib call', function()
    local res = h.kube_script({ NS = ns }, [[
      json.encode = function() error('hijacked json.encode') end
      json.decode = function() error('hijacked json.decode') end
      core.resolve = function() error('hijacked core.resolve') end
      local obj, changed = kube.update('cm', 'stamp', function(o) o.data.u = 'updated' end, { namespace = NS })
      print(obj.data.u, changed)
    ]])
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('updated\ttrue\n', res.out)
  end)
end)
