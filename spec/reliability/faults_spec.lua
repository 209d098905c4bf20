-- Retries under faults, as repeated trials: `cozy-migrate run` talks to the
-- apiserver only through tools/cluster/faultproxy, which fails about 20% of
-- ALL requests (the migration's and the runner's own: lease, ledger,
-- Events): 429 with Retry-After 1, 503, the connection reset before the
-- request is forwarded, and reset after the apiserver acted on it. The
-- migration patches a label onto every object of a fleet (1,000; 100 in the
-- short form) and creates 200 objects (20) with generateName, each once: a
-- create whose answer was lost is looked up by its label before it is sent
-- again, as a careful author writes it. A run that fails (a request out of
-- retries) must fail cleanly; it is run again, at most 5 times in all.
-- Then, read directly from the apiserver: every object patched, exactly one
-- object per create (a POST the engine repeated after it was applied would
-- make two), the proxy forwarded exactly that many POSTs, and the ledger
-- records the migration ok once.
local h = require('support.helpers')
local T = require('support.trials')
local P = require('support.proxy')
T.bind(it, function(msg) pending(msg) end)

local TRIALS = T.count('faults', 1, 3)
local FLEET = T.count('faults-fleet', 100, 1000)
local MADE = T.count('faults-made', 20, 200)
local RULES = {
  'action=429,retry-after=1,rate=0.04',
  'action=503,rate=0.08',
  'action=reset,rate=0.05',
  'action=reset-after,rate=0.04',
}

local function migration(ns)
  return string.format([==[
-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=30m
local kube = require('kube')
local log = require('log')
local NS, MADE = %q, %d
local todo = {}
for cm in kube.list('configmaps', { namespace = NS, label_selector = 'trial/fleet=1' }) do
  if (cm.metadata.labels or {})['trial/patched'] ~= 'yes' then todo[#todo + 1] = cm.metadata.name end
end
for _, name in ipairs(todo) do
  kube.patch('configmaps', name, { metadata = { labels = { ['trial/patched'] = 'yes' } } }, { namespace = NS })
end
local function exists(idx)
  for _ in kube.list('configmaps', { namespace = NS, label_selector = 'trial/made=' .. idx }) do return true end
  return false
end
local have = {}
for cm in kube.list('configmaps', { namespace = NS, label_selector = 'trial/made' }) do
  have[cm.metadata.labels['trial/made']] = true
end
local lost = 0
for i = 1, MADE do
  local idx = string.format('%%03d', i)
  local tries = 0
  while not have[idx] do
    tries = tries + 1
    local ok, err = pcall(kube.create, 'configmaps',
      { metadata = { generateName = 'made-', labels = { ['trial/made'] = idx } } }, { namespace = NS })
    if ok then
      have[idx] = true
    else
      -- not repeated by the engine: it may or may not have been applied
      if type(err) ~= 'table' or tries >= 10 then error(err, 0) end
      lost = lost + 1
      have[idx] = exists(idx)
    end
  end
end
log.info(string.format('patched %%d, creates whose answer was lost %%d', #todo, lost))]==], ns, MADE)
end

describe('#reliability retries through faults', function()
  local c, proxy

  setup(function()
    c = T.default_cluster()
    P.build()
    proxy = P.start(string.format('-kubeconfig %s -seed %d', h.q(c.kubeconfig), math.random(1, 1e9)))
  end)

  teardown(function()
    P.stop(proxy)
    c.cleanup()
  end)

  for i = 1, TRIALS do
    T.trial('faults: 20% 429/503/resets', string.format(
      'patches %d objects and creates %d through ~20%% faults, nothing twice (trial %d/%d)', FLEET, MADE, i, TRIALS),
      function()
        local ns = c.new_ns('rel-faults')
        c.empty_ledger(ns)
        -- the fleet, made directly (not through the proxy)
        h.must(h.lua(string.format([[
local kube = require('kube')
for i = 1, %d do
  kube.create('configmaps', { metadata = { name = string.format('f-%%04d', i), labels = { ['trial/fleet'] = '1' } } },
    { namespace = %q })
end]], FLEET, ns), '--timeout', '10m', { env = { KUBECONFIG = c.kubeconfig } }), 'create the fleet')
        local dir = h.tmpdir()
        assert(os.execute(string.format('mkdir -p %s/migrations/pre-apply %s/migrations/order.d %s/legacy-sh/lib',
          h.q(dir), h.q(dir), h.q(dir))))
        h.write(dir .. '/migrations/order.d/00001-v1.0.0', 'fleet-faults\n')
        h.write(dir .. '/migrations/revoked', '')
        h.write(dir .. '/migrations/pre-apply/fleet-faults.lua', migration(ns) .. '\n')
        P.faults(proxy, RULES)

        local codes, runs = {}, 0
        repeat
          runs = runs + 1
          local res = h.run(c.run_cmd(dir, ns, '--lease-duration 5s --lock-timeout 60s', proxy.kubeconfig))
          codes[#codes + 1] = tostring(res.code)
          if res.code ~= 0 then
            local last = res.err:gsub('%s+$', ''):match('([^\n]*)$')
            T.note(string.format('run %d exit %d: %s', runs, res.code, last:sub(1, 200)))
          end
          -- a clean failure: an exit code of docs/operating.md's table, never a signal
          assert.is_true(res.code >= 0 and res.code <= 7, 'run ' .. runs .. ' exited ' .. res.code .. ': ' .. res.err)
        until res.code == 0 or runs == 5
        local counts = P.counts(proxy)
        local received, faulted = 0, 0
        for _, n in pairs(counts.received) do received = received + n end
        for _, n in pairs(counts.faulted) do faulted = faulted + n end
        T.note(string.format('%d requests, %d faulted (%.0f%%), runs: exit %s', received, faulted,
          100 * faulted / math.max(received, 1), table.concat(codes, ', ')))
        assert.are.equal('0', codes[#codes], 'no run completed in 5: exit codes ' .. table.concat(codes, ', '))

        local patched = T.labelled(c, ns, 'trial/patched')
        assert.are.equal(FLEET, patched.yes or 0, 'objects patched')
        local made, dup, missing = T.labelled(c, ns, 'trial/made'), {}, {}
        for k = 1, MADE do
          local n = made[string.format('%03d', k)] or 0
          if n > 1 then dup[#dup + 1] = string.format('%03d x%d', k, n) end
          if n == 0 then missing[#missing + 1] = string.format('%03d', k) end
        end
        T.check(dup, 'creates applied more than once')
        T.check(missing, 'creates missing')
        local made_total = 0
        for _, n in pairs(made) do made_total = made_total + n end
        assert.are.equal(MADE, made_total, 'objects created')
        local posts = counts.forwarded['POST /api/v1/namespaces/' .. ns .. '/configmaps'] or 0
        assert.are.equal(MADE, posts, 'POSTs the proxy forwarded to the apiserver')
        local recs, problems = T.ledger(c, ns)
        T.check(problems, 'the ledger')
        assert.are.same({ state = 'ok', attempts = 1 }, recs['fleet-faults'], 'the record')
      end)
  end
end)
