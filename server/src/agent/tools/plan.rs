//! `update_plan`: the agent's visible plan, kept by the session and shown to the user.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    pub title: String,
    pub status: StepStatus,
}

pub(super) fn update_plan(context: &ToolContext, args: &Args) -> ToolResult {
    let mut steps = Vec::new();
    for (n, item) in args.array("steps")?.iter().enumerate() {
        let field = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_str())
                .ok_or_else(|| Failure::Arguments(format!("steps[{n}] needs a string {name:?}")))
        };
        let status = match field("status")? {
            "pending" => StepStatus::Pending,
            "in_progress" => StepStatus::InProgress,
            "done" | "completed" => StepStatus::Done,
            other => {
                return Err(Failure::Arguments(format!(
                    "steps[{n}].status must be pending, in_progress or done, found {other:?}"
                )));
            }
        };
        steps.push(PlanStep {
            title: field("title")?.to_owned(),
            status,
        });
    }
    let mut out = String::from("plan updated:\n");
    for step in &steps {
        let mark = match step.status {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[~]",
            StepStatus::Done => "[x]",
        };
        let _ = writeln!(out, "{mark} {}", step.title);
    }
    *context.plan.lock().unwrap_or_else(|e| e.into_inner()) = steps;
    Ok(ToolOutput::ok(out))
}
