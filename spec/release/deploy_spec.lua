-- deploy/: every manifest, and the Helm snippet rendered with its values,
-- is accepted by the real apiserver (kubectl apply --dry-run=server), and
-- the hook's shape holds: hook annotations, backoffLimit, a deadline above
-- the lock wait plus the migrations' timeouts, non-root, the image's
-- entrypoint arguments.
local h = require('support.helpers')
local yaml = require('yaml')

local DEPLOY = h.root .. '/deploy'

-- The template uses plain {{ .Values.x.y }} substitutions, `| quote`, and
-- one `with`/`toYaml | nindent` block: rendered here without helm.
local function render(template, values)
  local function lookup(path)
    local v = values
    for k in path:gmatch('[^.]+') do v = v[k] end
    return v
  end
  local out, skipping = {}, false
  local lines = {}
  for l in (template .. '\n'):gmatch('([^\n]*)\n') do lines[#lines + 1] = l end
  local i = 1
  while i <= #lines do
    local l = lines[i]
    local with = l:match('^%s*{{%- with %.Values%.([%w.]+) }}$')
    if l:match('^{{%- /%*') then
      while not lines[i]:find('%*/}}') do i = i + 1 end
    elseif with then
      local indent = tonumber(lines[i + 1]:match('nindent (%d+)'))
      local list = lookup(with)
      for _, e in ipairs(list or {}) do
        out[#out + 1] = string.rep(' ', indent) .. '- name: ' .. e.name
        out[#out + 1] = string.rep(' ', indent) .. '  value: ' .. string.format('%q', e.value)
      end
      assert(lines[i + 2]:match('{{%- end }}'), 'with block: expected end')
      i = i + 2
    else
      l = l:gsub('{{ %.Values%.([%w.]+) | quote }}', function(p) return string.format('%q', tostring(lookup(p))) end)
      l = l:gsub('{{ %.Values%.([%w.]+) }}', function(p) return tostring(lookup(p)) end)
      assert(not l:find('{{', 1, true), 'unrendered: ' .. l)
      out[#out + 1] = l
    end
    i = i + 1
  end
  return table.concat(out, '\n') .. '\n'
end

local function docs(text)
  local out = {}
  for doc in ('\n' .. text .. '\n---\n'):gmatch('\n(.-)\n%-%-%-') do
    local d = yaml.decode(doc)
    if d then out[#out + 1] = d end
  end
  return out
end

local function duration_s(s)
  local n, u = s:match('^(%d+)([smh])$')
  return tonumber(n) * ({ s = 1, m = 60, h = 3600 })[u]
end

local function job_of(list)
  for _, d in ipairs(list) do if d.kind == 'Job' then return d end end
end

local function lock_timeout(job)
  local args = job.spec.template.spec.containers[1].args
  for i, a in ipairs(args) do if a == '--lock-timeout' then return duration_s(args[i + 1]) end end
end

describe('deploy/', function()
  local values, rendered
  setup(function()
    values = yaml.decode(h.slurp(DEPLOY .. '/helm/values.yaml'))
    rendered = render(h.slurp(DEPLOY .. '/helm/templates/migrations-hook.yaml'), values)
  end)

  it('the hook Job is a pre-upgrade,pre-install hook with a backoff and a deadline above its timeouts', function()
    for _, text in ipairs({ h.slurp(DEPLOY .. '/hook-job.yaml'), rendered }) do
      local list = docs(text)
      assert.are.equal(3, #list)
      for _, d in ipairs(list) do
        assert.are.equal('pre-upgrade,pre-install', d.metadata.annotations['helm.sh/hook'])
        assert.is_truthy(d.metadata.annotations['helm.sh/hook-delete-policy']:find('before-hook-creation', 1, true))
      end
      local job = job_of(list)
      assert.is_true(job.spec.backoffLimit >= 1)
      assert.is_true(job.spec.activeDeadlineSeconds > lock_timeout(job) + values.migrations.migrationsTimeoutSeconds)
      assert.are.equal(65534, job.spec.template.spec.securityContext.runAsUser)
      local env = {}
      for _, e in ipairs(job.spec.template.spec.containers[1].env) do env[e.name] = e end
      assert.is_truthy(env.NAMESPACE and env.MIGRATIONS_IMAGE and env.SKIP and env.SKIP_REASON)
    end
    assert.are.equal(values.migrations.lockTimeoutSeconds, lock_timeout(job_of(docs(rendered))))
    local env = job_of(docs(rendered)).spec.template.spec.containers[1].env
    assert.are.same({ name = 'CLUSTER_DOMAIN', value = 'cozy.local' }, env[#env])
  end)

  it('the --only and background Jobs run one slug and the background tier, with a deadline', function()
    local only = job_of(docs(h.slurp(DEPLOY .. '/only-job.yaml')))
    assert.are.equal('ONLY', only.spec.template.spec.containers[1].env[1].name)
    local bg = job_of(docs(h.slurp(DEPLOY .. '/background-job.yaml')))
    assert.are.same({ '--tier', 'background', '--lock-timeout', '5m' }, bg.spec.template.spec.containers[1].args)
    for _, j in ipairs({ only, bg }) do
      assert.is_nil(j.metadata.annotations, 'not a hook')
      assert.is_true(j.spec.activeDeadlineSeconds > lock_timeout(j))
    end
  end)

  it('every manifest passes the apiserver with server-side dry run', function()
    if not h.has_cluster() then
      pending('needs the local apiserver (KUBECONFIG)')
      return
    end
    local ns = h.kubectl('get namespace cozy-system')
    if ns.code ~= 0 then h.must(h.kubectl('create namespace cozy-system')) end
    local files = { DEPLOY .. '/hook-job.yaml', DEPLOY .. '/only-job.yaml', DEPLOY .. '/background-job.yaml',
      h.write(os.tmpname() .. '.yaml', rendered) }
    for _, f in ipairs(files) do
      local res = h.kubectl('apply --dry-run=server -f ' .. h.q(f))
      assert.are.equal(0, res.code, f .. ': ' .. res.err)
      assert.matches('(server dry run)', res.out, 1, true)
    end
    -- and the server does check: a broken Job is refused
    local bad = h.write(os.tmpname() .. '.yaml', (h.slurp(files[3]):gsub('backoffLimit: 0', 'backoffLimit: many')))
    assert.are_not.equal(0, h.kubectl('apply --dry-run=server -f ' .. h.q(bad)).code)
  end)
end)
