//! Stop sequences over streamed text (`stop` of the OpenAI API): text is released as soon as it
//! cannot be the start of a stop sequence; the first complete stop sequence ends the text before
//! it (the sequence itself is never sent, as OpenAI's API does).

/// Finds stop sequences in text that arrives piece by piece.
#[derive(Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    /// Text that may be the start of a stop sequence.
    held: String,
    stopped: bool,
}

impl StopMatcher {
    /// `stops` must not hold an empty string (the request parser refuses one).
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop sequence has been seen.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds `piece`; returns the text that may be sent now.
    pub fn push(&mut self, piece: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first {
            self.stopped = true;
            let out = self.held[..at].to_owned();
            self.held.clear();
            return out;
        }
        let keep = self
            .stops
            .iter()
            .map(|s| partial_tail(&self.held, s))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        self.held.drain(..cut).collect()
    }

    /// The end of the text: whatever is still held (nothing after a stop).
    pub fn finish(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        std::mem::take(&mut self.held)
    }
}

/// The length of the longest tail of `text` that is a proper beginning of `stop`.
fn partial_tail(text: &str, stop: &str) -> usize {
    text.char_indices()
        .map(|(i, _)| i)
        .filter(|&i| text.len() - i < stop.len())
        .find(|&i| stop.starts_with(&text[i..]))
        .map_or(0, |i| text.len() - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| (*s).to_owned()).collect());
        let out: Vec<String> = pieces.iter().map(|p| m.push(p)).collect();
        let end = m.finish();
        (out, end, m.stopped())
    }

    #[test]
    fn text_without_a_stop_passes_through_whole() {
        let (out, end, stopped) = run(&["END"], &["Hello", " world", "!"]);
        assert_eq!(out.concat() + &end, "Hello world!");
        assert!(!stopped);
    }

    #[test]
    fn a_stop_split_across_pieces_is_held_back_and_cut() {
        let (out, end, stopped) = run(&["\n\nUser:"], &["Sure.", "\n", "\nUs", "er: hi", "more"]);
        assert_eq!(out, ["Sure.", "", "", "", ""]);
        assert_eq!(end, "");
        assert!(stopped);
    }

    #[test]
    fn a_false_start_is_released_when_it_parts_from_the_stop() {
        let (out, end, stopped) = run(&["abc"], &["xa", "b", "d", "e"]);
        assert_eq!(out, ["x", "", "abd", "e"]);
        assert_eq!(end, "");
        assert!(!stopped);
    }

    #[test]
    fn the_earliest_of_several_stops_wins_and_a_held_tail_is_released_at_the_end() {
        let (out, _, stopped) = run(&["world", "lo w"], &["Hello world"]);
        assert_eq!(out, ["Hel"]);
        assert!(stopped);
        let (out, end, stopped) = run(&["ab"], &["xxa"]);
        assert_eq!(
            (out.concat(), end.as_str(), stopped),
            ("xx".to_owned(), "a", false)
        );
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let (out, end, stopped) = run(&["é!"], &["caf", "é", "?é", "!"]);
        assert_eq!(out.concat(), "café?");
        assert_eq!(end, "");
        assert!(stopped);
    }
}
