-- The ledger itself at fault, as trials.
--
-- Deleted mid-run (3): a 10-migration sequence runs; at a random moment in
-- its first half a person deletes the ledger ConfigMap. The runner must stop
-- at its next record with exit 12, saying the ledger was deleted and how to
-- restore it; the next run must refuse (exit 12: the Lease records that this
-- cluster had a ledger) and create nothing, where it used to take the
-- cluster for a fresh install and record every slug skipped-fresh-install,
-- those that never ran among them; plan and preview refuse too, and status
-- --failed says so (exit 1). Then the way out the message gives (an
-- empty ledger): a run completes, every step ok once, none
-- skipped-fresh-install, and the new ledger carries the no-delete label and
-- the keep annotation (it was not created by the engine).
--
-- At the limit (1 trial of several cases): a ledger filled (a key of its
-- own) to a chosen room below the apiserver's 1 MiB object limit, one
-- migration run with --only. A migration is never run without room for its
-- record: refused with exit 13 (the message names the size, the limit and
-- the way out) when its largest record does not fit, and then it did not run
-- (no marker); past 80% a failed record is written shrunk (output and
-- journal cut, with a marker and the true counts) and status warns; below
-- 80% it is whole.
-- Throughout: every migration that ran (its marker) is recorded.
local h = require('support.helpers')
local T = require('support.trials')
local json = require('json')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 10
local LIMIT = 1048576
local MARK = 'platform.cozystack.io/ledger-uid'

describe('#reliability the ledger at fault', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function ledger_cm(ns)
    local res = c.kubectl('get configmap cozystack-version -n ' .. ns .. ' -o json')
    return res.code == 0 and json.decode(res.out) or nil
  end

  local function deleted_trial()
    local ns = T.sequence_ns(c, 'rel-gone')
    local dir = T.sequence(ns, STEPS, 0.2)
    local a = T.start(c.run_cmd(dir, ns, ''))
    assert.is_true(h.eventually(20, function() return h.has(T.out(a), 'seq-01 ... ok') end),
      'the run did not record its first step: ' .. T.err(a))
    h.sleep(string.format('%.3f', math.random() * STEPS * 0.15))
    local lease = T.lease(c, ns)
    h.must(c.kubectl('delete configmap cozystack-version -n ' .. ns), 'delete the ledger')
    local rc = T.wait(a, 60)
    local problems = {}
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    local done = select(2, T.out(a):gsub('%.%.%. ok', ''))
    T.note(string.format('deleted after %d of %d; the run exited %s', done, STEPS, tostring(rc)))
    if rc ~= 12 and rc ~= 0 then problems[#problems + 1] = 'the run exited ' .. tostring(rc) .. ', not 12' end
    if rc == 12 and not h.has(T.err(a), 'was deleted during the run') then
      problems[#problems + 1] = 'the run did not say the ledger was deleted: ' .. T.err(a):sub(-300)
    end
    if not (lease and (lease.metadata.annotations or {})[MARK]) then
      problems[#problems + 1] = 'the Lease did not record the ledger before it was deleted'
    end
    -- the next run: refused, nothing created
    local b = h.run(c.run_cmd(dir, ns, ''))
    if b.code ~= 12 or not h.has(b.err, 'is absent, but the Lease') then
      problems[#problems + 1] = string.format('the next run exited %d: %s', b.code, b.err:sub(-300))
    end
    for _, cmd in ipairs({ 'plan', 'preview' }) do
      local r = h.run((c.run_cmd(dir, ns, ''):gsub(' run %-%-dir ', ' ' .. cmd .. ' --dir ')))
      if r.code ~= 12 then problems[#problems + 1] = string.format('%s exited %d, not 12: %s', cmd, r.code, r.err) end
    end
    local st = h.run((c.run_cmd(dir, ns, ''):gsub(' run %-%-dir ', ' status --failed --dir ')))
    if st.code ~= 1 or not h.has(st.err, 'is absent, but the Lease') then
      problems[#problems + 1] = string.format('status --failed exited %d without saying the ledger was deleted: %s',
        st.code, st.err)
    end
    local recs = T.records(c, ns)
    add(T.fresh_problems(recs))
    if recs then problems[#problems + 1] = 'the next run created a ledger' end
    T.check(problems, 'a ledger deleted mid-run')
    -- the way out: an empty ledger, then every step runs (again)
    c.empty_ledger(ns)
    local again = h.run(c.run_cmd(dir, ns, ''))
    assert.are.equal(0, again.code, 'the run over an empty ledger: ' .. again.err)
    local vals, bad = T.ledger(c, ns)
    add(bad)
    recs = T.records(c, ns)
    add(T.fresh_problems(recs))
    add(T.ok_without_marker(vals, T.labelled(c, ns, 'trial/end')))
    for k = 1, STEPS do
      local s = string.format('seq-%02d', k)
      if not recs[s] or recs[s].state ~= 'ok' or recs[s].attempts ~= 1 then problems[#problems + 1] = s .. ' is not ok once' end
    end
    local cm = ledger_cm(ns)
    if (cm.metadata.labels or {})['platform.cozystack.io/no-delete'] ~= 'true' or
        (cm.metadata.annotations or {})['helm.sh/resource-policy'] ~= 'keep' then
      problems[#problems + 1] = 'the ledger the engine wrote to lacks the no-delete label or the keep annotation'
    end
    if ((T.lease(c, ns) or { metadata = {} }).metadata.annotations or {})[MARK] ~= cm.metadata.uid then
      problems[#problems + 1] = 'the Lease does not record the new ledger'
    end
    T.check(problems, 'after the way out')
  end

  -- ---- at the limit ----------------------------------------------------------

  -- Lua migrations: each creates a marker ran-<slug>-xxxxx first; a `warn`
  -- one then prints 25 lines of 300 control bytes, sends 60 writes the
  -- apiserver refuses (a journal of 61 writes with the marker's) and fails.
  local function limit_tree(ns)
    local ok_body = string.format([[
local kube = require('kube')
kube.create('configmaps', { metadata = { generateName = 'ran-' .. %%q .. '-' } }, { namespace = %q })]], ns)
    local fail_body = ok_body .. [[

local log = require('log')
for i = 1, 25 do log.info('%%d %%s', i, string.rep('\1', 300)) end
for i = 1, 60 do pcall(kube.create, 'configmaps', { metadata = { name = 'Not_A_Name' .. i } }, { namespace = ]] ..
      string.format('%q', ns) .. [[ }) end
error('failed on purpose')]]
    local scripts = {}
    for _, s in ipairs({ 'fits', 'abort-later' }) do scripts[s] = { body = ok_body:format(s) } end
    for _, s in ipairs({ 'warn-fails', 'warn-refused' }) do scripts[s] = { on_error = 'warn', body = fail_body:format(s) } end
    return require('support.fixture').tree({
      batches = { { '00001-v1.0.0', { 'abort-later', 'fits', 'warn-fails', 'warn-refused' } } }, scripts = scripts })
  end

  -- data bytes as the object limit counts them (keys + values)
  local function data_bytes(cm)
    local n = 0
    for k, v in pairs(cm.data or {}) do n = n + #k + #v end
    return n
  end

  -- Sets the filler key so that `room` bytes are left under the limit.
  local function leave_room(ns, room)
    local cm = ledger_cm(ns)
    local others = data_bytes(cm) - (cm.data and cm.data['x-filler'] and #'x-filler' + #cm.data['x-filler'] or 0)
    local size = LIMIT - others - #'x-filler' - room
    local f = h.write(os.tmpname(), json.encode({ data = { ['x-filler'] = string.rep('f', size) } }))
    h.must(c.kubectl(string.format('patch configmap cozystack-version -n %s --type merge --patch-file %s', ns, h.q(f))),
      'set the filler')
    os.remove(f)
  end

  -- {slug = how many times it ran} from its markers ran-<slug>-xxxxx
  local function runs(ns)
    local out = {}
    for _, o in ipairs(c.json('get configmaps -n ' .. ns).items) do
      local slug = o.metadata.name:match('^ran%-(.+)%-%w%w%w%w%w$')
      if slug then out[slug] = (out[slug] or 0) + 1 end
    end
    return out
  end

  local function limit_trial()
    local ns = c.new_ns('rel-full')
    c.empty_ledger(ns)
    local dir = limit_tree(ns)
    local problems = {}
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    local function only(slug, room)
      leave_room(ns, room)
      local before = runs(ns)
      local r = h.run(c.run_cmd(dir, ns, '--only ' .. slug))
      return r, runs(ns)[slug] ~= before[slug]
    end
    local function expect_refused(slug, room)
      local r, ran = only(slug, room)
      if r.code ~= 13 then problems[#problems + 1] = string.format('%s with %d bytes free: exit %d, not 13: %s', slug,
        room, r.code, r.err:sub(-300)) end
      if ran then problems[#problems + 1] = string.format('%s ran with %d bytes free', slug, room) end
      for _, want in ipairs({ 'may take up to', tostring(LIMIT) .. '-byte limit', 'Make room' }) do
        if r.code == 13 and not h.has(r.err, want) then problems[#problems + 1] = 'the refusal does not say ' .. want end
      end
      T.note(string.format('%s refused at %d free (its record: up to %s bytes)', slug, room,
        r.err:match('may take up to (%d+) bytes') or '?'))
      return r
    end
    -- an ok-only step (on-error=abort) without room for even an ok record
    expect_refused('fits', 1200)
    -- with room for it: it runs and is recorded
    local r = only('fits', 4000)
    if r.code ~= 0 then problems[#problems + 1] = 'fits with 4000 bytes free: exit ' .. r.code .. ': ' .. r.err end
    local raw = (ledger_cm(ns).data or {})['m.fits']
    T.note(string.format('an ok record: %s bytes', raw and #raw or '?'))
    -- past 80%, a failing warn step has room for its shrunk record: it runs,
    -- and the record is shrunk
    r = only('warn-fails', 40000)
    local rec = (T.records(c, ns) or {})['warn-fails']
    if not (rec and rec.state == 'failed') then
      problems[#problems + 1] = 'warn-fails (40000 free) is not recorded failed: ' .. r.err:sub(-300)
    else
      if not (rec.output or ''):find('^%[cozy%-migrate: output cut') then problems[#problems + 1] = 'its output is not cut' end
      if not (rec.journal and rec.journal.cut and rec.journal.more == 61 and rec.journal.writes == 61) then
        problems[#problems + 1] = 'its journal is not cut to its counts: ' .. json.encode(rec.journal)
      end
      T.note(string.format('a shrunk failed record: %d bytes', #ledger_cm(ns).data['m.warn-fails']))
    end
    local st = h.run((c.run_cmd(dir, ns, ''):gsub(' run %-%-dir ', ' status --failed --dir ')))
    if st.code ~= 1 or not h.has(st.err, 'failed records are written shrunk') then
      problems[#problems + 1] = string.format('status --failed past 80%% exited %d without a warning: %s', st.code, st.err)
    end
    -- a warn step whose shrunk failed record would not fit: refused; an
    -- abort step (ok record only) still fits there
    expect_refused('warn-refused', 5000)
    r = only('abort-later', 5000)
    if r.code ~= 0 then problems[#problems + 1] = 'abort-later with 5000 bytes free: exit ' .. r.code .. ': ' .. r.err end
    -- far from the limit a failed record is whole
    r = only('warn-fails', 400000)
    rec = (T.records(c, ns) or {})['warn-fails']
    if not (rec and rec.state == 'failed' and not rec.output:find('output cut', 1, true) and rec.journal and
        #(rec.journal.entries or {}) > 0) then
      problems[#problems + 1] = 'warn-fails (400000 free) is not recorded whole: ' .. json.encode(rec or {}):sub(1, 300)
    else
      T.note(string.format('the same failed record whole: %d bytes', #ledger_cm(ns).data['m.warn-fails']))
    end
    -- what ran is recorded, and the ledger holds
    add(T.unrecorded_problems(T.records(c, ns), runs(ns)))
    local _, bad = T.ledger(c, ns)
    add(bad)
    T.check(problems, 'a ledger at its limit')
  end

  local n = T.count('ledger-deleted', 1, 3)
  for i = 1, n do
    T.trial('ledger deleted mid-run', string.format(
      'a ledger deleted mid-run stops the run (exit 12), and the next run refuses rather than seed it anew (trial %d/%d)',
      i, n), deleted_trial)
  end
  T.trial('ledger at the limit', 'a migration never runs without room in the ledger for its record; near the limit ' ..
    'failed records shrink', limit_trial)
end)
