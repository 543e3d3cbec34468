-- wright.nvim: the user commands. Nothing starts until require('wright').setup{} is called.

if vim.g.loaded_wright then
  return
end
vim.g.loaded_wright = true

local function wright()
  return require('wright')
end

vim.api.nvim_create_user_command('Wright', function(opts)
  wright().command(opts.args, opts)
end, {
  nargs = '*',
  range = true,
  desc = 'wright: the chat (no task), or run the agent on a task (the selection as context); `plan TASK` in plan mode',
})

vim.api.nvim_create_user_command('WrightPrompt', function(opts)
  wright().prompt(opts.args)
end, { nargs = '+', desc = 'wright: a follow-up message to the current session' })

vim.api.nvim_create_user_command('WrightCancel', function(opts)
  wright().cancel(opts.args ~= '' and opts.args or nil)
end, { nargs = '?', desc = 'wright: cancel the current session' })

vim.api.nvim_create_user_command('WrightUndo', function(opts)
  wright().undo(opts.args ~= '' and opts.args or nil)
end, { nargs = '?', desc = "wright: take back the last session's edits" })

vim.api.nvim_create_user_command('WrightSessions', function()
  wright().sessions()
end, { desc = 'wright: list sessions; resume, undo or cancel one' })

vim.api.nvim_create_user_command('WrightStats', function(opts)
  wright().stats(opts.args ~= '' and tonumber(opts.args) or nil)
end, { nargs = '?', desc = "wright: how many of the agent's edits were applied, undone, kept (last [days] days)" })

vim.api.nvim_create_user_command('WrightStatus', function()
  wright().status()
end, { desc = 'wright: what the server holds and how it is configured' })

vim.api.nvim_create_user_command('WrightReview', function(opts)
  wright().review_hunks(opts.args ~= '' and opts.args or nil)
end, { nargs = '?', desc = "wright: each proposed edit in diff mode; ga/gr accept/reject the hunk under the cursor" })

vim.api.nvim_create_user_command('WrightAccept', function(opts)
  wright().review_decision(true, opts.args ~= '' and opts.args or nil)
end, { nargs = '?', desc = "wright: apply a review session's edits" })

vim.api.nvim_create_user_command('WrightReject', function(opts)
  wright().review_decision(false, opts.args ~= '' and opts.args or nil)
end, { nargs = '?', desc = "wright: drop a review session's edits" })

vim.api.nvim_create_user_command('WrightLog', function()
  wright().log()
end, { desc = "wright: the agent's event log" })
