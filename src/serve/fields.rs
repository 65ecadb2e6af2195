//! Which top-level fields a request may have: the fields an endpoint reads, and OpenAI
//! fields it does not serve, accepted only at their neutral value (or null) so that a
//! request is never half-served in silence. Any other field is an error naming it.

use super::error::ApiError;
use super::reply::Kind;
use serde_json::Value;

/// Fields both endpoints read (`user` is only a label, and ignored).
const SHARED: &[&str] = &[
    "model",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "presence_penalty",
    "frequency_penalty",
    "user",
];

/// OpenAI fields not served, with the values (JSON) that ask for nothing beyond what is.
const NEUTRAL: &[(&str, &[&str])] = &[
    ("logprobs", &["false", "0"]),
    ("top_logprobs", &["0"]),
    ("logit_bias", &["{}"]),
    ("echo", &["false"]),
    ("best_of", &["1"]),
    ("suffix", &[]),
    ("tools", &["[]"]),
    ("tool_choice", &["\"none\""]),
    ("parallel_tool_calls", &["true", "false"]),
    ("functions", &["[]"]),
    ("function_call", &["\"none\""]),
    ("response_format", &[r#"{"type":"text"}"#]),
];

/// The fields only `kind` reads.
fn own_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Completion => &["prompt"],
        Kind::Chat => &["messages"],
    }
}

/// Checks the top-level fields of `body` (a body that is not an object is left to the
/// shape check).
pub fn check(kind: Kind, body: &Value) -> Result<(), ApiError> {
    let Some(object) = body.as_object() else {
        return Ok(());
    };
    let own = own_fields(kind);
    for (field, value) in object {
        if own.contains(&field.as_str()) || SHARED.contains(&field.as_str()) {
            continue;
        }
        match NEUTRAL.iter().find(|(name, _)| name == field) {
            Some((name, neutral)) => check_neutral(name, neutral, value)?,
            None => {
                return Err(ApiError::UnknownField {
                    field: field.clone(),
                    known: [own, SHARED].concat().join(", "),
                })
            }
        }
    }
    Ok(())
}

/// `value` of the unserved field `name` must be null or one of `neutral`.
fn check_neutral(name: &'static str, neutral: &[&str], value: &Value) -> Result<(), ApiError> {
    let is_neutral = value.is_null()
        || neutral
            .iter()
            .any(|text| serde_json::from_str::<Value>(text).is_ok_and(|n| n == *value));
    if is_neutral {
        return Ok(());
    }
    let accepted = if neutral.is_empty() {
        "null".to_string()
    } else {
        format!("null or {}", neutral.join(" or "))
    };
    Err(ApiError::invalid(
        name,
        format!("{value} is not supported (only {accepted})"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param(kind: Kind, body: Value) -> Option<String> {
        check(kind, &body)
            .err()
            .map(|e| serde_json::to_value(e.body()).unwrap()["error"]["param"].to_string())
    }

    #[test]
    fn unserved_fields_are_refused_by_name_unless_neutral() {
        let ok = json!({"model": "m", "prompt": "x", "user": "u", "logprobs": null,
            "echo": false, "logit_bias": {}, "stream_options": {"include_usage": true}});
        assert_eq!(param(Kind::Completion, ok), None);
        let chat = json!({"model": "m", "messages": [], "tools": [], "tool_choice": "none",
            "response_format": {"type": "text"}});
        assert_eq!(param(Kind::Chat, chat), None);
        let cases = [
            (Kind::Completion, json!({"logprobs": 5}), "\"logprobs\""),
            (Kind::Chat, json!({"logprobs": true}), "\"logprobs\""),
            (
                Kind::Chat,
                json!({"tools": [{"type": "function"}]}),
                "\"tools\"",
            ),
            (
                Kind::Chat,
                json!({"response_format": {"type": "json_object"}}),
                "\"response_format\"",
            ),
            (
                Kind::Completion,
                json!({"logit_bias": {"1": 5}}),
                "\"logit_bias\"",
            ),
            (Kind::Completion, json!({"messages": []}), "\"messages\""),
            (Kind::Chat, json!({"temprature": 1}), "\"temprature\""),
        ];
        for (kind, body, want) in cases {
            assert_eq!(param(kind, body.clone()).as_deref(), Some(want), "{body}");
        }
    }
}
