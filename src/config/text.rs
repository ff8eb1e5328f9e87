//! The text of a configuration document as Unit reads it: JSON that may start with a UTF-8 byte-order mark and
//! hold JavaScript-style comments (`// …` to the end of the line, `/* … */`).
//!
//! Comments are blanked (replaced by spaces, line breaks kept) before `serde_json` reads the text, so the line
//! and column of a syntax error still point into what the user wrote.

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Parses a configuration document from the bytes the API or `--config` received.
pub fn parse(bytes: &[u8]) -> serde_json::Result<serde_json::Value> {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    serde_json::from_slice(&blank_comments(bytes))
}

/// Where the scanner is: comments are only recognised outside strings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    Str,
    StrEscape,
    LineComment,
    BlockComment,
    BlockCommentStar,
}

/// Replaces every comment byte by a space (a line break inside a block comment is kept). An unterminated block
/// comment is blanked to the end, which leaves `serde_json` to report what is missing.
fn blank_comments(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut state = State::Code;
    let mut i = 0;
    while i < out.len() {
        let b = out[i];
        state = match state {
            State::Code if b == b'"' => State::Str,
            State::Code if b == b'/' && out.get(i + 1) == Some(&b'/') => {
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 1;
                State::LineComment
            }
            State::Code if b == b'/' && out.get(i + 1) == Some(&b'*') => {
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 1;
                State::BlockComment
            }
            State::Code => State::Code,
            State::Str if b == b'\\' => State::StrEscape,
            State::Str if b == b'"' => State::Code,
            State::Str | State::StrEscape => State::Str,
            State::LineComment if b == b'\n' => State::Code,
            State::LineComment => blank(&mut out[i], State::LineComment),
            State::BlockComment | State::BlockCommentStar
                if b == b'/' && state == State::BlockCommentStar =>
            {
                out[i] = b' ';
                State::Code
            }
            State::BlockComment | State::BlockCommentStar if b == b'*' => {
                blank(&mut out[i], State::BlockCommentStar)
            }
            State::BlockComment | State::BlockCommentStar => {
                blank(&mut out[i], State::BlockComment)
            }
        };
        i += 1;
    }
    out
}

/// Blanks one comment byte (keeping line breaks, so positions stay right) and stays in `next`.
fn blank(b: &mut u8, next: State) -> State {
    if *b != b'\n' && *b != b'\r' {
        *b = b' ';
    }
    next
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::json;

    #[test]
    fn reads_comments_and_a_byte_order_mark() {
        let text = "\u{FEFF}{\n  // the listeners\n  \"a\": \"x//y\", /* not\n here */ \"b\": [1 /**/, 2]\n}\n";
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            json!({"a": "x//y", "b": [1, 2]})
        );
    }

    #[test]
    fn keeps_strings_holding_comment_markers_and_escaped_quotes() {
        let text = r#"{"a": "/* \" // */", "b": "c"} // end"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            json!({"a": "/* \" // */", "b": "c"})
        );
    }

    #[test]
    fn positions_of_errors_stay_those_of_the_text() {
        let err = parse(b"{/* a\nb */ \"a\": }").unwrap_err();
        assert_eq!((err.line(), err.column()), (2, 11));
    }

    #[test]
    fn unterminated_comments_are_errors() {
        assert!(parse(b"{\"a\": 1} /* open").is_ok());
        assert!(parse(b"{\"a\": /* open").is_err());
        assert!(parse(b"/").is_err());
    }
}
