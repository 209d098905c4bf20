-- Helpers the specs share: run a command and capture its exit code, stdout
-- and stderr; write files into a temporary directory; reach the binary that
-- runs the specs and the test cluster's kubectl.
--
-- Shipped with the engine (`cozy-migrate spec` finds it in share/
-- cozy-migrate/spec, or this checkout's spec/): a platform repository's
-- specs require it as they are, with nothing of this checkout around.
local M = {}

local function cwd()
  local p = io.popen('pwd')
  local d = p:read('l')
  p:close()
  return d
end

local function absolute(path)
  if path:sub(1, 1) == '/' then return path end
  return cwd() .. '/' .. path
end

local function exists(path)
  local f = io.open(path, 'rb')
  if f then f:close() end
  return f ~= nil
end

-- What `cozy-migrate spec` says about this run (host/cli/script.c): its
-- id, the binary, the harness directory; {} outside it.
local function this_run()
  local ok, migrate = pcall(require, 'migrate')
  return ok and type(migrate) == 'table' and type(migrate.run) == 'table' and migrate.run or {}
end
M.this_run = this_run

-- The tree the specs are about: COZY_ROOT, else the directory the specs
-- run from (a platform repository's root). Absolute, so specs that cd
-- elsewhere (or build into it) still find it.
M.root = os.getenv('COZY_ROOT')
if not M.root or M.root == '' then M.root = cwd() end
M.root = absolute(M.root)
-- The binary: COZY_MIGRATE, else the one running these specs, else the
-- checkout's build.
M.bin = os.getenv('COZY_MIGRATE')
if not M.bin or M.bin == '' then M.bin = this_run().bin or (M.root .. '/build/cozy-migrate') end
M.bin = absolute(M.bin)
-- This checkout's local apiserver (tools/testenv); absent in a platform
-- repository, where the specs use the cluster in KUBECONFIG.
M.testenv = M.root .. '/tools/testenv'

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.q = shell_quote

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return '' end
  -- a /proc file of a process that just ended opens but fails to read
  local s = f:read('a') or ''
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

-- Scratch files and directories go under COZY_SPEC_TMP when tools/run-tests
-- sets it: the one place beside its own a confined shell migration may
-- read and write (COZY_SHELL_RW), so a spec's script can write a file the
-- spec reads. os.tmpname too, for the specs that use it directly.
local spec_tmp = os.getenv('COZY_SPEC_TMP')
if spec_tmp and spec_tmp ~= '' then
  rawset(os, 'tmpname', function()
    local p = assert(io.popen('mktemp -p ' .. shell_quote(spec_tmp)))
    local name = p:read('l')
    p:close()
    return assert(name, 'mktemp in COZY_SPEC_TMP failed')
  end)
end

function M.tmpdir()
  local base = os.getenv('COZY_SPEC_TMP')
  local p = io.popen(base and base ~= '' and ('mktemp -d -p ' .. shell_quote(base)) or 'mktemp -d')
  local d = p:read('l')
  p:close()
  return d
end

-- private_tmpdir(): a directory in /tmp, outside what a confined shell
-- migration may read (docs/testing.md): for the runner's own credentials
-- (a service-account directory, a kubeconfig) when a case needs a script
-- not to see them, and when the scratch directory must not hold them.
function M.private_tmpdir()
  local base = os.getenv('COZY_SPEC_PRIVATE')
  local p = io.popen(base and base ~= '' and ('mktemp -d -p ' .. shell_quote(base))
    or 'mktemp -d /tmp/cozy-private-XXXXXX')
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

-- must(res [, what]) asserts a command exited 0 and returns its result; a
-- failure shows what (a label), the command's stdout and its stderr.
function M.must(res, what)
  require('luassert').are.equal(0, res.code, (what or '') .. '\nstdout: ' .. tostring(res.out) ..
    '\nstderr: ' .. tostring(res.err))
  return res
end

-- has(s, sub): whether s contains sub, as plain text.
function M.has(s, sub) return s:find(sub, 1, true) ~= nil end

-- contains(s, sub [, what]) asserts that s contains sub (plain text) and
-- shows s on failure; what names s (default 'output').
function M.contains(s, sub, what)
  require('luassert').is_true(M.has(s, sub),
    string.format('%s: expected to find %q in:\n%s', what or 'output', sub, s))
end

-- lacks(s, sub [, what]) asserts that s does not contain sub.
function M.lacks(s, sub, what)
  require('luassert').is_false(M.has(s, sub),
    string.format('%s: did not expect %q in:\n%s', what or 'output', sub, s))
end

-- one_line(s [, what]) asserts that s is exactly one non-empty line.
function M.one_line(s, what)
  local t = s:gsub('\n$', '')
  require('luassert').is_true(t ~= '' and not t:find('\n'),
    string.format('%s: expected exactly one line, got:\n%s', what or 'stderr', s))
end

-- fails(res, code, text): asserts that a command exited code with one
-- line on stderr holding text (plain); returns that line: what bad input
-- must give (one clear line and a distinct exit code).
function M.fails(res, code, text)
  local luassert = require('luassert')
  luassert.are.equal(code, res.code, 'stdout: ' .. res.out .. '\nstderr: ' .. res.err)
  local msg = res.err:gsub('\n$', '')
  luassert.is_nil(msg:find('\n'), 'expected one line, got:\n' .. res.err)
  luassert.is_truthy(msg:find(text, 1, true), ('expected %q in %q'):format(text, msg))
  return msg
end

-- keys(t): t's keys, sorted (a set as a list assert.are.same can compare).
function M.keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- count(t): how many keys t has (0 for nil).
function M.count(t)
  local n = 0
  for _ in pairs(t or {}) do n = n + 1 end
  return n
end

-- lines_of(file): the non-empty lines of a file, in order ({} when absent).
function M.lines_of(file)
  local out = {}
  for l in slurp(file):gmatch('[^\n]+') do out[#out + 1] = l end
  return out
end

function M.sleep(s) os.execute('sleep ' .. s) end

-- eventually(secs, cond): waits up to secs for cond() to be true; returns
-- whether it became true.
function M.eventually(secs, cond)
  for _ = 1, secs * 10 do
    if cond() then return true end
    M.sleep(0.1)
  end
  return cond()
end

-- pgrep -f for a command line; the pattern's first letter is bracketed so
-- the `sh -c` running pgrep does not match itself.
function M.alive(pattern)
  local r = M.run('pgrep -f ' .. M.q('[' .. pattern:sub(1, 1) .. ']' .. pattern:sub(2)))
  return r.code == 0, r.out
end

-- Whether pid is a live process (a zombie does not count: PID 1 of the
-- test machine may not reap the orphans it inherits).
function M.running(pid)
  local f = io.open('/proc/' .. pid .. '/stat')
  if not f then return false end
  local st = f:read('a'):match('%) (%a)')
  f:close()
  return st ~= nil and st ~= 'Z'
end

-- unique(): 8 hex digits no other spec file or test run shares, for names
-- (busted loads each file afresh, so a per-file counter alone repeats).
function M.unique()
  local f = assert(io.open('/proc/sys/kernel/random/uuid'))
  local id = f:read('l')
  f:close()
  return id:gsub('-', ''):sub(1, 8)
end

-- kube_script(vars, body [, flags...]) runs body in the sandbox with kube,
-- json and kube.core (as core: the stdlib's own module, which a migration
-- cannot require; `lua --stdlib-internals` lets the engine's specs) required
-- and each of vars defined as a local string; the script's last stdout
-- line, when JSON, is decoded into res.json.
function M.kube_script(vars, body, ...)
  local names = {}
  for k in pairs(vars) do names[#names + 1] = k end
  table.sort(names)
  local pre = { "local kube = require('kube')", "local json = require('json')",
    "local core = require('kube.core')" }
  for _, k in ipairs(names) do pre[#pre + 1] = string.format('local %s = %q', k, vars[k]) end
  local res = M.lua(table.concat(pre, '\n') .. '\n' .. body, '--stdlib-internals', ...)
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

-- kcreate(obj [, what]) creates an object (a table) with the testenv
-- kubectl create: no last-applied annotation, as an older chart made it.
function M.kcreate(obj, what)
  local f = M.write(os.tmpname() .. '.json', require('json').encode(obj))
  local res = M.must(M.kubectl('create -f ' .. f), what)
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

-- kubectl_bin() -> the kubectl the specs use: this checkout's build of it
-- (the testenv's) when there is one, else kubectl from PATH.
function M.kubectl_bin()
  local bin = M.root .. '/build/testenv/bin/kubectl'
  if exists(bin) then return bin end
  if M.run('command -v kubectl').code ~= 0 then
    error('kubectl is not on PATH: the spec harness reads and arranges the cluster with it', 0)
  end
  return 'kubectl'
end

-- kc_raw(args [, kubeconfig]) runs kubectl against kubeconfig (default
-- $KUBECONFIG) without asking whether that cluster is disposable: for the
-- question itself (support.disposable). Specs use kc.
function M.kc_raw(args, kubeconfig)
  kubeconfig = kubeconfig or os.getenv('KUBECONFIG')
  if not kubeconfig or kubeconfig == '' then
    if exists(M.testenv) then return M.kubectl(args) end
    error('KUBECONFIG is not set: the specs run against a disposable cluster in KUBECONFIG ' ..
      '(a kind cluster, or tools/testenv in the cozy-migrate checkout)', 0)
  end
  return M.run(string.format('%s --kubeconfig %s %s', shell_quote(M.kubectl_bin()), shell_quote(kubeconfig), args))
end

-- kc(args) runs kubectl against the cluster in $KUBECONFIG (a kind cluster,
-- or the testenv whose kubeconfig tools/run-tests exports), falling back to
-- the testenv's in this checkout when KUBECONFIG is unset, once that
-- cluster has said it is disposable (support.disposable; a cluster that
-- does not is refused, and nothing is sent to it). Specs that must also
-- pass on kind use kc; h.kubectl always means the testenv (its contexts,
-- e.g. testenv-reader, exist nowhere else).
function M.kc(args)
  local kubeconfig = os.getenv('KUBECONFIG')
  if kubeconfig and kubeconfig ~= '' then require('support.disposable').assert() end
  return M.kc_raw(args)
end

-- kc_json(args) runs `kubectl ARGS -o json` through kc and decodes the output.
function M.kc_json(args)
  return require('json').decode(M.must(M.kc(args .. ' -o json')).out)
end

function M.has_cluster()
  return os.getenv('KUBECONFIG') ~= nil and os.getenv('KUBECONFIG') ~= ''
end

-- need_cluster() asserts that the specs have a test cluster; e2e files
-- call it in their setup.
function M.need_cluster()
  require('luassert').is_true(M.has_cluster(), 'KUBECONFIG must point at the testenv (tools/run-tests sets it)')
end

-- apply_crd(crd) applies a CustomResourceDefinition (a table, or YAML
-- text) to the testenv, labelled as this run's, and returns it as the server stored it once the apiserver serves
-- its objects: Established comes a moment before the resource is in
-- discovery and its handler answers, so it then lists the resource by
-- plural.group until that works. Fails naming the CRD after `secs`
-- seconds (default 30) of that.
function M.apply_crd(crd, secs)
  local f
  if type(crd) == 'table' then
    f = M.write(os.tmpname() .. '.json', require('json').encode(crd))
  else
    f = M.write(os.tmpname() .. '.yaml', crd)
  end
  local res = M.kubectl('apply -o json -f ' .. f)
  os.remove(f)
  local obj = require('json').decode(M.must(res, 'apply the CRD').out)
  local name = obj.metadata.name
  -- this run's, so support.cluster may delete it for an "API absent" case
  M.must(M.kubectl(string.format('label crd %s cozy-migrate.spec/run=%s --overwrite', name,
    require('support.cluster').run_id())))
  M.must(M.kubectl('wait --for condition=established --timeout=60s crd/' .. name), 'CRD ' .. name .. ' established')
  local what = obj.spec.names.plural .. '.' .. obj.spec.group
  local deadline = os.time() + (secs or 30)
  repeat
    res = M.kubectl('get ' .. what .. ' --all-namespaces -o name')
    if res.code == 0 then return obj end
    M.sleep(0.2)
  until os.time() > deadline
  error(string.format('CRD %s is established but the apiserver still does not serve %s after %ds: %s',
    name, what, secs or 30, (res.err:gsub('%s+$', ''))), 2)
end

-- configmap_names(ns, selector): the names of the ConfigMaps in ns that
-- match a label selector, as kubectl lists them, sorted.
function M.configmap_names(ns, selector)
  local names = {}
  for _, o in ipairs(M.kubectl_json('get configmaps -n ' .. ns .. ' -l ' .. selector).items) do
    names[#names + 1] = o.metadata.name
  end
  table.sort(names)
  return names
end

return M
