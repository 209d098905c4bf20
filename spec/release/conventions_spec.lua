-- The house rules of host/ beside its layers (tools/conventions, run by
-- `make lint`): a comment (in host/, stdlib/ or spec/) names only files
-- that exist, every export carries its module's prefix and is used by
-- something else, no function is over 120 lines and no file over 950. Each
-- is seen failing, naming the file and line, on a copy of the tree with a
-- violation planted in it, and passing on what it must let through.
local h = require('support.helpers')


local function conventions(root, objdir)
  return h.run(h.q(h.root .. '/tools/conventions') .. ' ' .. h.q(root) .. ' ' .. h.q(objdir))
end

-- A scratch root with a copy of the tree (no build/, no .git) and an empty
-- object directory; the caller plants files (and objects) in it.
local function scratch()
  local d = h.tmpdir()
  h.must(h.run('tar -C ' .. h.q(h.root) .. " --exclude=./build --exclude=./.git -cf - . | tar -C " ..
    h.q(d) .. ' -xf -'), 'copy the tree')
  h.must(h.run('mkdir -p ' .. h.q(d .. '/obj')), 'the object directory')
  return d
end

-- plant(d, FILE, text): writes host/FILE and its object.
local function plant(d, file, text)
  h.write(d .. '/host/' .. file, text)
  local obj = d .. '/obj/' .. file:gsub('%.c$', '.o')
  h.must(h.run('mkdir -p ' .. h.q(obj:match('^(.*)/'))), 'the object folder')
  h.must(h.run('cc -c -x c -I ' .. h.q(d .. '/host') .. ' -o ' .. h.q(obj) .. ' ' ..
    h.q(d .. '/host/' .. file)), 'compile ' .. file)
end

-- put(d, PATH, text): writes PATH of the copy (a folder it needs too).
local function put(d, path, text)
  h.must(h.run('mkdir -p ' .. h.q((d .. '/' .. path):match('^(.*)/'))), 'the folder of ' .. path)
  h.write(d .. '/' .. path, text)
end

local function check(d)
  local res = conventions(d, d .. '/obj')
  h.run('rm -rf ' .. h.q(d))
  return res
end

describe('the house rules of host/', function()
  it('hold on the tree as it is', function()
    local objdir = h.root .. '/build/obj'
    if h.run('test -d ' .. h.q(objdir)).code ~= 0 then objdir = h.root .. '/build/asan/obj' end
    local res = conventions(h.root, objdir)
    assert.are.equal(0, res.code, res.out .. res.err)
  end)

  describe('files', function()
    it('fail on a comment naming a C file that is gone', function()
      local d = scratch()
      plant(d, 'client/planted.c', '/* planted.c: x.\n * The caller (kube.c) decides. */\nint planted_x;\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/client/planted.c:2: the comment names kube.c, which is not in host/')
    end)

    it('fail on a path naming a folder the file is not in', function()
      local d = scratch()
      plant(d, 'lua/planted.c', '/* planted.c: x */\n// see lua/kube_core.c\nint planted_x;\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/lua/planted.c:2: the comment names lua/kube_core.c')
    end)

    it("let through a file that exists, a system header and another project's file", function()
      local d = scratch()
      plant(d, 'base/planted.c', '/* planted.c: like proc/child.c and rest.h, over <yaml.h>,\n' ..
        " * as git's run-command.c and Lua's llex.c do. */\nint planted_x;\n" ..
        'const char *planted_s = "gone.c is a string, not a comment";\n')
      local res = check(d)
      h.lacks(res.out, 'the comment names', 'nothing said of the planted file\'s comment')
    end)

    it('fail on a Lua comment of stdlib/ naming a host/ path that is gone', function()
      local d = scratch()
      put(d, 'stdlib/planted.lua', '-- planted: x.\nlocal M = {} -- the host function (with host/guard.c)\nreturn M\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'stdlib/planted.lua:2: the comment names host/guard.c, which is not in the repository')
    end)

    it("fail on spec/'s Lua long comments, bare spec names and shell comments", function()
      local d = scratch()
      put(d, 'spec/e2e/planted_spec.lua', '--[[ planted: x,\n  as spec/e2e/gone_spec.lua did ]]\n' ..
        '-- the rest is in gone_spec.lua\nlocal x = 1\n')
      put(d, 'spec/fixtures/planted/x.sh', '#!/bin/bash\necho "#" # run by tools/gone-runner\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'spec/e2e/planted_spec.lua:2: the comment names spec/e2e/gone_spec.lua,')
      h.contains(res.out, 'spec/e2e/planted_spec.lua:3: the comment names gone_spec.lua, which is not in the repository')
      h.contains(res.out, 'spec/fixtures/planted/x.sh:2: the comment names tools/gone-runner,')
    end)

    it("let through Lua strings, files and folders that exist, globs and placeholders that match, and others' paths", function()
      local d = scratch()
      put(d, 'spec/e2e/planted_spec.lua', '-- planted: like stdlib/kube.lua, tools/layers, docs/ and\n' ..
        '-- spec/e2e/runner_*_spec.lua, host/LAYER/NAME.c, dispatch_spec.lua and rest.c; not\n' ..
        "-- migrations/order.d or legacy-sh/x.sh (any platform's layout), the platform's spec/x.lua,\n" ..
        '-- <host>/<pid>, https://example.com/host/x.c\n' ..
        'local s = "host/gone.c" .. [[ -- spec/gone.lua ]] .. \'tools/gone\'\nreturn s\n')
      local res = check(d)
      h.lacks(res.out, 'planted_spec', 'nothing said of the planted spec')
    end)
  end)

  describe('prefix', function()
    it('fails on an export without its module\'s prefix, naming it', function()
      local d = scratch()
      plant(d, 'cli/planted.c', '/* planted.c: x */\nint planted_ok(void) { return 0; }\n' ..
        'const char *shown(void) { return "x"; }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, "host/cli/planted.c:1: shown is exported without its module's prefix")
      h.lacks(res.out, 'planted_ok is exported without', 'the prefixed one passes')
    end)

    it('fails on lua/ exporting under the client\'s kube_ prefix, a layer below', function()
      local d = scratch()
      plant(d, 'lua/planted.c', '/* planted.c: x */\nint kube_connect(void) { return 0; }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/lua/planted.c:1: kube_connect is exported without')
    end)

    it('lets through the layer, the family, the interface, luaopen_ and a declared prefix', function()
      local d = scratch()
      plant(d, 'client/planted.c', '/* planted.c: x */\nint client_planted_x(void) { return 0; }\n')
      plant(d, 'release/lint_planted.c', '/* lint_planted.c: x */\nint lint_rule_planted(void) { return 0; }\n')
      plant(d, 'base/planted_io.c', '/* planted_io.c: x */\n#include "base/stop.h"\n' ..
        'int stop_planted(void) { return 0; }\n')
      plant(d, 'lua/luaplanted.c', '/* luaplanted.c: x */\nint luaopen_planted(void) { return 0; }\n' ..
        'static int hidden(void) { return 1; }\nint luaplanted_y(void) { return hidden(); }\n')
      plant(d, 'base/planted.c', '/* planted.c: x\n * Prefixes: pl_ (its short name). */\n' ..
        'int pl_x(void) { return 0; }\n')
      local res = check(d)
      h.lacks(res.out, 'without its module', 'nothing said of the planted files\' prefixes')
    end)

    it('does not take a declaration that is not a prefix', function()
      local d = scratch()
      plant(d, 'base/planted.c', '/* planted.c: x\n * Prefixes: hold (no underscore). */\n' ..
        'int hold(void) { return 0; }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/base/planted.c:1: hold is exported without')
    end)
  end)

  describe('length', function()
    local function body(n)
      local t = {}
      for i = 1, n do t[i] = '    x += ' .. i .. ';' end
      return table.concat(t, '\n') .. '\n'
    end

    it('fails on a function over 120 lines, naming it and its opening line', function()
      local d = scratch()
      plant(d, 'base/planted.c', '/* planted.c: x */\nint planted_long(int x)\n{\n' .. body(119) ..
        '    return x;\n}\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/base/planted.c:3: planted_long is 122 lines long (at most 120')
    end)

    it('lets through 120 lines and a table of any length', function()
      local d = scratch()
      local rows = {}
      for i = 1, 300 do rows[i] = '    ' .. i .. ',' end
      plant(d, 'base/planted.c', '/* planted.c: x */\nint planted_fits(int x)\n{\n' .. body(117) ..
        '    return x;\n}\n\nconst int planted_table[] = {\n' .. table.concat(rows, '\n') .. '\n};\n')
      local res = check(d)
      h.lacks(res.out, 'lines long (at most 120', 'nothing said of the planted function\'s length')
    end)
  end)

  describe('unused', function()
    it('fails on an export nothing else uses, naming the line that defines it', function()
      local d = scratch()
      plant(d, 'base/planted.c', '/* planted.c: x */\nint planted_used(void) { return 0; }\n\n' ..
        'int planted_dead(void)\n{\n    return planted_used();\n}\n')
      plant(d, 'base/planted_user.c', '/* planted_user.c: x\n * Unreferenced: planted_user_x (a spec\'s fixture) */\n' ..
        'int planted_used(void);\nint planted_user_x(void) { return planted_used(); }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/base/planted.c:4: planted_dead is exported but no other object')
      h.lacks(res.out, 'planted_used is exported', 'the one another object uses passes')
    end)

    it("lets through one a tools/ C file calls, and one declared with a reason, and no bare declaration", function()
      local d = scratch()
      plant(d, 'base/planted.c', '/* planted.c: x\n * Unreferenced: planted_kept (called from gdb)\n' ..
        ' * Unreferenced: planted_bare */\nint planted_fuzzed(void) { return 0; }\n' ..
        'int planted_kept(void) { return 1; }\nint planted_bare(void) { return 2; }\n')
      put(d, 'tools/fuzz/planted_fuzz.c', 'int planted_fuzzed(void);\nint main(void) { return planted_fuzzed(); }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.lacks(res.out, 'planted_fuzzed is exported', 'what a fuzz target calls passes')
      h.lacks(res.out, 'planted_kept is exported', 'what the file says it keeps, and why, passes')
      h.contains(res.out, 'host/base/planted.c:6: planted_bare is exported but no other object')
    end)
  end)

  describe('size', function()
    local function lines(n)
      local t = { '/* planted.c: x */' }
      for i = 2, n do t[i] = 'int planted_' .. i .. ';' end
      return table.concat(t, '\n') .. '\n'
    end

    it('fails on a C file over 950 lines, and lets through 950', function()
      local d = scratch()
      put(d, 'host/base/planted.c', lines(951))
      put(d, 'host/base/planted_fits.h', lines(950))
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/base/planted.c:951: base/planted.c is 951 lines long (at most 950')
      h.lacks(res.out, 'planted_fits', 'a file of 950 lines passes')
    end)
  end)
  -- growth (issue 40): one way an array grows, mem_grow (base/mem.h).
  describe('growth', function()
    it('fails on an array grown by a hand-written realloc outside base/, naming the line', function()
      local d = scratch()
      plant(d, 'run/planted.c', '/* planted.c: x */\n#include <stdlib.h>\n' ..
        'int planted_push(int **v, size_t *n)\n{\n' ..
        '    int *nv = realloc(*v, (*n + 1) * sizeof *nv);\n' ..
        '    if (!nv)\n        return -1;\n    *v = nv;\n    (*n)++;\n    return 0;\n}\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/run/planted.c:5: an array grown by hand')
    end)

    it('fails on a doubling capacity too', function()
      local d = scratch()
      plant(d, 'formats/planted.c', '/* planted.c: x */\n#include <stdlib.h>\n' ..
        'char *planted_more(char *p, size_t cap) { return realloc(p, cap * 2); }\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/formats/planted.c:3: an array grown by hand')
    end)

    it('lets through mem_grow, a byte-sized realloc, base/ and a comment', function()
      local d = scratch()
      plant(d, 'run/planted.c', '/* planted.c: not realloc(p, n * sizeof *p) */\n' ..
        '#include <stdlib.h>\n#include "base/mem.h"\n' ..
        'int *planted_push(int *v, size_t n) { return mem_grow(v, n + 1, sizeof *v); }\n' ..
        'void *planted_alloc(void *p, size_t nsize) { return realloc(p, nsize); }\n' ..
        '// realloc(v, (n + 1) * sizeof *v) was the old way\n')
      plant(d, 'base/planted.c', '/* planted.c: x */\n#include <stdlib.h>\n' ..
        'void *planted_grow(void *p, size_t n) { return realloc(p, n * sizeof(int)); }\n')
      local res = check(d)
      -- the unused rule speaks of the planted exports; growth says nothing
      h.lacks(res.out, 'grown by hand', 'nothing said of the planted growth')
      h.contains(res.out, 'planted_push is exported', 'the planted files were checked')
    end)
  end)
  -- errbuf (issue 40): a module says why in struct buf *err, whole.
  describe('errbuf', function()
    it('fails on a header with struct buf *err that still takes char *err, size_t errlen', function()
      local d = scratch()
      h.write(d .. '/host/run/planted.h', '/* planted.h: x */\n#include "base/buf.h"\n' ..
        'int planted_read(const char *path, struct buf *err);\n' ..
        'int planted_write(const char *path, char *err, size_t errlen);\n')
      local res = check(d)
      assert.are.equal(1, res.code, res.out .. res.err)
      h.contains(res.out, 'host/run/planted.h:4: a module that says why in struct buf *err')
    end)

    it('lets through a header in either style alone', function()
      local d = scratch()
      h.write(d .. '/host/run/planted.h', '/* planted.h: x */\n#include "base/buf.h"\n' ..
        'int planted_read(const char *path, struct buf *err);\n')
      h.write(d .. '/host/run/planted_old.h', '/* planted_old.h: x */\n' ..
        'int planted_old_read(const char *path, char *err, size_t errlen);\n')
      local res = check(d)
      h.lacks(res.out, 'planted', 'nothing said of the planted headers')
    end)
  end)
end)
