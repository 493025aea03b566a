//! Bounded output capture: a head/tail window in memory, the full stream in a capped log file, and cursor reads.
//!
//! The stream is addressed by byte offsets (cursors) from its start. Memory holds the first `head` bytes and the last
//! `tail` bytes; everything also goes to a log file until it reaches `log_cap`. A cursor read is served from memory or
//! the log; bytes that are in neither any more are skipped and counted, so a reader never sees a byte twice and always
//! learns how much it missed. Reads and views never split a UTF-8 character.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Limits of one captured stream.
#[derive(Debug, Clone)]
pub struct OutputLimits {
    /// Bytes kept from the start of the stream.
    pub head: usize,
    /// Bytes kept from the end of the stream.
    pub tail: usize,
    /// Lines longer than this (bytes) are shortened in views, with a marker.
    pub max_line: usize,
    /// Bytes written to the log file at most; past this the log stops and says so.
    pub log_cap: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            head: 16 * 1024,
            tail: 16 * 1024,
            max_line: 2 * 1024,
            log_cap: 64 << 20,
        }
    }
}

struct Log {
    path: PathBuf,
    /// Open while the stream is being written; closed at EOF so retained processes hold no descriptors.
    file: Option<File>,
    created: bool,
    written: u64,
    failed: bool,
}

/// One captured stream.
pub(crate) struct Capture {
    limits: OutputLimits,
    head: Vec<u8>,
    /// The last bytes of the stream; `tail_start` is the stream offset of `tail[0]`.
    tail: Vec<u8>,
    tail_start: u64,
    total: u64,
    /// The stream has ended (EOF): its last bytes are final even if they are not a complete character.
    finished: bool,
    /// The stream is a terminal's: views and reads are cleaned of escape sequences and `\r` overwrites.
    terminal: bool,
    log: Log,
}

/// A head/tail view of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputView {
    /// The head, an omission marker when bytes were dropped, and the tail; long lines shortened.
    pub text: String,
    /// Bytes of the stream not shown in `text` (between head and tail).
    pub omitted_bytes: u64,
    /// Bytes received so far.
    pub total_bytes: u64,
}

/// The result of a cursor read (the default: nothing read, at cursor 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputChunk {
    /// The text read (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// Where the next read should start.
    pub next_cursor: u64,
    /// Bytes between the requested cursor and the returned text that are no longer available (neither in memory nor
    /// in the log).
    pub skipped_bytes: u64,
    /// Bytes received so far.
    pub total_bytes: u64,
}

/// Length of the longest prefix of `b` that does not end inside a UTF-8 character.
fn complete_prefix(b: &[u8]) -> usize {
    let n = b.len();
    // Look back at most 3 bytes for the start of the last character.
    for back in 1..=n.min(4) {
        let c = b[n - back];
        if c & 0xC0 != 0x80 {
            let need = match c {
                0xF0..=0xF7 => 4,
                0xE0..=0xEF => 3,
                0xC0..=0xDF => 2,
                _ => 1,
            };
            return if need > back { n - back } else { n };
        }
    }
    n
}

/// Number of leading UTF-8 continuation bytes (at most 3).
fn leading_continuations(b: &[u8]) -> usize {
    b.iter().take(3).take_while(|&&c| c & 0xC0 == 0x80).count()
}

/// Shortens lines longer than `max` bytes, keeping their start and end around a marker.
fn shorten_lines(text: &str, max: usize) -> String {
    if max == 0 || text.len() <= max {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len().min(64 * 1024));
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.len() <= max {
            out.push_str(line);
            continue;
        }
        let mut keep_start = max / 2;
        while !line.is_char_boundary(keep_start) {
            keep_start -= 1;
        }
        let mut keep_end = line.len() - max / 2;
        while !line.is_char_boundary(keep_end) {
            keep_end += 1;
        }
        out.push_str(&line[..keep_start]);
        out.push_str(&format!(
            "…[{} bytes of this line omitted]…",
            keep_end - keep_start
        ));
        out.push_str(&line[keep_end..]);
    }
    out
}

impl Capture {
    /// A capture whose log goes to `log_path` (created on the first byte).
    pub(crate) fn new(limits: OutputLimits, log_path: PathBuf) -> Capture {
        Capture {
            limits,
            head: Vec::new(),
            tail: Vec::new(),
            tail_start: 0,
            total: 0,
            finished: false,
            terminal: false,
            log: Log {
                path: log_path,
                file: None,
                created: false,
                written: 0,
                failed: false,
            },
        }
    }

    /// Bytes received so far.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Bytes written to the log file so far (what it occupies on disk).
    pub(crate) fn log_bytes(&self) -> u64 {
        if self.log.created {
            self.log.written
        } else {
            0
        }
    }

    /// The log file path, once something was written to it.
    pub(crate) fn log_path(&self) -> Option<&PathBuf> {
        (self.log.created && !self.log.failed).then_some(&self.log.path)
    }

    /// The stream ended: close the log file (reads reopen it).
    pub(crate) fn finish(&mut self) {
        self.log.file = None;
        self.finished = true;
    }

    /// Whether the log stopped at its cap.
    pub(crate) fn log_truncated(&self) -> bool {
        self.log.written >= self.limits.log_cap && self.total > self.log.written
    }

    /// Appends a chunk of the stream.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.write_log(chunk);
        let mut rest = chunk;
        if self.head.len() < self.limits.head {
            let take = (self.limits.head - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        self.total += chunk.len() as u64;
        if rest.is_empty() {
            self.tail_start = self.total - self.tail.len() as u64;
            return;
        }
        let cap = self.limits.tail;
        if rest.len() >= cap {
            self.tail.clear();
            self.tail.extend_from_slice(&rest[rest.len() - cap..]);
        } else {
            self.tail.extend_from_slice(rest);
            if self.tail.len() > 2 * cap.max(1) {
                let drop = self.tail.len() - cap;
                self.tail.drain(..drop);
            }
        }
        self.tail_start = self.total - self.tail.len() as u64;
    }

    /// Creates the (empty) log file now, so its path can be announced before the first output byte (background
    /// runs). Harmless when it exists already.
    pub(crate) fn create_log(&mut self) {
        if !self.log.created && !self.log.failed && self.limits.log_cap > 0 {
            self.write_log(&[]);
        }
    }

    fn write_log(&mut self, chunk: &[u8]) {
        let log = &mut self.log;
        if log.failed || log.written >= self.limits.log_cap {
            return;
        }
        if log.file.is_none() {
            if log.created {
                return;
            }
            // A new file only (never one planted at the path, nor a symlink), readable by the owner alone: the output
            // of a command may be secret.
            match crate::sys::files::create_private(&log.path) {
                Ok(f) => {
                    log.file = Some(f);
                    log.created = true;
                }
                Err(e) => {
                    tracing::warn!(path = %log.path.display(), "cannot create output log: {e}");
                    log.failed = true;
                    return;
                }
            }
        }
        let room = (self.limits.log_cap - log.written).min(chunk.len() as u64) as usize;
        let file = log.file.as_mut().expect("log file opened above");
        if let Err(e) = file.write_all(&chunk[..room]) {
            tracing::warn!(path = %log.path.display(), "cannot write output log: {e}");
            log.failed = true;
            return;
        }
        log.written += room as u64;
    }

    /// Bytes `[from, to)` of the stream as far as they are available from memory or the log; returns the offset the
    /// available bytes start at (≥ `from`) and the bytes.
    fn bytes_at(&self, from: u64, to: u64) -> (u64, Vec<u8>) {
        let head_len = self.head.len() as u64;
        if from < head_len {
            let end = to.min(head_len);
            return (from, self.head[from as usize..end as usize].to_vec());
        }
        if from < self.tail_start
            && from < self.log.written
            && let Ok(file) = crate::sys::files::open_nofollow(&self.log.path)
        {
            let end = to.min(self.log.written).min(self.tail_start.max(from + 1));
            let mut buf = vec![0u8; (end - from) as usize];
            if crate::sys::files::read_at(&file, &mut buf, from)
                .map(|n| n == buf.len())
                .unwrap_or(false)
            {
                return (from, buf);
            }
        }
        let start = from.max(self.tail_start);
        if start >= to {
            return (start, Vec::new());
        }
        let a = (start - self.tail_start) as usize;
        let b = (to - self.tail_start) as usize;
        (start, self.tail[a..b].to_vec())
    }

    /// Marks the stream as a terminal's (see [`crate::StdinMode::Terminal`]).
    pub(crate) fn set_terminal(&mut self) {
        self.terminal = true;
    }

    /// Text as shown: a terminal's cleaned for reading, anything else without escape sequences and stray control
    /// characters (an OSC 52 clipboard write or a screen clear is for a terminal, not for the model). The log keeps
    /// the raw bytes.
    fn shown(&self, text: std::borrow::Cow<'_, str>) -> String {
        if self.terminal {
            crate::terminal::clean(&text)
        } else {
            match crate::terminal::strip_controls(&text) {
                std::borrow::Cow::Borrowed(_) => text.into_owned(),
                std::borrow::Cow::Owned(stripped) => stripped,
            }
        }
    }

    /// Reads up to `max` bytes from `cursor`. A cursor past the end reads nothing and returns the end.
    pub(crate) fn read(&self, cursor: u64, max: usize) -> OutputChunk {
        let cursor = cursor.min(self.total);
        let to = cursor.saturating_add(max.max(4) as u64).min(self.total);
        // Gather contiguous bytes across the head, log and tail regions.
        let (mut start, mut bytes) = self.bytes_at(cursor, to);
        let mut pos = start + bytes.len() as u64;
        while pos < to && !bytes.is_empty() {
            let (s, more) = self.bytes_at(pos, to);
            if s != pos || more.is_empty() {
                break;
            }
            pos += more.len() as u64;
            bytes.extend_from_slice(&more);
        }
        // Never start inside a character (possible only after a skip) ...
        if start > cursor {
            let lead = leading_continuations(&bytes);
            bytes.drain(..lead);
            start += lead as u64;
        }
        // ... and never end inside one, unless the stream itself has ended there (a character whose first bytes
        // arrived may still be completed by the next chunk).
        let end_of_stream = self.finished && start + bytes.len() as u64 == self.total;
        if !end_of_stream {
            bytes.truncate(complete_prefix(&bytes));
        }
        OutputChunk {
            text: self.shown(String::from_utf8_lossy(&bytes)),
            next_cursor: start + bytes.len() as u64,
            skipped_bytes: start - cursor,
            total_bytes: self.total,
        }
    }

    /// The head/tail view: the whole stream when it fits, else its head, a marker saying how many bytes were left
    /// out (and where the log is), and its tail; long lines shortened.
    pub(crate) fn view(&self) -> OutputView {
        // Show at most `tail` bytes after the head (the buffer may hold more between compactions).
        let from = (self.head.len() as u64).max(self.total.saturating_sub(self.limits.tail as u64));
        let tail_all = &self.tail[(from - self.tail_start) as usize..];
        // While the stream is open, a character cut at its end is not shown yet (its rest is on the way).
        let settled = |b: &[u8]| {
            if self.finished {
                b.len()
            } else {
                complete_prefix(b)
            }
        };
        if from == self.head.len() as u64 {
            // Head and tail meet: nothing is left out, and a character may straddle the seam.
            let mut bytes = Vec::with_capacity(self.head.len() + tail_all.len());
            bytes.extend_from_slice(&self.head);
            bytes.extend_from_slice(tail_all);
            let end = settled(&bytes);
            return OutputView {
                text: shorten_lines(
                    &self.shown(String::from_utf8_lossy(&bytes[..end])),
                    self.limits.max_line,
                ),
                omitted_bytes: 0,
                total_bytes: self.total,
            };
        }
        // More follows the head, so a character cut at its end continues in the omitted part.
        let head_len = complete_prefix(&self.head);
        let head = self.shown(String::from_utf8_lossy(&self.head[..head_len]));
        let tail_bytes = &tail_all[leading_continuations(tail_all)..];
        let shown_start = self.total - tail_bytes.len() as u64;
        let tail_bytes = &tail_bytes[..settled(tail_bytes)];
        let omitted = shown_start - head_len as u64;
        let mut text = String::with_capacity(head.len() + tail_bytes.len() + 128);
        text.push_str(&shorten_lines(&head, self.limits.max_line));
        let where_ = match (self.log_path(), self.log_truncated()) {
            (Some(p), false) => format!("; the full output is in {}", p.display()),
            (Some(p), true) => format!(
                "; {} holds the first {} bytes",
                p.display(),
                self.log.written
            ),
            (None, _) => String::new(),
        };
        text.push_str(&format!("\n…[{omitted} bytes omitted{where_}]…\n"));
        text.push_str(&shorten_lines(
            &self.shown(String::from_utf8_lossy(tail_bytes)),
            self.limits.max_line,
        ));
        OutputView {
            text,
            omitted_bytes: omitted,
            total_bytes: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(head: usize, tail: usize, log_cap: u64) -> (tempfile::TempDir, Capture) {
        let dir = tempfile::tempdir().unwrap();
        let limits = OutputLimits {
            head,
            tail,
            max_line: 0,
            log_cap,
        };
        let c = Capture::new(limits, dir.path().join("out.log"));
        (dir, c)
    }

    #[test]
    fn short_output_is_kept_whole() {
        let (_d, mut c) = capture(16, 16, 1 << 20);
        c.push(b"hello ");
        c.push(b"world\n");
        let v = c.view();
        assert_eq!(v.text, "hello world\n");
        assert_eq!((v.omitted_bytes, v.total_bytes), (0, 12));
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_a_marker() {
        let (_d, mut c) = capture(10, 10, 1 << 20);
        for i in 0..100u8 {
            c.push(&[b'a' + (i % 26)]);
        }
        let v = c.view();
        assert_eq!(v.omitted_bytes, 80);
        assert!(
            v.text
                .starts_with("abcdefghij\n…[80 bytes omitted; the full output is in "),
            "{}",
            v.text
        );
        assert!(v.text.ends_with("]…\nmnopqrstuv"), "{}", v.text);
    }

    #[test]
    fn cursor_reads_return_every_byte_once_from_memory_and_log() {
        let (_d, mut c) = capture(8, 8, 1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for chunk in data.chunks(37) {
            c.push(chunk);
        }
        let mut cursor = 0;
        let mut got = Vec::new();
        loop {
            let r = c.read(cursor, 100);
            assert_eq!(r.skipped_bytes, 0);
            if r.text.is_empty() {
                break;
            }
            got.extend_from_slice(r.text.as_bytes());
            cursor = r.next_cursor;
        }
        assert_eq!(got, data);
    }

    #[test]
    fn reads_past_the_log_cap_skip_and_count() {
        let (_d, mut c) = capture(4, 4, 10);
        c.push(b"0123456789abcdefghijklmnopqrstuvwxyz");
        let r = c.read(0, 100);
        assert_eq!(
            (r.text.as_str(), r.skipped_bytes),
            ("0123456789", 0),
            "head and log are contiguous"
        );
        let r = c.read(4, 100);
        assert_eq!((r.text.as_str(), r.skipped_bytes), ("456789", 0));
        let r = c.read(10, 100);
        assert_eq!(
            (r.text.as_str(), r.skipped_bytes, r.next_cursor),
            ("wxyz", 22, 36)
        );
        assert!(c.log_truncated());
        assert!(c.view().text.contains("holds the first 10 bytes"));
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let (_d, mut c) = capture(5, 5, 1 << 20);
        let text = "ééééééééééééééééééé€€€€€€€€€";
        // Feed byte by byte so every boundary is exercised.
        for b in text.as_bytes() {
            c.push(std::slice::from_ref(b));
        }
        let v = c.view();
        assert!(!v.text.contains('\u{FFFD}'), "{}", v.text);
        assert!(v.text.starts_with("éé\n"), "{}", v.text);
        assert!(v.text.ends_with("€"), "{}", v.text);
        // Cursor reads of odd sizes reassemble the text exactly.
        for max in [1, 2, 3, 5, 7] {
            let mut cursor = 0;
            let mut got = String::new();
            loop {
                let r = c.read(cursor, max);
                if r.next_cursor == cursor {
                    break;
                }
                got.push_str(&r.text);
                cursor = r.next_cursor;
            }
            assert_eq!(got, text, "max {max}");
        }
    }

    #[test]
    fn a_character_still_arriving_is_not_read_or_shown_until_it_is_complete() {
        let (_d, mut c) = capture(4, 4, 1 << 20);
        let euro = "€".as_bytes();
        c.push(b"ab");
        c.push(&euro[..1]);
        // The stream is open: the first byte of `€` waits for the rest instead of becoming U+FFFD.
        let r = c.read(0, 100);
        assert_eq!((r.text.as_str(), r.next_cursor), ("ab", 2));
        let r = c.read(2, 100);
        assert_eq!((r.text.as_str(), r.next_cursor), ("", 2));
        assert_eq!(c.view().text, "ab");
        c.push(&euro[1..]);
        c.push("xyzé".as_bytes());
        c.push(&"é".as_bytes()[..1]);
        let r = c.read(2, 100);
        assert_eq!((r.text.as_str(), r.next_cursor), ("€xyzé", 10));
        assert!(!c.view().text.contains('\u{FFFD}'), "{}", c.view().text);
        assert!(c.view().text.ends_with("é"), "{}", c.view().text);
        // Once the stream has ended, its incomplete last character is final: shown (replaced) and passed.
        c.finish();
        let r = c.read(10, 100);
        assert_eq!((r.text.as_str(), r.next_cursor), ("\u{FFFD}", 11));
        assert!(c.view().text.ends_with('\u{FFFD}'), "{}", c.view().text);
        let (_d, mut short) = capture(16, 16, 1 << 20);
        short.push(&euro[..2]);
        assert_eq!(short.view().text, "");
        short.finish();
        assert_eq!(short.view().text, "\u{FFFD}");
    }

    #[test]
    fn a_character_across_the_head_and_tail_seam_is_shown_whole() {
        // The head ends inside the third `é`; the tail holds the rest; nothing was left out.
        let (_d, mut c) = capture(5, 5, 1 << 20);
        c.push("ééé".as_bytes());
        let v = c.view();
        assert_eq!((v.text.as_str(), v.omitted_bytes), ("ééé", 0));
        c.finish();
        assert_eq!(c.view().text, "ééé");
    }

    #[test]
    fn long_lines_are_shortened_in_views() {
        let line = "x".repeat(10_000);
        let s = shorten_lines(&format!("short\n{line}\nend"), 100);
        assert!(s.starts_with("short\n"));
        assert!(s.contains("…[9900 bytes of this line omitted]…"), "{s}");
        assert!(s.ends_with("\nend"));
        let s = shorten_lines(&"é".repeat(200), 101);
        assert!(s.contains("omitted"));
    }

    #[test]
    fn helpers() {
        assert_eq!(complete_prefix("aé".as_bytes()), 3);
        assert_eq!(complete_prefix(&"aé".as_bytes()[..2]), 1);
        assert_eq!(complete_prefix(&"€".as_bytes()[..2]), 0);
        assert_eq!(leading_continuations(&"€".as_bytes()[1..]), 2);
    }
}

/// How much output one read returns at most by default.
const DEFAULT_READ_BYTES: usize = 256 * 1024;

/// What one [`Executor::read_output`](crate::Executor::read_output) asks for: the bytes after a cursor, or the
/// head/tail view of everything; how long to wait for something new (or the exit); whether to answer as soon as the
/// output goes quiet; and how many bytes at most. Build it with [`ReadOptions::after`] or [`ReadOptions::view`] and
/// the setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    pub(crate) cursor: Option<u64>,
    pub(crate) wait: std::time::Duration,
    pub(crate) idle: Option<std::time::Duration>,
    pub(crate) max_bytes: usize,
}

impl ReadOptions {
    /// The bytes after `cursor` (0 for all output from the start), at once (no wait), at most 256 KiB.
    pub fn after(cursor: u64) -> ReadOptions {
        ReadOptions {
            cursor: Some(cursor),
            wait: std::time::Duration::ZERO,
            idle: None,
            max_bytes: DEFAULT_READ_BYTES,
        }
    }

    /// The head/tail view of all output (the middle left out when it is long), at once (no wait).
    pub fn view() -> ReadOptions {
        ReadOptions {
            cursor: None,
            ..ReadOptions::after(0)
        }
    }

    /// Waits up to `wait` for new output (with a cursor) or for the exit (for the view) before answering.
    pub fn wait(mut self, wait: std::time::Duration) -> ReadOptions {
        self.wait = wait;
        self
    }

    /// Answers once the output has gone quiet for `idle` (a prompt, a banner, one burst of a build), the process
    /// exited, or the wait ended, whichever comes first.
    pub fn until_quiet(mut self, idle: std::time::Duration) -> ReadOptions {
        self.idle = Some(idle);
        self
    }

    /// At most `max_bytes` of output in this read (the rest stays for the next one, from the returned cursor).
    pub fn max_bytes(mut self, max_bytes: usize) -> ReadOptions {
        self.max_bytes = max_bytes;
        self
    }

    /// The cursor the read starts after (`None`: the head/tail view).
    pub fn cursor(&self) -> Option<u64> {
        self.cursor
    }
}
