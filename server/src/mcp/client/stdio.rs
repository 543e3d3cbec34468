//! A stdio server's pipes as a transport: its stdout read as JSON-RPC lines (anything else ends
//! the connection with the offending line kept, so that a program that is no MCP server fails
//! at once instead of leaving the handshake to time out), its stderr kept (the end of it) for
//! error messages and logged at debug.

use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader, ReadBuf};
use tokio::net::unix::pipe;

/// How much of a server's stderr is kept: its last lines, for messages.
const STDERR_TAIL: usize = 4096;
/// How much of a line that is not JSON-RPC a message quotes.
const QUOTED: usize = 200;

/// A pipe end as tokio's, nonblocking.
pub fn receiver(fd: OwnedFd) -> std::io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(fd)
}

pub fn sender(fd: OwnedFd) -> std::io::Result<pipe::Sender> {
    pipe::Sender::from_owned_fd(fd)
}

/// What the reader of a server's stdout saw that ended the connection.
#[derive(Default)]
pub struct StdoutVerdict {
    /// The first line that was not a JSON-RPC message (cut to [`QUOTED`] bytes).
    pub not_json_rpc: Mutex<Option<String>>,
}

/// A server's stdout, passed on line by line while each line starts like a JSON message; at the
/// first line that does not, reading ends (end of file) and the line is kept in the verdict.
pub struct CheckedStdout<R> {
    inner: R,
    verdict: Arc<StdoutVerdict>,
    /// No byte of the current line but blanks seen yet.
    at_line_start: bool,
    /// Collecting the offending line for the message, until its end or [`QUOTED`] bytes.
    offending: Option<Vec<u8>>,
    ended: bool,
}

impl<R> CheckedStdout<R> {
    pub fn new(inner: R, verdict: Arc<StdoutVerdict>) -> Self {
        Self {
            inner,
            verdict,
            at_line_start: true,
            offending: None,
            ended: false,
        }
    }

    fn finish(&mut self) {
        self.ended = true;
        if let Some(line) = self.offending.take() {
            let line = String::from_utf8_lossy(&line).trim_end().to_owned();
            *self
                .verdict
                .not_json_rpc
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(line);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CheckedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let before = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            let read = buf.filled().len() - before;
            if read == 0 {
                // End of file: an offending line still being collected is complete.
                if this.offending.is_some() {
                    this.finish();
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(line) = this.offending.as_mut() {
                // Still collecting the quote: nothing of this is passed on.
                let new = &buf.filled()[before..];
                let end = new.iter().position(|&b| b == b'\n');
                let take = end
                    .unwrap_or(new.len())
                    .min(QUOTED - line.len().min(QUOTED));
                line.extend_from_slice(&new[..take]);
                buf.set_filled(before);
                if end.is_some() || line.len() >= QUOTED {
                    this.finish();
                }
                continue;
            }
            let mut bad_at = None;
            for (offset, &byte) in buf.filled()[before..].iter().enumerate() {
                if this.at_line_start {
                    match byte {
                        b' ' | b'\t' | b'\r' | b'\n' => {}
                        b'{' | b'[' => this.at_line_start = false,
                        _ => {
                            bad_at = Some(before + offset);
                            break;
                        }
                    }
                } else if byte == b'\n' {
                    this.at_line_start = true;
                }
            }
            let Some(bad_at) = bad_at else {
                return Poll::Ready(Ok(()));
            };
            let rest = &buf.filled()[bad_at..];
            let end = rest.iter().position(|&b| b == b'\n');
            let quoted = rest[..end.unwrap_or(rest.len()).min(QUOTED)].to_vec();
            this.offending = Some(quoted);
            buf.set_filled(bad_at);
            if end.is_some() || this.offending.as_ref().is_some_and(|l| l.len() >= QUOTED) {
                this.finish();
            }
            if bad_at > before {
                // Whole messages before the offending line are still delivered.
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// The end of a server's stderr, filled by a task that reads it.
#[derive(Default)]
pub struct StderrTail {
    text: Mutex<String>,
    /// Set when the pipe closed (the server exited, or closed it).
    closed: tokio::sync::Notify,
    is_closed: std::sync::atomic::AtomicBool,
}

impl StderrTail {
    /// Reads `stderr` on a task until it closes.
    pub fn spawn(server: &str, stderr: pipe::Receiver) -> Arc<StderrTail> {
        let tail = Arc::new(StderrTail::default());
        let task_tail = tail.clone();
        let server = server.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                // A line without an end is read in pieces so that a flood stays bounded.
                match (&mut lines)
                    .take(STDERR_TAIL as u64)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&line);
                        tracing::debug!(server = %server, "stderr: {}", text.trim_end());
                        task_tail.push(&text);
                    }
                }
            }
            task_tail
                .is_closed
                .store(true, std::sync::atomic::Ordering::SeqCst);
            task_tail.closed.notify_waiters();
        });
        tail
    }

    fn push(&self, text: &str) {
        let mut kept = self.text.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_str(text);
        if kept.len() > STDERR_TAIL {
            let mut start = kept.len() - STDERR_TAIL;
            while !kept.is_char_boundary(start) {
                start += 1;
            }
            kept.replace_range(..start, "");
        }
    }

    pub fn text(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits (at most `limit`) for the pipe to close, so that a message about a server that
    /// exited has its last words.
    pub async fn settle(&self, limit: std::time::Duration) {
        let closed = self.closed.notified();
        if self.is_closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = tokio::time::timeout(limit, closed).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_through(input: &[u8]) -> (Vec<u8>, Option<String>) {
        let verdict = Arc::new(StdoutVerdict::default());
        let mut reader = CheckedStdout::new(input, verdict.clone());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        let line = verdict.not_json_rpc.lock().unwrap().clone();
        (out, line)
    }

    #[tokio::test]
    async fn json_lines_pass_and_the_first_other_line_ends_the_stream() {
        let good = b"{\"jsonrpc\":\"2.0\"}\n\n  [1]\n";
        assert_eq!(read_through(good).await, (good.to_vec(), None));
        let (out, line) = read_through(b"{\"a\":1}\ngarbage here\n{\"b\":2}\n").await;
        assert_eq!(out, b"{\"a\":1}\n");
        assert_eq!(line.as_deref(), Some("garbage here"));
        let (out, line) = read_through(b"Starting server...").await;
        assert!(out.is_empty());
        assert_eq!(line.as_deref(), Some("Starting server..."));
        let long = "x".repeat(10_000);
        // A long line in pieces, as a pipe delivers it, is quoted up to the cap.
        let (_, line) = read_through(long.as_bytes()).await;
        assert_eq!(line.unwrap().len(), QUOTED);
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_bytes_only() {
        let tail = StderrTail::default();
        for line in 0..2000 {
            tail.push(&format!("line {line} é\n"));
        }
        let text = tail.text();
        assert!(text.len() <= STDERR_TAIL, "{}", text.len());
        assert!(text.ends_with("line 1999 é\n"), "{text}");
        assert!(!text.contains("line 1 é"), "{text}");
    }
}
