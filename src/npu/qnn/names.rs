//! Names in the emitted graphs: QNN tensor and node names double as C++ identifiers in
//! the generated `model.cpp`, as the QNN converter's do.

/// `name` with every character outside `[A-Za-z0-9_]` replaced by `_`, and a leading `_`
/// when it would start with a digit.
pub fn c_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        out.insert(0, '_');
    }
    out
}
