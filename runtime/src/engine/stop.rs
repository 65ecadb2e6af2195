//! Stop strings over streamed text: text is released as soon as it cannot be the start
//! of a stop string, and generation ends when one appears (it is not released).

/// Watches streamed text for stop strings.
#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    /// Text not released yet: it may be the start of a stop string.
    held: String,
    stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop string was seen.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds streamed text; returns the text that can be shown now. After a stop string
    /// nothing more is released.
    pub fn push(&mut self, text: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(text);
        let found = self.stops.iter().filter_map(|s| self.held.find(s)).min();
        if let Some(at) = found {
            self.stopped = true;
            let shown = self.held[..at].to_string();
            self.held.clear();
            return shown;
        }
        let keep = self.partial_stop_len();
        let release = self.held.len() - keep;
        let shown = self.held[..release].to_string();
        self.held.drain(..release);
        shown
    }

    /// Releases what is held (generation ended without a stop string).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Bytes at the end of `held` that are a proper prefix of some stop string.
    fn partial_stop_len(&self) -> usize {
        let held = &self.held;
        (1..=held.len())
            .rev()
            .filter(|&n| held.is_char_boundary(held.len() - n))
            .find(|&n| {
                let tail = &held[held.len() - n..];
                self.stops
                    .iter()
                    .any(|s| s.len() > n && s.starts_with(tail))
            })
            .unwrap_or(0)
    }
}
