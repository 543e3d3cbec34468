-- Review mode: the session's edit is held (the buffer untouched), :WrightReview shows it as a
-- diff, :WrightAccept applies it through workspace/applyEdit. The provider's script: the edit,
-- then "Done.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup({ apply_mode = 'review' })
  local bufnr = H.open('src/lib.rs')
  local original = H.text(bufnr)

  vim.cmd('Wright make add commutative')
  local session = H.finished()
  H.eq('done', session.status, 'the session outcome')
  H.eq(original, H.text(bufnr), 'the buffer is untouched while the edit is held')
  H.truthy(session.proposals['src/lib.rs'], 'the proposal for src/lib.rs was received')

  local diff_buf = require('wright').review()
  local diff = table.concat(vim.api.nvim_buf_get_lines(diff_buf, 0, -1, true), '\n')
  H.truthy(diff:find('-    a + b', 1, true) and diff:find('+    b + a', 1, true), 'the diff:\n' .. diff)
  vim.cmd('close')

  vim.cmd('WrightAccept')
  H.wait('the accepted edit in the buffer', function()
    return H.text(bufnr) == (original:gsub('    a %+ b\n', '    b + a\n'))
  end)
  H.truthy(vim.bo[bufnr].modified, 'unsaved')
end)
