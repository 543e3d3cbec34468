//! `codegen`: writes `editors/vscode/src/protocol.ts`, the TypeScript declarations of wright's
//! LSP extensions, from the `wright-protocol` crate (a test fails when the file is stale).
//!
//! The declarations come from `ts-rs` derives on the protocol's own types (its `ts` feature,
//! enabled only here), not from a description kept beside them: ts-rs reads the same serde
//! attributes serde does (`rename_all`, `tag`, `rename_all_fields`, `flatten`), so the field
//! names and shapes cannot drift from what goes on the wire. What serde attributes cannot say is
//! fixed here or in the crate, each checked by a test below:
//! - `u64` is a TypeScript `number`, not ts-rs's default `bigint`: serde_json writes it as a
//!   JSON number, and `JSON.parse` reads a number;
//! - an `Option` field is `T | null` (serde writes `null`), and absent-or-null (`field?: T |
//!   null`) in a params struct whose `Option`s are `#[serde(default)]`, which the crate marks
//!   `ts(optional_fields = nullable)`;
//! - the flattened event map of `wright/agentEvent` is typed as the union `AgentEventKind`.
//!
//! The file imports nothing: the extension pairs the method names with the types
//! (`new RequestType<AgentRunParams, AgentRunResult, void>(AgentRun.method)`).

use std::any::TypeId;
use std::collections::HashSet;
use std::fmt::Write as _;

use anyhow::Context as _;
use ts_rs::{Config, TS, TypeVisitor};
use wright_protocol::{self as proto, Request};

/// Where the declarations go, relative to the repository root.
pub const OUTPUT: &str = "editors/vscode/src/protocol.ts";

pub fn run() -> anyhow::Result<()> {
    let path = crate::project_root().join(OUTPUT);
    let dir = path.parent().expect("OUTPUT names a file in a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&path, generate()).with_context(|| format!("writing {}", path.display()))?;
    println!("codegen: wrote {OUTPUT}");
    // The configuration reference, from the schema (its test fails when they differ).
    let reference = crate::project_root().join("docs/configuration.md");
    std::fs::write(&reference, wright::config::reference())
        .with_context(|| format!("writing {}", reference.display()))?;
    println!("codegen: wrote docs/configuration.md");
    Ok(())
}

/// The text of [`OUTPUT`].
pub fn generate() -> String {
    generator().finish()
}

/// Every method of the crate, with its types; `every_method_is_generated` checks the list
/// against `wright_protocol::METHODS`.
fn generator() -> Generator {
    let mut file = Generator::new();
    file.request::<proto::Status>();
    file.request::<proto::ViewFileText>();
    file.request::<proto::Context>();
    file.request::<proto::AgentRun>();
    file.request::<proto::AgentPrompt>();
    file.request::<proto::SessionConfigure>();
    file.request::<proto::AgentCancel>();
    file.request::<proto::Sessions>();
    file.request::<proto::Undo>();
    file.request::<proto::EditsAccept>();
    file.request::<proto::EditsReject>();
    file.request::<proto::Stats>();
    file.server_request::<proto::RequestApprovalParams, proto::RequestApprovalResult>(
        "RequestApproval",
        proto::RequestApproval::METHOD,
    );
    file.union::<proto::AgentEventKind>();
    file.notification::<proto::AgentEventParams<proto::AgentEventKind>>(
        "AgentEvent",
        proto::AgentEvent::METHOD,
    );
    file
}

struct Generator {
    config: Config,
    /// Types already visited, so each is declared once, where it is first needed.
    seen: HashSet<TypeId>,
    /// Each type's declaration by name: written out in name order, because ts-rs visits a
    /// type's dependencies in an order that changes from build to build (TypeScript needs no
    /// declaration before use).
    declarations: std::collections::BTreeMap<String, String>,
    /// `(inlined, name)` of the unions declared by [`Generator::union`].
    unions: Vec<(String, String)>,
    /// `(constant, method, params, result)`.
    requests: Vec<(String, &'static str, String, String)>,
    /// `(constant, method, params)`.
    notifications: Vec<(&'static str, &'static str, String)>,
    /// Server → client requests: `(constant, method, params, result)`.
    server_requests: Vec<(&'static str, &'static str, String, String)>,
}

impl Generator {
    fn new() -> Self {
        Generator {
            config: Config::new().with_large_int("number"),
            seen: HashSet::new(),
            declarations: std::collections::BTreeMap::new(),
            unions: Vec::new(),
            requests: Vec::new(),
            notifications: Vec::new(),
            server_requests: Vec::new(),
        }
    }

    fn server_request<P: TS + 'static, R: TS + 'static>(
        &mut self,
        name: &'static str,
        method: &'static str,
    ) {
        self.visit::<P>();
        self.visit::<R>();
        let (params, result) = (P::name(&self.config), R::name(&self.config));
        self.server_requests.push((name, method, params, result));
    }

    fn request<R: Request + 'static>(&mut self)
    where
        R::Params: TS + 'static,
        R::Result: TS + 'static,
    {
        self.visit::<R::Params>();
        self.visit::<R::Result>();
        // The method's enum, `wright_protocol::AgentRun`, names its constant.
        let name = std::any::type_name::<R>()
            .rsplit("::")
            .next()
            .unwrap_or_default();
        self.requests.push((
            name.to_owned(),
            R::METHOD,
            R::Params::name(&self.config),
            R::Result::name(&self.config),
        ));
    }

    fn notification<P: TS + 'static>(&mut self, name: &'static str, method: &'static str) {
        self.visit::<P>();
        let params = P::name(&self.config);
        self.notifications.push((name, method, params));
    }

    /// Declares the enum `T` under its name, and writes that name where ts-rs would inline it
    /// into a type that flattens it (a discriminated union is only usable in TypeScript by name).
    fn union<T: TS + 'static>(&mut self) {
        self.visit::<T>();
        self.unions
            .push((T::inline_flattened(&self.config), T::name(&self.config)));
    }

    fn finish(self) -> String {
        let mut out = String::from(
            "// Generated by `cargo xtask codegen` from protocol/src/lib.rs (crate wright-protocol).\n\
             // Do not edit: change the crate and run `cargo xtask codegen` again.\n\
             // docs/protocol.md documents every method.\n",
        );
        out.push_str(
            "\n/** A request's method name; its types are `Requests[method]`. */\n\
             export interface RequestMethod<M extends keyof Requests> {\n  readonly method: M;\n}\n",
        );
        out.push_str(
            "\n/** A notification's method name; its params are `Notifications[method]`. */\n\
             export interface NotificationMethod<M extends keyof Notifications> {\n  readonly method: M;\n}\n",
        );
        out.push('\n');
        for (name, method, _, _) in &self.requests {
            let _ = writeln!(
                out,
                "export const {name}: RequestMethod<\"{method}\"> = {{ method: \"{method}\" }};"
            );
        }
        for (name, method, _) in &self.notifications {
            let _ = writeln!(
                out,
                "export const {name}: NotificationMethod<\"{method}\"> = {{ method: \"{method}\" }};"
            );
        }
        for (name, method, _, _) in &self.server_requests {
            let _ = writeln!(
                out,
                "export const {name} = {{ method: \"{method}\" }} as const;"
            );
        }
        out.push_str("\n/** Every request (client → server): its params and result. */\nexport interface Requests {\n");
        for (_, method, params, result) in &self.requests {
            let _ = writeln!(
                out,
                "  \"{method}\": {{ params: {params}; result: {result} }};"
            );
        }
        out.push_str("}\n\n/** Every notification (server → client): its params. */\nexport interface Notifications {\n");
        for (_, method, params) in &self.notifications {
            let _ = writeln!(out, "  \"{method}\": {params};");
        }
        out.push_str(
            "}\n\n/** Every request the server sends the client: its params and result. */\nexport interface ServerRequests {\n",
        );
        for (_, method, params, result) in &self.server_requests {
            let _ = writeln!(
                out,
                "  \"{method}\": {{ params: {params}; result: {result} }};"
            );
        }
        out.push_str(
            "}\n\nexport type ParamsOf<M extends keyof Requests> = Requests[M][\"params\"];\n",
        );
        out.push_str("export type ResultOf<M extends keyof Requests> = Requests[M][\"result\"];\n");

        out.push_str(
            "\n/** Every method, requests and notifications. */\nexport const METHODS = [\n",
        );
        for method in proto::METHODS {
            let _ = writeln!(out, "  \"{method}\",");
        }
        out.push_str("] as const;\n");

        out.push_str(
            "\n/** `workspace/executeCommand` names, for clients without custom requests. */\n\
             export const Commands = {\n",
        );
        for command in proto::commands::ALL {
            let _ = writeln!(out, "  {}: \"{command}\",", command_key(command));
        }
        out.push_str("} as const;\n");

        out.push_str("\n// The types of the params and results.\n");
        for declaration in self.declarations.values() {
            out.push_str(declaration);
        }
        out
    }

    /// Declares `T` after the types it uses, unless it has no declaration of its own
    /// (`String`, `Vec<_>`, `Option<_>`…: those are written inline).
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        T::visit_dependencies(self);
        if T::output_path().is_some() {
            let mut decl = T::decl(&self.config);
            for (inlined, name) in &self.unions {
                decl = decl.replace(inlined.as_str(), name);
            }
            let docs = T::docs().unwrap_or_default();
            self.declarations.insert(
                T::name(&self.config),
                format!("\n{docs}export {}\n", layout(&decl)),
            );
        }
    }
}

impl TypeVisitor for Generator {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        Generator::visit::<T>(self);
    }
}

/// `wright.agent.run` → `agentRun`: the command's key in `Commands`.
fn command_key(command: &str) -> String {
    let mut key = String::new();
    let words = command
        .strip_prefix("wright.")
        .unwrap_or(command)
        .split('.');
    for (n, word) in words.enumerate() {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            if n == 0 {
                key.push(first);
            } else {
                key.extend(first.to_uppercase());
            }
            key.push_str(chars.as_str());
        }
    }
    key
}

/// One field per line, indented by nesting: ts-rs writes a declaration on one line, with its
/// fields' doc comments on lines of their own.
fn layout(decl: &str) -> String {
    // First the line breaks: after `{`, and after a `,` directly inside `{` (not inside
    // `<>`, `()` or `[]`, where it separates type arguments, not fields).
    let mut lines: Vec<String> = Vec::new();
    for line in decl.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line.starts_with("/**") || line.starts_with('*') {
            lines.push(line.to_owned());
            continue;
        }
        let mut open: Vec<char> = Vec::new();
        let mut current = String::new();
        let mut in_string = false;
        for c in line.chars() {
            if in_string {
                in_string = c != '"';
                current.push(c);
                continue;
            }
            current.push(c);
            match c {
                '"' => in_string = true,
                '{' | '(' | '[' | '<' => open.push(c),
                '}' | ')' | ']' | '>' => {
                    open.pop();
                }
                _ => {}
            }
            if c == '{' || (c == ',' && open.last().is_none_or(|&b| b == '{')) {
                lines.push(std::mem::take(&mut current));
            }
        }
        lines.push(current);
    }
    // Then the indentation: one level per line that leaves brackets open (`Array<{` is one),
    // closed by the line that closes them all (`}>`).
    let mut out = String::new();
    let mut levels: Vec<usize> = Vec::new();
    fn close(levels: &mut Vec<usize>) {
        if let Some(top) = levels.last_mut() {
            *top -= 1;
            if *top == 0 {
                levels.pop();
            }
        }
    }
    for line in lines
        .iter()
        .map(|line| line.trim())
        .filter(|l| !l.is_empty())
    {
        let closers = line
            .chars()
            .take_while(|c| matches!(c, '}' | ')' | ']' | '>'))
            .count();
        if line.starts_with('*') {
            out.push_str(&"  ".repeat(levels.len()));
            out.push(' ');
        } else {
            (0..closers).for_each(|_| close(&mut levels));
            out.push_str(&"  ".repeat(levels.len()));
            let (mut opened, mut in_string) = (0, false);
            for c in line.chars().skip(closers) {
                match c {
                    '"' => in_string = !in_string,
                    '{' | '(' | '[' | '<' if !in_string => opened += 1,
                    '}' | ')' | ']' | '>' if !in_string && opened > 0 => opened -= 1,
                    '}' | ')' | ']' | '>' if !in_string => close(&mut levels),
                    _ => {}
                }
            }
            if opened > 0 {
                levels.push(opened);
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    use wright::agent::events::{AgentEvent, FinalStatus, Outcome};
    use wright::agent::tools::{PlanStep, StepStatus};
    use wright::llm::Usage;

    #[test]
    fn protocol_ts_is_up_to_date() {
        let path = crate::project_root().join(OUTPUT);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed.replace("\r\n", "\n") == generate(),
            "{OUTPUT} is not what protocol/src/lib.rs generates: run `cargo xtask codegen` \
             and commit the result"
        );
    }

    #[test]
    fn numbers_are_numbers_and_events_a_named_union() {
        let text = generate();
        assert!(
            !text.contains("bigint"),
            "serde_json writes u64 as a JSON number"
        );
        assert!(
            text.contains("  seq: number,\n} & AgentEventKind;\n"),
            "{text}"
        );
        assert!(text.contains("export type AgentEventKind = {\n  \"kind\": \"model\","));
    }

    #[test]
    fn every_method_is_generated() {
        let file = generator();
        let mut generated: Vec<&str> = file.requests.iter().map(|r| r.1).collect();
        generated.extend(file.notifications.iter().map(|n| n.1));
        generated.extend(file.server_requests.iter().map(|r| r.1));
        generated.sort_unstable();
        let mut methods = proto::METHODS.to_vec();
        methods.sort_unstable();
        assert_eq!(
            generated, methods,
            "list the missing method in `generator()`"
        );
    }

    /// One event of every kind the server has, its fields set apart from their defaults.
    fn every_server_event() -> Vec<AgentEvent> {
        let usage = Usage {
            input: 1_200,
            cached_input: 1_000,
            output: 30,
            cache_write: 200,
        };
        let events = vec![
            AgentEvent::Model {
                model: "openai/gpt-4.1".into(),
                tier: Some("large".into()),
                reason: "configured".into(),
            },
            AgentEvent::StepStarted { step: 2 },
            AgentEvent::TextDelta {
                text: "Reading".into(),
            },
            AgentEvent::StepRetried {
                step: 1,
                reason: "connection reset".into(),
            },
            AgentEvent::ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "src/lib.rs"}"#.into(),
            },
            AgentEvent::ToolResult {
                id: "call_1".into(),
                name: "read_file".into(),
                is_error: true,
                output: "no such file".into(),
            },
            AgentEvent::FilesChanged {
                paths: vec!["src/lib.rs".into()],
            },
            AgentEvent::Plan {
                steps: vec![
                    PlanStep {
                        title: "read".into(),
                        status: StepStatus::Done,
                    },
                    PlanStep {
                        title: "edit".into(),
                        status: StepStatus::InProgress,
                    },
                    PlanStep {
                        title: "test".into(),
                        status: StepStatus::Pending,
                    },
                ],
            },
            AgentEvent::Usage {
                total: usage,
                context_tokens: 1_230,
                context_window: 128_000,
                cost_usd: Some(0.0011),
            },
            AgentEvent::Turn {
                turn: 2,
                message: "now the docs".into(),
            },
            AgentEvent::Mode {
                mode: "plan".into(),
            },
            AgentEvent::Title {
                title: "Fix the parser".into(),
            },
            AgentEvent::Approval {
                command: "cargo fetch".into(),
                decision: "allowAlways".into(),
            },
            AgentEvent::EditApplied {
                paths: vec!["src/lib.rs".into()],
            },
            AgentEvent::EditRejected {
                paths: vec!["src/lib.rs".into()],
                reason: "changed since the edit was planned".into(),
            },
            AgentEvent::EditProposed {
                path: "src/lib.rs".into(),
                before: Some("a - b\n".into()),
                after: Some("a + b\n".into()),
                hunks: vec![wright::agent::events::Hunk {
                    id: "h1".into(),
                    start_line: 1,
                    end_line: 1,
                    old_text: "a - b\n".into(),
                    new_text: "a + b\n".into(),
                }],
            },
            AgentEvent::Compacted {
                masked: 3,
                tokens_before: 9_000,
                tokens_after: 4_000,
                summarized: true,
            },
            AgentEvent::Error {
                message: "rate limited".into(),
            },
            AgentEvent::Finished {
                turn: 1,
                outcome: Outcome {
                    status: FinalStatus::Failed,
                    message: "stopped".into(),
                    reason: Some("step limit".into()),
                    steps: 40,
                    files_changed: vec!["src/lib.rs".into()],
                    usage,
                },
            },
            AgentEvent::Finished {
                turn: 1,
                outcome: Outcome {
                    status: FinalStatus::Done,
                    message: "done".into(),
                    reason: None,
                    steps: 3,
                    files_changed: Vec::new(),
                    usage: Usage::default(),
                },
            },
            AgentEvent::Finished {
                turn: 1,
                outcome: Outcome {
                    status: FinalStatus::Cancelled,
                    message: String::new(),
                    reason: None,
                    steps: 1,
                    files_changed: Vec::new(),
                    usage: Usage::default(),
                },
            },
        ];
        for event in &events {
            // No wildcard: a new kind of event fails to compile here until it has a sample
            // above (and a variant in `wright_protocol::AgentEventKind`).
            match event {
                AgentEvent::Model { .. }
                | AgentEvent::Turn { .. }
                | AgentEvent::Mode { .. }
                | AgentEvent::Title { .. }
                | AgentEvent::StepStarted { .. }
                | AgentEvent::TextDelta { .. }
                | AgentEvent::StepRetried { .. }
                | AgentEvent::ToolCall { .. }
                | AgentEvent::ToolResult { .. }
                | AgentEvent::Approval { .. }
                | AgentEvent::EditApplied { .. }
                | AgentEvent::EditRejected { .. }
                | AgentEvent::FilesChanged { .. }
                | AgentEvent::EditProposed { .. }
                | AgentEvent::Plan { .. }
                | AgentEvent::Usage { .. }
                | AgentEvent::Compacted { .. }
                | AgentEvent::Error { .. }
                | AgentEvent::Finished { .. } => {}
            }
        }
        events
    }

    /// The server sends its own `AgentEvent`s as the flattened map of `AgentEventParams`; the
    /// generated union is `AgentEventKind`'s, so each must read back as one, unchanged.
    #[test]
    fn server_events_parse_as_agent_event_kind() {
        let events = every_server_event();
        let mut kinds = HashSet::new();
        for (seq, event) in (1..).zip(&events) {
            let serde_json::Value::Object(map) = serde_json::to_value(event).unwrap() else {
                panic!("{event:?} is not serialized as an object");
            };
            let sent = serde_json::to_value(proto::AgentEventParams {
                session_id: "s1".to_owned(),
                seq,
                event: map,
            })
            .unwrap();
            let read: proto::AgentEventParams<proto::AgentEventKind> =
                serde_json::from_value(sent.clone())
                    .unwrap_or_else(|err| panic!("{sent} is not an AgentEventKind: {err}"));
            assert_eq!(serde_json::to_value(&read).unwrap(), sent);
            kinds.insert(sent["kind"].as_str().unwrap().to_owned());
        }
        assert_eq!(kinds.len(), 19, "one sample per kind: {kinds:?}");
    }

    /// `ts(optional_fields = nullable)` must sit exactly on the structs whose fields are
    /// `#[serde(default)]`: serde accepts those absent, and writes every other `Option` as `null`.
    #[test]
    fn optional_fields_follow_serde_default() {
        let source =
            std::fs::read_to_string(crate::project_root().join("protocol/src/lib.rs")).unwrap();
        let mut checked = 0;
        for item in source.split("\n#[derive(").skip(1) {
            let Some(name) = item
                .split_once("pub struct ")
                .map(|(_, rest)| rest.split(|c: char| !c.is_alphanumeric()).next().unwrap())
            else {
                continue;
            };
            let body = item.split("\n}").next().unwrap();
            let defaults = body.contains("#[serde(default)]");
            let optional = body.contains("ts(optional_fields = nullable)");
            assert_eq!(
                defaults, optional,
                "{name}: `#[serde(default)]` fields and `ts(optional_fields = nullable)` go together"
            );
            checked += usize::from(defaults);
        }
        assert_eq!(
            checked, 7,
            "ContextParams, AgentRunParams, AgentPromptParams, SessionConfigureParams, \
             ReviewParams, UndoParams and StatsParams"
        );
    }

    #[test]
    fn layout_breaks_fields_not_type_arguments() {
        let decl = "type T = { a: Array<{ x: string, y: [number, string], }>, \n/**\n * Doc, with a comma.\n */\nb: \"k, v\", };";
        assert_eq!(
            layout(decl),
            "type T = {\n  a: Array<{\n    x: string,\n    y: [number, string],\n  }>,\n  /**\n   * Doc, with a comma.\n   */\n  b: \"k, v\",\n};"
        );
    }

    #[test]
    fn command_keys_are_camel_case() {
        assert_eq!(command_key("wright.status"), "status");
        assert_eq!(command_key("wright.agent.run"), "agentRun");
        assert_eq!(command_key("wright.edits.undo"), "editsUndo");
    }
}
