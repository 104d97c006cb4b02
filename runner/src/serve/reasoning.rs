//! The reasoning of a thinking-mode answer (DeepSeek V4 with `reasoning_effort`), sent apart
//! from its content as DeepSeek's API does: the model's text up to the first `</think>` is
//! `reasoning_content`, what follows is `content`, and the tag itself is neither.

/// Closes the reasoning.
const END: &str = crate::deepseek::chat::THINK_END;

/// Splits the pieces of one answer as they arrive, holding back only what may be the start of
/// `</think>` split across pieces.
#[derive(Debug)]
pub struct Splitter {
    reasoning: bool,
    held: String,
}

impl Splitter {
    /// A splitter for an answer that starts in its reasoning (`thinking`) or not.
    pub fn new(thinking: bool) -> Self {
        Self {
            reasoning: thinking,
            held: String::new(),
        }
    }

    /// The (reasoning, content) ready to send after `piece`.
    pub fn push(&mut self, piece: &str) -> (String, String) {
        if !self.reasoning {
            return (String::new(), piece.to_string());
        }
        self.held.push_str(piece);
        if let Some(at) = self.held.find(END) {
            let reasoning = self.held[..at].to_string();
            let content = self.held[at + END.len()..].to_string();
            self.held.clear();
            self.reasoning = false;
            return (reasoning, content);
        }
        // keep back the longest tail that could begin the tag (`get` skips cuts inside a
        // character; a tail that matches starts with `<`)
        let held = &self.held;
        let keep = (1..END.len())
            .rev()
            .filter_map(|n| held.len().checked_sub(n))
            .find(|&at| held.get(at..).is_some_and(|tail| END.starts_with(tail)))
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

    fn run(thinking: bool, pieces: &[&str]) -> (String, String) {
        let mut s = Splitter::new(thinking);
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
        let mut s = Splitter::new(true);
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
