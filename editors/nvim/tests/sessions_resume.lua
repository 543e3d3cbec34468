-- :WrightSessions lists a failed session and resumes it from the picker (vim.ui.select,
-- stubbed). The provider's script: a 401 (the session fails), then "Resumed." for the resume.

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  H.open('src/lib.rs')
  vim.cmd('Wright fix add')
  local session = H.finished()
  H.eq('failed', session.status, 'the first run fails (401)')
  local failed_notice = false
  for _, n in ipairs(H.notifications) do
    failed_notice = failed_notice or (n.level == vim.log.levels.ERROR and n.message:find(session.id .. ' failed', 1, true) ~= nil)
  end
  H.truthy(failed_notice, 'the failure is notified as an error')

  local pickers = {}
  vim.ui.select = function(items, opts, on_choice)
    local labels = vim.tbl_map(opts.format_item or tostring, items)
    table.insert(pickers, { kind = opts.kind, labels = labels })
    if opts.kind == 'wright_session' then
      on_choice(items[1])
    else
      on_choice('Resume')
    end
  end
  vim.cmd('WrightSessions')
  H.wait('the session to be resumed and finish', function()
    return #pickers == 2 and session.status == 'done'
  end)
  H.truthy(pickers[1].labels[1]:find(session.id .. ' [failed] fix add', 1, true), 'listed: ' .. pickers[1].labels[1])
  H.eq({ 'Resume', 'Make current' }, pickers[2].labels, 'the actions for a failed session without edits')
  H.eq('Resumed.', session.outcome.message, 'the resumed outcome')
end)
