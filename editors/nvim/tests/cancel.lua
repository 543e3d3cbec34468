-- :WrightCancel stops a running session: the provider's answer stalls after its first event,
-- the statusline and the progress window show the session at work, the cancel ends it as
-- cancelled, and the window closes `linger_ms` later.

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup({ progress = { float = true, linger_ms = 300 } })
  H.open('src/lib.rs')
  vim.cmd('Wright think for a long time')
  local ui = require('wright.ui')
  -- The model's first words, not just the step's start: they prove the request reached the
  -- provider, so the cancel below interrupts a running stream rather than a step not yet sent.
  H.wait('the model to start streaming', function()
    local session = ui.current and ui.sessions[ui.current]
    return session ~= nil and session.step >= 1 and session.text ~= ''
  end)
  local statusline = require('wright').statusline()
  H.truthy(statusline:find('wright: step 1', 1, true), 'the statusline while running: ' .. statusline)
  H.truthy(ui.float_visible(), 'the progress window shows while running')
  vim.cmd('WrightCancel')
  local session = H.finished()
  H.eq('cancelled', session.status, 'the outcome')
  H.eq('wright: cancelled', require('wright').statusline(), 'the statusline after')
  H.truthy(ui.float_visible(), 'the window shows the end')
  H.wait('the progress window to close after linger_ms', function()
    return not ui.float_visible()
  end, 3000)
end)
