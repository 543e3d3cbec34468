//! The `json` format: the arguments of a str_replace tool call, `{"path", "old_string",
//! "new_string", "replace_all"?}`, a list of them, or `{"path", "edits": [...]}` (the shape of
//! `multi_edit`).
//!
//! The JSON value may sit in prose or a code fence: parsing starts at the first `{` or `[` and
//! stops at the end of that value. `file_path` is accepted for `path`, as some tools name it.

use serde_json::{Map, Value};

use super::{FileOp, Hunk, ParseError, push_update};

pub fn parse(input: &str) -> Result<Vec<FileOp>, ParseError> {
    let Some(start) = input.find(['{', '[']) else {
        return Err(ParseError::new(1, "expected a JSON object or list"));
    };
    let line_of = |offset: usize| input[..offset].matches('\n').count() + 1;
    let mut values = serde_json::Deserializer::from_str(&input[start..]).into_iter::<Value>();
    let value = match values.next() {
        Some(Ok(value)) => value,
        Some(Err(err)) => {
            return Err(ParseError::new(
                line_of(start) + err.line() - 1,
                format!("invalid JSON: {err}"),
            ));
        }
        None => {
            return Err(ParseError::new(
                line_of(start),
                "expected a JSON object or list",
            ));
        }
    };
    let line = line_of(start);
    let items = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut ops: Vec<FileOp> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Value::Object(object) = item else {
            return Err(ParseError::new(
                line,
                format!("item {index}: expected a JSON object"),
            ));
        };
        let path = string(object, &["path", "file_path"], index, line)?;
        let edits = match object.get("edits") {
            Some(Value::Array(edits)) => edits.iter().collect(),
            Some(_) => {
                return Err(ParseError::new(
                    line,
                    format!("item {index}: \"edits\" must be a list"),
                ));
            }
            None => vec![item],
        };
        for edit in edits {
            let Value::Object(edit) = edit else {
                return Err(ParseError::new(
                    line,
                    format!("item {index}: each edit must be a JSON object"),
                ));
            };
            let hunk = Hunk {
                old: string(edit, &["old_string"], index, line)?,
                new: string(edit, &["new_string"], index, line)?,
                substring: true,
                replace_all: match edit.get("replace_all") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(all)) => *all,
                    Some(_) => {
                        return Err(ParseError::new(
                            line,
                            format!("item {index}: \"replace_all\" must be true or false"),
                        ));
                    }
                },
                input_line: line,
                ..Hunk::default()
            };
            push_update(&mut ops, &path, hunk);
        }
    }
    Ok(ops)
}

fn string(
    object: &Map<String, Value>,
    keys: &[&str],
    index: usize,
    line: usize,
) -> Result<String, ParseError> {
    match keys.iter().find_map(|k| object.get(*k)) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ParseError::new(
            line,
            format!("item {index}: \"{}\" must be a string", keys[0]),
        )),
        None => Err(ParseError::new(
            line,
            format!("item {index}: missing \"{}\"", keys[0]),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_lists_and_multi_edits_in_prose() {
        let ops = parse(
            "Call:\n```json\n[{\"path\": \"a.rs\", \"old_string\": \"x\", \"new_string\": \"y\", \"replace_all\": true},\n\
             {\"file_path\": \"a.rs\", \"old_string\": \"p\", \"new_string\": \"q\"},\n\
             {\"path\": \"b.rs\", \"edits\": [{\"old_string\": \"1\", \"new_string\": \"2\"}]}]\n```\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 2);
        let FileOp::Update { path, hunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!((path.as_str(), hunks.len()), ("a.rs", 2));
        assert!(hunks[0].replace_all && hunks[0].substring && !hunks[1].replace_all);
        assert_eq!(ops[1].path(), "b.rs");
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let err = parse("text\n{\"path\": \"a\",\n \"old_string\": 1, \"new_string\": \"\"}")
            .unwrap_err();
        assert_eq!(err.line, 2);
        assert!(
            err.message.contains("\"old_string\" must be a string"),
            "{err}"
        );
        let err = parse("{\"path\": \"a\",\n\"old_string\": \"x\"").unwrap_err();
        assert!(err.message.contains("invalid JSON"), "{err}");
        let err = parse("{\"path\": \"a\", \"old_string\": \"x\"}").unwrap_err();
        assert!(err.message.contains("missing \"new_string\""), "{err}");
    }
}
