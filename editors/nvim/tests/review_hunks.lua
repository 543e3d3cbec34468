-- Review per hunk: a review session proposes two hunks; :WrightReview opens the proposal in
-- diff mode; `ga` on the first hunk applies just it to the open buffer (through
-- workspace/applyEdit), the proposal left over comes back with one hunk, and `gr` rejects it;
-- a follow-up turn then tells the model which hunk was rejected (checked by the Rust side).
-- The provider's script: the two edits, "Proposed both.", "Understood.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup({ apply_mode = 'review' })
  local bufnr = H.open('src/lib.rs')
  local original = H.text(bufnr)

  vim.cmd('Wright make add wrap and use checked_div')
  local session = H.finished()
  local proposal = session.proposals['src/lib.rs']
  H.truthy(proposal, 'a proposal for src/lib.rs')
  H.eq(2, #proposal.hunks, 'two hunks')
  H.eq(original, H.text(bufnr), 'nothing applied yet')

  vim.cmd('WrightReview')
  H.truthy(vim.wo.diff, 'the review window is in diff mode')
  H.truthy(vim.api.nvim_buf_get_name(0):find('proposed', 1, true), 'the cursor is on the proposal side')
  vim.api.nvim_win_set_cursor(0, { proposal.hunks[1].startLine, 0 })
  vim.api.nvim_feedkeys('ga', 'x', false)
  local first_only = original:gsub('    a %+ b\n', '    a.wrapping_add(b)\n', 1)
  H.wait('exactly the first hunk in the buffer', function()
    return H.text(bufnr) == first_only
  end)
  H.wait('the proposal left with one hunk', function()
    local left = session.proposals['src/lib.rs']
    return left and #left.hunks == 1 and left.hunks[1].id == proposal.hunks[2].id
  end)

  vim.cmd('wincmd h')
  local left = session.proposals['src/lib.rs']
  vim.api.nvim_win_set_cursor(0, { left.hunks[1].startLine, 0 })
  vim.api.nvim_feedkeys('gr', 'x', false)
  H.wait('nothing proposed any more', function()
    return session.proposals['src/lib.rs'] == nil
  end)
  H.eq(first_only, H.text(bufnr), 'the buffer holds exactly the accepted hunk')

  require('wright').prompt('why both?', { session = session.id })
  H.wait('the follow-up turn to end', function()
    return session.finished_turn == 2
  end)
end)
