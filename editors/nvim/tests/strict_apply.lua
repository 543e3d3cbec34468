-- The strict workspace/applyEdit handler on edits crafted here (no model involved): a stale
-- version anywhere refuses the whole edit, nothing applied; version 0 is checked like any
-- other; unversioned `changes`, resource operations and ranges past the end; a good
-- two-document edit lands in both buffers.

local H = dofile(vim.env.WRIGHT_NVIM_PLUGIN .. '/tests/helpers.lua')

H.run(function()
  H.setup()
  local lib, client = H.open('src/lib.rs')
  local cargo = H.open('Cargo.toml')
  local lib_uri, cargo_uri = vim.uri_from_bufnr(lib), vim.uri_from_bufnr(cargo)
  local lib_text, cargo_text = H.text(lib), H.text(cargo)
  local apply = require('wright.apply').workspace_apply_edit
  local ctx = { client_id = client.id, method = 'workspace/applyEdit' }
  local function version(bufnr)
    return vim.lsp.util.buf_versions[bufnr]
  end
  local function insert_at_top(uri, v, text)
    return {
      textDocument = { uri = uri, version = v },
      edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } }, newText = text } },
    }
  end
  H.eq(0, version(lib), 'a buffer just opened is at version 0')

  -- The second document's version is stale: nothing is applied, not even to the first.
  vim.api.nvim_buf_set_lines(cargo, 0, 0, true, { '# typed' })
  local typed_cargo = H.text(cargo)
  local answer = apply(nil, {
    edit = { documentChanges = { insert_at_top(lib_uri, 0, '// one\n'), insert_at_top(cargo_uri, 0, '# two\n') } },
  }, ctx)
  H.eq(false, answer.applied, 'a stale second document refuses the edit')
  H.truthy(answer.failureReason:find('Cargo.toml changed since the edit was computed', 1, true), answer.failureReason)
  H.eq(lib_text, H.text(lib), 'the first document is untouched')
  H.eq(typed_cargo, H.text(cargo), 'the second keeps the typed line')

  -- Version 0 is checked too: the user typed into a buffer opened at 0.
  vim.api.nvim_buf_set_lines(lib, 0, 0, true, { '// typed' })
  local typed_lib = H.text(lib)
  answer = apply(nil, { edit = { documentChanges = { insert_at_top(lib_uri, 0, '// agent\n') } } }, ctx)
  H.eq(false, answer.applied, 'an edit for version 0 of a buffer now past it')
  H.eq(typed_lib, H.text(lib), 'untouched')

  -- Resource operations and ranges outside the buffer are refused with a reason.
  answer = apply(nil, { edit = { documentChanges = { { kind = 'create', uri = vim.uri_from_fname(H.workspace .. '/new.rs') } } } }, ctx)
  H.eq(false, answer.applied, 'a resource operation')
  H.truthy(answer.failureReason:find('resource operations', 1, true), answer.failureReason)
  answer = apply(nil, {
    edit = { documentChanges = { {
      textDocument = { uri = lib_uri, version = version(lib) },
      edits = { { range = { start = { line = 90, character = 0 }, ['end'] = { line = 91, character = 0 } }, newText = 'x' } },
    } } },
  }, ctx)
  H.eq(false, answer.applied, 'a range past the end')
  H.eq(typed_lib, H.text(lib), 'still untouched')

  -- Current versions: both documents change, as one edit.
  answer = apply(nil, {
    edit = { documentChanges = { insert_at_top(lib_uri, version(lib), '// one\n'), insert_at_top(cargo_uri, version(cargo), '# two\n') } },
  }, ctx)
  H.eq({ applied = true }, answer, 'a current two-document edit')
  H.eq('// one\n' .. typed_lib, H.text(lib), 'the first document')
  H.eq('# two\n' .. typed_cargo, H.text(cargo), 'the second document')

  -- Unversioned `changes` (a client without documentChanges would get these) apply as given.
  answer = apply(nil, {
    edit = { changes = { [lib_uri] = { { range = { start = { line = 0, character = 3 }, ['end'] = { line = 0, character = 6 } }, newText = 'ONE' } } } },
  }, ctx)
  H.eq({ applied = true }, answer, 'unversioned changes')
  H.eq('// ONE', vim.api.nvim_buf_get_lines(lib, 0, 1, true)[1], 'the change')
end)
