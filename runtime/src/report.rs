//! Errors as people read them: the message and each cause not already in it.

/// The message of `error`, then those of its causes whose text the messages before do
/// not already hold (wrapping errors often repeat their source's text).
pub fn error_chain(error: &dyn std::error::Error) -> Vec<String> {
    let mut lines = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !lines.iter().any(|line| line.contains(&text)) {
            lines.push(text);
        }
        source = cause.source();
    }
    lines
}
