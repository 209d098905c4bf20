-- What a migration author sees when something is wrong: every script error
-- names the script's line, the verb and the object; a fleet whose fn forgot
-- `return true` is counted from its writes and told so; a timeout names the
-- header line it came from; `lua` and `exec` read the header as the runner
-- does; one bad header blocks only its own slug's runs; a dead proxy-url is
-- named.
local h = require('support.helpers')
local fixture = require('support.fixture')
local json = require('json')

local HEADER = '-- cozystack-migration: on-error=abort\n'

local function exec(body, ...)
  local dir = h.tmpdir()
  local f = h.write(dir .. '/m.lua', body)
  local args = { 'exec', ... }
  args[#args + 1] = 'm'
  args[#args + 1] = f
  local res = h.cozy(table.unpack(args))
  res.file = f
  res.json = json.decode(res.out:match('([^\n]+)\n?$') or 'null')
  return res
end

describe('#e2e author errors', function()
  local ns

  setup(function()
    h.need_cluster()
    ns = 'author-' .. h.unique()
    h.must(h.kubectl('create namespace ' .. ns))
  end)
  teardown(function() h.kubectl('delete namespace --wait=false ' .. ns) end)

  describe('a kube error that ends a script', function()
    it('names the line, the verb and the object', function()
      local res = exec(HEADER .. string.format([[
local kube = require('kube')

kube.patch('secrets', 'x', { data = {} }, { namespace = %q })
]], ns))
      assert.are.equal(1, res.code)
      assert.are.equal(res.file .. ':4: kube.patch secrets ' .. ns .. '/x: Error from server (NotFound): ' ..
        'secrets "x" not found', res.json.message)
    end)

    it('does so for each object a fleet failed on, at the line inside fn', function()
      h.must(h.kubectl('create configmap a -n ' .. ns))
      local res = exec(HEADER .. string.format([[
local kube, fleet = require('kube'), require('fleet')
fleet.each('configmaps', { namespace = %q, field_selector = 'metadata.name=a' }, function(cm)
  kube.get('secrets', cm.metadata.name, { namespace = %q })
  kube.delete('secrets', cm.metadata.name, { namespace = %q })
  return true
end)
]], ns, ns, ns))
      assert.are.equal(1, res.code)
      h.contains(res.json.message, res.file .. ':3: FleetFailed: configmaps: 1 of 1 objects failed')
      h.contains(res.json.message, ns .. '/a: ' .. res.file .. ':5: kube.delete secrets ' .. ns ..
        '/a: Error from server (NotFound)')
    end)

    it('leaves tostring(err) reading like kubectl for a script that catches it', function()
      local res = exec(HEADER .. string.format([[
local kube = require('kube')
local ok, err = pcall(kube.patch, 'secrets', 'x', { data = {} }, { namespace = %q })
print(tostring(err))
print(err.where)
]], ns))
      h.contains(res.err, '[m] Error from server (NotFound): secrets "x" not found\n')
      h.contains(res.err, '[m] ' .. res.file .. ':3\n')
    end)
  end)

  describe('a fleet whose fn changes objects without returning true', function()
    for _, n in ipairs({ 1, 8 }) do
      it('counts them from the writes and says so (concurrency ' .. n .. ')', function()
        local set = 'quiet' .. n
        for i = 1, 3 do
          h.must(h.kubectl(string.format('create configmap %s-%d -n %s', set, i, ns)))
          h.must(h.kubectl(string.format('label configmap %s-%d -n %s set=%s', set, i, ns, set)))
        end
        local res = exec(HEADER .. string.format([[
local kube, fleet = require('kube'), require('fleet')
local r = fleet.each('configmaps', { namespace = %q, label_selector = 'set=%s', concurrency = %d }, function(cm)
  if cm.metadata.name:match('%%-1$') then return false end  -- looked, changed nothing
  kube.patch('configmaps', cm.metadata.name, { data = { v = '1' } }, { namespace = %q })
end)
print(require('json').encode({ seen = r.seen, changed = r.changed, from_writes = r.from_writes }))
]], ns, set, n, ns))
        h.must(res)
        h.contains(res.err, string.format('configmaps: fn returned nothing (or false) for 2 object(s) its ' ..
          'writes changed (%s/%s-2, %s/%s-3): counted as changed from the write journal; return true from fn ' ..
          'when it changes an object', ns, set, ns, set))
        h.contains(res.err, 'configmaps: 3 seen, 2 changed (2 counted from the writes), 0 failed')
        assert.are.same({ 2, 2 }, { res.json.journal.writes, res.json.journal.changed })
        for _, kv in ipairs({ '"changed":2', '"from_writes":2', '"seen":3' }) do h.contains(res.err, kv) end
      end)
    end
  end)

  describe('the header, read by lua and exec as the runner reads it', function()
    local SLOW = HEADER .. '-- cozystack-migration: timeout=1s\nrequire("kube").sleep(2.5)\n'

    it("stops lua --dry-run at the header's timeout=, naming its line", function()
      -- a sleep of 30 s: stopped at the timeout, it returns long before,
      -- however slow the machine
      local f = h.write(h.tmpdir() .. '/slow.lua', (SLOW:gsub('sleep%(2%.5%)', 'sleep(30)')))
      local t0 = os.time()
      local res = h.cozy('lua', '--dry-run', f)
      assert.are.equal(1, res.code)
      h.contains(res.err, 'Timeout: timed out after 1s (timeout=1s, ' .. f .. ':2)')
      assert.is_true(os.time() - t0 < 20)
    end)

    it("stops exec at the header's timeout=, and --timeout still wins", function()
      local res = exec(SLOW)
      assert.are.equal('timed out after 1s (timeout=1s, ' .. res.file .. ':2)', res.json.message)
      res = exec(SLOW, '--timeout', '4s')
      assert.are.equal('ok', res.json.outcome)
    end)

    it('refuses a header that does not parse: exit 3, one line naming the line', function()
      for _, cmd in ipairs({ 'lua', 'exec' }) do
        local f = h.write(h.tmpdir() .. '/typo.lua', HEADER .. '-- cozystack-migration: timout=1s\n')
        local res = cmd == 'lua' and h.cozy('lua', f) or h.cozy('exec', 'typo', f)
        assert.are.equal(3, res.code, cmd)
        h.one_line(res.err)
        h.contains(res.err, f .. ":2: unknown header key 'timout'")
      end
    end)

    it('runs a file without any header with the defaults', function()
      local f = h.write(h.tmpdir() .. '/scratch.lua', 'print("scratch")\n')
      h.contains(h.must(h.cozy('lua', f)).out, 'scratch')
    end)
  end)

  it('names the header line of a migration the runner stops at its timeout', function()
    local dir = fixture.tree {
      batches = { { '99999-untagged', { 'slow-one' } } },
      scripts = { ['slow-one'] = { on_error = 'warn', timeout = '1s', body = 'while true do end' } },
    }
    local rns = 'author-run-' .. h.unique()
    h.must(h.kubectl('create namespace ' .. rns))
    h.cozy('run', '--dir', dir, '--namespace', rns) -- the fresh install: records, runs nothing
    h.cozy('run', '--dir', dir, '--namespace', rns, '--only', 'slow-one')
    local rec = json.decode(h.kubectl_json('get configmap cozystack-version -n ' .. rns).data['m.slow-one'])
    assert.are.equal('timed out after 1s (timeout=1s, ' .. dir .. '/migrations/pre-apply/slow-one.lua:2)',
      rec.message)
  end)

  describe('one bad header', function()
    local dir, rns
    local BAD = "unknown header key 'timout'"
    setup(function()
      dir = fixture.tree {
        batches = { { '99999-untagged', { 'broken', 'fine' } } },
        scripts = {
          broken = { header = HEADER .. '-- cozystack-migration: timout=1s' },
          fine = { body = 'require("log").info("fine ran")' },
        },
      }
      rns = 'author-hdr-' .. h.unique()
      h.must(h.kubectl('create namespace ' .. rns))
    end)

    it('makes a run of the whole tier refuse before anything runs (exit 3)', function()
      for _, cmd in ipairs({ 'run', 'plan' }) do
        local res = h.cozy(cmd, '--dir', dir, '--namespace', rns)
        assert.are.equal(3, res.code, cmd)
        h.contains(res.err, BAD)
      end
    end)

    it('lets --only of another slug run, saying which header is broken', function()
      local res = h.must(h.cozy('run', '--dir', dir, '--namespace', rns, '--only', 'fine'))
      h.contains(res.err, '[fine] info: fine ran')
      h.contains(res.err, BAD .. ' (on-error, requires, timeout, dry-run) (it fails only its own runs; ' ..
        '`run` of the whole tier refuses it)')
    end)

    it('refuses --only of the slug itself (exit 3)', function()
      local res = h.cozy('run', '--dir', dir, '--namespace', rns, '--only', 'broken')
      assert.are.equal(3, res.code)
      h.one_line(res.err)
      h.contains(res.err, BAD)
    end)

    it('lets status show the ledger, saying which header is broken', function()
      local res = h.must(h.cozy('status', '--dir', dir, '--namespace', rns))
      h.contains(res.out, 'fine')
      h.contains(res.err, BAD)
    end)

    it('fails lint', function()
      local res = h.cozy('lint', '--dir', dir)
      assert.are.equal(3, res.code)
      h.contains(res.out, 'migrations/pre-apply/broken.lua:2: header: ' .. BAD)
    end)
  end)

  it('names a dead proxy-url (without its password) when the cluster cannot be reached', function()
    local view = h.kubectl_json('config view --raw --minify --context testenv')
    view.clusters[1].cluster['proxy-url'] = 'http://user:s3cret@127.0.0.1:9'
    local kc = h.write(h.tmpdir() .. '/kubeconfig', json.encode(view))
    local res = exec(HEADER .. 'require("kube").get("configmaps", "x", { namespace = "default" })\n',
      '--kubeconfig', kc, '--retry-for', '1s')
    h.contains(res.json.message, 'proxy-url http://***@127.0.0.1:9 (the kubeconfig\'s proxy to ' ..
      view.clusters[1].cluster.server .. ') failed: ')
    h.lacks(res.out .. res.err, 's3cret')
  end)
end)
