-- Retries, end to end: `cozy-migrate lua` talks to the real apiserver
-- through tools/cluster/faultproxy, which injects 429 (with Retry-After and a
-- text body, as priority-and-fairness answers), 503, other statuses, and
-- connections closed without a response, and counts what it received and
-- what it forwarded. The proxy is built here (go build, cached) and run
-- twice: once offering HTTP/2, as the apiserver does, and once HTTP/1.1 only.
local h = require('support.helpers')
local json = require('json')

local NS = string.format('kr-%d-%d', os.time(), math.random(1000, 9999))
local must = h.must
local proxy = require('support.proxy')
local start_proxy, stop_proxy = proxy.start, proxy.stop
local faults, counts = proxy.faults, proxy.counts

local function run(p, body, ...)
  local src = string.format("local kube = require('kube')\nlocal json = require('json')\nlocal NS = %q\n%s",
    NS, body)
  local res = h.lua(src, '--kubeconfig', p.kubeconfig, ...)
  local last = res.out:match('([^\n]*)\n?$')
  if last and last ~= '' then res.json = json.decode(last) end
  return res
end

local function count_matches(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

local function kubectl_names(label) return h.configmap_names(NS, label) end

local CM_PATH = '/api/v1/namespaces/' .. NS .. '/configmaps'

describe('#e2e kube retries through a fault-injecting proxy', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    must(h.kubectl('create configmap target -n ' .. NS .. ' --from-literal=n=0'))
    for i = 1, 7 do
      must(h.kubectl(string.format('create configmap page-%d -n %s', i, NS)))
      must(h.kubectl(string.format('label configmap page-%d -n %s set=pages', i, NS)))
    end
  end)

  teardown(function()
    h.kubectl('delete configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  for _, mode in ipairs({ { name = 'HTTP/2', args = '' }, { name = 'HTTP/1.1', args = '-http1' } }) do
    describe('over ' .. mode.name, function()
      local p

      setup(function() p = start_proxy(mode.args .. ' -seed 7') end)
      teardown(function() stop_proxy(p) end)

      it('calls succeed through 503s and connection resets, and each retry is logged', function()
        faults(p, {
          'method=GET,path=' .. CM_PATH .. '/target,action=503,count=2',
          'method=GET,path=' .. CM_PATH .. '/target,action=reset,count=2',
          'method=PATCH,action=reset,count=1',
          'method=PATCH,action=503,count=1',
        })
        local res = run(p, [[
          local cm = kube.get('cm', 'target', { namespace = NS })
          local out = kube.patch('cm', 'target', { data = { n = tostring(tonumber(cm.data.n) + 1) } }, { namespace = NS })
          print(json.encode({ n = out.data.n, before = cm.data.n }))
        ]])
        must(res)
        assert.are.equal(tostring(tonumber(res.json.before) + 1), res.json.n)
        local c = counts(p)
        assert.are.equal(5, c.received['GET ' .. CM_PATH .. '/target'])
        assert.are.equal(1, c.forwarded['GET ' .. CM_PATH .. '/target'])
        assert.are.equal(3, c.received['PATCH ' .. CM_PATH .. '/target'])
        assert.are.equal(1, c.forwarded['PATCH ' .. CM_PATH .. '/target'])
        -- one "retrying" line per injected fault
        assert.are.equal(6, count_matches(res.err, 'retrying'))
        assert.matches('HTTP 503', res.err)
        local k = json.decode(must(h.kubectl('get configmap target -n ' .. NS .. ' -o json')).out)
        assert.are.equal(res.json.n, k.data.n)
      end)

      it('honours Retry-After on a 429 with a text body', function()
        faults(p, { 'method=GET,path=' .. CM_PATH .. '/target,action=429,retry-after=1,count=1' })
        local res = run(p, [[
          kube.resource('cm') -- discovery first, so only the GET is timed
          local t0 = kube.now()
          local cm = kube.get('cm', 'target', { namespace = NS })
          print(json.encode({ elapsed = kube.now() - t0, found = cm ~= nil }))
        ]])
        must(res)
        assert.is_true(res.json.found)
        assert.is_true(res.json.elapsed >= 1.0, 'retried after ' .. res.json.elapsed .. 's')
        assert.matches('retrying GET [^\n]* after HTTP 429', res.err)
        local c = counts(p)
        assert.are.equal(2, c.received['GET ' .. CM_PATH .. '/target'])
        assert.are.equal(1, c.forwarded['GET ' .. CM_PATH .. '/target'])
      end)

      it('retries a POST refused with 429, which the server never processed', function()
        local tag = 'r429' .. (mode.args == '' and 'h2' or 'h1')
        faults(p, { 'method=POST,action=429,retry-after=0,count=1' })
        local res = run(p, string.format([[
          local cm = kube.create('cm', { metadata = { generateName = 'r429-', namespace = NS, labels = { run = %q } } })
          print(json.encode({ name = cm.metadata.name }))
        ]], tag))
        must(res)
        local c = counts(p)
        assert.are.equal(2, c.received['POST ' .. CM_PATH])
        assert.are.equal(1, c.forwarded['POST ' .. CM_PATH])
        assert.are.same({ res.json.name }, kubectl_names('run=' .. tag))
      end)

      it('does not apply a POST twice when the connection breaks after the server applied it', function()
        local tag = 'reset' .. (mode.args == '' and 'h2' or 'h1')
        faults(p, { 'method=POST,action=reset-after,count=1' })
        local res = run(p, string.format([[
          kube.get('cm', 'target', { namespace = NS }) -- the connection is reused for the POST
          local ok, err = pcall(kube.create, 'cm', { metadata = { generateName = 'reset-', namespace = NS,
            labels = { run = %q } } })
          print(json.encode({ ok = ok, reason = err and err.reason, text = err and tostring(err) }))
        ]], tag))
        must(res)
        local c = counts(p)
        assert.are.equal(1, c.forwarded['POST ' .. CM_PATH])
        assert.are.equal(1, c.received['POST ' .. CM_PATH])
        assert.are.equal(1, #kubectl_names('run=' .. tag))
        assert.is_false(res.json.ok)
        assert.are.equal('ConnectionError', res.json.reason)
        assert.matches('^Unable to connect to the server: POST: the connection broke after the request was sent',
          res.json.text)
        assert.are.equal(0, count_matches(res.err, 'retrying POST'))
      end)

      it('does not repeat a POST whose connection broke before an answer, even if it never arrived', function()
        local tag = 'lost' .. (mode.args == '' and 'h2' or 'h1')
        faults(p, { 'method=POST,action=reset,count=1' })
        local res = run(p, string.format([[
          local ok, err = pcall(kube.create, 'cm', { metadata = { generateName = 'lost-', namespace = NS,
            labels = { run = %q } } })
          print(json.encode({ ok = ok, reason = err and err.reason }))
        ]], tag))
        must(res)
        assert.are.same({ ok = false, reason = 'ConnectionError' }, res.json)
        local c = counts(p)
        assert.are.equal(1, c.received['POST ' .. CM_PATH])
        assert.is_nil(c.forwarded['POST ' .. CM_PATH])
        assert.are.same({}, kubectl_names('run=' .. tag))
      end)

      it('does not retry a POST answered with 503', function()
        local tag = 'svc' .. (mode.args == '' and 'h2' or 'h1')
        faults(p, { 'method=POST,action=503,count=1' })
        local res = run(p, string.format([[
          local ok, err = pcall(kube.create, 'cm', { metadata = { generateName = 'svc-', namespace = NS,
            labels = { run = %q } } })
          print(json.encode({ ok = ok, code = err and err.code, reason = err and err.reason, text = tostring(err) }))
        ]], tag))
        must(res)
        assert.are.same(false, res.json.ok)
        assert.are.equal(503, res.json.code)
        assert.are.equal('ServiceUnavailable', res.json.reason)
        assert.matches('^Error from server %(ServiceUnavailable%)', res.json.text)
        local c = counts(p)
        assert.are.equal(1, c.received['POST ' .. CM_PATH])
        assert.is_nil(c.forwarded['POST ' .. CM_PATH])
        assert.are.same({}, kubectl_names('run=' .. tag))
        assert.are.equal(0, count_matches(res.err, 'retrying'))
      end)

      it('a list whose continue token expires without a fresh one lists again and yields each object once',
        function()
          faults(p, { 'method=GET,query=continue=,action=status,code=410,count=1' })
          local res = run(p, [[
            local names, seen, dup = {}, {}, 0
            for cm in kube.list('cm', { namespace = NS, label_selector = { set = 'pages' }, limit = 2 }) do
              if seen[cm.metadata.name] then dup = dup + 1 end
              seen[cm.metadata.name] = true
              names[#names + 1] = cm.metadata.name
            end
            table.sort(names)
            print(json.encode({ names = json.array(names), dup = dup }))
          ]])
          must(res)
          assert.are.same(kubectl_names('set=pages'), res.json.names)
          assert.are.equal(0, res.json.dup)
          assert.matches('continue token expired[^\n]*listing again from the start', res.err)
          assert.are.equal(1, counts(p).faulted['GET ' .. CM_PATH])
        end)

      it('survives a seeded mix of 503s and resets on most reads', function()
        faults(p, {
          'method=GET,path=' .. CM_PATH .. ',action=503,rate=0.15',
          'method=GET,path=' .. CM_PATH .. ',action=reset,rate=0.1',
        })
        local res = run(p, [[
          local n = 0
          for _ = 1, 40 do
            if kube.get('cm', 'target', { namespace = NS }) then n = n + 1 end
          end
          print(json.encode({ n = n, conns = kube.connections() }))
        ]])
        must(res)
        assert.are.equal(40, res.json.n)
        local c = counts(p)
        local faulted = c.faulted['GET ' .. CM_PATH .. '/target'] or 0
        assert.is_true(faulted > 0, 'the seed injected no fault')
        assert.are.equal(40, c.forwarded['GET ' .. CM_PATH .. '/target'])
        assert.are.equal(faulted, count_matches(res.err, 'retrying'))
      end)

      it('applies a kube.update once when the answer to its PUT is lost', function()
        local name = 'counter-' .. (mode.args == '' and 'h2' or 'h1')
        must(h.kubectl('create configmap ' .. name .. ' -n ' .. NS .. ' --from-literal=n=0'))
        faults(p, { 'method=PUT,path=' .. CM_PATH .. '/' .. name .. ',action=reset-after,count=1' })
        local res = run(p, string.format([[
          local calls = 0
          local obj = kube.update('cm', %q, function(cm)
            calls = calls + 1
            cm.data.n = tostring(tonumber(cm.data.n) + 1)
          end, { namespace = NS })
          print(json.encode({ calls = calls, n = obj.data.n }))
        ]], name))
        must(res)
        local c = counts(p)
        assert.are.equal(1, c.faulted['PUT ' .. CM_PATH .. '/' .. name])
        -- the first PUT landed (its answer was dropped), the repeat got 409
        assert.are.equal(2, c.forwarded['PUT ' .. CM_PATH .. '/' .. name])
        assert.are.same({ calls = 1, n = '1' }, res.json)
        assert.are.equal('1', h.kubectl_json('get configmap ' .. name .. ' -n ' .. NS).data.n)
        assert.matches('applied by an earlier attempt', res.err)
      end)

      it('retries a broken connection for the time --retry-for allows, logging each retry', function()
        faults(p, { 'method=GET,path=' .. CM_PATH .. '/target,action=reset' })
        local started = os.time()
        local res = run(p, [[
          kube.get('cm', 'target', { namespace = NS })
        ]], '--retry-for', '3s')
        assert.are.equal(1, res.code)
        local took = os.time() - started
        -- it stops when the next wait would pass the 3 s, never long after
        assert.is_true(took <= 6, 'gave up after ' .. took .. 's')
        assert.is_true(count_matches(res.err, 'retrying GET') >= 3, res.err)
        assert.matches('no time left to retry', res.err)
        faults(p, {})
      end)
    end)
  end
end)
