//! Output capture with a cap: the first half of the cap and the last half are kept, what lies
//! between is only counted, so a flood costs bounded memory and the reader still sees how the
//! output began and how it ended.

use std::collections::VecDeque;

/// The default cap per stream (64 KiB for stdout and for stderr: `docs/design.md`).
pub const DEFAULT_CAP: usize = 64 * 1024;

/// One stream's captured output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: u64,
    cap: usize,
}

impl Captured {
    pub fn new(cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            omitted: 0,
            cap,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        let head_room = (self.cap / 2).saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(head_room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        let tail_cap = self.cap - self.cap / 2;
        if bytes.len() >= tail_cap {
            self.omitted += (self.tail.len() + bytes.len() - tail_cap) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_cap..]);
            return;
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(tail_cap);
        self.tail.drain(..excess);
        self.omitted += excess as u64;
    }

    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.omitted > 0
    }

    /// Bytes dropped from the middle.
    pub fn omitted(&self) -> u64 {
        self.omitted
    }

    /// The text, lossily decoded, with a marker where bytes were dropped.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.truncated() {
            text.push_str(&format!(
                "\n[… {} bytes omitted by wright's sandbox …]\n",
                self.omitted
            ));
        }
        let (a, b) = self.tail.as_slices();
        text.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut c = Captured::new(16);
        c.push(b"hello ");
        c.push(b"world");
        assert!(!c.truncated());
        assert_eq!(c.text(), "hello world");
    }

    #[test]
    fn a_flood_keeps_head_and_tail_and_counts_the_rest() {
        let mut c = Captured::new(8);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qr", b"stuvwxyz"] {
            c.push(chunk);
        }
        assert!(c.truncated());
        assert_eq!(c.omitted(), 26 - 8);
        let text = c.text();
        assert!(text.starts_with("abcd\n[… 18 bytes omitted"), "{text}");
        assert!(text.ends_with("wxyz"), "{text}");
    }

    #[test]
    fn byte_by_byte_equals_one_push() {
        let data: Vec<u8> = (0..200u8).collect();
        let mut whole = Captured::new(50);
        whole.push(&data);
        let mut bytes = Captured::new(50);
        for b in &data {
            bytes.push(std::slice::from_ref(b));
        }
        assert_eq!(whole, bytes);
    }
}
