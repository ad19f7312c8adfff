//! The HTTP endpoints: `GET /metrics` for a scraper, and the dashboard's page and data.
//! Both are read-only: anything but `GET` is refused.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::access::TlsFront;
use crate::{Access, Metrics};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A response body and its content type.
pub(crate) type Reply = (&'static str, Vec<u8>);

/// What a server answers for a path, or `None` (404).
type Routes = dyn Fn(&str) -> Option<Reply> + Send + Sync;

/// An HTTP server on one thread, answering `GET`s from its routes until dropped; with TLS,
/// it listens on loopback behind a TLS front that listens on the address asked for.
pub(crate) struct Server {
    front: Option<TlsFront>,
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
        access: &Access,
    ) -> io::Result<Server> {
        let plain = if access.tls.is_some() {
            "127.0.0.1:0"
        } else {
            addr
        };
        let server = tiny_http::Server::http(plain)
            .map_err(|e| io::Error::new(io::ErrorKind::AddrNotAvailable, format!("{addr}: {e}")))?;
        let bound = server.server_addr().to_ip().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr}: not an IP address"),
            )
        })?;
        let server = Arc::new(server);
        let serving = server.clone();
        let authorization = access.expected_authorization();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || serve(&serving, not_found, authorization.as_deref(), &*routes))?;
        let front = match &access.tls {
            Some((cert, key)) => Some(TlsFront::start(addr, cert, key, bound)?),
            None => None,
        };
        Ok(Server {
            addr: front.as_ref().map_or(bound, TlsFront::addr),
            front,
            server,
            thread: Some(thread),
        })
    }

    /// Whether it speaks HTTPS.
    pub(crate) fn is_tls(&self) -> bool {
        self.front.is_some()
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

fn serve(
    server: &tiny_http::Server,
    not_found: &str,
    authorization: Option<&str>,
    routes: &Routes,
) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("").to_owned();
        let allowed = match authorization {
            None => true,
            Some(expected) => request
                .headers()
                .iter()
                .any(|h| h.field.equiv("Authorization") && h.value.as_str() == expected),
        };
        if !allowed {
            let challenge =
                tiny_http::Header::from_bytes("WWW-Authenticate", "Basic realm=\"stampede\"")
                    .expect("a valid header");
            let response = tiny_http::Response::from_data(
                b"the application's credentials are needed\n".to_vec(),
            )
            .with_status_code(401)
            .with_header(challenge);
            if let Err(e) = request.respond(response) {
                tracing::debug!("an HTTP answer was not delivered: {e}");
            }
            continue;
        }
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
        drop(self.front.take());
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
                &Access::default(),
            )?,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }
}
