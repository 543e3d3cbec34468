//! Constrained decoding of tool calls: a byte-level grammar of
//! `{"name": "<a tool>", "arguments": <JSON object>}` followed by `</tool_call>`, checked as
//! the model writes it.
//!
//! The design: once the model has written `<tool_call>`, every next token is chosen among
//! those whose bytes keep the text a valid *prefix* of that grammar (the decoder tries the
//! most likely token first and walks down the ranking only when it is refused, so the cost is
//! one cheap check per step in the usual case). Every valid prefix of JSON can be completed,
//! and the end-of-turn token is refused until the grammar is complete, so a call either ends
//! as valid JSON naming a real tool or runs out of its token budget, which is reported as an
//! error. Limits on nesting, whitespace runs and key lengths keep a confused model from
//! filling the budget with blanks. The arguments are checked as JSON, not against each tool's
//! schema: the agent validates them and tells the model what is wrong, as with remote models.

/// Where a byte of the call went, for the decoder that streams the call's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Punctuation and keys of the envelope.
    Envelope,
    /// A byte of the tool's name.
    Name,
    /// The name is complete (the closing quote).
    NameEnd,
    /// A byte of the arguments object.
    Arguments,
    /// The arguments' last byte (the closing brace).
    ArgumentsEnd,
    /// The last byte of `</tool_call>`: the call is complete.
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Up to [`MAX_ENVELOPE_SPACE`] bytes of whitespace.
    Space,
    Literal(&'static [u8]),
    Name,
    Arguments,
}

const PROGRAM: &[Step] = &[
    Step::Space,
    Step::Literal(b"{"),
    Step::Space,
    Step::Literal(b"\"name\""),
    Step::Space,
    Step::Literal(b":"),
    Step::Space,
    Step::Literal(b"\""),
    Step::Name,
    Step::Space,
    Step::Literal(b","),
    Step::Space,
    Step::Literal(b"\"arguments\""),
    Step::Space,
    Step::Literal(b":"),
    Step::Space,
    Step::Arguments,
    Step::Space,
    Step::Literal(b"}"),
    Step::Space,
    Step::Literal(b"</tool_call>"),
];

const MAX_ENVELOPE_SPACE: usize = 2;
const MAX_JSON_SPACE: usize = 16;
const MAX_DEPTH: usize = 32;

/// The call grammar's state; cheap to clone, which is how a candidate token is tried.
#[derive(Clone, Debug)]
pub struct CallGrammar<'t> {
    tools: &'t [String],
    step: usize,
    /// Bytes consumed by the current step (literal position, whitespace run, name so far).
    progress: usize,
    name: Vec<u8>,
    json: Json,
}

impl<'t> CallGrammar<'t> {
    pub fn new(tools: &'t [String]) -> Self {
        Self {
            tools,
            step: 0,
            progress: 0,
            name: Vec::new(),
            json: Json::default(),
        }
    }

    pub fn is_complete(&self) -> bool {
        self.step >= PROGRAM.len()
    }

    /// Whether `bytes` can follow the text so far.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let mut probe = self.clone();
        bytes.iter().all(|b| probe.feed(*b).is_some())
    }

    /// Consumes one byte; `None` when the grammar refuses it (the state is then unspecified:
    /// try on a clone).
    pub fn feed(&mut self, byte: u8) -> Option<Part> {
        loop {
            let step = *PROGRAM.get(self.step)?;
            match step {
                Step::Space => {
                    if is_space(byte) && self.progress < MAX_ENVELOPE_SPACE {
                        self.progress += 1;
                        return Some(Part::Envelope);
                    }
                    self.next_step();
                }
                Step::Literal(text) => {
                    if text[self.progress] != byte {
                        return None;
                    }
                    self.progress += 1;
                    if self.progress == text.len() {
                        self.next_step();
                        if self.is_complete() {
                            return Some(Part::End);
                        }
                    }
                    return Some(Part::Envelope);
                }
                Step::Name => {
                    if byte == b'"' {
                        if !self.tools.iter().any(|t| t.as_bytes() == self.name) {
                            return None;
                        }
                        self.next_step();
                        return Some(Part::NameEnd);
                    }
                    self.name.push(byte);
                    if !self
                        .tools
                        .iter()
                        .any(|t| t.as_bytes().starts_with(&self.name))
                    {
                        return None;
                    }
                    return Some(Part::Name);
                }
                Step::Arguments => {
                    // Whitespace before the object belongs to the `Space` step before.
                    self.json.feed(byte)?;
                    if self.json.is_complete() {
                        self.next_step();
                        return Some(Part::ArgumentsEnd);
                    }
                    return Some(Part::Arguments);
                }
            }
        }
    }

    fn next_step(&mut self) {
        self.step += 1;
        self.progress = 0;
    }

    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\n' | b'\r' | b'\t')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the top-level value: only `{` is accepted.
    Start,
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or the container's close.
    After,
    String {
        key: bool,
        escape: Escape,
    },
    Number(Number),
    Word {
        word: &'static [u8],
        at: usize,
    },
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// Hex digits of `\u` still expected.
    Unicode(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Number {
    Minus,
    Zero,
    Integer,
    Dot,
    Fraction,
    Exponent,
    ExponentSign,
    ExponentDigits,
}

impl Number {
    fn complete(self) -> bool {
        matches!(
            self,
            Self::Zero | Self::Integer | Self::Fraction | Self::ExponentDigits
        )
    }

    fn next(self, byte: u8) -> Option<Self> {
        use Number::*;
        Some(match (self, byte) {
            (Minus, b'0') => Zero,
            (Minus, b'1'..=b'9') => Integer,
            (Integer, b'0'..=b'9') => Integer,
            (Zero | Integer, b'.') => Dot,
            (Dot | Fraction, b'0'..=b'9') => Fraction,
            (Zero | Integer | Fraction, b'e' | b'E') => Exponent,
            (Exponent, b'+' | b'-') => ExponentSign,
            (Exponent | ExponentSign | ExponentDigits, b'0'..=b'9') => ExponentDigits,
            _ => return None,
        })
    }
}

/// A byte-level validator of one JSON object (a pushdown automaton).
#[derive(Clone, Debug)]
pub struct Json {
    state: State,
    stack: Vec<Container>,
    space_run: usize,
}

impl Default for Json {
    fn default() -> Self {
        Self {
            state: State::Start,
            stack: Vec::new(),
            space_run: 0,
        }
    }
}

impl Json {
    pub fn is_complete(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes one byte; `None` when it cannot continue valid JSON.
    pub fn feed(&mut self, byte: u8) -> Option<()> {
        let structural = matches!(
            self.state,
            State::Value
                | State::ArrayFirst
                | State::ObjectFirst
                | State::Key
                | State::Colon
                | State::After
        );
        if structural && is_space(byte) {
            self.space_run += 1;
            return (self.space_run <= MAX_JSON_SPACE).then_some(());
        }
        self.space_run = 0;
        match self.state {
            State::Start => {
                if byte != b'{' {
                    return None;
                }
                self.open(Container::Object)
            }
            State::Done => None,
            State::Value | State::ArrayFirst => {
                if self.state == State::ArrayFirst && byte == b']' {
                    return self.close(Container::Array);
                }
                self.value(byte)
            }
            State::ObjectFirst | State::Key => match byte {
                b'"' => {
                    self.state = State::String {
                        key: true,
                        escape: Escape::None,
                    };
                    Some(())
                }
                b'}' if self.state == State::ObjectFirst => self.close(Container::Object),
                _ => None,
            },
            State::Colon => {
                if byte != b':' {
                    return None;
                }
                self.state = State::Value;
                Some(())
            }
            State::After => match (byte, self.stack.last()?) {
                (b',', Container::Object) => {
                    self.state = State::Key;
                    Some(())
                }
                (b',', Container::Array) => {
                    self.state = State::Value;
                    Some(())
                }
                (b'}', Container::Object) => self.close(Container::Object),
                (b']', Container::Array) => self.close(Container::Array),
                _ => None,
            },
            State::String { key, escape } => {
                let escape = match (escape, byte) {
                    (Escape::None, b'"') => {
                        self.state = if key { State::Colon } else { State::After };
                        return Some(());
                    }
                    (Escape::None, b'\\') => Escape::Backslash,
                    (Escape::None, 0..=0x1f) => return None,
                    (Escape::None, _) => Escape::None,
                    (Escape::Backslash, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        Escape::None
                    }
                    (Escape::Backslash, b'u') => Escape::Unicode(4),
                    (Escape::Unicode(n), b) if b.is_ascii_hexdigit() => {
                        if n == 1 {
                            Escape::None
                        } else {
                            Escape::Unicode(n - 1)
                        }
                    }
                    _ => return None,
                };
                self.state = State::String { key, escape };
                Some(())
            }
            State::Number(number) => match number.next(byte) {
                Some(next) => {
                    self.state = State::Number(next);
                    Some(())
                }
                None if number.complete() => {
                    self.state = State::After;
                    self.feed(byte)
                }
                None => None,
            },
            State::Word { word, at } => {
                if word[at] != byte {
                    return None;
                }
                self.state = if at + 1 == word.len() {
                    State::After
                } else {
                    State::Word { word, at: at + 1 }
                };
                Some(())
            }
        }
    }

    fn value(&mut self, byte: u8) -> Option<()> {
        self.state = match byte {
            b'{' => return self.open(Container::Object),
            b'[' => return self.open(Container::Array),
            b'"' => State::String {
                key: false,
                escape: Escape::None,
            },
            b'-' => State::Number(Number::Minus),
            b'0' => State::Number(Number::Zero),
            b'1'..=b'9' => State::Number(Number::Integer),
            b't' => State::Word {
                word: b"true",
                at: 1,
            },
            b'f' => State::Word {
                word: b"false",
                at: 1,
            },
            b'n' => State::Word {
                word: b"null",
                at: 1,
            },
            _ => return None,
        };
        Some(())
    }

    fn open(&mut self, container: Container) -> Option<()> {
        if self.stack.len() >= MAX_DEPTH {
            return None;
        }
        self.stack.push(container);
        self.state = match container {
            Container::Object => State::ObjectFirst,
            Container::Array => State::ArrayFirst,
        };
        Some(())
    }

    fn close(&mut self, container: Container) -> Option<()> {
        if self.stack.pop()? != container {
            return None;
        }
        self.state = if self.stack.is_empty() {
            State::Done
        } else {
            State::After
        };
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_accepts(text: &str) -> bool {
        let mut json = Json::default();
        text.bytes().all(|b| json.feed(b).is_some())
    }

    fn json_complete(text: &str) -> bool {
        let mut json = Json::default();
        text.bytes().all(|b| json.feed(b).is_some()) && json.is_complete()
    }

    #[test]
    fn valid_objects_are_accepted_and_completed() {
        for text in [
            r#"{}"#,
            r#"{"path": "src/main.rs", "start_line": 10, "end_line": -2.5e+3}"#,
            r#"{"edits": [{"old_string": "a\n\"b\"\u00e9", "replace_all": true}, null, []]}"#,
            "{ \"a\" : [ 1 , 0.5 , false ] }",
        ] {
            assert!(json_complete(text), "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
        }
    }

    #[test]
    fn every_prefix_of_valid_json_is_accepted_but_not_complete() {
        let text = r#"{"a": [1, {"b": "c\"d"}], "e": 12.5e3}"#;
        for end in 0..text.len() {
            assert!(json_accepts(&text[..end]), "{}", &text[..end]);
            assert!(!json_complete(&text[..end]), "{}", &text[..end]);
        }
    }

    #[test]
    fn invalid_json_is_refused_at_the_first_wrong_byte() {
        for text in [
            r#"[1]"#,
            r#"{"a" 1}"#,
            r#"{"a": 01}"#,
            r#"{"a": tru "#,
            r#"{"a": "line
break"}"#,
            r#"{"a": 1,}"#,
            r#"{"a": 1]"#,
            r#"{"a": "\x"}"#,
            r#"{"a": 1} "#,
            r#"{'a': 1}"#,
        ] {
            assert!(!json_accepts(text), "{text}");
        }
        assert!(!json_accepts(&format!(
            "{{{}",
            " ".repeat(MAX_JSON_SPACE + 1)
        )));
        assert!(!json_accepts(&format!("{{\"a\":{}", "[".repeat(MAX_DEPTH))));
    }

    #[test]
    fn the_call_grammar_names_a_known_tool_and_closes_the_tag() {
        let tools = vec!["read_file".to_owned(), "read_artifact".to_owned()];
        let text = "\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>";
        let mut grammar = CallGrammar::new(&tools);
        let parts: Vec<Part> = text.bytes().map(|b| grammar.feed(b).unwrap()).collect();
        assert!(grammar.is_complete());
        assert_eq!(grammar.name(), "read_file");
        assert_eq!(parts.last(), Some(&Part::End));
        assert_eq!(parts.iter().filter(|p| **p == Part::NameEnd).count(), 1);
        let arguments: Vec<u8> = text
            .bytes()
            .zip(&parts)
            .filter(|(_, p)| matches!(p, Part::Arguments | Part::ArgumentsEnd))
            .map(|(b, _)| b)
            .collect();
        assert_eq!(arguments, br#"{"path": "a.rs"}"#);

        let fresh = CallGrammar::new(&tools);
        assert!(fresh.accepts(b"{\"name\": \"read_"));
        assert!(!fresh.accepts(b"{\"name\": \"write_file\""));
        assert!(!fresh.accepts(b"{\"name\": \"read\""));
        assert!(!fresh.accepts(b"{\"name\": \"read_file\", \"arguments\": [1]"));
        assert!(!fresh.accepts(b"{\"name\": \"read_file\", \"arguments\": {}}</tool_call> "));
    }
}
