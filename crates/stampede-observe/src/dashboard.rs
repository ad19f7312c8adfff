//! The live dashboard: one static page (HTML, style, script and the vendored uPlot chart
//! library, all compiled into the binary) and `GET /api/samples`, the samples of a
//! [`Metrics`] as JSON, which the page polls. Read-only.

use std::io;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::endpoint::{Reply, Server};
use crate::{Access, Metrics};

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// The page's files, by path.
const FILES: [(&str, &str, &str); 6] = [
    ("/", HTML, include_str!("../web/index.html")),
    ("/dashboard.js", JS, include_str!("../web/dashboard.js")),
    ("/dashboard.css", CSS, include_str!("../web/dashboard.css")),
    (
        "/vendor/uPlot.iife.min.js",
        JS,
        include_str!("../web/vendor/uPlot.iife.min.js"),
    ),
    (
        "/vendor/uPlot.min.css",
        CSS,
        include_str!("../web/vendor/uPlot.min.css"),
    ),
    (
        "/vendor/uPlot.LICENSE",
        TEXT,
        include_str!("../web/vendor/uPlot.LICENSE"),
    ),
];

/// Serves the dashboard of `metrics` until dropped.
///
/// The metrics may be one runtime's (a [`RuntimeSource`](crate::RuntimeSource)) or a whole
/// application's, each sample labelled with its `space` (what the distribution layer's
/// `application_metrics` gives): the page groups by that label.
pub struct Dashboard {
    server: Server,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Dashboard {
    /// Listens on `addr` (`host:port`; port 0 picks one), titling the page `title`.
    ///
    /// ```
    /// use stampede_core::Runtime;
    /// use stampede_observe::{Dashboard, Metrics, RuntimeSource};
    ///
    /// let rt = Runtime::new();
    /// let metrics = Metrics::new();
    /// metrics.add(RuntimeSource::new(&rt));
    /// let dashboard = Dashboard::start("127.0.0.1:0", "example", metrics).unwrap();
    /// assert!(dashboard.url().starts_with("http://127.0.0.1:"));
    /// ```
    pub fn start(addr: &str, title: &str, metrics: Metrics) -> io::Result<Dashboard> {
        Dashboard::start_with(addr, title, metrics, &Access::default())
    }

    /// [`start`](Dashboard::start), protected as `access` says: every request must present
    /// its credentials, and with its certificate the page is served over HTTPS.
    pub fn start_with(
        addr: &str,
        title: &str,
        metrics: Metrics,
        access: &Access,
    ) -> io::Result<Dashboard> {
        let title = title.to_owned();
        let routes = move |path: &str| -> Option<Reply> {
            if path == "/api/samples" {
                return Some(("application/json", snapshot(&title, &metrics).into_bytes()));
            }
            let path = if path == "/index.html" { "/" } else { path };
            FILES
                .iter()
                .find(|(p, _, _)| *p == path)
                .map(|(_, kind, body)| (*kind, body.as_bytes().to_vec()))
        };
        Ok(Dashboard {
            server: Server::start(
                addr,
                "stampede-dashboard",
                "not found: the dashboard is at /\n",
                Box::new(routes),
                access,
            )?,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The page's address, `http://host:port/` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.server.is_tls() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/", self.addr())
    }
}

/// `{"title": ..., "time": seconds since the epoch, "samples": [...]}`.
fn snapshot(title: &str, metrics: &Metrics) -> String {
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    format!(
        "{{\"title\":{},\"time\":{time},\"samples\":{}}}",
        serde_json::to_string(title).expect("a string serializes"),
        crate::to_json(&metrics.samples())
    )
}
