-- busted output handler: the plain terminal output, then each spec file's
-- wall time, slowest first (so every CI log shows which files cost the
-- suite's time: docs/testing.md, "What the suite costs"), then one
-- machine-read line `N passed, N failed, N skipped` (errors count as
-- failed) that CI and tools/run-tests read.
return function(options)
  local busted = require('busted')
  local handler = require('busted.outputHandlers.plainTerminal')(options)
  local files, current = {}, nil
  busted.subscribe({ 'file', 'start' }, function(file)
    current = { name = file.name, tests = 0 }
    return nil, true
  end)
  busted.subscribe({ 'test', 'end' }, function()
    if current then current.tests = current.tests + 1 end
    return nil, true
  end)
  -- busted stamps duration (its monotonic clock, seconds) on the element
  -- at 'end': the file's top-level code, its hooks and its cases.
  busted.subscribe({ 'file', 'end' }, function(file)
    if current then
      current.seconds = file.duration or 0
      files[#files + 1] = current
      current = nil
    end
    return nil, true
  end)
  busted.subscribe({ 'suite', 'end' }, function()
    if #files > 0 then
      table.sort(files, function(a, b) return a.seconds > b.seconds end)
      local total = 0
      for _, f in ipairs(files) do total = total + f.seconds end
      io.stdout:write(string.format('spec files by wall time (%d files, %.1f s):\n', #files, total))
      for _, f in ipairs(files) do
        io.stdout:write(string.format('%8.1f s  %4d tests  %s\n', f.seconds, f.tests, f.name))
      end
    end
    local failed = handler.failuresCount + handler.errorsCount
    io.stdout:write(string.format('%d passed, %d failed, %d skipped\n',
      handler.successesCount, failed, handler.pendingsCount))
    io.stdout:flush()
    return nil, true
  end)
  return handler
end
