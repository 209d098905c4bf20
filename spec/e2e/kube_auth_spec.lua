-- Which bearer token goes on the wire: client-go lets a user's tokenFile
-- win over its inline token, and the file is read again when it changes
-- (service-account tokens rotate). Proved against the real apiserver, which
-- answers 401 to a token it does not know.
local h = require('support.helpers')
local json = require('json')

describe('a kubeconfig user with both token and tokenFile', function()
  local dir, kubeconfig, tokenfile, good

  setup(function()
    local raw = json.decode(h.must(h.kubectl('config view --raw -o json')).out)
    local cluster
    for _, c in ipairs(raw.clusters) do if c.name == 'testenv' then cluster = c.cluster end end
    for _, u in ipairs(raw.users) do
      if u.name == 'testenv-token-admin' then good = u.user.token end
    end
    assert.is_truthy(cluster and good, 'the testenv kubeconfig has a token user')
    dir = h.tmpdir()
    tokenfile = h.write(dir .. '/token', good .. '\n')
    kubeconfig = h.write(dir .. '/config', json.encode {
      apiVersion = 'v1', kind = 'Config', ['current-context'] = 'both',
      clusters = { { name = 'c', cluster = cluster } },
      users = { { name = 'both', user = { token = 'not-a-valid-token', tokenFile = 'token' } } },
      contexts = { { name = 'both', context = { cluster = 'c', user = 'both' } } },
    })
  end)

  teardown(function() os.execute('rm -rf ' .. h.q(dir)) end)

  -- A script's list(): lists namespaces, returns the outcome ('ok' or the
  -- error's reason).
  local LIST = [[
local kube, json = require('kube'), require('json')
local function list()
  local ok, err = pcall(function() for _ in kube.list('namespaces', { limit = 1 }) do break end end)
  return ok and 'ok' or (type(err) == 'table' and err.reason or tostring(err))
end
]]

  -- Lists namespaces once, and prints the outcome as a JSON line.
  local function probe()
    return h.lua(LIST .. 'print(json.encode({ list() }))\n', '--kubeconfig', kubeconfig)
  end

  it('is reported as authenticating with the token file', function()
    local res = h.must(h.cozy('config', '--kubeconfig', kubeconfig))
    assert.are.equal('token-file', json.decode(res.out).auth)
  end)

  it('sends the token from the file, not the inline one', function()
    local res = probe()
    assert.are.equal(0, res.code, res.err)
    assert.are.same({ 'ok' }, json.decode(res.out))
  end)

  it('reads the file again as soon as it changes', function()
    -- The file turns bad while the script waits between two requests: the
    -- second request must carry the new (rejected) token, well before the
    -- once-a-minute re-read would.
    -- (once the first answer is printed, however long the script took to
    -- get there)
    local f = h.write(os.tmpname() .. '.lua', LIST .. [[
local first = list()
print('first ' .. first)
kube.sleep(2.5)
print(json.encode({ first, list() }))
]])
    local runner = require('support.runner')
    local out = runner.alongside(string.format('%s lua --kubeconfig %s %s', h.q(h.bin), h.q(kubeconfig), h.q(f)), 0,
      runner.until_line('o1', 'first') .. '; printf bad-token > ' .. h.q(tokenfile))
    os.remove(f)
    h.write(tokenfile, good .. '\n')
    assert.are.equal('0\n', out.r1, out.e1)
    assert.are.same({ 'ok', 'Unauthorized' }, json.decode(out.o1:match('[^\n]+\n?$')))
  end)
end)
