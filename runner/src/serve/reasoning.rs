//! The reasoning of a thinking-mode answer (a family encoder's thinking mode, with
//! `reasoning_effort`), sent apart from its content as DeepSeek's API does: the model's text up
//! to the first mark that closes it (the encoder's [`crate::chat::AnswerSyntax`], `</think>`) is
//! `reasoning_content`, what follows is `content`, and the mark itself is neither.

/// Splits the pieces of one answer as they arrive, holding back only what may be the start of
/// `</think>` split across pieces.
#[derive(Debug)]
pub struct Splitter {
    /// The mark that closes the reasoning, while the answer is still in it.
    reasoning: Option<&'static str>,
    held: String,
}

impl Splitter {
    /// A splitter for an answer that starts in its reasoning, closed by `end` (thinking mode),
    /// or not (`None`).
    pub fn new(end: Option<&'static str>) -> Self {
        Self {
            reasoning: end,
            held: String::new(),
        }
    }

    /// The (reasoning, content) ready to send after `piece`.
    pub fn push(&mut self, piece: &str) -> (String, String) {
        let Some(end) = self.reasoning else {
            return (String::new(), piece.to_string());
        };
        self.held.push_str(piece);
        if let Some(at) = self.held.find(end) {
            let reasoning = self.held[..at].to_string();
            let content = self.held[at + end.len()..].to_string();
            self.held.clear();
            self.reasoning = None;
            return (reasoning, content);
        }
        // keep back the longest tail that could begin the tag (`get` skips cuts inside a
        // character; a tail that matches starts with `<`)
        let held = &self.held;
        let keep = (1..end.len())
            .rev()
            .filter_map(|n| held.len().checked_sub(n))
            .find(|&at| held.get(at..).is_some_and(|tail| end.starts_with(tail)))
            .map_or(0, |at| held.len() - at);
        let send = self.held.len() - keep;
        let reasoning = self.held[..send].to_string();
        self.held.drain(..send);
        (reasoning, String::new())
    }

    /// What is still held at the end of the answer (reasoning the model never closed).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const END: &str = "</think>";

    fn run(thinking: bool, pieces: &[&str]) -> (String, String) {
        let mut s = Splitter::new(thinking.then_some(END));
        let (mut r, mut c) = (String::new(), String::new());
        for p in pieces {
            let (a, b) = s.push(p);
            r.push_str(&a);
            c.push_str(&b);
        }
        r.push_str(&s.finish());
        (r, c)
    }

    #[test]
    fn the_tag_splits_reasoning_from_content_wherever_the_pieces_break() {
        let text = "Let me think: 2+2 is 4.</think>It is 4. A <b>tag</b> stays.";
        for cut in 0..=text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let got = run(true, &[&text[..cut], &text[cut..]]);
            assert_eq!(
                got,
                (
                    "Let me think: 2+2 is 4.".to_string(),
                    "It is 4. A <b>tag</b> stays.".to_string()
                ),
                "cut at {cut}"
            );
        }
        // one character at a time, with a multi-byte character next to the tag
        let text = "é<</think>ü";
        let pieces: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        assert_eq!(run(true, &refs), ("é<".to_string(), "ü".to_string()));
    }

    #[test]
    fn held_text_is_sent_as_soon_as_it_cannot_begin_the_tag() {
        let mut s = Splitter::new(Some(END));
        assert_eq!(s.push("abc</th"), ("abc".to_string(), String::new()));
        assert_eq!(s.push("x"), ("</thx".to_string(), String::new()));
    }

    #[test]
    fn unclosed_reasoning_and_chat_mode() {
        assert_eq!(
            run(true, &["a", "b</thi"]),
            ("ab</thi".to_string(), String::new())
        );
        assert_eq!(
            run(false, &["a</think>b"]),
            (String::new(), "a</think>b".to_string())
        );
    }
}
