//! LSP base-protocol framing (`Content-Length` headers), tolerant of what a broken client sends.
//!
//! tower-lsp-server's own codec ends the whole session on the first malformed frame; an editor
//! then loses its server over one bad byte. This decoder instead skips what is not a frame,
//! says how much it skipped and why, and carries on at the next `Content-Length` header.

/// The largest message accepted. A `didOpen` of a file this large is not one to edit through a
/// language server; a larger `Content-Length` is refused and its body skipped.
pub const MAX_MESSAGE_BYTES: usize = 128 * 1024 * 1024;

/// A header block without its blank line may not grow beyond this before it is garbage.
const MAX_HEADER_BYTES: usize = 8 * 1024;

const CONTENT_LENGTH: &[u8] = b"content-length";

/// What the decoder found next in the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A message body, as the header delimited it.
    Message(Vec<u8>),
    /// A complete JSON body that ended before its `Content-Length` said, followed by the next
    /// message's header: the declared length was wrong, the message itself is intact.
    ShortMessage { body: Vec<u8>, declared: usize },
    /// Bytes that were not a frame, skipped up to the next header.
    Skipped { bytes: usize, reason: String },
}

/// Splits a byte stream into frames. Feed it with [`Decoder::extend`], drain it with
/// [`Decoder::next_frame`].
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: Vec<u8>,
    /// The header of the message whose body is being awaited: (header length, body length).
    pending: Option<(usize, usize)>,
    /// How far the pending body was searched for a following header (search is incremental so
    /// a large body arriving in small reads stays linear).
    searched: usize,
    /// Body bytes of an oversized message still to be thrown away as they arrive.
    discard: usize,
}

impl Decoder {
    pub fn extend(&mut self, bytes: &[u8]) {
        let skip = self.discard.min(bytes.len());
        self.discard -= skip;
        self.buffer.extend_from_slice(&bytes[skip..]);
    }

    pub fn next_frame(&mut self) -> Option<Frame> {
        if let Some((header_len, body_len)) = self.pending {
            return self.body(header_len, body_len);
        }
        if self.buffer.is_empty() {
            return None;
        }
        if !starts_like_a_header(&self.buffer) {
            return Some(self.skip_to_next_header(1, "expected a Content-Length header"));
        }
        let Some(header_len) = find(&self.buffer, b"\r\n\r\n").map(|end| end + 4) else {
            if self.buffer.len() > MAX_HEADER_BYTES {
                return Some(self.skip_to_next_header(1, "header block without an end"));
            }
            return None;
        };
        match parse_headers(&self.buffer[..header_len]) {
            Ok(body_len) if body_len > MAX_MESSAGE_BYTES => {
                let available = self.buffer.len() - header_len;
                self.discard = body_len.saturating_sub(available);
                let drop = header_len + body_len.min(available);
                self.buffer.drain(..drop);
                Some(Frame::Skipped {
                    // A declared length near `usize::MAX` is garbage, not a reason to panic.
                    bytes: header_len.saturating_add(body_len),
                    reason: format!(
                        "message of {body_len} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"
                    ),
                })
            }
            Ok(body_len) => {
                self.pending = Some((header_len, body_len));
                self.searched = 0;
                self.body(header_len, body_len)
            }
            Err(reason) => Some(self.skip_to_next_header(header_len, &reason)),
        }
    }

    fn body(&mut self, header_len: usize, body_len: usize) -> Option<Frame> {
        let end = header_len + body_len;
        if self.buffer.len() >= end {
            let body = self.buffer[header_len..end].to_vec();
            self.buffer.drain(..end);
            self.pending = None;
            return Some(Frame::Message(body));
        }
        // The body is incomplete. If another header has already arrived after a complete JSON
        // value, the declared length was too long, and waiting would hang the editor forever.
        let body = &self.buffer[header_len..];
        let mut from = self.searched.saturating_sub(CONTENT_LENGTH.len() - 1);
        self.searched = body.len();
        let next_header = loop {
            // A body may mention "Content-Length" itself: only a header that follows a
            // complete JSON value ends it.
            let at = from + find_header_name(&body[from..])?;
            if serde_json::from_slice::<serde::de::IgnoredAny>(&body[..at]).is_ok() {
                break at;
            }
            from = at + 1;
        };
        let body = body[..next_header].to_vec();
        self.buffer.drain(..header_len + next_header);
        self.pending = None;
        Some(Frame::ShortMessage {
            body,
            declared: body_len,
        })
    }

    /// Drops bytes up to the next `Content-Length` at or after `from` (or all but a tail that
    /// could be the start of one).
    fn skip_to_next_header(&mut self, from: usize, reason: &str) -> Frame {
        let from = from.min(self.buffer.len());
        let bytes = match find_header_name(&self.buffer[from..]) {
            Some(at) => from + at,
            None => self.buffer.len() - partial_header_tail(&self.buffer[from..]),
        };
        self.buffer.drain(..bytes);
        Frame::Skipped {
            bytes,
            reason: reason.to_owned(),
        }
    }
}

/// Whether the buffer begins with a header name we accept, or a prefix of one still arriving.
fn starts_like_a_header(buffer: &[u8]) -> bool {
    [CONTENT_LENGTH, b"content-type"].iter().any(|name| {
        let n = name.len().min(buffer.len());
        buffer[..n].eq_ignore_ascii_case(&name[..n])
    })
}

/// The body length a header block declares, or why it declares none.
fn parse_headers(block: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(block).map_err(|_| "header is not UTF-8".to_owned())?;
    let mut length = None;
    for line in text.split("\r\n").filter(|line| !line.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("header line {line:?} has no colon"))?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("Content-Length {value:?} is not a number"))?,
            );
        }
    }
    length.ok_or_else(|| "header without Content-Length".to_owned())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The position of the next `Content-Length` header name, matched without regard to case.
fn find_header_name(haystack: &[u8]) -> Option<usize> {
    haystack
        .windows(CONTENT_LENGTH.len())
        .position(|window| window.eq_ignore_ascii_case(CONTENT_LENGTH))
}

/// How many trailing bytes could be the beginning of a `Content-Length` still arriving.
fn partial_header_tail(buffer: &[u8]) -> usize {
    (1..CONTENT_LENGTH.len())
        .rev()
        .find(|&n| {
            n <= buffer.len()
                && buffer[buffer.len() - n..].eq_ignore_ascii_case(&CONTENT_LENGTH[..n])
        })
        .unwrap_or(0)
}

/// Frames one outgoing message.
pub fn encode(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[&[u8]]) -> Vec<Frame> {
        let mut decoder = Decoder::default();
        let mut frames = Vec::new();
        for chunk in input {
            decoder.extend(chunk);
            while let Some(frame) = decoder.next_frame() {
                frames.push(frame);
            }
        }
        frames
    }

    fn message(body: &str) -> Frame {
        Frame::Message(body.as_bytes().to_vec())
    }

    #[test]
    fn frames_split_across_reads_byte_by_byte() {
        let mut input = encode(br#"{"a":1}"#);
        input.extend(encode(br#"{"b":"\u00e9"}"#));
        let chunks: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(
            decode_all(&chunks),
            [message(r#"{"a":1}"#), message(r#"{"b":"\u00e9"}"#)]
        );
    }

    #[test]
    fn headers_are_case_insensitive_and_content_type_is_accepted() {
        let input = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH: 2\r\n\r\n{}";
        assert_eq!(decode_all(&[input]), [message("{}")]);
    }

    #[test]
    fn garbage_is_skipped_up_to_the_next_header() {
        let mut input = b"\x00\xff garbage bytes ".to_vec();
        input.extend(encode(b"{}"));
        let frames = decode_all(&[&input]);
        assert_eq!(frames.len(), 2);
        assert!(
            matches!(&frames[0], Frame::Skipped { bytes: 17, .. }),
            "{frames:?}"
        );
        assert_eq!(frames[1], message("{}"));
    }

    #[test]
    fn garbage_keeps_a_tail_that_may_be_a_header_arriving() {
        let frames = decode_all(&[b"junk Content-Le", b"ngth: 2\r\n\r\n{}"]);
        assert!(
            matches!(&frames[0], Frame::Skipped { bytes: 5, .. }),
            "{frames:?}"
        );
        assert_eq!(frames[1], message("{}"));
    }

    #[test]
    fn a_bad_length_value_skips_the_header() {
        let mut input = b"Content-Length: ten\r\n\r\n".to_vec();
        input.extend(encode(b"[]"));
        let frames = decode_all(&[&input]);
        assert!(
            matches!(&frames[0], Frame::Skipped { reason, .. } if reason.contains("not a number")),
            "{frames:?}"
        );
        assert_eq!(frames[1], message("[]"));
    }

    #[test]
    fn a_too_long_length_is_recovered_at_the_next_header() {
        let mut input = b"Content-Length: 40\r\n\r\n{\"id\":1}".to_vec();
        input.extend(encode(br#"{"id":2}"#));
        let frames = decode_all(&[&input]);
        assert_eq!(
            frames,
            [
                Frame::ShortMessage {
                    body: br#"{"id":1}"#.to_vec(),
                    declared: 40
                },
                message(r#"{"id":2}"#)
            ]
        );
    }

    #[test]
    fn a_too_short_length_yields_the_truncated_body_then_skips_its_rest() {
        let mut input = b"Content-Length: 5\r\n\r\n{\"id\":1}".to_vec();
        input.extend(encode(b"{}"));
        let frames = decode_all(&[&input]);
        assert_eq!(frames[0], message(r#"{"id""#));
        assert!(
            matches!(&frames[1], Frame::Skipped { bytes: 3, .. }),
            "{frames:?}"
        );
        assert_eq!(frames[2], message("{}"));
    }

    #[test]
    fn an_oversized_message_is_discarded_as_it_arrives() {
        let header = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE_BYTES + 10);
        let mut decoder = Decoder::default();
        decoder.extend(header.as_bytes());
        decoder.extend(&[b' '; 6]);
        assert!(matches!(decoder.next_frame(), Some(Frame::Skipped { .. })));
        decoder.extend(&vec![b' '; MAX_MESSAGE_BYTES + 4]);
        decoder.extend(&encode(b"{}"));
        assert_eq!(decoder.next_frame(), Some(message("{}")));
        assert!(decoder.buffer.is_empty());
    }

    /// Found by the `framing` fuzz target: a `Content-Length` of `usize::MAX` overflowed the
    /// count of skipped bytes (a panic in a debug build, a wrong count in a release one).
    #[test]
    fn a_content_length_of_usize_max_is_skipped_without_overflow() {
        let header = format!("Content-Length: {}\r\n\r\n", usize::MAX);
        let frames = decode_all(&[header.as_bytes(), b"{}"]);
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert!(
            matches!(&frames[0], Frame::Skipped { bytes, .. } if *bytes == usize::MAX),
            "{frames:?}"
        );
    }
}
