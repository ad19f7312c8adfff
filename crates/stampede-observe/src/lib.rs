//! Stampede's metrics, read at scrape time from the counters the runtime already keeps (no
//! metric calls on hot paths) and exported in the Prometheus/OpenMetrics text format.
//!
//! A [`Metrics`] holds [`Source`]s: [`RuntimeSource`] for a runtime's zones, named
//! containers and tasks; the distribution layer adds its address space's counters, the
//! coordination layer its executor's. [`Metrics::render`] asks each source for its
//! [`Sample`]s and encodes them; [`Endpoint`] serves that on `GET /metrics`, and
//! [`Dashboard`] serves a live web page of them.
//!
//! Labels are bounded: zones, container names and kinds, task names, never timestamps.
//!
//! ```
//! use stampede_core::{ContainerOptions, Runtime};
//! use stampede_observe::{Metrics, RuntimeSource};
//!
//! let rt = Runtime::new();
//! let ch = rt.channel(ContainerOptions::unbounded().name("frames")).unwrap();
//! let t = rt.task(0).unwrap();
//! let out = t.attach_output(&ch).unwrap();
//! for ts in 0..3 {
//!     out.put(ts, "x").unwrap();
//! }
//! let metrics = Metrics::new();
//! metrics.add(RuntimeSource::new(&rt));
//! let text = metrics.render();
//! assert!(text.contains(r#"stampede_container_puts_total{container="frames",kind="channel"} 3"#));
//! ```

mod access;
mod dashboard;
mod endpoint;
mod logs;
mod process;
mod render;
mod runtime;

pub use access::Access;
pub use dashboard::Dashboard;
pub use endpoint::Endpoint;
pub use logs::{init_logging, FORMAT_VAR as LOG_FORMAT_VAR};
pub use process::process;
pub use render::{from_json, to_json, Kind, Sample};
pub use runtime::RuntimeSource;

/// `samples` in the OpenMetrics text format (samples of one family and label set summed).
pub fn encode(samples: Vec<Sample>) -> String {
    render::encode(samples)
}

use std::sync::{Arc, Mutex};

/// What a source reports at each scrape.
pub trait Source: Send + Sync + 'static {
    /// Appends this source's samples to `out`.
    fn collect(&self, out: &mut Vec<Sample>);
}

/// A closure that appends samples is a source.
impl<F: Fn(&mut Vec<Sample>) + Send + Sync + 'static> Source for F {
    fn collect(&self, out: &mut Vec<Sample>) {
        self(out)
    }
}

/// The sources of one address space's metrics; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct Metrics {
    sources: Arc<Mutex<Vec<Arc<dyn Source>>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("sources", &self.lock().len())
            .finish()
    }
}

impl Metrics {
    /// No sources yet.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Source>>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a source.
    pub fn add(&self, source: impl Source) {
        self.lock().push(Arc::new(source));
    }

    /// Every source's samples now.
    pub fn samples(&self) -> Vec<Sample> {
        let sources: Vec<Arc<dyn Source>> = self.lock().clone();
        let mut out = Vec::new();
        for s in sources {
            s.collect(&mut out);
        }
        out
    }

    /// Every source's samples now, in the OpenMetrics text format.
    pub fn render(&self) -> String {
        encode(self.samples())
    }
}
