//! `cargo xtask`: the project's own tasks, in Rust so they run wherever cargo does.

mod bench;
mod bench_agent;
mod bench_compaction;
mod bench_edit;
mod bench_index;
mod bench_llm;
mod bench_local;
mod bench_retrieval;
mod bench_sandbox;
mod codegen;
mod demo;
mod fuzz;
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
  bench sandbox    sandbox start overhead, snapshot creation, throughput and idle memory
                   against bubblewrap [--runs N]; writes docs/benchmarks.md
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
