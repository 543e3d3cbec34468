//! An incremental Server-Sent Events parser: bytes in, complete events out, whatever the
//! chunking.
//!
//! It follows the WHATWG event-stream rules the providers rely on: lines end with CRLF, LF or
//! CR (a CRLF split across two chunks is one line end), `:` starts a comment, a field's value
//! loses one leading space, several `data` lines join with `\n`, and a blank line dispatches
//! the event (an event without data is dropped).

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseParser {
    /// The current line, not yet terminated.
    line: Vec<u8>,
    /// The previous chunk ended with CR: an LF first in the next one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Feeds bytes, appending every event they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&bytes[..end]);
            let line = std::mem::take(&mut self.line);
            self.take_line(&line, out);
            // Reuse the allocation for the next line.
            self.line = line;
            self.line.clear();
            let terminator = bytes[end];
            bytes = &bytes[end + 1..];
            if terminator == b'\r' {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
    }

    fn take_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // Lines are complete here, so a multi-byte character is never split.
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = value.into_owned(),
            // `id` and `retry` matter to browsers reconnecting, not to one model call.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            parser.feed(piece, &mut out);
        }
        out
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn every_chunking_gives_the_same_events() {
        let input = ": keep-alive comment\r\n\
            event: message_start\r\ndata: {\"a\":1}\r\n\r\n\
            data: first\ndata:second\n\n\
            data: é€😀\r\r\
            event: ping\n\n\
            data: [DONE]\n\n";
        let expected = vec![
            event("message_start", "{\"a\":1}"),
            event("", "first\nsecond"),
            event("", "é€😀"),
            event("", "[DONE]"),
        ];
        for chunk in 1..input.len() {
            assert_eq!(
                parse_in_chunks(input.as_bytes(), chunk),
                expected,
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn an_unterminated_event_is_not_dispatched() {
        assert_eq!(parse_in_chunks(b"data: partial\n", 3), vec![]);
        assert_eq!(parse_in_chunks(b"data: partial", 3), vec![]);
    }

    #[test]
    fn a_field_without_colon_and_empty_data_count() {
        assert_eq!(parse_in_chunks(b"data\n\n", 1), vec![event("", "")]);
        assert_eq!(parse_in_chunks(b"event: x\n\n", 1), vec![]);
        assert_eq!(
            parse_in_chunks(b"data:  two spaces\n\n", 2),
            vec![event("", " two spaces")]
        );
    }
}
