//! Runtimes: the embedded, in-process default, or an address space joined to an application.

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use stampede_core as core;
use stampede_net::{Config, Space, Tls};

use crate::error::{
    boxed, guard, guard_value, handle, opt_text, put_out, release, stp_status, text, Error, Result,
};

/// How an address space joins an application.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_mode {
    /// Meshes with other peers (listens on an ephemeral port unless told otherwise).
    STP_PEER = 0,
    /// Connects to a router; the usual mode of end devices.
    STP_CLIENT = 1,
    /// Listens for clients and peers and routes between them.
    STP_ROUTER = 2,
}

/// A join configuration, built by `stp_config_new` and the `stp_config_*` setters.
#[allow(non_camel_case_types)]
pub struct stp_config {
    cfg: std::sync::Mutex<Config>,
}

/// A runtime: the embedded in-process runtime, or an address space of a distributed
/// application. Containers and tasks are made from it; free it last.
#[allow(non_camel_case_types)]
pub struct stp_runtime {
    rt: core::Runtime,
    /// The application the runtime joined, if any: its names, and leaving it.
    space: Option<Space>,
    id: CString,
}

impl stp_runtime {
    pub(crate) fn core(&self) -> &core::Runtime {
        &self.rt
    }

    pub(crate) fn space(&self) -> Option<&Space> {
        self.space.as_ref()
    }
}

impl Drop for stp_runtime {
    fn drop(&mut self) {
        match &self.space {
            // Leaving withdraws names at once, so others release what this space held.
            Some(s) => s.clone().leave(),
            None => self.rt.stop_collector(),
        }
    }
}

pub(crate) fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// A new embedded runtime: every task and container in this process, nothing on the network.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_new(out: *mut *mut stp_runtime) -> stp_status {
    init_logging();
    guard(|| {
        crate::error::need_out(out, "out")?;
        let rt = stp_runtime {
            rt: core::Runtime::new(),
            space: None,
            id: CString::default(),
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(rt), "out") }
    })
}

/// Logs only when `STAMPEDE_LOG` or `RUST_LOG` asks (`docs/observability.md`); the first
/// runtime a program makes looks.
fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        stampede_observe::init_logging(None);
    });
}

/// Joins application `app` as a new address space configured by `cfg` (which stays owned by
/// the caller). Fails with `STP_CONNECT`, `STP_AUTH_REJECTED` or `STP_CONFIG`.
///
/// # Safety
/// `app` is a NUL-terminated string; `cfg` a live config; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_join(
    app: *const c_char,
    cfg: *const stp_config,
    out: *mut *mut stp_runtime,
) -> stp_status {
    init_logging();
    guard(|| {
        // SAFETY: forwarded contract.
        let (app, cfg) = unsafe { (text(app, "app")?, handle(cfg, "cfg")?) };
        let cfg = cfg.cfg.lock().map_err(|_| Error::invalid("cfg"))?.clone();
        crate::error::need_out(out, "out")?;
        let space = Space::join(app, cfg)?;
        let id = CString::new(space.id()).unwrap_or_default();
        let rt = stp_runtime {
            rt: space.runtime().clone(),
            space: Some(space),
            id,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(rt), "out") }
    })
}

/// The address space's unique id, or "" for an embedded runtime. Valid while `rt` lives.
///
/// # Safety
/// `rt` is NULL or a live runtime.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_id(rt: *const stp_runtime) -> *const c_char {
    guard_value(c"".as_ptr(), || {
        // SAFETY: forwarded contract.
        unsafe { handle(rt, "rt") }.map_or(c"".as_ptr(), |r| r.id.as_ptr())
    })
}

/// Whether `name` is registered: in this process for an embedded runtime, anywhere in the
/// application for an address space. Waits up to `timeout_ms` for it to appear.
///
/// # Safety
/// `rt` is a live runtime; `name` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_wait_for(
    rt: *const stp_runtime,
    name: *const c_char,
    timeout_ms: i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (rt, name) = unsafe { (handle(rt, "rt")?, text(name, "name")?) };
        match rt.space() {
            Some(s) => s.wait_for(name, wait_budget(timeout_ms)).map(|_| ())?,
            None => {
                poll_local(timeout_ms, name, || Ok(rt.core().lookup(name).map(|_| ())))?;
            }
        }
        Ok(())
    })
}

/// A timeout for operations that cannot wait forever in one call: "forever" becomes a year.
pub(crate) fn wait_budget(timeout_ms: i64) -> Duration {
    if timeout_ms < 0 {
        Duration::from_secs(365 * 24 * 3600)
    } else {
        millis(timeout_ms)
    }
}

/// Polls an embedded runtime's name table until `find` succeeds or the timeout passes.
pub(crate) fn poll_local<T>(
    timeout_ms: i64,
    name: &str,
    mut find: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + wait_budget(timeout_ms);
    loop {
        if let Some(v) = find()? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(Error::new(
                stp_status::STP_NOT_FOUND,
                format!("no container named {name:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Leaves the application (for an address space) and releases the runtime. Free containers,
/// tasks and connections made from it first. NULL is ignored.
///
/// # Safety
/// `rt` is NULL or a live runtime, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_free(rt: *mut stp_runtime) {
    // SAFETY: forwarded contract.
    unsafe { release(rt) }
}

/// A join configuration for `mode` (an `stp_mode`) with default timings: lease 1 s, operation
/// timeout 5 s. Returns NULL for an unknown mode.
#[no_mangle]
pub extern "C" fn stp_config_new(mode: i32) -> *mut stp_config {
    guard_value(std::ptr::null_mut(), || {
        let cfg = match mode {
            0 => Config::peer(),
            1 | 2 => Config {
                mode: if mode == 1 {
                    stampede_net::Mode::Client
                } else {
                    stampede_net::Mode::Router
                },
                ..Config::peer()
            },
            _ => return std::ptr::null_mut(),
        };
        boxed(stp_config {
            cfg: std::sync::Mutex::new(cfg),
        })
    })
}

fn with_cfg(cfg: *const stp_config, f: impl FnOnce(&mut Config) -> Result<()>) -> stp_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live config.
        let c = unsafe { handle(cfg, "cfg") }?;
        let mut c = c.cfg.lock().map_err(|_| Error::invalid("cfg"))?;
        f(&mut c)
    })
}

/// Adds an endpoint to listen on, e.g. "tcp/127.0.0.1:7447".
///
/// # Safety
/// `cfg` is a live config; `endpoint` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_config_listen(
    cfg: *mut stp_config,
    endpoint: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        c.listen
            .push(unsafe { text(endpoint, "endpoint") }?.to_owned());
        Ok(())
    })
}

/// Adds a router or peer endpoint to connect to.
///
/// # Safety
/// `cfg` is a live config; `endpoint` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_config_connect(
    cfg: *mut stp_config,
    endpoint: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        c.connect
            .push(unsafe { text(endpoint, "endpoint") }?.to_owned());
        Ok(())
    })
}

/// Sets the user and password presented to routers and peers.
///
/// # Safety
/// `cfg` is a live config; `user`, `password` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn stp_config_credentials(
    cfg: *mut stp_config,
    user: *const c_char,
    password: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        let (u, p) = unsafe { (text(user, "user")?, text(password, "password")?) };
        c.credentials = Some((u.to_owned(), p.to_owned()));
        Ok(())
    })
}

/// Uses TLS: PEM files of the trusted root CA, and this space's certificate and private key
/// (NULL for none; a listening space needs both).
///
/// # Safety
/// `cfg` is a live config; the paths are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn stp_config_tls(
    cfg: *mut stp_config,
    root_ca: *const c_char,
    certificate: *const c_char,
    private_key: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        let path = |p, what| -> Result<Option<PathBuf>> {
            // SAFETY: forwarded contract.
            Ok(unsafe { opt_text(p, what) }?.map(PathBuf::from))
        };
        c.tls = Some(Tls {
            root_ca: path(root_ca, "root_ca")?,
            certificate: path(certificate, "certificate")?,
            private_key: path(private_key, "private_key")?,
            ..Tls::default()
        });
        Ok(())
    })
}

/// Sets how long a silent address space is considered alive, how long a remote operation
/// waits for an answer before failing with `STP_UNREACHABLE`, and how long joining waits for
/// a router or peer before failing with `STP_CONNECT`.
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_timeouts(
    cfg: *mut stp_config,
    lease_ms: u64,
    op_timeout_ms: u64,
    connect_timeout_ms: u64,
) -> stp_status {
    with_cfg(cfg, |c| {
        if lease_ms == 0 || op_timeout_ms == 0 || connect_timeout_ms == 0 {
            return Err(Error::invalid("timeouts must be positive"));
        }
        c.lease = Duration::from_millis(lease_ms);
        c.op_timeout = Duration::from_millis(op_timeout_ms);
        c.connect_timeout = Duration::from_millis(connect_timeout_ms);
        Ok(())
    })
}

/// Sets a file of `user:password` lines that a listening space accepts from others.
///
/// # Safety
/// `cfg` is a live config; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_config_credentials_file(
    cfg: *mut stp_config,
    path: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        c.credentials_file = Some(PathBuf::from(unsafe { text(path, "path") }?));
        Ok(())
    })
}

/// Reads the access rules the space enforces on the containers it owns (lines `user
/// permissions pattern`; see `docs/distribution.md`); a denied request fails in the
/// requesting space with `STP_DENIED`. A missing file or malformed rule is `STP_CONFIG`
/// here, naming the line.
///
/// # Safety
/// `cfg` is a live config; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_config_access_file(
    cfg: *mut stp_config,
    path: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        let path = unsafe { text(path, "path") }?;
        c.access = Some(stampede_net::Access::from_file(path)?);
        Ok(())
    })
}

/// Sets the space's quotas for each other address space, as owner: the largest item it
/// accepts (bytes; a larger put fails with `STP_TOO_LARGE`), the most connections one space
/// may hold (`STP_TOO_MANY_CONNECTIONS` beyond) and the most puts one connection may have
/// waiting for room (`STP_FULL` beyond). 0 keeps a default.
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_quotas(
    cfg: *mut stp_config,
    max_item_bytes: u64,
    max_connections: u64,
    max_waiting_puts: u64,
) -> stp_status {
    with_cfg(cfg, |c| {
        let q = &mut c.quotas;
        for (n, field) in [
            (max_item_bytes, &mut q.max_item_bytes),
            (max_connections, &mut q.max_connections),
            (max_waiting_puts, &mut q.max_waiting_puts),
        ] {
            if n > 0 {
                *field = usize::try_from(n).unwrap_or(usize::MAX);
            }
        }
        Ok(())
    })
}

/// Serves the space's metrics over HTTP on `addr` (`host:port`; `GET /metrics`, the
/// OpenMetrics text; see `docs/observability.md`). A bad address fails the join with
/// `STP_CONFIG`.
///
/// # Safety
/// `cfg` is a live config; `addr` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_config_metrics_listen(
    cfg: *mut stp_config,
    addr: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        c.metrics_listen = Some(unsafe { text(addr, "addr") }?.to_owned());
        Ok(())
    })
}

/// Sets the bytes of shared memory for large messages to processes on this host (0: off;
/// the default is 64 MiB).
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_shm_pool(cfg: *mut stp_config, bytes: usize) -> stp_status {
    with_cfg(cfg, |c| {
        c.shm_pool = bytes;
        Ok(())
    })
}

/// Finds peers by UDP multicast on the local network (off by default, so unrelated
/// applications on a network never meet).
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_multicast_scouting(
    cfg: *mut stp_config,
    enabled: bool,
) -> stp_status {
    with_cfg(cfg, |c| {
        c.multicast_scouting = enabled;
        Ok(())
    })
}

/// Sets how many further waiting items a get on another space's queue takes ahead, held by
/// the connection as a lease (0, the default: none). The next gets are answered from the
/// lease without a round trip; what was not handed out returns to the queue when the
/// connection detaches or this space dies. Leases trade strict oldest-first order across
/// getters for throughput.
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_queue_prefetch(cfg: *mut stp_config, items: u32) -> stp_status {
    with_cfg(cfg, |c| {
        c.queue_prefetch = items;
        Ok(())
    })
}

/// Sets how many rounds a blocking get busy-waits before it parks. Negative means the
/// default: spin as a local runtime does on more than two cores, not at all on two or fewer,
/// where the network threads that deliver items need the processor. Fails with
/// `STP_INVALID_ARGUMENT` above `UINT32_MAX`.
///
/// # Safety
/// `cfg` is a live config.
#[no_mangle]
pub unsafe extern "C" fn stp_config_spin_rounds(cfg: *mut stp_config, rounds: i64) -> stp_status {
    with_cfg(cfg, |c| {
        c.spin_rounds =
            match rounds {
                r if r < 0 => None,
                r => Some(u32::try_from(r).map_err(|_| {
                    Error::invalid(format!("spin_rounds {r} is above {}", u32::MAX))
                })?),
            };
        Ok(())
    })
}

/// Appends a raw Zenoh setting: `path` (such as "scouting/multicast/enabled") and its JSON5
/// value (such as "false"; a string is quoted: "\"text\""), applied after everything else
/// the config sets, in the order added. An unknown path or a value that does not parse or
/// fit fails here with `STP_CONFIG`, naming the path, and leaves the config unchanged.
///
/// # Safety
/// `cfg` is a live config; `path`, `json5_value` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn stp_config_zenoh(
    cfg: *mut stp_config,
    path: *const c_char,
    json5_value: *const c_char,
) -> stp_status {
    with_cfg(cfg, |c| {
        // SAFETY: forwarded contract.
        let (k, v) = unsafe { (text(path, "path")?, text(json5_value, "json5_value")?) };
        let setting = (k.to_owned(), v.to_owned());
        // Zenoh checks each setting on its own (its parse and its value's predicate), so a
        // default config with only this one refuses it as the joined one would.
        Config {
            zenoh: vec![setting.clone()],
            ..Config::peer()
        }
        .to_zenoh()?;
        c.zenoh.push(setting);
        Ok(())
    })
}

/// The floor of time zone `zone` in this runtime: everything below it has been reclaimed, and
/// no new task may start below it. `INT64_MIN` before the first collection; `STP_INFINITY` for
/// NULL.
///
/// # Safety
/// `rt` is NULL or a live runtime.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_floor(rt: *const stp_runtime, zone: u32) -> i64 {
    guard_value(core::INFINITY, || {
        // SAFETY: forwarded contract.
        unsafe { handle(rt, "rt") }.map_or(core::INFINITY, |r| {
            r.core().gc_stats(core::ZoneId(zone)).floor
        })
    })
}

/// Releases a config. NULL is ignored.
///
/// # Safety
/// `cfg` is NULL or a live config, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_config_free(cfg: *mut stp_config) {
    // SAFETY: forwarded contract.
    unsafe { release(cfg) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(cfg: *mut stp_config) -> Config {
        // SAFETY: a live config from `stp_config_new`.
        unsafe { &*cfg }.cfg.lock().unwrap().clone()
    }

    #[test]
    fn setters_fill_the_config() {
        let cfg = stp_config_new(1);
        // SAFETY: `cfg` is live until freed at the end; the strings are NUL-terminated.
        unsafe {
            assert_eq!(stp_config_shm_pool(cfg, 0), stp_status::STP_OK);
            assert_eq!(stp_config_multicast_scouting(cfg, true), stp_status::STP_OK);
            assert_eq!(stp_config_queue_prefetch(cfg, 4), stp_status::STP_OK);
            assert_eq!(stp_config_spin_rounds(cfg, 7), stp_status::STP_OK);
            let c = settings(cfg);
            assert_eq!(c.shm_pool, 0);
            assert!(c.multicast_scouting);
            assert_eq!(c.queue_prefetch, 4);
            assert_eq!(c.spin_rounds, Some(7));

            assert_eq!(
                stp_config_spin_rounds(cfg, u32::MAX as i64),
                stp_status::STP_OK
            );
            assert_eq!(settings(cfg).spin_rounds, Some(u32::MAX));
            assert_eq!(
                stp_config_spin_rounds(cfg, u32::MAX as i64 + 1),
                stp_status::STP_INVALID_ARGUMENT
            );
            assert_eq!(settings(cfg).spin_rounds, Some(u32::MAX));
            assert_eq!(stp_config_spin_rounds(cfg, -1), stp_status::STP_OK);
            assert_eq!(settings(cfg).spin_rounds, None);

            let path = c"scouting/multicast/enabled".as_ptr();
            assert_eq!(
                stp_config_zenoh(cfg, path, c"false".as_ptr()),
                stp_status::STP_OK
            );
            assert_eq!(
                stp_config_zenoh(cfg, path, c"{".as_ptr()),
                stp_status::STP_CONFIG
            );
            let unknown = c"no/such/setting".as_ptr();
            assert_eq!(
                stp_config_zenoh(cfg, unknown, c"1".as_ptr()),
                stp_status::STP_CONFIG
            );
            assert_eq!(
                settings(cfg).zenoh,
                vec![("scouting/multicast/enabled".to_owned(), "false".to_owned())]
            );
            stp_config_free(cfg);
        }
    }
}
