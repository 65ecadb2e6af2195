//! Fresh names: the one place that picks a name not taken yet.

/// `hint`, or `hint` followed by the first number that makes it free (`matmul`,
/// `matmul1`, ...).
pub fn fresh_name(hint: &str, taken: impl Fn(&str) -> bool) -> String {
    std::iter::once(hint.to_string())
        .chain((1..).map(|i| format!("{hint}{i}")))
        .find(|candidate| !taken(candidate))
        .expect("an unbounded range always has a free name")
}
