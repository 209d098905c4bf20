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
