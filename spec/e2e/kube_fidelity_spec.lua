-- JSON fidelity through a real round trip (apiserver -> Lua -> apiserver),
-- and dry run: with --dry-run (or DRY_RUN=1) every write is validated by the
-- apiserver and persisted by none, which kubectl confirms.
local h = require('support.helpers')
local json = require('json')

local NS = string.format('kf-%d-%d', os.time(), math.random(1000, 9999))
local SUFFIX = string.format('%d%d', os.time() % 100000, math.random(100, 999))
local GROUP = 'f' .. SUFFIX .. '.cozystack.io'
local PLURAL = 'apps' .. SUFFIX
local CR = PLURAL .. '.' .. GROUP

local must = h.must

local function run(body, ...)
  return h.kube_script({ NS = NS, CR = CR }, body, ...)
end

local function kget(what)
  local k = must(h.kubectl('get ' .. what .. ' -n ' .. NS .. ' -o json'))
  return json.decode(k.out), k.out
end

-- The fields whose JSON shape a Lua round trip could lose.
local SPEC = {
  empty_list = json.array(),
  nested = { lists = json.array { json.array(), json.array { 1, 2 } }, empty_object = json.object() },
  count = 3,
  big = 9007199254740991, -- 2^53 - 1
  negative = -42,
  ratio = 0.25,
  flag = false,
  nothing_here = json.null,
}

describe('#e2e kube JSON fidelity and dry run', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    h.apply_crd({
      apiVersion = 'apiextensions.k8s.io/v1', kind = 'CustomResourceDefinition',
      metadata = { name = CR },
      spec = { group = GROUP, scope = 'Namespaced',
        names = { plural = PLURAL, singular = PLURAL:sub(1, -2), kind = 'App' .. SUFFIX },
        versions = json.array { { name = 'v1', served = true, storage = true,
          schema = { openAPIV3Schema = { type = 'object', ['x-kubernetes-preserve-unknown-fields'] = true } } } } },
    })
    h.kapply({ apiVersion = GROUP .. '/v1', kind = 'App' .. SUFFIX,
      metadata = { name = 'round', namespace = NS }, spec = SPEC })
    -- a ConfigMap holding a custom resource as JSON text, as Helm values do
    local embedded = json.encode({ apiVersion = GROUP .. '/v1', kind = 'App' .. SUFFIX,
      metadata = { name = 'inner' }, spec = SPEC })
    h.kapply({ apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'holder', namespace = NS },
      data = { ['app.json'] = embedded } })
  end)

  teardown(function()
    h.kubectl('delete ' .. CR .. ',configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete crd ' .. CR .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  local function check_spec(spec, raw)
    assert.is_true(json.is_array(spec.empty_list))
    assert.are.equal(0, #spec.empty_list)
    assert.is_true(json.is_array(spec.nested.lists[1]))
    assert.are.same({ 1, 2 }, spec.nested.lists[2])
    assert.is_false(json.is_array(spec.nested.empty_object))
    assert.are.equal(nil, next(spec.nested.empty_object))
    for _, k in ipairs({ 'count', 'big', 'negative' }) do
      assert.are.equal('integer', math.type(spec[k]), k)
      assert.are.equal(SPEC[k], spec[k], k)
    end
    assert.are.equal(0.25, spec.ratio)
    assert.is_false(spec.flag)
    -- and the text itself: [] stays [], {} stays {}, integers have no ".0"
    assert.matches('"empty_list":%s*%[%]', raw)
    assert.matches('"empty_object":%s*{}', raw)
    assert.matches('"big":%s*9007199254740991[,}\n ]', raw)
    assert.matches('"count":%s*3[,}\n ]', raw)
  end

  it('keeps empty arrays, empty objects and integers of a custom resource through get and replace', function()
    local before, before_raw = kget(CR .. ' round')
    check_spec(before.spec, before_raw)
    must(run [[
      local app = kube.get(CR, 'round', { namespace = NS })
      app.spec.touched = 1
      kube.replace(CR, app)
    ]])
    local after, raw = kget(CR .. ' round')
    assert.are.equal(1, after.spec.touched)
    assert.are_not.equal(before.metadata.resourceVersion, after.metadata.resourceVersion)
    check_spec(after.spec, raw)
  end)

  it('keeps them in a custom resource embedded as JSON text in a ConfigMap', function()
    must(run [[
      local holder = kube.get('cm', 'holder', { namespace = NS })
      local app = assert(json.decode(holder.data['app.json']))
      app.spec.touched = 2
      kube.patch('cm', 'holder', { data = { ['app.json'] = json.encode(app) } }, { namespace = NS })
    ]])
    local holder = kget('configmap holder')
    local text = holder.data['app.json']
    local app = json.decode(text)
    assert.are.equal(2, app.spec.touched)
    check_spec(app.spec, text)
  end)

  describe('dry run', function()
    local function state()
      local cm = kget('configmap holder')
      local names = {}
      for _, o in ipairs(kget('configmaps').items) do names[#names + 1] = o.metadata.name end
      table.sort(names)
      return { rv = cm.metadata.resourceVersion, labels = cm.metadata.labels, names = names }
    end

    local WRITES = [[
      local made = kube.create('cm', { metadata = { name = 'dry-new', namespace = NS } })
      local patched = kube.patch('cm', 'holder', { metadata = { labels = { dry = 'run' } } }, { namespace = NS })
      local applied = kube.apply('cm', { metadata = { name = 'dry-applied', namespace = NS }, data = { a = 'b' } })
      local h = kube.get('cm', 'holder', { namespace = NS })
      h.data.extra = 'x'
      local replaced = kube.replace('cm', h)
      local deleted = kube.delete('cm', 'holder', { namespace = NS, wait = true })
      local ok, err = pcall(kube.create, 'cm', { metadata = { name = 'Bad_Name', namespace = NS } })
      print(json.encode({ dry = kube.dry_run, made = made.metadata.name, label = patched.metadata.labels.dry,
        applied = applied.data.a, replaced = replaced.data.extra, deleted = deleted, invalid = err and err.code }))
    ]]

    local function check(res, before)
      must(res)
      -- the server answered as if each write had happened, and still validated
      assert.are.same({ dry = true, made = 'dry-new', label = 'run', applied = 'b', replaced = 'x', deleted = true,
        invalid = 422 }, res.json)
      assert.are.same(before, state())
    end

    it('--dry-run: create, patch, apply, replace and delete change nothing', function()
      local before = state()
      check(run(WRITES, '--dry-run'), before)
    end)

    it('DRY_RUN=1 does the same', function()
      local before = state()
      check(run(WRITES, { env = { DRY_RUN = '1' } }), before)
    end)

    it('without it the same writes land (the check above can fail)', function()
      local res = run(WRITES)
      must(res)
      assert.is_false(res.json.dry)
      assert.are.equal(0, h.kubectl('get configmap dry-new -n ' .. NS).code)
      assert.are.equal('b', kget('configmap dry-applied').data.a)
      assert.are_not.equal(0, h.kubectl('get configmap holder -n ' .. NS).code)
    end)
  end)
end)
