//! `e2e`: the editor clients tested in the real editors (`cargo xtask e2e <editor>`).

mod nvim;

use anyhow::bail;

pub fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("nvim") => nvim::run(&args[1..]),
        Some(other) => bail!("e2e: unknown editor {other:?}; expected `nvim`"),
        None => bail!("e2e: which editor? `cargo xtask e2e nvim [--install | --install-only]`"),
    }
}
