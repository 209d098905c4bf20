-- kube.list against the real apiserver: paging with limit/continue over
-- 1,200 ConfigMaps, leaving early (proved with the module's request
-- counter), and a continue token the real server expires: etcd is compacted
-- past the list's revision through its JSON gateway while the iteration is
-- paused between pages.
local h = require('support.helpers')
local json = require('json')

local NS = string.format('kl-%d-%d', os.time(), math.random(1000, 9999))
local BULK = 1200

local must = h.must

local function script(body)
  return string.format("local kube = require('kube')\nlocal json = require('json')\nlocal core = require('kube.core')\n"
    .. "local NS = %q\n%s", NS, body)
end

local function run(body, ...)
  return h.kube_script({ NS = NS }, body, ...)
end

-- The etcd client URL of the running testenv. tools/testenv has no command
-- for it, so it is read from etcd's own command line (its pid file sits in
-- the state directory, next to the kubeconfig).
local function etcd_url()
  local dir = assert(os.getenv('KUBECONFIG'), 'KUBECONFIG is not set'):match('^(.*)/[^/]*$')
  local pid = assert(h.slurp(dir .. '/etcd.pid'):match('%d+'), 'no etcd.pid in ' .. dir)
  local prev
  for a in h.slurp('/proc/' .. pid .. '/cmdline'):gmatch('[^\0]+') do
    if prev == '--listen-client-urls' then return (a:match('^[^,]+')) end
    prev = a
  end
  error('etcd --listen-client-urls not found for pid ' .. pid)
end

local function etcd(url, what, body)
  local res = must(h.run(string.format("curl -sS -f -X POST %s/v3/%s -d %s", url, what, h.q(json.encode(body)))))
  return json.decode(res.out)
end

local function kubectl_names(selector) return h.configmap_names(NS, selector) end

-- The list pages of NS's ConfigMaps with selector, fetched with kubectl's
-- raw GET (no migration can send a raw request). Stops after max pages.
local function raw_pages(selector, limit, max)
  local pages, token = {}, nil
  repeat
    local path = string.format('/api/v1/namespaces/%s/configmaps?labelSelector=%s&limit=%d%s', NS,
      selector:gsub('=', '%%3D'), limit, token and ('&continue=' .. token) or '')
    local page = json.decode(must(h.kubectl('get --raw ' .. h.q(path))).out)
    pages[#pages + 1] = page
    token = page.metadata.continue
  until token == nil or token == '' or token == json.null or (max and #pages >= max)
  return pages, token
end

describe('#e2e kube.list', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    -- one process, one connection: 1,200 creates take a few seconds
    must(run(string.format([[
      for i = 1, %d do
        kube.create('cm', { metadata = { name = string.format('bulk-%%05d', i), namespace = NS,
          labels = { set = 'bulk' } }, data = { i = tostring(i) } })
      end
      for i = 1, 30 do
        kube.create('cm', { metadata = { name = string.format('exp-%%02d', i), namespace = NS,
          labels = { set = 'exp' } } })
      end
    ]], BULK)))
  end)

  teardown(function()
    h.kubectl('delete configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  it('pages through 1,200 ConfigMaps 100 at a time, yielding each exactly once', function()
    local res = must(run [[
      local before = core.requests()
      kube.resource('cm')
      local start = core.requests()
      local seen, names, dup = {}, {}, 0
      for cm in kube.list('cm', { namespace = NS, label_selector = { set = 'bulk' }, limit = 100 }) do
        if seen[cm.metadata.name] then dup = dup + 1 end
        seen[cm.metadata.name] = true
        names[#names + 1] = cm.metadata.name
      end
      local requests = core.requests() - start
      table.sort(names)
      print(json.encode({ names = json.array(names), dup = dup, requests = requests,
        conns = kube.connections(), discovery = start - before }))
    ]])
    -- the pages the server hands out, counted by paging by hand
    res.json.pages = #raw_pages('set=bulk', 100)
    local want = kubectl_names('set=bulk')
    assert.are.equal(BULK, #want)
    assert.are.equal(0, res.json.dup)
    assert.are.same(want, res.json.names)
    -- one request per page the server hands out (it may end with an empty
    -- page when a selector filters the tail of the key range)
    assert.is_true(res.json.pages >= math.ceil(BULK / 100))
    assert.are.equal(res.json.pages, res.json.requests)
    assert.are.equal(1, res.json.conns)
  end)

  it('stops fetching when the loop is left early', function()
    local res = must(run [[
      kube.resource('cm')
      local start = core.requests()
      local n = 0
      for _ in kube.list('cm', { namespace = NS, label_selector = { set = 'bulk' }, limit = 100 }) do
        n = n + 1
        if n == 150 then break end
      end
      local after_loop = core.requests() - start
      kube.get('cm', 'bulk-00001', { namespace = NS })
      print(json.encode({ n = n, requests = after_loop, later = core.requests() - start }))
    ]])
    assert.are.equal(150, res.json.n)
    assert.are.equal(math.ceil(150 / 100), res.json.requests)
    assert.are.equal(res.json.requests + 1, res.json.later)
  end)

  it('lists across all namespaces and cluster-scoped resources', function()
    local res = must(run [[
      local n = 0
      for cm in kube.list('cm', { all_namespaces = true, label_selector = 'set=bulk', limit = 500 }) do
        if cm.metadata.namespace == NS then n = n + 1 end
      end
      local found = false
      for ns in kube.list('namespaces', { limit = 2 }) do
        if ns.metadata.name == NS then found = true end
      end
      print(json.encode({ n = n, found = found }))
    ]])
    assert.are.same({ n = BULK, found = true }, res.json)
  end)

  it('survives a continue token the server expired (etcd compacted mid-list), each object once', function()
    local dir = h.tmpdir()
    local f = h.write(dir .. '/list.lua', script [[
      local names, seen, dup, n = {}, {}, 0, 0
      for cm in kube.list('cm', { namespace = NS, label_selector = { set = 'exp' }, limit = 5 }) do
        n = n + 1
        if seen[cm.metadata.name] then dup = dup + 1 end
        seen[cm.metadata.name] = true
        names[#names + 1] = cm.metadata.name
        if n == 5 then
          -- the first page is done: let the spec compact etcd, then go on
          print('PAGE1')
          kube.wait('cm', 'go-on', function(o) return o ~= nil end, 60, { namespace = NS })
        end
      end
      table.sort(names)
      print(json.encode({ names = json.array(names), dup = dup }))
    ]])
    os.execute(string.format('(%s lua --stdlib-internals %s >%s 2>%s; echo $? >%s) &', h.q(h.bin), h.q(f), h.q(dir .. '/out'),
      h.q(dir .. '/err'), h.q(dir .. '/rc')))
    for _ = 1, 300 do
      if h.slurp(dir .. '/out'):find('PAGE1') or h.slurp(dir .. '/rc') ~= '' then break end
      h.sleep(0.1)
    end
    assert.matches('PAGE1', h.slurp(dir .. '/out'), nil, nil, h.slurp(dir .. '/err'))
    -- a token of the same revision as the script's, to look at the 410 itself
    local _, token = raw_pages('set=exp', 5, 1)
    -- move etcd past the list's revision, then compact up to it
    local url = etcd_url()
    local before = tonumber(etcd(url, 'kv/range', { key = 'Lw==' }).header.revision)
    must(h.kubectl('create configmap bump -n ' .. NS))
    local rev = tonumber(etcd(url, 'kv/range', { key = 'Lw==' }).header.revision)
    assert.is_true(rev > before)
    etcd(url, 'kv/compaction', { revision = tostring(rev), physical = true })
    -- only now may the script go on (it polls for this object)
    must(h.kubectl('create configmap go-on -n ' .. NS))
    for _ = 1, 600 do
      if h.slurp(dir .. '/rc') ~= '' then break end
      h.sleep(0.1)
    end
    local err = h.slurp(dir .. '/err')
    assert.are.equal('0', h.slurp(dir .. '/rc'):match('%d+'), err)
    local out = json.decode(h.slurp(dir .. '/out'):match('([^\n]*)\n?$'))
    -- the server did expire such a token, and offered a fresh one
    local gone = h.kubectl('get --raw ' .. h.q(string.format(
      '/api/v1/namespaces/%s/configmaps?labelSelector=set%%3Dexp&limit=5&continue=%s', NS, token)))
    assert.are_not.equal(0, gone.code)
    assert.matches('Expired', gone.err)
    assert.are.same(kubectl_names('set=exp'), out.names)
    assert.are.equal(0, out.dup)
    assert.matches('continue token expired', err)
  end)
end)
