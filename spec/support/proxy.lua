-- The fault-injecting proxy (tools/cluster/faultproxy) in front of the
-- local apiserver, for specs that prove what survives 429s, 5xx and broken
-- connections. start(args) compiles it once per run (build(): go's cache
-- makes a repeat cheap, not free: 2 to 5 s on a loaded machine, in each of
-- eight spec files), runs one on a free loopback port and writes a kubeconfig that
-- trusts it (the proxy adds the admin identity upstream); faults() replaces
-- its rules and counters; counts() reads what it received and forwarded;
-- log() what it printed.
local h = require('support.helpers')
local json = require('json')

local M = {}
local PROXY = h.root .. '/build/testenv/bin/faultproxy'

function M.build()
  local run = h.this_run()
  if run.faultproxy_built then return end
  h.must(h.run(string.format('cd %s/tools/cluster && go build -o %s ./faultproxy', h.q(h.root), h.q(PROXY))))
  run.faultproxy_built = true
end

-- start(args) -> {pid, port, ca, dir, kubeconfig}
function M.start(args)
  M.build()
  local p = { dir = h.tmpdir() }
  p.ca = p.dir .. '/ca.pem'
  -- not through h.run: its own redirections would take the echo's output
  assert(os.execute(string.format('%s -port-file %s -ca-file %s %s >%s 2>&1 & echo $! >%s',
    h.q(PROXY), h.q(p.dir .. '/port'), h.q(p.ca), args or '', h.q(p.dir .. '/log'), h.q(p.dir .. '/pid'))))
  p.pid = assert(h.slurp(p.dir .. '/pid'):match('%d+'), 'no pid for faultproxy')
  for _ = 1, 100 do
    p.port = h.slurp(p.dir .. '/port'):match('%d+')
    if p.port then break end
    h.sleep(0.1)
  end
  assert(p.port, 'faultproxy did not start: ' .. h.slurp(p.dir .. '/log'))
  p.kubeconfig = h.write(p.dir .. '/kubeconfig', string.format([[
apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: "https://127.0.0.1:%s", certificate-authority: %s}
users:
- name: nobody
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: nobody}
current-context: proxy
]], p.port, p.ca))
  -- the testenv behind a proxy: judged disposable as the testenv is
  require('support.disposable').derived(p.kubeconfig)
  return p
end

function M.stop(p)
  if p and p.pid then require('luassert').is_true(os.execute('kill ' .. p.pid)) end
end

local function control(p, method, what, body)
  local args = ''
  if body then
    args = '--data-binary @' .. h.q(h.write(p.dir .. '/body.json', json.encode(body)))
  end
  local res = h.must(h.run(string.format('curl -sS -f --cacert %s -X %s %s https://127.0.0.1:%s/_faultproxy/%s',
    h.q(p.ca), method, args, p.port, what)))
  return res.out ~= '' and json.decode(res.out) or nil
end

function M.faults(p, specs) control(p, 'PUT', 'faults', json.array(specs)) end
function M.counts(p) return control(p, 'GET', 'counts') end
-- log(p, n) -> the last n lines the proxy printed (its faults, upstream errors)
function M.log(p, n)
  local lines = {}
  for l in (h.slurp(p.dir .. '/log') or ''):gmatch('[^\n]+') do lines[#lines + 1] = l end
  return table.concat(lines, '\n', math.max(1, #lines - (n or 40) + 1))
end

return M
