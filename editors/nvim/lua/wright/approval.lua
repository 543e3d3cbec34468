-- wright.nvim: `wright/requestApproval`, a command that needs more than the sandbox allows,
-- answered through `vim.ui.select`.

local M = {}

local choices = {
  { decision = 'allow', label = 'Allow once' },
  { decision = 'allowAlways', label = 'Allow for the rest of this session' },
  { decision = 'deny', label = 'Deny' },
}

local function prompt(params)
  return string.format(
    'wright %s wants to run `%s` (%s): %s',
    params.sessionId,
    params.command ~= vim.NIL and params.command or '?',
    params.kind,
    params.reason
  )
end

--- The request handler: `{ decision = 'allow' | 'allowAlways' | 'deny' }`.
function M.request_approval(_, params)
  local opts = {
    prompt = prompt(params),
    kind = 'wright_approval',
    format_item = function(choice)
      return choice.label
    end,
  }
  local co, is_main = coroutine.running()
  if co and not is_main then
    -- Neovim 0.11+ runs server requests in a coroutine: wait for any vim.ui.select, even an
    -- asynchronous one (telescope, fzf-lua…).
    vim.ui.select(choices, opts, function(choice)
      -- Scheduled: a synchronous select calls back before the yield below.
      vim.schedule(function()
        coroutine.resume(co, choice)
      end)
    end)
    local choice = coroutine.yield()
    return { decision = choice and choice.decision or 'deny' }
  end
  -- Neovim 0.10: the answer must be returned now, so only a synchronous select can give it.
  local answered, picked = false, nil
  vim.ui.select(choices, opts, function(choice)
    answered, picked = true, choice
  end)
  if not answered then
    require('wright.ui').notify('denied: this vim.ui.select answers too late for Neovim 0.10', vim.log.levels.WARN)
  end
  return { decision = picked and picked.decision or 'deny' }
end

return M
