//! Address spaces: a process's runtime joined to a distributed application
//! (`stampede_net::Space`).
//!
//! Containers a space creates are owned by it and registered by name cluster-wide; the
//! others are found by name and come back as the same `Channel`, `Queue` and `Register`
//! classes, used through the same connections. Joining, lookups and everything that talks to
//! other address spaces run without the GIL; lookups wait in slices so Ctrl-C is seen.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;
use stampede_core::Timestamp;
use stampede_net as net;
use stampede_net::{Config, Mode};

use crate::errors::{self, Exc};
use crate::stm::{duration, lock, options, zone_id, Channel, Queue, Register, Runtime};

/// TLS settings for joining: endpoints then use ``tls/`` locators.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Tls {
    root_ca: Option<PathBuf>,
    certificate: Option<PathBuf>,
    private_key: Option<PathBuf>,
    verify_name: bool,
}

fn path_str(p: &Option<PathBuf>) -> Option<String> {
    p.as_ref().map(|p| p.to_string_lossy().into_owned())
}

#[pymethods]
impl Tls {
    #[new]
    #[pyo3(signature = (
        *, root_ca = None, certificate = None, private_key = None, verify_name = true
    ))]
    fn new(
        root_ca: Option<PathBuf>,
        certificate: Option<PathBuf>,
        private_key: Option<PathBuf>,
        verify_name: bool,
    ) -> Self {
        Tls {
            root_ca,
            certificate,
            private_key,
            verify_name,
        }
    }
    /// The certificate authority that signed the other side's certificate.
    #[getter]
    fn root_ca(&self) -> Option<String> {
        path_str(&self.root_ca)
    }
    /// This side's certificate, for listening.
    #[getter]
    fn certificate(&self) -> Option<String> {
        path_str(&self.certificate)
    }
    /// This side's private key, for listening.
    #[getter]
    fn private_key(&self) -> Option<String> {
        path_str(&self.private_key)
    }
    /// Whether a certificate must name the host connected to.
    #[getter]
    fn verify_name(&self) -> bool {
        self.verify_name
    }
}

/// A name registered in an application's name server.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct NameRecord {
    /// The name.
    name: String,
    /// The address space that registered it.
    space: String,
    /// ``"channel"``, ``"queue"``, ``"register"`` or ``"service"``.
    kind: String,
    /// The container's id at its owner (0 for a service).
    container: u64,
    /// The container's time zone.
    zone: u32,
    /// The container's capacity; ``None`` when unbounded.
    capacity: Option<u64>,
    /// Free-form metadata.
    meta: String,
}

impl From<net::NameRecord> for NameRecord {
    fn from(r: net::NameRecord) -> Self {
        NameRecord {
            name: r.name,
            space: r.space,
            kind: r.kind.to_string(),
            container: r.container,
            zone: r.zone,
            capacity: (r.capacity > 0).then_some(r.capacity),
            meta: r.meta,
        }
    }
}

#[pymethods]
impl NameRecord {
    fn __repr__(&self) -> String {
        format!(
            "NameRecord(name={:?}, kind={}, space={:?})",
            self.name, self.kind, self.space
        )
    }
}

/// Counters of an address space's network activity.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct SpaceStats {
    /// Requests served for other address spaces.
    served: u64,
    /// Requests that could not be decoded (answered with an error).
    malformed: u64,
    /// Requests refused because their address space had left.
    refused: u64,
    /// Operations that failed because an owner was unreachable.
    unreachable: u64,
    /// Gets answered from this space's cache of remote items.
    cache_hits: u64,
    /// Address spaces seen leaving or dying.
    spaces_lost: u64,
    /// Items pushed ahead to remote readers (one per reader).
    pushed: u64,
    /// New items not pushed because the pusher was behind (readers fetch them on get).
    push_skipped: u64,
    /// Items other spaces pushed here.
    push_received: u64,
    /// Consumes and applied gets other spaces sent without waiting that this space refused.
    consume_failed: u64,
    /// Arrival and garbage events sent to subscribed spaces (one per subscriber).
    events_sent: u64,
    /// Events received from owners and dispatched to callbacks here.
    events_received: u64,
    /// Events dropped on a full queue or a failed send.
    events_dropped: u64,
    /// Events an owner numbered that never arrived here.
    events_lost: u64,
    /// Puts into remote channels sent without waiting for their owner.
    puts_sent: u64,
    /// Of those, puts their owner refused (each raised by a later put or flush).
    puts_refused: u64,
    /// Gets on other spaces' channels answered here from pushed items, with no round trip.
    view_hits: u64,
    /// Reads of other spaces' registers answered here from pushed values.
    register_hits: u64,
    /// Items of other spaces' queues taken ahead into leases (``queue_prefetch``).
    leased: u64,
    /// Gets on other spaces' queues answered from a lease.
    lease_hits: u64,
    /// Snapshots taken to start or rebuild a remote input connection's view.
    view_snapshots: u64,
    /// Gets readers answered from their views that this space, as owner, refused.
    seen_refused: u64,
    /// Large items this process sent on in the buffer they arrived in (no copy).
    sent_as_received: u64,
    /// Large items this process handed to Zenoh afresh (copied into shared memory or sent).
    sent_fresh: u64,
    /// Loans for remote channels lent in shared memory (put without a copy).
    loans_shared: u64,
    /// Loans lent in plain memory instead (small, no shared memory, or its pool full).
    loans_plain: u64,
    /// Invocations of named code this space sent (calls and one-way).
    invocations_sent: u64,
    /// Invocations this space ran a handler for.
    invocations_served: u64,
    /// Invocations that reached this space for a name it does not serve.
    invocations_unknown: u64,
    /// Failures of this space's invocations reported back to it.
    invocations_failed: u64,
    /// Answers that arrived after their call stopped waiting.
    answers_late: u64,
    /// Requests this space, as owner, refused under its access rules.
    denied: u64,
    /// Requests this space, as owner, refused as over a quota.
    quota_refused: u64,
}

/// One address space's answer to ``Space.explain_cluster``: what holds a zone's watermark
/// there, or why it did not answer.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct SpaceWatermark {
    /// The address space.
    space: String,
    /// The lowest of its own watermark terms, which it reports to the others.
    local: Option<Timestamp>,
    /// Its floor: everything below it has been reclaimed there.
    floor: Option<Timestamp>,
    /// The watermark its terms and the other spaces' reports give now.
    watermark: Option<Timestamp>,
    /// Its explanation, one line per term.
    text: String,
    /// Why it did not answer; ``None`` when it did.
    error: Option<String>,
}

#[pymethods]
impl SpaceWatermark {
    fn __repr__(&self) -> String {
        match &self.error {
            None => format!(
                "SpaceWatermark(space={:?}, watermark={})",
                self.space,
                self.watermark.unwrap_or_default()
            ),
            Some(e) => format!("SpaceWatermark(space={:?}, error={e:?})", self.space),
        }
    }
    fn __str__(&self) -> String {
        match &self.error {
            None => format!("{}: {}", self.space, self.text),
            Some(e) => format!("{}: {e}", self.space),
        }
    }
}

fn explanation(w: net::SpaceWatermark) -> SpaceWatermark {
    let mut out = SpaceWatermark {
        space: w.space,
        local: None,
        floor: None,
        watermark: None,
        text: String::new(),
        error: None,
    };
    match w.report {
        Ok(r) => {
            out.local = Some(r.local);
            out.floor = Some(r.floor);
            out.watermark = Some(r.watermark);
            out.text = r.text;
        }
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

fn mode(py: Python<'_>, m: &str) -> PyResult<Mode> {
    match m {
        "peer" => Ok(Mode::Peer),
        "client" => Ok(Mode::Client),
        "router" => Ok(Mode::Router),
        other => Err(errors::raise(
            py,
            Exc::ConfigError,
            (format!(
                "mode {other:?} is not \"peer\", \"client\" or \"router\""
            ),),
        )),
    }
}

/// An address space: this process's runtime joined to a distributed Stampede application.
///
/// ``Space.join`` connects over Eclipse Zenoh. A space is a ``Runtime``: named containers it
/// creates are owned here and their names registered application-wide; ``lookup_channel``
/// and the others find any space's containers by name, and its tasks (``task``, ``spawn``)
/// use them all through the same connections as local ones. What only an application has
/// is its own: name records (``record``, ``records``), the other spaces, statistics and the
/// cluster-wide watermark. The space leaves at ``leave()`` or at the end of its ``with``
/// block; if the process dies instead, the others notice within the lease and release
/// everything it held (connections, virtual time, held queue items).
#[pyclass(module = "stampede", frozen, extends = Runtime)]
pub(crate) struct Space {
    space: Mutex<Option<net::Space>>,
    id: String,
    app: String,
}

impl Space {
    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<net::Space> {
        lock(&self.space).clone().ok_or_else(|| {
            errors::raise(
                py,
                Exc::Closed,
                (format!("address space {} has left", self.id),),
            )
        })
    }
}

#[pymethods]
impl Space {
    /// Joins application ``app`` (a name without ``/``) and returns this process's address
    /// space in it.
    ///
    /// ``mode`` is ``"peer"`` (a cluster member), ``"client"`` (an end device, connecting
    /// to a router) or ``"router"``; ``listen`` and ``connect`` are Zenoh endpoints such as
    /// ``"tcp/127.0.0.1:7447"``. ``tls``, ``user``/``password`` and ``credentials_file``
    /// (``user:password`` lines a listening side accepts) secure the links. ``lease`` is how
    /// soon a dead process is noticed, ``op_timeout`` how long an operation waits for a live
    /// owner's answer, ``wait_slice`` how long an owner holds a blocked request before it is
    /// asked again; ``None`` keeps the default. ``queue_prefetch`` is how many more waiting
    /// items a get on another space's queue takes ahead, held by the connection as a lease
    /// (0: none). ``metrics_listen`` (``"host:port"``) serves the space's metrics over HTTP
    /// (``GET /metrics``). ``access_file`` holds the access rules this space enforces on the
    /// containers it owns (lines ``user permissions pattern``; see the distribution guide);
    /// a denied request raises ``Denied`` in the requesting space. ``max_item_bytes``,
    /// ``max_connections`` and ``max_waiting_puts`` are its quotas for each other space
    /// (``None`` keeps the default; see the distribution guide). Raises ``ConfigError``,
    /// ``ConnectError`` or ``AuthRejected``.
    #[staticmethod]
    #[pyo3(signature = (
        app, *, mode = "peer", listen = Vec::new(), connect = Vec::new(), tls = None,
        user = None, password = None, credentials_file = None, lease = None,
        op_timeout = None, wait_slice = None, connect_timeout = None,
        multicast_scouting = false, shm_pool = None, queue_prefetch = 0, metrics_listen = None,
        access_file = None, max_item_bytes = None, max_connections = None,
        max_waiting_puts = None,
    ))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn join(
        py: Python<'_>,
        app: &str,
        mode: &str,
        listen: Vec<String>,
        connect: Vec<String>,
        tls: Option<PyRef<'_, Tls>>,
        user: Option<String>,
        password: Option<String>,
        credentials_file: Option<PathBuf>,
        lease: Option<f64>,
        op_timeout: Option<f64>,
        wait_slice: Option<f64>,
        connect_timeout: Option<f64>,
        multicast_scouting: bool,
        shm_pool: Option<usize>,
        queue_prefetch: u32,
        metrics_listen: Option<String>,
        access_file: Option<PathBuf>,
        max_item_bytes: Option<usize>,
        max_connections: Option<usize>,
        max_waiting_puts: Option<usize>,
    ) -> PyResult<Py<Space>> {
        let mut cfg = Config {
            mode: self::mode(py, mode)?,
            listen,
            connect,
            multicast_scouting,
            credentials_file,
            queue_prefetch,
            metrics_listen,
            ..Config::default()
        };
        cfg.tls = tls.map(|t| net::Tls {
            root_ca: t.root_ca.clone(),
            certificate: t.certificate.clone(),
            private_key: t.private_key.clone(),
            verify_name: t.verify_name,
        });
        cfg.credentials = match (user, password) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => {
                return Err(errors::raise(
                    py,
                    Exc::ConfigError,
                    ("user and password go together",),
                ))
            }
        };
        let times = [
            ("lease", lease, &mut cfg.lease),
            ("op_timeout", op_timeout, &mut cfg.op_timeout),
            ("wait_slice", wait_slice, &mut cfg.wait_slice),
            ("connect_timeout", connect_timeout, &mut cfg.connect_timeout),
        ];
        for (what, secs, field) in times {
            if let Some(s) = secs {
                *field = duration(py, what, s)?;
            }
        }
        if let Some(bytes) = shm_pool {
            cfg.shm_pool = bytes;
        }
        let q = &mut cfg.quotas;
        for (given, field) in [
            (max_item_bytes, &mut q.max_item_bytes),
            (max_connections, &mut q.max_connections),
            (max_waiting_puts, &mut q.max_waiting_puts),
        ] {
            if let Some(n) = given {
                *field = n;
            }
        }
        if let Some(path) = access_file {
            cfg.access = Some(net::Access::from_file(path).map_err(|e| errors::net_error(py, e))?);
        }
        let space = py
            .detach(|| net::Space::join(app, cfg))
            .map_err(|e| errors::net_error(py, e))?;
        let base = Runtime::of_space(space.runtime().clone());
        let init = PyClassInitializer::from(base).add_subclass(Space {
            id: space.id().to_owned(),
            app: space.app().to_owned(),
            space: Mutex::new(Some(space)),
        });
        Py::new(py, init)
    }

    /// This address space's id (its Zenoh session id).
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The application joined.
    #[getter]
    fn app(&self) -> &str {
        &self.app
    }

    /// The space as its runtime (a space is one): explanations, counters and collection of
    /// this address space.
    #[getter]
    fn runtime(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Whether the space has left.
    #[getter]
    fn left(&self) -> bool {
        lock(&self.space).is_none()
    }

    /// Creates a channel owned and served by the address space ``space`` (an id from
    /// ``spaces()``); a name registers it application-wide there. It is used from here like
    /// any other space's channel.
    #[pyo3(signature = (space, name = None, *, capacity = None, zone = 0))]
    fn channel_on(
        &self,
        py: Python<'_>,
        space: &str,
        name: Option<String>,
        capacity: Option<i64>,
        zone: i64,
    ) -> PyResult<Channel> {
        let s = self.get(py)?;
        let opts = options(py, name, capacity, zone)?;
        let c = py
            .detach(|| s.channel_on(space, opts))
            .map_err(|e| errors::net_error(py, e))?;
        Ok(Channel::wrap(c))
    }

    /// Creates a queue owned by ``space`` (see ``channel_on``).
    #[pyo3(signature = (space, name = None, *, capacity = None, zone = 0))]
    fn queue_on(
        &self,
        py: Python<'_>,
        space: &str,
        name: Option<String>,
        capacity: Option<i64>,
        zone: i64,
    ) -> PyResult<Queue> {
        let s = self.get(py)?;
        let opts = options(py, name, capacity, zone)?;
        let q = py
            .detach(|| s.queue_on(space, opts))
            .map_err(|e| errors::net_error(py, e))?;
        Ok(Queue::wrap(q))
    }

    /// Creates a register owned by ``space`` (see ``channel_on``).
    #[pyo3(signature = (space, name = None, *, zone = 0))]
    fn register_on(
        &self,
        py: Python<'_>,
        space: &str,
        name: Option<String>,
        zone: i64,
    ) -> PyResult<Register> {
        let s = self.get(py)?;
        let opts = options(py, name, None, zone)?;
        let reg = py
            .detach(|| s.register_on(space, opts))
            .map_err(|e| errors::net_error(py, e))?;
        Ok(Register { reg })
    }

    /// The record of ``name`` if a live address space has registered it now, else ``None``.
    fn record(&self, py: Python<'_>, name: &str) -> PyResult<Option<NameRecord>> {
        let s = self.get(py)?;
        Ok(py.detach(|| s.record(name)).map(NameRecord::from))
    }

    /// Every name registered in the application now.
    fn records(&self, py: Python<'_>) -> PyResult<Vec<NameRecord>> {
        let s = self.get(py)?;
        Ok(py
            .detach(|| s.records())
            .into_iter()
            .map(NameRecord::from)
            .collect())
    }

    /// Ids of the address spaces known alive, this one included.
    fn spaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.get(py)?.spaces())
    }

    /// What holds ``zone``'s watermark in every live address space, this one first.
    #[pyo3(signature = (zone = 0))]
    fn explain_cluster(&self, py: Python<'_>, zone: i64) -> PyResult<Vec<SpaceWatermark>> {
        let s = self.get(py)?;
        let z = zone_id(py, zone)?;
        Ok(py
            .detach(|| s.explain_cluster(z))
            .into_iter()
            .map(explanation)
            .collect())
    }

    /// This space's metrics now, in the OpenMetrics text format: its runtime's zones,
    /// named containers and tasks, and its own counters.
    fn metrics(&self, py: Python<'_>) -> PyResult<String> {
        let s = self.get(py)?;
        Ok(py.detach(|| s.metrics().render()))
    }

    /// Serves a live web page of the whole application (every space's metrics, this
    /// one's included) on ``listen`` (``"host:port"``; port 0 picks one) until the returned
    /// :class:`Dashboard` closes, titled with the application's name; each space is asked
    /// for at most ``timeout`` seconds per refresh.
    /// ``executors`` maps names to :class:`stampede.cnc.Executor`\ s this space runs: their
    /// counters join the space's metrics (``Executor.report_to``), and the page shows their
    /// timelines.
    #[pyo3(signature = (listen = "127.0.0.1:0", title = None, executors = None, timeout = 2.0))]
    fn dashboard(
        slf: &Bound<'_, Self>,
        listen: &str,
        title: Option<&str>,
        executors: Option<std::collections::HashMap<String, Bound<'_, PyAny>>>,
        timeout: f64,
    ) -> PyResult<crate::dashboard::Dashboard> {
        let py = slf.py();
        let s = slf.get().get(py)?;
        let timeout = crate::stm::duration(py, "timeout", timeout)?;
        for (name, ex) in executors.unwrap_or_default() {
            // The executor adds itself: the coordination face depends on this one, not the
            // other way round.
            ex.call_method1("report_to", (slf, name.as_str()))?;
        }
        crate::dashboard::Dashboard::new(s.dashboard(listen, title, timeout))
    }

    /// ``"host:port"`` where the space serves its metrics, or ``None``.
    #[getter]
    fn metrics_addr(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.get(py)?.metrics_addr().map(|a| a.to_string()))
    }

    /// Counters of this space's network activity.
    fn stats(&self, py: Python<'_>) -> PyResult<SpaceStats> {
        let s = self.get(py)?.stats();
        Ok(SpaceStats {
            served: s.served,
            malformed: s.malformed,
            refused: s.refused,
            unreachable: s.unreachable,
            cache_hits: s.cache_hits,
            spaces_lost: s.spaces_lost,
            pushed: s.pushed,
            push_skipped: s.push_skipped,
            push_received: s.push_received,
            consume_failed: s.consume_failed,
            events_sent: s.events_sent,
            events_received: s.events_received,
            events_dropped: s.events_dropped,
            events_lost: s.events_lost,
            puts_sent: s.puts_sent,
            puts_refused: s.puts_refused,
            view_hits: s.view_hits,
            register_hits: s.register_hits,
            leased: s.leased,
            lease_hits: s.lease_hits,
            view_snapshots: s.view_snapshots,
            seen_refused: s.seen_refused,
            sent_as_received: s.sent_as_received,
            sent_fresh: s.sent_fresh,
            loans_shared: s.loans_shared,
            loans_plain: s.loans_plain,
            invocations_sent: s.invocations_sent,
            invocations_served: s.invocations_served,
            invocations_unknown: s.invocations_unknown,
            invocations_failed: s.invocations_failed,
            answers_late: s.answers_late,
            denied: s.denied,
            quota_refused: s.quota_refused,
        })
    }

    /// Leaves the application: this space's names go, and the others release what it held
    /// at once rather than after the lease. Leaving twice is harmless.
    fn leave(slf: &Bound<'_, Self>) {
        slf.as_super().get().mark_left();
        if let Some(s) = lock(&slf.get().space).take() {
            slf.py().detach(|| s.leave());
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        slf: &Bound<'_, Self>,
        _t: Option<Bound<'_, PyAny>>,
        _e: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) {
        Self::leave(slf);
    }

    fn __repr__(&self) -> String {
        format!("Space(app={:?}, id={:?})", self.app, self.id)
    }
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Space>()?;
    m.add_class::<Tls>()?;
    m.add_class::<NameRecord>()?;
    m.add_class::<SpaceStats>()?;
    m.add_class::<SpaceWatermark>()?;
    Ok(())
}
