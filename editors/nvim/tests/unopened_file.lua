-- An agent edit to a file no buffer shows: the server sends it unversioned, the strict handler
-- loads a buffer for it and edits it there (unsaved, the disk untouched), and the server
-- counts it applied once that buffer's didOpen and didChange show the result. A new file is
-- written on disk by the server (this client declares no resource operations).
-- The provider's script: one `apply_patch` (Cargo.toml's version, a new src/extra.rs), then
-- "Done.".

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  H.open('src/lib.rs')
  local manifest = H.workspace .. '/Cargo.toml'
  H.eq(-1, vim.fn.bufnr(manifest), 'Cargo.toml is not open before the run')
  local on_disk = H.read_file('Cargo.toml')

  vim.cmd('Wright bump the version and add a module')
  local session = H.finished()
  H.eq('done', session.status, 'the session outcome')
  local bufnr = vim.fn.bufnr(manifest)
  H.truthy(bufnr ~= -1 and vim.api.nvim_buf_is_loaded(bufnr), 'a buffer was loaded for Cargo.toml')
  H.eq((on_disk:gsub('0%.1%.0', '0.2.0')), H.text(bufnr), 'the edit in that buffer')
  H.truthy(vim.bo[bufnr].modified, 'the edited buffer is unsaved (modified)')
  H.eq(on_disk, H.read_file('Cargo.toml'), 'the file on disk')
  H.eq('pub fn extra() {}\n', H.read_file('src/extra.rs'), 'the new file, written by the server')
end)
