//! Reading a request's body within its size limit and timeout. The rest of a body
//! refused for its size is drained for a moment after the refusal (a lingering close), so
//! that the client reads the 413 rather than a connection reset.

use super::error::ApiError;
use axum::body::{Body, Bytes, HttpBody};
use http_body_util::BodyExt;
use std::time::Duration;

/// How long a refused body is drained at most after its refusal.
const LINGER: Duration = Duration::from_secs(1);
/// Bytes of a refused body drained at most.
const LINGER_BYTES: usize = 16 << 20;

/// The body's bytes: one over `limit` bytes is refused at once when its Content-Length
/// says so (before any of it is read), or as soon as it passes the limit; one that does
/// not arrive within `timeout` is a 408.
pub async fn read(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, ApiError> {
    tokio::time::timeout(timeout, collect(body, limit))
        .await
        .map_err(|_| ApiError::BodyTimeout {
            seconds: timeout.as_secs_f64(),
        })?
}

/// The body's bytes, up to `limit`; the rest of a longer one lingers.
async fn collect(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let too_large = |body: Body| {
        tokio::spawn(linger(body));
        Err(ApiError::BodyTooLarge { limit })
    };
    let declared = body.size_hint().lower();
    if declared > limit as u64 {
        return too_large(body);
    }
    let mut bytes = Vec::with_capacity(declared as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::BadBody(e.to_string()))?;
        let data = frame.data_ref().map_or(&[][..], |data| data);
        if bytes.len() + data.len() > limit {
            return too_large(body);
        }
        bytes.extend_from_slice(data);
    }
    Ok(bytes.into())
}

/// Reads and drops what `body` sends, for [`LINGER`] and [`LINGER_BYTES`] at most.
async fn linger(mut body: Body) {
    let drain = async {
        let mut left = LINGER_BYTES;
        while let Some(Ok(frame)) = body.frame().await {
            let size = frame.data_ref().map_or(0, Bytes::len);
            match left.checked_sub(size) {
                Some(rest) => left = rest,
                None => return,
            }
        }
    };
    // Time is up: dropping the body closes the connection.
    let _ = tokio::time::timeout(LINGER, drain).await;
}
