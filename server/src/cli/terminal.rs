//! What the CLI prints to a terminal, with control characters shown escaped.
//!
//! Model text, tool results, command output and repository file names reach the user's
//! terminal through `wright exec`, `wright grep`, `wright index` and the rest. Printed raw, an
//! escape sequence in any of them acts on the terminal: a clipboard write (OSC 52), a cleared
//! screen, a new window title, or a carriage return that forges a line of wright's own output.
//! So every byte a terminal would act on is written as visible text (`\x1b`, `\r`, `\u{9b}`,
//! `\u{202e}`); newline and tab are kept. Output to a pipe or a file, and `--json` output, stay
//! byte-exact: a program reading them wants the data.

use std::io::{self, IsTerminal, Write};

/// A writer that escapes control characters when `escape` is set.
///
/// It works on bytes, so a multi-byte control (a C1 control or a bidirectional override in
/// UTF-8) split across two writes is still recognised: the bytes that may begin one are held
/// until the next write, or written escaped by `flush`.
pub struct Escaped<W: Write> {
    inner: W,
    escape: bool,
    held: Vec<u8>,
}

/// Standard output, escaped when it is a terminal and `raw` is not asked (`--json`).
pub fn stdout(raw: bool) -> Escaped<io::StdoutLock<'static>> {
    let escape = !raw && io::stdout().is_terminal();
    Escaped::new(io::stdout().lock(), escape)
}

/// Standard error, escaped when it is a terminal.
pub fn stderr() -> Escaped<io::Stderr> {
    let escape = io::stderr().is_terminal();
    Escaped::new(io::stderr(), escape)
}

/// A line on standard error, control characters escaped on a terminal. For messages that carry
/// anything from a repository, a model or a command (which is nearly every message).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stderr = $crate::cli::terminal::stderr();
        let _ = writeln!(stderr, $($arg)*);
        let _ = stderr.flush();
    }};
}
pub(crate) use say;

impl<W: Write> Escaped<W> {
    pub fn new(inner: W, escape: bool) -> Self {
        Self {
            inner,
            escape,
            held: Vec::new(),
        }
    }

    /// Escapes `bytes` (after what was held) into `out`, holding back a trailing prefix of a
    /// multi-byte control when `more` may follow.
    fn escape_into(&mut self, bytes: &[u8], out: &mut Vec<u8>, more: bool) {
        let mut input = std::mem::take(&mut self.held);
        input.extend_from_slice(bytes);
        let mut at = 0;
        while at < input.len() {
            let rest = &input[at..];
            let byte = rest[0];
            match byte {
                b'\n' | b'\t' => out.push(byte),
                0x00..=0x1f | 0x7f => push_escape(out, byte as u32, "x"),
                0xc2 | 0xe2 if more && is_control_prefix(rest) => {
                    self.held.extend_from_slice(rest);
                    return;
                }
                0xc2 if rest.get(1).is_some_and(|b| (0x80..=0x9f).contains(b)) => {
                    push_escape(out, rest[1] as u32, "u");
                    at += 2;
                    continue;
                }
                0xe2 if is_bidi_control(rest) => {
                    let code = 0x2000 + ((rest[1] as u32 & 0x3f) << 6) + (rest[2] as u32 & 0x3f);
                    push_escape(out, code, "u");
                    at += 3;
                    continue;
                }
                _ => out.push(byte),
            }
            at += 1;
        }
    }
}

/// `\x1b` for a C0 control, `\u{9b}` for the rest.
fn push_escape(out: &mut Vec<u8>, code: u32, form: &str) {
    let text = match (code, form) {
        (0x0d, _) => "\\r".to_owned(),
        (_, "x") => format!("\\x{code:02x}"),
        _ => format!("\\u{{{code:x}}}"),
    };
    out.extend_from_slice(text.as_bytes());
}

/// Whether `rest` is an incomplete start of a C1 control or a bidirectional control.
fn is_control_prefix(rest: &[u8]) -> bool {
    matches!(rest, [0xc2] | [0xe2] | [0xe2, 0x80 | 0x81])
}

/// U+202A–U+202E and U+2066–U+2069: they reorder what the terminal shows (a line that reads
/// as one thing and is another).
fn is_bidi_control(rest: &[u8]) -> bool {
    matches!(
        rest,
        [0xe2, 0x80, 0xaa..=0xae, ..] | [0xe2, 0x81, 0xa6..=0xa9, ..]
    )
}

impl<W: Write> Write for Escaped<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if !self.escape {
            return self.inner.write(bytes);
        }
        let mut out = Vec::with_capacity(bytes.len());
        self.escape_into(bytes, &mut out, true);
        self.inner.write_all(&out)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            // An incomplete sequence at the end is no control; it is shown as the bytes it is.
            let held = std::mem::take(&mut self.held);
            let mut out = Vec::new();
            for byte in held {
                push_escape(&mut out, byte as u32, "x");
            }
            self.inner.write_all(&out)?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Escaped<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(pieces: &[&[u8]]) -> String {
        let mut out = Vec::new();
        {
            let mut writer = Escaped::new(&mut out, true);
            for piece in pieces {
                writer.write_all(piece).unwrap();
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn controls_are_shown_escaped_and_newline_and_tab_kept() {
        let hostile = "ok\tline\n\x1b]52;c;aGk=\x07\x1b[2J\rwright: done\x7f\n";
        assert_eq!(
            escaped(&[hostile.as_bytes()]),
            "ok\tline\n\\x1b]52;c;aGk=\\x07\\x1b[2J\\rwright: done\\x7f\n"
        );
        let c1_and_bidi = "a\u{9b}31m b\u{202e}cba\u{2066} é ✓";
        assert_eq!(
            escaped(&[c1_and_bidi.as_bytes()]),
            "a\\u{9b}31m b\\u{202e}cba\\u{2066} é ✓"
        );
    }

    #[test]
    fn a_control_split_across_writes_is_still_escaped() {
        let csi = "\u{9b}".as_bytes();
        let rlo = "\u{202e}".as_bytes();
        assert_eq!(escaped(&[b"x", &csi[..1], &csi[1..], b"y"]), "x\\u{9b}y");
        assert_eq!(escaped(&[&rlo[..1], &rlo[1..2], &rlo[2..]]), "\\u{202e}");
        // Held bytes that never complete are written, escaped, at the end.
        assert_eq!(escaped(&[b"z", &csi[..1]]), "z\\xc2");
    }

    #[test]
    fn without_a_terminal_the_bytes_pass_unchanged() {
        let mut out = Vec::new();
        Escaped::new(&mut out, false)
            .write_all(b"\x1b[2J\r\xc2\x9b")
            .unwrap();
        assert_eq!(out, b"\x1b[2J\r\xc2\x9b");
    }
}
