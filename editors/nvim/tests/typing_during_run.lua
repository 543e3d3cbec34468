-- Typing during a run is never overwritten. The user types a line just as the agent's first
-- edit arrives (computed against the version before the keystroke): the strict handler
-- refuses it (`applied: false`, the versions in the reason), the agent retries against the new
-- version, and the final text holds both the user's line and the agent's edit.
-- The provider's script: the edit, the same edit again (after a second, so the keystroke's
-- didChange has reached the server), then "Done.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  local apply = require('wright.apply')
  local real_handler = apply.workspace_apply_edit
  local answers = {}
  local typed = '// typed while the agent worked'
  apply.workspace_apply_edit = function(err, params, ctx)
    if #answers == 0 then
      -- The user's keystroke lands between the server computing the edit and Neovim applying it.
      local bufnr = vim.fn.bufnr(vim.uri_to_fname(params.edit.documentChanges[1].textDocument.uri))
      vim.api.nvim_buf_set_lines(bufnr, 0, 0, true, { typed })
    end
    local answer = real_handler(err, params, ctx)
    table.insert(answers, answer)
    return answer
  end

  H.setup()
  local bufnr = H.open('src/lib.rs')
  local original = H.text(bufnr)

  vim.cmd('Wright make add commutative')
  local session = H.finished()
  H.eq('done', session.status, 'the session outcome')
  H.truthy(#answers == 2, 'two edits reached Neovim: ' .. vim.inspect(answers))
  H.eq(false, answers[1].applied, 'the stale edit is refused')
  H.truthy(
    answers[1].failureReason:find('changed since the edit was computed', 1, true),
    'the refusal says why: ' .. tostring(answers[1].failureReason)
  )
  H.eq(true, answers[2].applied, 'the retry against the new version is applied')
  local expected = typed .. '\n' .. (original:gsub('    a %+ b\n', '    b + a\n'))
  H.eq(expected, H.text(bufnr), 'the final text: the user line and the agent edit')
  H.truthy(vim.bo[bufnr].modified, 'unsaved')
  local warned = false
  for _, n in ipairs(H.notifications) do
    warned = warned or (n.level == vim.log.levels.WARN and n.message:find('edit refused', 1, true) ~= nil)
  end
  H.truthy(warned, 'the user is told an edit was refused')
end)
