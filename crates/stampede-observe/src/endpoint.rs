//! The HTTP endpoint a scraper reads: `GET /metrics`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::Metrics;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `metrics` on `GET /metrics` from one thread until dropped.
pub struct Endpoint {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Endpoint {
    /// Listens on `addr` (`host:port`; port 0 picks one, see [`Endpoint::addr`]).
    pub fn start(addr: &str, metrics: Metrics) -> io::Result<Endpoint> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| io::Error::new(io::ErrorKind::AddrNotAvailable, format!("{addr}: {e}")))?;
        let bound = server.server_addr().to_ip().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr}: not an IP address"),
            )
        })?;
        let server = Arc::new(server);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("stampede-metrics".into())
            .spawn(move || serve(&serving, &metrics))?;
        Ok(Endpoint {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

fn serve(server: &tiny_http::Server, metrics: &Metrics) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("");
        let response = match (request.method(), path) {
            (tiny_http::Method::Get, "/metrics") => {
                let header = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE)
                    .expect("a valid header");
                tiny_http::Response::from_string(metrics.render()).with_header(header)
            }
            (tiny_http::Method::Get, _) => {
                tiny_http::Response::from_string("not found: the metrics are at /metrics\n")
                    .with_status_code(404)
            }
            _ => tiny_http::Response::from_string("only GET\n").with_status_code(405),
        };
        if let Err(e) = request.respond(response) {
            tracing::debug!("a metrics scrape's answer was not delivered: {e}");
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
