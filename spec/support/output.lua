-- busted output handler: the plain terminal output, then one machine-read
-- line `N passed, N failed, N skipped` (errors count as failed) that CI and
-- tools/run-tests read.
return function(options)
  local busted = require('busted')
  local handler = require('busted.outputHandlers.plainTerminal')(options)
  busted.subscribe({ 'suite', 'end' }, function()
    local failed = handler.failuresCount + handler.errorsCount
    io.stdout:write(string.format('%d passed, %d failed, %d skipped\n',
      handler.successesCount, failed, handler.pendingsCount))
    io.stdout:flush()
    return nil, true
  end)
  return handler
end
