-- Helpers the specs share: run a command and capture its exit code, stdout
-- and stderr; write files into a temporary directory; reach the built binary
-- and the test cluster's kubectl.
local M = {}

-- Absolute, so specs that cd elsewhere (or build into it) land in the repo.
M.root = os.getenv('COZY_ROOT')
if not M.root or M.root == '' then
  local p = io.popen('pwd')
  M.root = p:read('l')
  p:close()
end
M.bin = os.getenv('COZY_MIGRATE') or (M.root .. '/build/cozy-migrate')
M.testenv = M.root .. '/tools/testenv'

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.q = shell_quote

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return '' end
  local s = f:read('a')
  f:close()
  return s
end
M.slurp = slurp

function M.write(path, content)
  local f = assert(io.open(path, 'wb'))
  f:write(content)
  f:close()
  return path
end

function M.tmpdir()
  local p = io.popen('mktemp -d')
  local d = p:read('l')
  p:close()
  return d
end

-- run(cmd) -> {code=, out=, err=}; cmd is a shell string.
function M.run(cmd)
  local out, err = os.tmpname(), os.tmpname()
  local ok, how, code = os.execute(string.format('%s >%s 2>%s', cmd, out, err))
  local res = { out = slurp(out), err = slurp(err) }
  os.remove(out)
  os.remove(err)
  if how == 'signal' then res.code = 128 + code else res.code = code end
  res.ok = ok and true or false
  return res
end

-- cozy(args..., {env = {K = V}}) runs the built binary.
function M.cozy(...)
  local args = { ... }
  local env = ''
  if type(args[#args]) == 'table' then
    local e = table.remove(args)
    for k, v in pairs(e.env or {}) do env = env .. k .. '=' .. shell_quote(v) .. ' ' end
  end
  local parts = {}
  for i, a in ipairs(args) do parts[i] = shell_quote(a) end
  return M.run(string.format('env %s%s %s', env, shell_quote(M.bin), table.concat(parts, ' ')))
end

-- lua(source [, flags...] [, {env=}]) writes source to a temp file and runs
-- `cozy-migrate lua FLAGS... FILE`.
function M.lua(source, ...)
  local f = M.write(os.tmpname() .. '.lua', source)
  local args = { 'lua', ... }
  local env = type(args[#args]) == 'table' and table.remove(args) or nil
  args[#args + 1] = f
  if env then args[#args + 1] = env end
  local res = M.cozy(table.unpack(args))
  os.remove(f)
  return res
end

-- must(res) asserts a command exited 0 and returns its result.
function M.must(res)
  require('luassert').are.equal(0, res.code, res.err)
  return res
end

-- kube_script(vars, body [, flags...]) runs body in the sandbox with kube,
-- json and kube.core (as core) required and each of vars defined as a local
-- string; the script's last stdout line, when JSON, is decoded into res.json.
function M.kube_script(vars, body, ...)
  local names = {}
  for k in pairs(vars) do names[#names + 1] = k end
  table.sort(names)
  local pre = { "local kube = require('kube')", "local json = require('json')",
    "local core = require('kube.core')" }
  for _, k in ipairs(names) do pre[#pre + 1] = string.format('local %s = %q', k, vars[k]) end
  local res = M.lua(table.concat(pre, '\n') .. '\n' .. body, ...)
  local last = res.out:match('([^\n]*)\n?$')
  if last and last ~= '' then res.json = require('json').decode(last) end
  return res
end

-- kapply(obj) applies an object (a table) with the testenv kubectl.
function M.kapply(obj)
  local f = M.write(os.tmpname() .. '.json', require('json').encode(obj))
  local res = M.must(M.kubectl('apply -f ' .. f))
  os.remove(f)
  return res
end

-- kubectl_json(args) runs `kubectl ARGS -o json` and decodes the output.
function M.kubectl_json(args)
  return require('json').decode(M.must(M.kubectl(args .. ' -o json')).out)
end

function M.kubectl(args)
  return M.run(shell_quote(M.testenv) .. ' kubectl ' .. args)
end

-- kc(args) runs kubectl against the cluster in $KUBECONFIG (a kind cluster,
-- or the testenv whose kubeconfig tools/run-tests exports), falling back to
-- the testenv's when KUBECONFIG is unset. Specs that must also pass on kind
-- use kc; h.kubectl always means the testenv (its contexts, e.g.
-- testenv-reader, exist nowhere else). The binary is the one built for the
-- testenv when present, else kubectl from PATH.
function M.kc(args)
  local kubeconfig = os.getenv('KUBECONFIG')
  if not kubeconfig or kubeconfig == '' then return M.kubectl(args) end
  local bin = M.root .. '/build/testenv/bin/kubectl'
  local f = io.open(bin, 'rb')
  if f then f:close() else bin = 'kubectl' end
  return M.run(string.format('%s --kubeconfig %s %s', shell_quote(bin), shell_quote(kubeconfig), args))
end

-- kc_json(args) runs `kubectl ARGS -o json` through kc and decodes the output.
function M.kc_json(args)
  return require('json').decode(M.must(M.kc(args .. ' -o json')).out)
end

function M.has_cluster()
  return os.getenv('KUBECONFIG') ~= nil and os.getenv('KUBECONFIG') ~= ''
end

return M
