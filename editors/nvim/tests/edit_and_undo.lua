-- An agent task from :Wright edits the open buffer through workspace/applyEdit (unsaved, the
-- disk untouched); :WrightStatus, :WrightLog; :WrightSessions lists the session; :WrightUndo
-- brings the text back; :WrightStats then counts the edit applied and undone.
-- The provider's script: one `edit` of src/lib.rs (`a + b` -> `b + a`), then "Done.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup({ progress = { float = true, linger_ms = 60000 } })
  local bufnr = H.open('src/lib.rs')
  local original = H.text(bufnr)
  local on_disk = H.read_file('src/lib.rs')
  H.truthy(original:find('    a + b\n', 1, true), 'the example workspace has `a + b`')

  vim.cmd('Wright make add commutative')
  local session = H.finished()
  H.eq('done', session.status, 'the session outcome')
  H.wait('the edit in the buffer', function()
    return H.text(bufnr):find('    b + a\n', 1, true) ~= nil
  end)
  H.eq((original:gsub('    a %+ b\n', '    b + a\n')), H.text(bufnr), 'the buffer after the edit')
  H.truthy(vim.bo[bufnr].modified, 'the edited buffer is unsaved (modified)')
  H.eq(on_disk, H.read_file('src/lib.rs'), 'the file on disk')
  H.truthy(require('wright').statusline():find('done', 1, true), 'the statusline says done: ' .. require('wright').statusline())
  H.truthy(require('wright.ui').float_visible(), 'the progress window shows the end of the session')
  local log = table.concat(vim.api.nvim_buf_get_lines(require('wright.ui').log_buffer(), 0, -1, true), '\n')
  H.truthy(log:find('edit {', 1, true), 'the log shows the edit call: ' .. log)

  -- :WrightStatus reports the server and the model; :WrightLog opens the event log.
  vim.cmd('WrightStatus')
  local status
  H.wait('the status', function()
    for _, n in ipairs(H.notifications) do
      if n.message:find('wright: wright ', 1, true) then
        status = n.message
        return true
      end
    end
    return false
  end)
  H.truthy(status:find('model: openai/gpt-4.1 (environment WRIGHT_MODEL)', 1, true), status)
  H.truthy(status:find('current session: ' .. session.id .. ' [done]', 1, true), status)
  vim.cmd('WrightLog')
  H.eq('wright://log', vim.api.nvim_buf_get_name(0), 'the log buffer')
  vim.cmd('close')

  -- :WrightSessions lists it; the stubbed picker shows what it was given and picks nothing.
  local listed
  vim.ui.select = function(items, opts, on_choice)
    listed = vim.tbl_map(opts.format_item, items)
    on_choice(nil)
  end
  vim.cmd('WrightSessions')
  H.wait('the session list', function()
    return listed ~= nil
  end)
  H.eq(1, #listed, 'sessions listed')
  H.truthy(listed[1]:find('[done] make add commutative', 1, true), 'the listed session: ' .. listed[1])

  vim.cmd('WrightUndo')
  H.wait('the undo to restore the text', function()
    return H.text(bufnr) == original
  end)
  H.wait('the undo to be reported', function()
    for _, n in ipairs(H.notifications) do
      if n.message:find('undid ' .. session.id .. ': src/lib.rs', 1, true) then
        return true
      end
    end
    return false
  end)

  vim.cmd('WrightStats')
  local stats
  H.wait('the stats', function()
    for _, n in ipairs(H.notifications) do
      if n.message:find('stats of the last 30 days', 1, true) then
        stats = n.message
        return true
      end
    end
    return false
  end)
  H.truthy(stats:find('all%s+sessions 1, turns 1; edits proposed 1, applied 1, rejected 0, undone 1, kept 0'), stats)
end)
