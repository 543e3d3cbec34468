-- :'<,'>Wright with a characterwise selection and no task: the task comes from vim.ui.input
-- (stubbed), the exact selected characters go with it (checked on the provider's side). Then
-- a linewise range; keymaps only when asked. The provider's script: "It adds." twice.

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  local prompts = {}
  vim.ui.input = function(opts, on_confirm)
    table.insert(prompts, opts.prompt)
    on_confirm('explain the signature')
  end
  H.eq('', vim.fn.maparg('<leader>wr', 'n'), 'no keymaps before asking')
  H.setup({ keymaps = true })
  H.eq(':Wright ', vim.fn.maparg('<leader>wr', 'x'), 'keymaps = true maps run in visual mode')
  H.eq('<Cmd>WrightUndo<CR>', vim.fn.maparg('<leader>wu', 'n'), 'and undo')
  local bufnr = H.open('src/lib.rs')
  H.eq('pub fn add(a: i64, b: i64) -> i64 {', vim.api.nvim_buf_get_lines(bufnr, 3, 4, true)[1], 'line 4')

  -- Select `add(a: i64, b: i64)` on line 4, characterwise.
  vim.cmd('normal! 4G0favf)\27')
  vim.cmd("'<,'>Wright")
  H.eq({ 'Wright task: ' }, prompts, 'the task was asked for')
  local first = H.finished()
  H.eq('done', first.status, 'the first session')
  H.eq('explain the signature', first.task, 'the task')

  -- Lines 3 to 5, linewise.
  vim.cmd('3,5Wright explain these lines')
  H.wait('a second session', function()
    return require('wright.ui').current ~= first.id
  end)
  H.eq('done', H.finished().status, 'the second session')
end)
