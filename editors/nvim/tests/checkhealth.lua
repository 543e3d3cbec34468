-- `:checkhealth wright` runs without error and reports the binary, its version, the sandbox
-- from `wright doctor --json` and the model from the environment (WRIGHT_MODEL).

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  H.open('src/lib.rs')
  vim.cmd('checkhealth wright')
  local report = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, true), '\n')
  local function has(text)
    H.truthy(report:find(text, 1, true), 'the report has ' .. vim.inspect(text) .. ':\n' .. report)
  end
  has('binary: ' .. H.bin)
  has('version: wright ')
  has('user namespaces: ')
  has('model: openai/gpt-4.1 (environment WRIGHT_MODEL)')
  has('openai: key set, endpoint http://127.0.0.1:')
  has('server running (client ')
  H.truthy(not report:find('ERROR', 1, true), 'no errors:\n' .. report)

  -- Without WRIGHT_MODEL, the workspace's own configuration file names the model.
  vim.cmd('bwipeout')
  local previous = vim.env.WRIGHT_MODEL
  vim.env.WRIGHT_MODEL = nil
  vim.cmd('checkhealth wright')
  vim.env.WRIGHT_MODEL = previous
  report = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, true), '\n')
  has('model: openai/gpt-4.1-mini (workspace file ')
end)
