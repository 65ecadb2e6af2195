//! The server's errors, answered as OpenAI does:
//! `{"error": {"message", "type", "param", "code"}}` with a 4xx or 5xx status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

/// Why a request was not (fully) served.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON.
    #[error("the request body is not valid JSON: {0}")]
    BadJson(String),
    /// The body is JSON of the wrong shape (a missing field, a wrong type).
    #[error("the request body does not match the API: {0}")]
    BadShape(String),
    /// The body could not be read (other than for its size).
    #[error("cannot read the request body: {0}")]
    BadBody(String),
    /// The body is larger than `--max-body`.
    #[error("the request body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body did not arrive within `--body-timeout`.
    #[error("the request body did not arrive within {seconds} s")]
    BodyTimeout {
        /// The timeout in seconds.
        seconds: f64,
    },
    /// The body has a field this endpoint does not know.
    #[error("unknown field `{field}` (this endpoint reads {known})")]
    UnknownField {
        /// The field.
        field: String,
        /// The fields the endpoint reads, listed.
        known: String,
    },
    /// A field's value is out of range or unsupported.
    #[error("`{param}`: {message}")]
    Invalid {
        /// The field.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The prompt does not fit in the model's context window.
    #[error(
        "the prompt has {prompt_tokens} tokens; the model's context window is {window} tokens"
    )]
    ContextLengthExceeded {
        /// Tokens of the prompt (rendered and encoded).
        prompt_tokens: usize,
        /// The context window.
        window: usize,
    },
    /// The request names a model this server does not serve.
    #[error("the model `{0}` does not exist (see GET /v1/models)")]
    ModelNotFound(String),
    /// No route has this path.
    #[error("no route for {0}")]
    NotFound(String),
    /// The route exists but not for this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The queue of waiting requests is full.
    #[error("the server is busy ({capacity} requests are waiting): retry later")]
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The worker has stopped (the server is shutting down).
    #[error("the server is shutting down")]
    Unavailable,
    /// The engine failed while generating.
    #[error("generation failed: {0}")]
    Engine(String),
}

/// The body of an error response (also the last event of a stream that fails).
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    error: ErrorDetail,
}

/// OpenAI's error object.
#[derive(Debug, Serialize)]
struct ErrorDetail {
    message: String,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<String>,
    code: Option<&'static str>,
}

impl ApiError {
    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::ModelNotFound(_) | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::QueueFull { .. } | ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The body answered: `{"error": {...}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.detail(),
        }
    }

    fn detail(&self) -> ErrorDetail {
        let (kind, code) = match self {
            ApiError::ModelNotFound(_) => ("invalid_request_error", Some("model_not_found")),
            ApiError::ContextLengthExceeded { .. } => {
                ("invalid_request_error", Some("context_length_exceeded"))
            }
            ApiError::NotFound(_) => ("invalid_request_error", Some("unknown_url")),
            ApiError::QueueFull { .. } => ("server_error", Some("server_overloaded")),
            ApiError::Unavailable | ApiError::Engine(_) => ("server_error", None),
            _ => ("invalid_request_error", None),
        };
        let param = match self {
            ApiError::Invalid { param, .. } => Some(param.to_string()),
            ApiError::UnknownField { field, .. } => Some(field.clone()),
            ApiError::ModelNotFound(_) => Some("model".to_string()),
            _ => None,
        };
        ErrorDetail {
            message: self.to_string(),
            kind,
            param,
            code,
        }
    }

    /// An out-of-range or unsupported value of `param`.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            param,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::ApiError;

    #[test]
    fn errors_have_openai_shape_and_status() {
        let error = ApiError::invalid("max_tokens", "must be at least 1");
        assert_eq!(error.status().as_u16(), 400);
        let json = serde_json::to_value(error.body()).unwrap();
        assert_eq!(
            json["error"],
            serde_json::json!({
                "message": "`max_tokens`: must be at least 1",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": null
            })
        );
        let full = ApiError::QueueFull { capacity: 1 };
        assert_eq!(full.status().as_u16(), 503);
        assert_eq!(
            serde_json::to_value(full.body()).unwrap()["error"]["code"],
            "server_overloaded"
        );
    }
}
