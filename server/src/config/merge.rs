//! How the values one key has in the layers combine into the value wright uses, by the key's
//! [`Merge`] rule, keeping every part and why it did or did not count (for `wright doctor`).
//!
//! The user's own layers (user file, editor, environment) resolve among themselves as always:
//! the later wins. A workspace file is the repository's, and its value combines with the
//! user's by the rule: a policy key can only be tightened by it.

use super::Source;
use super::schema::{self, KeySpec, Merge};

/// One layer's value of a key, in layer order.
pub(super) struct Given<'a> {
    pub value: &'a str,
    pub source: &'a Source,
    /// Whether the layer is the user's (not a workspace file).
    pub user: bool,
}

/// One layer's part in a key's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    value: String,
    pub source: Source,
    /// Why this part did not count, when it did not.
    pub ignored: Option<&'static str>,
    secret: bool,
}

impl Part {
    /// The value as it may be shown: secrets become `<set>`.
    pub fn display_value(&self) -> &str {
        if self.secret { "<set>" } else { &self.value }
    }
}

/// What the user's layers decided for the keys a [`Merge::UserChoice`] looks at.
pub(super) struct Choice {
    /// The user set the rule's `allowed_by` key to `true`.
    pub allowed: bool,
    /// A layer of the user's sets some key of the rule's group.
    pub user_chose: bool,
}

/// The combined value and the source to name for it (none when nothing sets the key and it
/// has no default, or only parts that did not count do), and every part.
pub(super) struct Combined {
    pub value: Option<(String, Source)>,
    pub parts: Vec<Part>,
}

const LATER_WINS: &str = "a later layer wins";
const LATER_OF_YOURS_WINS: &str = "a later layer of yours wins";
const YOUR_CHOICE_WINS: &str =
    "your own model choice wins over a workspace file's (allow_workspace_model = true lets it)";
const WORKSPACE_ALLOWED: &str = "allow_workspace_model = true: a workspace file's value wins";
const NARROW_ONLY: &str = "adds nothing: a workspace file can only narrow an allow-list";

pub(super) fn combine(spec: &KeySpec, given: &[Given], choice: &Choice) -> Combined {
    let default = || {
        spec.default.map(|value| Part {
            value: value.to_owned(),
            source: Source::Default,
            ignored: None,
            secret: spec.secret,
        })
    };
    if let Merge::Override | Merge::UserOnly(_) = spec.merge {
        // Plain precedence, workspace files in their place among the layers.
        let mut parts: Vec<Part> = given.iter().map(|g| part(spec, g)).collect();
        if parts.is_empty() {
            parts.extend(default());
        }
        return last_counts(parts, LATER_WINS);
    }
    // The user's value: their last layer's, else the default. Earlier layers of theirs are
    // shown as overridden.
    let user: Vec<&Given> = given.iter().filter(|g| g.user).collect();
    let mut parts: Vec<Part> = Vec::new();
    let base = match user.split_last() {
        Some((last, earlier)) => {
            parts.extend(
                earlier
                    .iter()
                    .map(|g| ignore(part(spec, g), LATER_OF_YOURS_WINS)),
            );
            Some(part(spec, last))
        }
        None => default(),
    };
    let workspace: Vec<Part> = given
        .iter()
        .filter(|g| !g.user)
        .map(|g| part(spec, g))
        .collect();
    match spec.merge {
        Merge::Override | Merge::UserOnly(_) => unreachable!("resolved above"),
        Merge::UserChoice { .. } => {
            if !choice.allowed && choice.user_chose {
                // The user's layers decide; with this key unset by them, it stays unset.
                let value = base.as_ref().map(|p| (p.value.clone(), p.source.clone()));
                parts.extend(base);
                parts.extend(workspace.into_iter().map(|p| ignore(p, YOUR_CHOICE_WINS)));
                return Combined { value, parts };
            }
            let overruled = if choice.allowed {
                WORKSPACE_ALLOWED
            } else {
                LATER_WINS
            };
            match base {
                Some(base) if !workspace.is_empty() => parts.push(ignore(base, overruled)),
                Some(base) => parts.push(base),
                None => {}
            }
            parts.extend(workspace);
            last_counts(parts, LATER_WINS)
        }
        Merge::Stricter(order) => {
            let rank = |value: &str| order.iter().position(|v| *v == value).unwrap_or(0);
            let notes = (
                "a workspace file's value is stricter",
                "not stricter than the value that applies",
            );
            least(parts, base, workspace, notes, |a, b| rank(a).cmp(&rank(b)))
        }
        Merge::Smaller => {
            let number = |value: &str| value.parse::<u64>().unwrap_or(0);
            let notes = (
                "a workspace file's value is smaller",
                "not smaller than the value that applies",
            );
            least(parts, base, workspace, notes, |a, b| {
                number(a).cmp(&number(b))
            })
        }
        Merge::Union => {
            let mut items: Vec<&str> = Vec::new();
            for part in base.iter().chain(&workspace) {
                for item in schema::items(&part.value) {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                }
            }
            let value = items.join("; ");
            together(value, parts, base, workspace)
        }
        Merge::Intersect { unset_allows_all } => {
            if base.is_none() && !unset_allows_all {
                // Nothing is allowed; a workspace file cannot add to that.
                parts.extend(workspace.into_iter().map(|p| ignore(p, NARROW_ONLY)));
                return Combined { value: None, parts };
            }
            let mut lists = base.iter().chain(&workspace);
            let mut items: Vec<&str> = lists
                .next()
                .map(|first| schema::items(&first.value).collect())
                .unwrap_or_default();
            for part in lists {
                let theirs: Vec<&str> = schema::items(&part.value).collect();
                items.retain(|item| theirs.contains(item));
            }
            let value = items.join("; ");
            together(value, parts, base, workspace)
        }
    }
}

fn part(spec: &KeySpec, given: &Given) -> Part {
    Part {
        value: given.value.to_owned(),
        source: given.source.clone(),
        ignored: None,
        secret: spec.secret,
    }
}

fn ignore(mut part: Part, why: &'static str) -> Part {
    part.ignored = Some(why);
    part
}

/// The last part counts; the ones before it that still count are marked with `why`.
fn last_counts(mut parts: Vec<Part>, why: &'static str) -> Combined {
    let Some(last) = parts.len().checked_sub(1) else {
        return Combined { value: None, parts };
    };
    for part in &mut parts[..last] {
        part.ignored = part.ignored.or(Some(why));
    }
    Combined {
        value: Some((parts[last].value.clone(), parts[last].source.clone())),
        parts,
    }
}

/// The least by `order` of the user's value and the workspace files' (the strictest mode, the
/// smallest limit); a tie goes to the user's. `notes` say why the user's value, and why a
/// workspace file's, did not count.
fn least(
    mut parts: Vec<Part>,
    base: Option<Part>,
    workspace: Vec<Part>,
    (yours, theirs): (&'static str, &'static str),
    order: impl Fn(&str, &str) -> std::cmp::Ordering,
) -> Combined {
    let user_base = base.is_some();
    let candidates: Vec<Part> = base.into_iter().chain(workspace).collect();
    let winner = (0..candidates.len()).reduce(|best, i| {
        if order(&candidates[i].value, &candidates[best].value).is_lt() {
            i
        } else {
            best
        }
    });
    let Some(winner) = winner else {
        return Combined { value: None, parts };
    };
    let (value, source) = (
        candidates[winner].value.clone(),
        candidates[winner].source.clone(),
    );
    for (i, candidate) in candidates.into_iter().enumerate() {
        parts.push(match i {
            _ if i == winner => candidate,
            0 if user_base => ignore(candidate, yours),
            _ => ignore(candidate, theirs),
        });
    }
    Combined {
        value: Some((value, source)),
        parts,
    }
}

/// A list several parts made: its source names them all (one alone names itself).
fn together(
    value: String,
    mut parts: Vec<Part>,
    base: Option<Part>,
    workspace: Vec<Part>,
) -> Combined {
    let mut counted: Vec<Source> = base
        .iter()
        .chain(&workspace)
        .map(|p| p.source.clone())
        .collect();
    parts.extend(base);
    parts.extend(workspace);
    let source = match counted.len() {
        0 => return Combined { value: None, parts },
        1 => counted.remove(0),
        _ => Source::Combined(counted),
    };
    Combined {
        value: Some((value, source)),
        parts,
    }
}
