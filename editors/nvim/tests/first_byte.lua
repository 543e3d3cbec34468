-- A measurement for `cargo xtask bench chat`, not a check of behaviour: a task, then
-- WRIGHT_BENCH_TURNS follow-ups sent from the chat buffer; the answer of follow-up k starts with
-- `MARK-k`, and the wall time at which the chat buffer first holds it (in the buffer's own
-- change callback) is printed as `STAMPS {"k": epoch ms, …}` on stdout.

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  H.open('src/lib.rs')
  vim.cmd('Wright explain add')
  local session = H.finished()
  vim.cmd('Wright')
  local chat = vim.api.nvim_get_current_buf()
  local stamps = {}
  vim.api.nvim_buf_attach(chat, false, {
    on_lines = function(_, buf, _, first, _, last_new)
      for _, line in ipairs(vim.api.nvim_buf_get_lines(buf, first, last_new, false)) do
        for k in line:gmatch('MARK%-(%d+)') do
          if not stamps[k] then
            local seconds, micros = vim.uv.gettimeofday()
            stamps[k] = seconds * 1000 + micros / 1000
          end
        end
      end
    end,
  })
  local turns = tonumber(vim.env.WRIGHT_BENCH_TURNS or '10')
  for k = 1, turns do
    local last = vim.api.nvim_buf_line_count(chat)
    vim.api.nvim_buf_set_lines(chat, last - 1, last, true, { 'follow-up ' .. k })
    vim.api.nvim_win_set_cursor(0, { last, 0 })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
    H.wait('turn ' .. (k + 1) .. ' to end', function()
      return session.finished_turn == k + 1
    end)
    H.truthy(stamps[tostring(k)], 'MARK-' .. k .. ' in the chat buffer')
  end
  io.stdout:write('STAMPS ' .. vim.json.encode(stamps) .. '\n')
end)
