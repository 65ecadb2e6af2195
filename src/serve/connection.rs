//! Accepting connections and serving HTTP/1.1 on each with hyper: the header timeout
//! (from when a connection connects or its previous response ends, so it also closes
//! idle keep-alive connections and slowloris clients), and graceful shutdown.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long to wait after a failed accept (too many open files, ...) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `router` on every connection `listener` accepts until `stop` resolves; returns
/// the connections still open, to be shut down gracefully.
pub async fn accept_until(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    stop: impl Future<Output = ()>,
) -> GracefulShutdown {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let service = TowerToHyperService::new(router);
    let connections = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return connections,
        };
        match stream {
            Ok((stream, _)) => {
                let connection = http.serve_connection(TokioIo::new(stream), service.clone());
                let connection = connections.watch(connection);
                // A connection's error (a reset, a header timeout) concerns that client only.
                tokio::spawn(async move { drop(connection.await) });
            }
            Err(error) => {
                eprintln!("oxrelax serve: cannot accept a connection: {error}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}
