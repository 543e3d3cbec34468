-- The chat buffer: `:Wright plan …` runs a plan turn; `:Wright` opens the conversation as
-- markdown; `:Wright code` switches the mode; a follow-up typed below the prompt line and sent
-- with <CR> in normal mode is the next turn (its edit lands in the open buffer, the tool output
-- folded); a third sent with <C-s> from insert mode. The provider's script: the plan's answer;
-- the edit, "Done."; "It wraps.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  local bufnr = H.open('src/lib.rs')
  local ui = require('wright.ui')

  vim.cmd('Wright plan look at add')
  local session = H.finished()
  H.eq('done', session.status, 'the plan turn')

  vim.cmd('Wright')
  local chat = vim.api.nvim_get_current_buf()
  H.truthy(chat ~= bufnr, 'the chat is a buffer of its own')
  H.eq('markdown', vim.bo[chat].filetype, 'the chat is markdown')
  local function text()
    return table.concat(vim.api.nvim_buf_get_lines(chat, 0, -1, true), '\n')
  end
  H.truthy(text():find('## You (turn 1)\nlook at add', 1, true), 'the first turn:\n' .. text())
  H.truthy(text():find('The plan: make add wrap.', 1, true), 'the streamed answer:\n' .. text())
  H.truthy(text():find('mode plan', 1, true), 'the header says plan mode:\n' .. text())

  vim.cmd('Wright code')
  local last = vim.api.nvim_buf_line_count(chat)
  vim.api.nvim_buf_set_lines(chat, last - 1, last, true, { 'now make add wrap around' })
  vim.api.nvim_win_set_cursor(0, { last, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  H.wait('the second turn to end', function()
    return session.finished_turn == 2
  end)
  H.wait('the second turn in the chat', function()
    return text():find('## You (turn 2)\nnow make add wrap around', 1, true) ~= nil
      and text():find('turn 2 done', 1, true) ~= nil
  end)
  H.wait('the edit in the source buffer', function()
    return H.text(bufnr):find('a.wrapping_add(b)', 1, true) ~= nil
  end)
  local output_line
  for i, line in ipairs(vim.api.nvim_buf_get_lines(chat, 0, -1, true)) do
    if line:find('edit output {{{', 1, true) then
      output_line = i
    end
  end
  H.truthy(output_line, 'a tool output block:\n' .. text())
  H.truthy(vim.fn.foldclosed(output_line) ~= -1, 'the tool output is folded')
  H.eq('', vim.api.nvim_buf_get_lines(chat, -2, -1, true)[1], 'the message area is empty again')

  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(chat), 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('Aexplain it<C-s><Esc>', true, false, true), 'x', false)
  H.wait('the third turn to end', function()
    return session.finished_turn == 3
  end)
  H.wait('the third answer in the chat', function()
    return text():find('It wraps.', 1, true) ~= nil
  end)
  H.eq(session.id, ui.current, 'one session all along')
end)
