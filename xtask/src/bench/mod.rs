//! `bench`: measurements, each a ratio against a named peer run in the same invocation,
//! recorded with the command that produced them in `docs/benchmarks.md`.
//!
//! One module per bench; what they share is in `shared`, which imports none of them (so the
//! benches import `shared`, this module imports the benches, and nothing imports back).

mod agent;
mod chat;
mod compaction;
mod e2e;
mod edit;
mod front_ends;
mod index;
mod llm;
mod load;
mod local;
mod recovery;
mod retrieval;
mod sandbox;
mod shared;

// `cargo xtask fuzz` records its section the same way.
pub use shared::record;

use anyhow::bail;

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let Some(name) = args.first() else {
        bail!(
            "which bench? `retrieval`, `edit`, `index`, `llm`, `compaction`, `agent`, `chat`, \
             `e2e`, `load`, `recovery`, `local` or `sandbox`"
        );
    };
    let command = format!("cargo xtask bench {}", args.join(" "));
    let body = match name.as_str() {
        "retrieval" => retrieval::run(&args[1..])?,
        "edit" => edit::run(&args[1..])?,
        "llm" => llm::run(&args[1..])?,
        "compaction" => compaction::run(&args[1..])?,
        "agent" => agent::run(&args[1..])?,
        "chat" => chat::run(&args[1..])?,
        "e2e" => match e2e::run(&args[1..])? {
            Some(body) => body,
            None => return Ok(()),
        },
        "load" => load::run(&args[1..])?,
        "recovery" => recovery::run(&args[1..])?,
        "local" => local::run(&args[1..])?,
        "index" => match index::run(&args[1..])? {
            Some(body) => body,
            // Handed over to the release build, which recorded its section.
            None => return Ok(()),
        },
        "sandbox" => match sandbox::run(&args[1..])? {
            Some(body) => body,
            None => return Ok(()),
        },
        other => {
            bail!(
                "no bench named {other:?}; there are `retrieval`, `edit`, `index`, `llm`, \
                 `compaction`, `agent`, `chat`, `e2e`, `load`, `recovery`, `local` and `sandbox`"
            )
        }
    };
    println!("\n{body}");
    shared::record(name, &command, &body)
}
