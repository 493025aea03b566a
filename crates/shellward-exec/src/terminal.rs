//! Terminal output as a model reads it: escape sequences removed and carriage-return overwrites resolved.
//!
//! A command on a pseudo-terminal writes for a screen: colours and cursor moves (`ESC [ … m`, `ESC [ K`), titles
//! (`ESC ] … BEL`), `\r\n` line ends, and progress bars that redraw one line with `\r`. [`clean`] replays the text on
//! a one-line model of a terminal — printing overwrites at the cursor, `\r` returns to the line's start, backspace and
//! the cursor-column sequences move, erase-in-line cuts — and keeps only what the final screen line shows, one line at
//! a time. The sequences themselves are parsed by `vte` (Alacritty's parser), so a malformed or unknown sequence is
//! dropped whole rather than leaking bytes. The log keeps the raw bytes; only views and reads are cleaned.

/// The text with escape sequences removed and `\r` overwrites resolved (`"10%\r20%\r30%\n"` → `"30%\n"`).
pub(crate) fn clean(text: &str) -> String {
    let mut screen = Line::default();
    let mut parser = vte::Parser::new();
    parser.advance(&mut screen, text.as_bytes());
    screen.finish()
}

/// Output of a command without a terminal, as a model reads it: escape sequences (colours, `ESC [ 2 J`, titles,
/// OSC 52 clipboard writes, …) and control characters other than `\n`, `\t` and `\r` removed; everything else kept as
/// written. Text without an escape or such a control is returned as it is, without parsing.
pub(crate) fn strip_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = |b: u8| b >= 0x20 && b != 0x7f || matches!(b, b'\n' | b'\t' | b'\r');
    if text.bytes().all(plain) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Stripped(String::with_capacity(text.len()));
    let mut parser = vte::Parser::new();
    parser.advance(&mut out, text.as_bytes());
    std::borrow::Cow::Owned(out.0)
}

/// What [`strip_controls`] keeps.
struct Stripped(String);

impl vte::Perform for Stripped {
    fn print(&mut self, c: char) {
        if c != '\x7f' {
            self.0.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t' | b'\r') {
            self.0.push(byte as char);
        }
    }
}

/// The line being drawn and the lines already finished.
#[derive(Default)]
struct Line {
    done: String,
    chars: Vec<char>,
    col: usize,
}

impl Line {
    fn put(&mut self, c: char) {
        if self.col < self.chars.len() {
            self.chars[self.col] = c;
        } else {
            // A cursor moved past the end (CSI C / G) leaves blanks, as on a screen.
            self.chars.resize(self.col, ' ');
            self.chars.push(c);
        }
        self.col += 1;
    }

    fn newline(&mut self) {
        self.done.extend(self.chars.drain(..));
        self.done.push('\n');
        self.col = 0;
    }

    fn finish(mut self) -> String {
        self.done.extend(self.chars.drain(..));
        self.done
    }
}

impl vte::Perform for Line {
    fn print(&mut self, c: char) {
        self.put(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => self.newline(),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => self.put('\t'),
            // Bell, shift-in/out and the other controls draw nothing.
            _ => {}
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        _intermediates: &[u8],
        _ignore: bool,
        action: char,
    ) {
        let first = params
            .iter()
            .next()
            .and_then(|p| p.first().copied())
            .unwrap_or(0) as usize;
        match action {
            // Erase in line: 0 (or none) from the cursor to the end, 2 the whole line. (1 blanks the start: no-op.)
            'K' if first == 0 => self.chars.truncate(self.col),
            'K' if first == 2 => self.chars.clear(),
            // Cursor forward / back / to column N (1-based).
            'C' => self.col += first.max(1),
            'D' => self.col = self.col.saturating_sub(first.max(1)),
            'G' => self.col = first.max(1) - 1,
            // Colours, modes, scrolling, other lines: nothing a line of text shows.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{clean, strip_controls};

    #[test]
    fn pipe_output_loses_escape_sequences_and_keeps_its_text() {
        // A clipboard write (OSC 52), a screen clear, colours and a bell: gone; text, tabs and line ends: kept.
        assert_eq!(
            strip_controls("\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mred\x1b[0m\tok\x07\r\n"),
            "red\tok\r\n"
        );
        assert!(matches!(
            strip_controls("plain text\r\n\tand tabs, ünïcödé"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(strip_controls("a\x00b\x7fc"), "abc");
    }

    #[test]
    fn colours_and_titles_are_removed() {
        assert_eq!(
            clean("\x1b]0;title\x07\x1b[1;31merror\x1b[0m: bad\r\n"),
            "error: bad\n"
        );
    }

    #[test]
    fn carriage_returns_keep_what_the_screen_shows() {
        assert_eq!(clean("10%\r20%\r100%\ndone\n"), "100%\ndone\n");
        assert_eq!(clean("long line\rshort\n"), "shortline\n");
        assert_eq!(clean("long line\r\x1b[Kshort\n"), "short\n");
        assert_eq!(
            clean(">>> print(6*7)\r\n42\r\n>>> "),
            ">>> print(6*7)\n42\n>>> "
        );
    }

    #[test]
    fn backspace_and_cursor_moves_overwrite() {
        assert_eq!(clean("abc\x08\x08X\n"), "aXc\n");
        assert_eq!(clean("abc\x1b[2DY\n"), "aYc\n");
        assert_eq!(clean("a\x1b[3Gb\n"), "a b\n");
    }

    #[test]
    fn unicode_and_plain_text_pass_through() {
        assert_eq!(clean("héllo → wörld\n"), "héllo → wörld\n");
        assert_eq!(clean("no newline"), "no newline");
    }

    #[test]
    fn an_unfinished_sequence_is_dropped_not_shown() {
        assert_eq!(clean("ok\x1b[3"), "ok");
    }
}
