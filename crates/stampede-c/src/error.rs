//! Status codes, the per-thread last error, and the guard every exported function runs in.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use stampede_core::{ErrorCode, GetError, Neighbors, PutError, StmError};
use stampede_net::NetError;

/// The outcome of a call. `STP_OK` is zero; every failure also sets `stp_last_error()`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_status {
    /// Success.
    STP_OK = 0,
    /// A NULL handle, a bad length or another invalid argument.
    STP_INVALID_ARGUMENT = 1,
    /// A bounded container stayed full (non-blocking put, or the timeout passed).
    STP_FULL = 2,
    /// No item matched before the timeout.
    STP_TIMEOUT = 3,
    /// No item matched now (non-blocking get).
    STP_UNAVAILABLE = 4,
    /// The requested item can never appear again (collected or consumed).
    STP_GONE = 5,
    /// The container was closed.
    STP_CLOSED = 6,
    /// The connection was detached or its task exited.
    STP_DETACHED = 7,
    /// A channel already holds (or held) an item with this timestamp.
    STP_DUPLICATE = 8,
    /// A timestamp or virtual time below the task's visibility.
    STP_BELOW_VISIBILITY = 9,
    /// The container's address space left, died or did not answer in time.
    STP_UNREACHABLE = 10,
    /// A container with this name is already registered.
    STP_NAME_TAKEN = 11,
    /// No container of this name appeared in time.
    STP_NOT_FOUND = 12,
    /// The name belongs to a container of another kind.
    STP_WRONG_KIND = 13,
    /// The name cannot be used.
    STP_INVALID_NAME = 14,
    /// The join configuration is invalid.
    STP_CONFIG = 15,
    /// No router or peer could be reached.
    STP_CONNECT = 16,
    /// The credentials or certificate were rejected.
    STP_AUTH_REJECTED = 17,
    /// A malformed message arrived.
    STP_PROTOCOL = 18,
    /// The item is not of the asked type (an array accessor on bytes, say).
    STP_WRONG_TYPE = 19,
    /// The task has exited.
    STP_TASK_EXITED = 20,
    /// An output connection to a container of another time zone.
    STP_ZONE_MISMATCH = 21,
    /// The channel accepts no more input connections.
    STP_TOO_MANY_CONNECTIONS = 22,
    /// No item with this ticket is held on this connection.
    STP_UNKNOWN_TICKET = 23,
    /// A waiting call gave up because its stop flag was set.
    STP_INTERRUPTED = 26,
    /// The operation is not available on this container where it lives (a local-only hook
    /// on a container served by another address space).
    STP_UNSUPPORTED = 27,
    /// A cluster task ended by failing or panicking; the message says how.
    STP_TASK_FAILED = 28,
    /// A cluster task was cancelled, or a wait gave up because the calling task was.
    STP_CANCELLED = 29,
    /// The container's owner does not allow this space's user the operation; the message
    /// names the user, the operation and the container.
    STP_DENIED = 30,
    /// A put's item is larger than the container's owner accepts from another address
    /// space (its quota).
    STP_TOO_LARGE = 31,
    /// An internal error was caught at the boundary; the message says where.
    STP_INTERNAL = 99,
}

/// The available timestamps nearest to a get that failed with `STP_TIMEOUT` or
/// `STP_UNAVAILABLE`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_neighbors {
    /// Whether `below` is set.
    pub has_below: bool,
    /// The nearest available timestamp below the request.
    pub below: i64,
    /// Whether `above` is set.
    pub has_above: bool,
    /// The nearest available timestamp above the request.
    pub above: i64,
}

impl From<Neighbors> for stp_neighbors {
    fn from(n: Neighbors) -> Self {
        stp_neighbors {
            has_below: n.below.is_some(),
            below: n.below.unwrap_or(0),
            has_above: n.above.is_some(),
            above: n.above.unwrap_or(0),
        }
    }
}

/// A failure on its way to the caller.
#[derive(Debug)]
pub(crate) struct Error {
    pub status: stp_status,
    pub message: String,
    pub neighbors: stp_neighbors,
}

impl Error {
    pub fn new(status: stp_status, message: impl Into<String>) -> Self {
        Error {
            status,
            message: message.into(),
            neighbors: stp_neighbors::default(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(stp_status::STP_INVALID_ARGUMENT, message)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// The status of each of the core's stable codes: the same number, except for the few
/// situations C reports as an invalid argument.
pub(crate) fn status(code: ErrorCode) -> stp_status {
    use stp_status::*;
    match code {
        ErrorCode::InvalidArgument | ErrorCode::InvalidTimestamp | ErrorCode::ZeroConsumers => {
            STP_INVALID_ARGUMENT
        }
        ErrorCode::Full => STP_FULL,
        ErrorCode::Timeout => STP_TIMEOUT,
        ErrorCode::Unavailable => STP_UNAVAILABLE,
        ErrorCode::Gone => STP_GONE,
        ErrorCode::Closed => STP_CLOSED,
        ErrorCode::Detached => STP_DETACHED,
        ErrorCode::DuplicateTimestamp => STP_DUPLICATE,
        ErrorCode::BelowVisibility => STP_BELOW_VISIBILITY,
        ErrorCode::Unreachable => STP_UNREACHABLE,
        ErrorCode::NameTaken => STP_NAME_TAKEN,
        ErrorCode::NotFound => STP_NOT_FOUND,
        ErrorCode::WrongKind => STP_WRONG_KIND,
        ErrorCode::InvalidName => STP_INVALID_NAME,
        ErrorCode::Config => STP_CONFIG,
        ErrorCode::Connect => STP_CONNECT,
        ErrorCode::AuthRejected => STP_AUTH_REJECTED,
        ErrorCode::Protocol => STP_PROTOCOL,
        ErrorCode::WrongType => STP_WRONG_TYPE,
        ErrorCode::TaskExited => STP_TASK_EXITED,
        ErrorCode::ZoneMismatch => STP_ZONE_MISMATCH,
        ErrorCode::TooManyConnections => STP_TOO_MANY_CONNECTIONS,
        ErrorCode::UnknownTicket => STP_UNKNOWN_TICKET,
        ErrorCode::Interrupted => STP_INTERRUPTED,
        ErrorCode::Unsupported => STP_UNSUPPORTED,
        ErrorCode::TaskFailed => STP_TASK_FAILED,
        ErrorCode::Cancelled => STP_CANCELLED,
        ErrorCode::Denied => STP_DENIED,
        ErrorCode::TooLarge => STP_TOO_LARGE,
        // `Internal` and codes newer than this table.
        _ => STP_INTERNAL,
    }
}

impl From<PutError> for Error {
    fn from(e: PutError) -> Self {
        Error::new(status(e.kind().code().0), e.to_string())
    }
}

impl From<GetError> for Error {
    fn from(e: GetError) -> Self {
        let neighbors = match e {
            GetError::Unavailable(n) | GetError::Timeout(n) => n.into(),
            _ => stp_neighbors::default(),
        };
        Error {
            status: status(e.code().0),
            message: e.to_string(),
            neighbors,
        }
    }
}

impl From<StmError> for Error {
    fn from(e: StmError) -> Self {
        Error::new(status(e.code().0), e.to_string())
    }
}

impl From<NetError> for Error {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Stm(s) => s.into(),
            e => Error::new(status(e.code()), e.to_string()),
        }
    }
}

struct Last {
    message: CString,
    neighbors: stp_neighbors,
}

thread_local! {
    static LAST: RefCell<Last> = RefCell::new(Last {
        message: CString::default(),
        neighbors: stp_neighbors::default(),
    });
}

fn record(e: Error) -> stp_status {
    // An interior NUL would truncate the message; replace it rather than lose the text.
    let message = CString::new(e.message.replace('\0', "\\0")).unwrap_or_default();
    let _ = LAST.try_with(|l| {
        let mut l = l.borrow_mut();
        l.message = message;
        l.neighbors = e.neighbors;
    });
    e.status
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("internal error: {what}")
}

/// Keeps `message` for `stp_last_error()`, for calls that report with errno values.
pub(crate) fn note(message: String) {
    record(Error::new(stp_status::STP_INTERNAL, message));
}

/// Runs the body of an exported function: errors become status codes and panics never cross
/// the boundary.
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> stp_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => stp_status::STP_OK,
        Ok(Err(e)) => record(e),
        Err(p) => record(Error::new(stp_status::STP_INTERNAL, panic_message(&*p))),
    }
}

/// Runs a function that cannot report a status (accessors, frees); a panic yields `fallback`.
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            record(Error::new(stp_status::STP_INTERNAL, panic_message(&*p)));
            fallback
        }
    }
}

/// A shared reference from a handle pointer.
///
/// # Safety
/// `p` is NULL or a live handle of type `T`.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: the caller passes NULL or a pointer from this library that is still alive.
    unsafe { p.as_ref() }.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}

/// A UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

/// An optional UTF-8 string argument (NULL means none).
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn opt_text<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: forwarded contract.
        unsafe { text(p, what) }.map(Some)
    }
}

/// Writes a result through an out-pointer.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put_out<T>(p: *mut T, v: T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Checks an out-pointer before work whose result must not be lost.
pub(crate) fn need_out<T>(p: *mut T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(Error::invalid(format!("{what} is NULL")))
    } else {
        Ok(())
    }
}

/// Moves a value into a new handle.
pub(crate) fn boxed<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

/// Releases a handle made by [`boxed`].
///
/// # Safety
/// `p` is NULL or a handle from [`boxed`] not yet released.
pub(crate) unsafe fn release<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: made by Box::into_raw and released once, by the caller's contract.
        guard_value((), || drop(unsafe { Box::from_raw(p) }));
    }
}

/// A message describing the most recent failed call on this thread ("" if none). The string
/// stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn stp_last_error() -> *const c_char {
    LAST.try_with(|l| l.borrow().message.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The nearest available timestamps reported by the most recent failed get on this thread.
#[no_mangle]
pub extern "C" fn stp_last_neighbors() -> stp_neighbors {
    LAST.try_with(|l| l.borrow().neighbors).unwrap_or_default()
}

/// The name of a status code, e.g. "STP_TIMEOUT"; "STP_UNKNOWN" for a value that is not one.
/// Static; never NULL.
#[no_mangle]
pub extern "C" fn stp_status_name(status: i32) -> *const c_char {
    use stp_status::*;
    const ALL: [stp_status; 31] = [
        STP_OK,
        STP_INVALID_ARGUMENT,
        STP_FULL,
        STP_TIMEOUT,
        STP_UNAVAILABLE,
        STP_GONE,
        STP_CLOSED,
        STP_DETACHED,
        STP_DUPLICATE,
        STP_BELOW_VISIBILITY,
        STP_UNREACHABLE,
        STP_NAME_TAKEN,
        STP_NOT_FOUND,
        STP_WRONG_KIND,
        STP_INVALID_NAME,
        STP_CONFIG,
        STP_CONNECT,
        STP_AUTH_REJECTED,
        STP_PROTOCOL,
        STP_WRONG_TYPE,
        STP_TASK_EXITED,
        STP_ZONE_MISMATCH,
        STP_TOO_MANY_CONNECTIONS,
        STP_UNKNOWN_TICKET,
        STP_INTERRUPTED,
        STP_UNSUPPORTED,
        STP_TASK_FAILED,
        STP_CANCELLED,
        STP_DENIED,
        STP_TOO_LARGE,
        STP_INTERNAL,
    ];
    let Some(status) = ALL.into_iter().find(|s| *s as i32 == status) else {
        return c"STP_UNKNOWN".as_ptr();
    };
    let s: &'static CStr = match status {
        STP_OK => c"STP_OK",
        STP_INVALID_ARGUMENT => c"STP_INVALID_ARGUMENT",
        STP_FULL => c"STP_FULL",
        STP_TIMEOUT => c"STP_TIMEOUT",
        STP_UNAVAILABLE => c"STP_UNAVAILABLE",
        STP_GONE => c"STP_GONE",
        STP_CLOSED => c"STP_CLOSED",
        STP_DETACHED => c"STP_DETACHED",
        STP_DUPLICATE => c"STP_DUPLICATE",
        STP_BELOW_VISIBILITY => c"STP_BELOW_VISIBILITY",
        STP_UNREACHABLE => c"STP_UNREACHABLE",
        STP_NAME_TAKEN => c"STP_NAME_TAKEN",
        STP_NOT_FOUND => c"STP_NOT_FOUND",
        STP_WRONG_KIND => c"STP_WRONG_KIND",
        STP_INVALID_NAME => c"STP_INVALID_NAME",
        STP_CONFIG => c"STP_CONFIG",
        STP_CONNECT => c"STP_CONNECT",
        STP_AUTH_REJECTED => c"STP_AUTH_REJECTED",
        STP_PROTOCOL => c"STP_PROTOCOL",
        STP_WRONG_TYPE => c"STP_WRONG_TYPE",
        STP_TASK_EXITED => c"STP_TASK_EXITED",
        STP_ZONE_MISMATCH => c"STP_ZONE_MISMATCH",
        STP_TOO_MANY_CONNECTIONS => c"STP_TOO_MANY_CONNECTIONS",
        STP_UNKNOWN_TICKET => c"STP_UNKNOWN_TICKET",
        STP_INTERRUPTED => c"STP_INTERRUPTED",
        STP_UNSUPPORTED => c"STP_UNSUPPORTED",
        STP_TASK_FAILED => c"STP_TASK_FAILED",
        STP_CANCELLED => c"STP_CANCELLED",
        STP_DENIED => c"STP_DENIED",
        STP_TOO_LARGE => c"STP_TOO_LARGE",
        STP_INTERNAL => c"STP_INTERNAL",
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status is its code's number, so the two tables cannot drift apart.
    #[test]
    fn statuses_are_the_core_codes() {
        for &code in ErrorCode::ALL {
            let st = status(code);
            match code {
                ErrorCode::InvalidTimestamp | ErrorCode::ZeroConsumers => {
                    assert_eq!(st, stp_status::STP_INVALID_ARGUMENT)
                }
                _ => assert_eq!(st as i32, code as i32, "{code}"),
            }
        }
    }

    /// `STP_INTERRUPTED`, `STP_UNSUPPORTED`, the cluster statuses and `STP_DENIED` have names; numbers
    /// that are no status are unknown.
    #[test]
    fn status_names() {
        let name = |n: i32| {
            // SAFETY: stp_status_name returns a static NUL-terminated string.
            unsafe { CStr::from_ptr(stp_status_name(n)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(stp_status::STP_INTERRUPTED as i32), "STP_INTERRUPTED");
        assert_eq!(name(26), "STP_INTERRUPTED");
        assert_eq!(name(stp_status::STP_UNSUPPORTED as i32), "STP_UNSUPPORTED");
        assert_eq!(name(28), "STP_TASK_FAILED");
        assert_eq!(name(29), "STP_CANCELLED");
        assert_eq!(name(30), "STP_DENIED");
        assert_eq!(name(31), "STP_TOO_LARGE");
        for n in [-1, 24, 25, 32, 98, 100] {
            assert_eq!(name(n), "STP_UNKNOWN", "{n}");
        }
    }

    /// An interrupted put reports `STP_INTERRUPTED`, not an internal error.
    #[test]
    fn interrupted_put_is_its_own_status() {
        let e: Error = stampede_core::PutError::new(
            stampede_core::PutErrorKind::Interrupted,
            0,
            stampede_core::Item::from("x"),
        )
        .into();
        assert_eq!(e.status, stp_status::STP_INTERRUPTED);
    }
}
