-- One migration in a supervised child process, seen through the
-- `cozy-migrate exec` test driver: every way a script can end must come back
-- as the right outcome, the output must be streamed and tailed, and no
-- process of the script may outlive it.
local h = require('support.helpers')
local json = require('json')

local dir

-- exec(name, source, flags...) writes source to dir/name and runs
-- `cozy-migrate exec FLAGS... test-slug FILE`; res.json is the result line.
local function exec(name, source, ...)
  local path = h.write(dir .. '/' .. name, source)
  local args = { 'exec', ... }
  local opts = type(args[#args]) == 'table' and table.remove(args) or {}
  args[#args + 1] = 'test-slug'
  args[#args + 1] = path
  args[#args + 1] = opts
  local res = h.cozy(table.unpack(args))
  local ok, d = pcall(json.decode, res.out)
  assert(ok and type(d) == 'table',
    'no JSON result; exit ' .. res.code .. '\nstdout: ' .. res.out .. '\nstderr: ' .. res.err)
  res.json = d
  return res
end

-- A string no other test run shares, so pgrep finds only our processes.
math.randomseed(os.time(), tonumber(tostring({}):match('0x(%x+)'), 16) or 0)
local function marker(base)
  return string.format('%d.%06d', base, math.random(1, 999999))
end

-- Processes whose command line contains `sleep MARK`; the pattern has the
-- dot as [.] so the shell running pgrep does not match itself.
local function survivors(mark)
  local pattern = 'sleep ' .. mark:gsub('%.', '[.]')
  local res = h.run('pgrep -f ' .. h.q(pattern))
  return res.out
end

local function lines(s)
  local t = {}
  for l in s:gmatch('([^\n]*)\n') do t[#t + 1] = l end
  return t
end

describe('a migration in a child process', function()
  setup(function() dir = h.tmpdir() end)
  teardown(function() if dir then h.run('rm -rf ' .. h.q(dir)) end end)

  it('runs a Lua script that succeeds', function()
    local res = exec('ok.lua', 'print("hello from lua")\nprint(1 + 1)\n')
    local d = res.json
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('ok', d.outcome)
    assert.are.equal(json.null, d.reason)
    assert.are.equal('', d.message)
    assert.are.equal('hello from lua\n2\n', d.tail)
  end)

  it('reports a Lua error as ScriptError with file and line', function()
    local res = exec('err.lua', 'local x = 1\n\nerror("boom " .. x)\n')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('failed', d.outcome)
    assert.are.equal('ScriptError', d.reason)
    assert.matches('err%.lua:3: boom 1$', d.message)
  end)

  it('stops a Lua endless loop at the deadline', function()
    local started = os.time()
    local res = exec('loop.lua', 'while true do end\n', '--timeout', '1s')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('timeout', d.outcome)
    assert.are.equal('Timeout', d.reason)
    assert.are.equal('timed out after 1s', d.message)
    assert.is_true(d.duration_ms >= 900 and d.duration_ms < 5000, 'duration ' .. d.duration_ms)
    assert.is_true(os.time() - started < 5)
  end)

  it('reports a shell script exiting 3 as ExitCode', function()
    local res = exec('exit3.sh', 'echo before\nexit 3\n')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('failed', d.outcome)
    assert.are.equal('ExitCode', d.reason)
    assert.are.equal('exit code 3', d.message)
    assert.are.equal(3, d.exit_code)
    assert.are.equal('before\n', d.tail)
  end)

  it('times out a hanging shell script and leaves no process behind', function()
    local mark = marker(1000)
    local res = exec('hang.sh', 'sleep ' .. mark .. ' &\nsleep ' .. mark .. '\n',
      '--timeout', '1s', '--grace', '1s')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('timeout', d.outcome)
    assert.are.equal('Timeout', d.reason)
    assert.are.equal('timed out after 1s', d.message)
    assert.is_true(d.duration_ms < 5000, 'duration ' .. d.duration_ms)
    assert.are.equal('', survivors(mark))
  end)

  it('reports a shell script dying of SIGSEGV as Crashed', function()
    -- ulimit: no core file wherever the kernel would put one.
    local res = exec('segv.sh', 'ulimit -c 0\nkill -SEGV $$\n')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('crashed', d.outcome)
    assert.are.equal('Crashed', d.reason)
    assert.are.equal(11, d.signal)
    assert.matches('signal 11', d.message)
  end)

  it('reports a shell script killed by SIGKILL as Killed', function()
    local res = exec('kill9.sh', 'kill -9 $$\n')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('killed', d.outcome)
    assert.are.equal('Killed', d.reason)
    assert.are.equal(9, d.signal)
    assert.matches('^killed by signal 9', d.message)
  end)

  it('kills what a successful shell script left running', function()
    local mark = marker(999)
    local res = exec('leftover.sh', 'sleep ' .. mark .. ' &\necho done\n')
    local d = res.json
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('ok', d.outcome)
    assert.are.equal('done\n', d.tail)
    assert.is_true(d.duration_ms < 5000, 'duration ' .. d.duration_ms)
    assert.are.equal('', survivors(mark))
  end)

  it('streams every output line to stderr with the slug as prefix', function()
    local res = exec('stream.sh', 'echo one\necho two >&2\nprintf partial\n')
    assert.are.equal(0, res.code, res.err)
    assert.matches('%[test%-slug%] one\n', res.err)
    assert.matches('%[test%-slug%] two\n', res.err)
    assert.matches('%[test%-slug%] partial\n', res.err)
    assert.are.equal('one\ntwo\npartial\n', res.json.tail)
    assert.are.equal(1, #lines(res.out), 'stdout holds more than the result line')
  end)

  it('streams a Lua script output with the slug as prefix', function()
    local res = exec('stream.lua', 'print("from lua")\n')
    assert.are.equal(0, res.code, res.err)
    assert.matches('%[test%-slug%] from lua\n', res.err)
  end)

  it('keeps only the last 20 lines in the tail', function()
    local res = exec('hundred.sh', 'for i in $(seq 1 100); do echo "line $i"; done\n')
    local t = lines(res.json.tail)
    assert.are.equal(20, #t)
    assert.are.equal('line 81', t[1])
    assert.are.equal('line 100', t[20])
    assert.matches('%[test%-slug%] line 1\n', res.err)
  end)

  it('keeps the tail within 4 KiB even with long lines', function()
    local res = exec('long.sh', 'for i in 1 2 3 4 5 6 7 8; do\n' ..
      '  head -c 3000 /dev/zero | tr "\\0" a; echo\ndone\necho last\n')
    local tail = res.json.tail
    assert.is_true(#tail <= 4096, 'tail of ' .. #tail .. ' bytes')
    assert.matches('a%.%.%.\nlast\n$', tail)
  end)

  it('passes --env entries to the script, overriding inherited ones', function()
    local res = exec('env.sh', 'echo "ns=$NAMESPACE other=$COZY_CHILD_OTHER"\n',
      '--env', 'NAMESPACE=x', { env = { NAMESPACE = 'inherited', COZY_CHILD_OTHER = 'kept' } })
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('ns=x other=kept\n', res.json.tail)
  end)

  it('runs a shell script in its workdir', function()
    local wd = dir .. '/legacy-sh'
    assert.are.equal(0, h.run('mkdir -p ' .. h.q(wd)).code)
    local res = exec('pwd.sh', 'pwd\n', '--workdir', wd)
    assert.are.equal(0, res.code, res.err)
    local real = h.run('cd ' .. h.q(wd) .. ' && pwd -P').out
    assert.are.equal(real, res.json.tail)
  end)

  it('gives the script /dev/null as stdin and no inherited fd', function()
    local res = exec('fds.sh',
      'read -r x; echo "read=$?"\nls /proc/self/fd | sort -n | tr "\\n" " "\n')
    assert.are.equal(0, res.code, res.err)
    local t = lines(res.json.tail)
    assert.are.equal('read=1', t[1])
    -- ls itself holds 0-2 and the directory it reads (3); nothing else.
    assert.are.equal('0 1 2 3 ', t[2])
  end)

  it('reports a missing workdir as SpawnError', function()
    local res = exec('nowd.sh', 'echo never\n', '--workdir', dir .. '/does-not-exist')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('spawn_error', d.outcome)
    assert.are.equal('SpawnError', d.reason)
    assert.matches('chdir .*does%-not%-exist: No such file', d.message)
    assert.are.equal('', d.tail)
  end)

  it('reports a Lua script over its memory cap as MemoryLimit', function()
    local res = exec('mem.lua',
      'local t = {}\nfor i = 1, 1e9 do t[i] = string.rep("x", 64) .. i end\n', '--memory', '8')
    local d = res.json
    assert.are.equal(1, res.code)
    assert.are.equal('nomem', d.outcome)
    assert.are.equal('MemoryLimit', d.reason)
  end)

  it('calls tick while waiting', function()
    local res = exec('wait.sh', 'sleep 1.2\n', '--tick', '200ms')
    assert.are.equal(0, res.code, res.err)
    local d = res.json
    local expected = d.duration_ms / 200
    assert.is_true(d.ticks >= 4 and math.abs(d.ticks - expected) <= 1.5,
      d.ticks .. ' ticks in ' .. d.duration_ms .. ' ms')
  end)

  it('refuses bad usage with exit 2 and one line', function()
    local res = h.cozy('exec', '--env', 'NOEQUALS', 'slug', 'x.sh')
    assert.are.equal(2, res.code)
    assert.matches('^cozy%-migrate: exec: %-%-env', res.err)
    assert.are.equal(1, #lines(res.err))
    res = h.cozy('exec', 'only-slug')
    assert.are.equal(2, res.code)
  end)
end)
