-- A command that needs the network asks through `wright/requestApproval` (the plugin declares
-- `experimental.wrightRequestApproval`), answered with `vim.ui.select`, stubbed here to pick
-- "Allow once". The provider's script: a run_command reaching a host listener, then "Done.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(asked, { prompt = opts.prompt, kind = opts.kind, labels = vim.tbl_map(opts.format_item, items) })
    for _, item in ipairs(items) do
      if item.decision == 'allow' then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end

  H.setup()
  H.open('src/lib.rs')
  vim.cmd('Wright fetch the page')
  local session = H.finished()
  H.eq('done', session.status, 'the session outcome')
  H.eq(1, #asked, 'approvals asked')
  H.eq('wright_approval', asked[1].kind, 'the select kind')
  H.eq({ 'Allow once', 'Allow for the rest of this session', 'Deny' }, asked[1].labels, 'the choices')
  H.truthy(asked[1].prompt:find('/dev/tcp/127.0.0.1', 1, true), 'the prompt names the command: ' .. asked[1].prompt)
  H.truthy(asked[1].prompt:find('(network)', 1, true), 'the prompt names the kind: ' .. asked[1].prompt)
end)
