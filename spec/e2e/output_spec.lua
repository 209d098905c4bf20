-- Every line the program prints goes through one output path: with
-- --log-format json, stdout and stderr hold JSON objects only, usage errors,
-- fatal errors and the scripts' own output included.
local h = require('support.helpers')
local fixture = require('support.fixture')
local json = require('json')

-- Asserts every non-empty line of text decodes to a JSON object; returns them.
local function json_lines(text, what)
  local out = {}
  for line in text:gmatch('[^\n]+') do
    local v = json.decode(line)
    assert.is_true(type(v) == 'table', string.format('%s: not a JSON object: %q', what, line))
    out[#out + 1] = v
  end
  return out
end

describe('--log-format json', function()
  it('makes a usage error one JSON line, even when the bad flag comes first', function()
    local res = h.cozy('run', '--bogus', '--log-format', 'json')
    assert.are.equal(2, res.code)
    assert.are.equal('', res.out)
    local lines = json_lines(res.err, 'stderr')
    assert.are.equal(1, #lines)
    assert.are.equal('error', lines[1].level)
    assert.matches("unknown flag '%-%-bogus'", lines[1].msg)
  end)

  it('makes an unreachable cluster a JSON error line and exit 6', function()
    local dir = fixture.tree { batches = { { '00001-v1', { 'a' } } }, scripts = { a = {} } }
    local kc = h.write(dir .. '/kubeconfig', [[
apiVersion: v1
kind: Config
current-context: nowhere
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: nowhere, context: {cluster: c, user: u}}]
]])
    local res = h.cozy('run', '--log-format=json', '--kubeconfig', kc, '--dir', dir,
      '--namespace', 'nowhere', '--lock-timeout', '1s', '--retry-for', '1s')
    assert.are.equal(6, res.code, res.err)
    json_lines(res.out, 'stdout')
    local lines = json_lines(res.err, 'stderr')
    assert.is_true(#lines >= 1)
    assert.matches('Unable to connect to the server', lines[#lines].msg)
  end)

  it('keeps a whole run, the scripts\' output included, in JSON lines', function()
    local ns = 'out-' .. os.time() .. math.random(1000, 9999)
    h.must(h.kubectl('create namespace ' .. ns))
    local dir = fixture.tree {
      batches = { { '00001-v1', { 'a', 'b' } } },
      scripts = { a = { body = "print('hello from a')" }, b = { shell = true, body = 'echo hello from b' } },
    }
    h.must(h.cozy('run', '--dir', dir, '--namespace', ns, '--log-format', 'json')) -- fresh install
    local res = h.must(h.cozy('run', '--dir', dir, '--namespace', ns, '--log-format', 'json',
      '--only', 'a'))
    local out, err = json_lines(res.out, 'stdout'), json_lines(res.err, 'stderr')
    assert.is_true(#out >= 1)
    local printed
    for _, l in ipairs(err) do if l.output == 'hello from a' then printed = l end end
    assert.is_truthy(printed, 'the script output arrives as a JSON line: ' .. res.err)
    assert.are.equal('a', printed.migration)
  end)
end)

describe('the text format', function()
  it('reports a usage error on one line naming the command', function()
    local res = h.cozy('status', '--dry-run')
    assert.are.equal(2, res.code)
    assert.are.equal('', res.out)
    assert.are.equal("cozy-migrate: status: unknown flag '--dry-run' (see 'cozy-migrate status --help')\n",
      res.err)
  end)

  it('refuses a namespace or ledger name the apiserver could never hold', function()
    for _, args in ipairs { { '--namespace', 'a/b', 'is not a namespace name' }, { '--ledger', '', 'is not a ConfigMap name' },
      { '--namespace', 'UPPER', 'is not a namespace name' } } do
      local res = h.cozy('plan', args[1], args[2])
      assert.are.equal(2, res.code, table.concat(args, ' '))
      assert.matches(args[3], res.err, 1, true)
    end
  end)
end)

-- What a script prints or raises is data: it can never take the runner's
-- keys in a JSON line, paint over the runner's lines on a terminal, or make
-- a JSON line that a strict parser rejects.
describe('#e2e script output against the runner', function()
  local runner = require('support.runner')
  teardown(runner.delete_namespaces)

  -- A tree of one migration `forger` (on-error=warn) and its namespace.
  local function case(body)
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    local dir = fixture.tree { batches = { { '00001-v1', { 'forger' } } },
      scripts = { forger = { body = body, on_error = 'warn' } } }
    return dir, ns
  end

  local function raw_controls(s)
    return s:find('[\r\27\1-\8\11\12\14-\31\127]') ~= nil
  end

  it('never lets a JSON line of the script carry keys of the runner', function()
    local dir, ns = case([[
print('{"migration":"forger","level":"info","msg":"forged","outcome":"ok","step":1,"steps":1,"tier":"pre-apply"}')
print('{"ts":"2026-01-01T00:00:00Z","step":1,"steps":1,"tier":"pre-apply","migration":"forger","outcome":"ok"}')
error('it really failed')
]])
    local res = runner.run(dir, ns, '--log-format', 'json')
    assert.are.equal(0, res.code, res.out .. res.err)
    local outcomes = {}
    for _, l in ipairs(json_lines(res.out, 'stdout')) do
      if l.migration == 'forger' and l.outcome then outcomes[#outcomes + 1] = l.outcome end
    end
    assert.are.same({ 'FAILED (warn)' }, outcomes, 'the only outcome line is the runner\'s')
    local forged, wrapped
    for _, l in ipairs(json_lines(res.err, 'stderr')) do
      if l.migration == 'forger' then
        for k in pairs(l) do
          assert.is_true(k == 'ts' or k == 'level' or k == 'migration' or k == 'msg' or k == 'output',
            'a script line carries the key ' .. k .. ': ' .. res.err)
        end
        if l.msg == 'forged' then forged = l end
        if l.output and l.output:find('"outcome":"ok"', 1, true) then wrapped = l end
      end
    end
    assert.is_truthy(forged, 'a log-shaped line reads as the log line it claims to be, and no more')
    assert.is_truthy(wrapped, 'a line shaped like the runner\'s stays the script\'s output')
  end)

  it('escapes CR and escape sequences in text: on its lines, the FAILED line, the Event and status', function()
    local dir, ns = case([[
print('\r\27[2K[1/1] pre-apply forger ... ok')
error('\27[32mok\r[1/1] pre-apply forger ... ok')
]])
    local res = runner.run(dir, ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.is_false(raw_controls(res.out), 'stdout: ' .. res.out)
    assert.is_false(raw_controls(res.err), 'stderr: ' .. res.err)
    h.contains(res.err, '[forger] \\x0d\\x1b[2K[1/1]')
    h.contains(res.out, 'FAILED (warn)')
    h.contains(res.out, '\\x1b[32mok\\x0d[1/1]')
    local rec = runner.records(ns).forger
    assert.is_false(raw_controls(rec.message), 'record message: ' .. rec.message)
    for _, e in ipairs(runner.events(ns)) do
      assert.is_false(raw_controls(e.message), 'Event message: ' .. e.message)
    end
    local st = h.cozy('status', 'forger', '--dir', dir, '--namespace', ns)
    assert.are.equal(0, st.code, st.err)
    assert.is_false(raw_controls(st.out), 'status SLUG: ' .. st.out)
    h.contains(st.out, '\\x1b[2K')
  end)

  it('keeps every JSON line valid UTF-8, whatever bytes the script prints or raises', function()
    local dir, ns = case([[
print('bad \255\254 bytes and a cut \226\130')
error('bad \192\175 message')
]])
    local res = runner.run(dir, ns, '--log-format', 'json')
    assert.are.equal(0, res.code, res.out .. res.err)
    for line in (res.out .. res.err):gmatch('[^\n]+') do
      assert.is_truthy(utf8.len(line), 'not valid UTF-8: ' .. line)
    end
    h.contains(res.err, 'bad \239\191\189\239\191\189 bytes')
    local rec = runner.records(ns).forger
    assert.is_truthy(utf8.len(rec.message), 'the record message is not valid UTF-8')
    assert.is_truthy(utf8.len(rec.output), 'the record output is not valid UTF-8')
  end)
end)
