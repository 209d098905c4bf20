-- Helpers the specs share: run a command and capture its exit code, stdout
-- and stderr; write files into a temporary directory; reach the built binary
-- and the test cluster's kubectl.
local M = {}

M.root = os.getenv('COZY_ROOT') or '.'
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

function M.kubectl(args)
  return M.run(shell_quote(M.testenv) .. ' kubectl ' .. args)
end

function M.has_cluster()
  return os.getenv('KUBECONFIG') ~= nil and os.getenv('KUBECONFIG') ~= ''
end

return M
