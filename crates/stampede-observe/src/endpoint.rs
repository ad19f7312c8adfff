//! The HTTP endpoints: `GET /metrics` for a scraper, and the dashboard's page and data.
//! Both are read-only: anything but `GET` is refused.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A response body and its content type.
pub(crate) type Reply = (&'static str, Vec<u8>);

/// What a server answers for a path, or `None` (404).
type Routes = dyn Fn(&str) -> Option<Reply> + Send + Sync;

/// An HTTP server on one thread, answering `GET`s from its routes until dropped.
pub(crate) struct Server {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(
        addr: &str,
        name: &str,
        not_found: &'static str,
        routes: Box<Routes>,
    ) -> io::Result<Server> {
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
            .name(name.into())
            .spawn(move || serve(&serving, not_found, &*routes))?;
        Ok(Server {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

fn serve(server: &tiny_http::Server, not_found: &str, routes: &Routes) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("").to_owned();
        let response = match (request.method(), routes(&path)) {
            (tiny_http::Method::Get, Some((content_type, body))) => {
                let header = tiny_http::Header::from_bytes("Content-Type", content_type)
                    .expect("a valid header");
                // Live data: a browser must not show an old answer.
                let fresh = tiny_http::Header::from_bytes("Cache-Control", "no-store")
                    .expect("a valid header");
                tiny_http::Response::from_data(body)
                    .with_header(header)
                    .with_header(fresh)
            }
            (tiny_http::Method::Get, None) => {
                tiny_http::Response::from_data(not_found.as_bytes().to_vec()).with_status_code(404)
            }
            _ => tiny_http::Response::from_data(b"only GET\n".to_vec()).with_status_code(405),
        };
        if let Err(e) = request.respond(response) {
            tracing::debug!("an HTTP answer was not delivered: {e}");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `metrics` on `GET /metrics` from one thread until dropped.
pub struct Endpoint {
    server: Server,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Endpoint {
    /// Listens on `addr` (`host:port`; port 0 picks one, see [`Endpoint::addr`]).
    pub fn start(addr: &str, metrics: Metrics) -> io::Result<Endpoint> {
        let routes = move |path: &str| {
            (path == "/metrics").then(|| (OPENMETRICS, metrics.render().into_bytes()))
        };
        Ok(Endpoint {
            server: Server::start(
                addr,
                "stampede-metrics",
                "not found: the metrics are at /metrics\n",
                Box::new(routes),
            )?,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }
}
