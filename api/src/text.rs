//! Text from outside the operator (bootc's stderr relaying a registry's
//! error body, a status message written by a node, an Event) made safe to
//! show on a terminal; and an error as one line with its sources.

use std::borrow::Cow;

/// `text` with every control character but newline escaped (`\u{1b}`,
/// `\r`, `\t`, `\u{9b}`...): C0, DEL and C1, so ANSI and OSC sequences
/// (cursor moves, line erasure, window titles, clipboard writes) are shown
/// rather than obeyed by the terminal that prints them.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `err` and each of its sources, joined by ": " (an HTTP client's error
/// says what failed only in its sources).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn escaped(c: char) -> bool {
    c.is_control() && c != '\n'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_and_osc_sequences_are_shown_not_obeyed() {
        let hostile = "registry says: \u{1b}]0;OWNED\u{7}\u{1b}[2K\u{1b}[1A\rhidden\u{9b}31m\u{7f}";
        let shown = escape_controls(hostile);
        assert_eq!(
            shown,
            "registry says: \\u{1b}]0;OWNED\\u{7}\\u{1b}[2K\\u{1b}[1A\\rhidden\\u{9b}31m\\u{7f}"
        );
        assert!(!shown.chars().any(char::is_control), "{shown}");
    }

    #[test]
    fn plain_text_and_newlines_are_kept() {
        let plain = "error: manifest unknown\nsecond line, ünïcödé ✓";
        assert!(matches!(escape_controls(plain), Cow::Borrowed(t) if t == plain));
        assert_eq!(escape_controls("a\tb\n"), "a\\tb\n");
    }
}
