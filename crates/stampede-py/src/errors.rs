//! The one place where error kinds become Python exceptions (`stampede.errors`): the core's,
//! and those of joining and naming in a distributed application (`NetError`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::PyErrArguments;
use stampede_core::{GetError, MarshalError, PutError, PutErrorKind, StmError};
use stampede_net::NetError;

macro_rules! exception_types {
    ($($name:ident),* $(,)?) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy)]
        pub(crate) enum Exc { $($name),* }

        fn exception_type(py: Python<'_>, e: Exc) -> PyResult<&Bound<'_, PyType>> {
            $(
                #[allow(non_upper_case_globals)]
                static $name: PyOnceLock<Py<PyType>> = PyOnceLock::new();
            )*
            match e {
                $(Exc::$name => $name.import(py, "stampede.errors", stringify!($name)),)*
            }
        }
    };
}

exception_types!(
    StampedeError,
    Full,
    DuplicateTimestamp,
    InvalidTimestamp,
    ZeroConsumers,
    BelowVisibility,
    Closed,
    Detached,
    Unavailable,
    Timeout,
    Gone,
    ZoneMismatch,
    TaskExited,
    UnknownTicket,
    NameTaken,
    TooManyConnections,
    InvalidArgument,
    MarshalError,
    UnreachableError,
    NotLocal,
    ConfigError,
    ConnectError,
    AuthRejected,
    NotFound,
    WrongKind,
    InvalidName,
    ProtocolError,
);

/// An exception of class `e` built from `args`.
pub(crate) fn raise<A>(py: Python<'_>, e: Exc, args: A) -> PyErr
where
    A: PyErrArguments + Send + Sync + 'static,
{
    match exception_type(py, e) {
        Ok(ty) => PyErr::from_type(ty.clone(), args),
        Err(err) => err,
    }
}

pub(crate) fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    raise(py, Exc::InvalidArgument, (msg.into(),))
}

pub(crate) fn marshal(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    raise(py, Exc::MarshalError, (msg.into(),))
}

/// A ``MarshalError`` whose ``__cause__`` is the hook's exception.
pub(crate) fn caused(py: Python<'_>, msg: impl Into<String>, cause: PyErr) -> PyErr {
    let msg = format!("{}: {}", msg.into(), cause.value(py));
    let e = marshal(py, msg);
    e.set_cause(py, Some(cause));
    e
}

pub(crate) fn from_marshal(py: Python<'_>, e: MarshalError) -> PyErr {
    marshal(py, e.to_string())
}

/// A failed put: the kind's exception, carrying the timestamp and the value handed back
/// (the very object the caller passed).
pub(crate) fn put_error(py: Python<'_>, e: PutError, value: &Bound<'_, PyAny>) -> PyErr {
    let msg = e.to_string();
    let ts = e.timestamp();
    let kind = e.kind();
    let item = value.clone().unbind();
    match kind {
        PutErrorKind::Full => raise(py, Exc::Full, (msg, ts, item)),
        PutErrorKind::DuplicateTimestamp => raise(py, Exc::DuplicateTimestamp, (msg, ts, item)),
        PutErrorKind::InvalidTimestamp => raise(py, Exc::InvalidTimestamp, (msg, ts, item)),
        PutErrorKind::ZeroConsumers => raise(py, Exc::ZeroConsumers, (msg, ts, item)),
        PutErrorKind::BelowVisibility { visibility } => {
            raise(py, Exc::BelowVisibility, (msg, ts, visibility, item))
        }
        PutErrorKind::Closed => raise(py, Exc::Closed, (msg, item)),
        PutErrorKind::Detached => raise(py, Exc::Detached, (msg, item)),
        PutErrorKind::Unreachable => raise(py, Exc::UnreachableError, (msg, item)),
        _ => raise(py, Exc::StampedeError, (msg,)),
    }
}

/// A get that returned nothing.
pub(crate) fn get_error(py: Python<'_>, e: GetError) -> PyErr {
    let msg = e.to_string();
    match e {
        GetError::Unavailable(n) => raise(py, Exc::Unavailable, (msg, n.below, n.above)),
        GetError::Timeout(n) => raise(py, Exc::Timeout, (msg, n.below, n.above)),
        GetError::Gone(ts) => raise(py, Exc::Gone, (msg, ts)),
        GetError::Closed => raise(py, Exc::Closed, (msg,)),
        GetError::Detached => raise(py, Exc::Detached, (msg,)),
        GetError::Unreachable => raise(py, Exc::UnreachableError, (msg,)),
        _ => raise(py, Exc::StampedeError, (msg,)),
    }
}

pub(crate) fn stm_error(py: Python<'_>, e: StmError) -> PyErr {
    let msg = e.to_string();
    match e {
        StmError::BelowVisibility {
            requested,
            visibility,
        } => raise(py, Exc::BelowVisibility, (msg, requested, visibility)),
        StmError::ZoneMismatch { .. } => raise(py, Exc::ZoneMismatch, (msg,)),
        StmError::Detached => raise(py, Exc::Detached, (msg,)),
        StmError::TaskExited => raise(py, Exc::TaskExited, (msg,)),
        StmError::UnknownTicket(_) => raise(py, Exc::UnknownTicket, (msg,)),
        StmError::Closed => raise(py, Exc::Closed, (msg,)),
        StmError::NameTaken(_) => raise(py, Exc::NameTaken, (msg,)),
        StmError::TooManyConnections(_) => raise(py, Exc::TooManyConnections, (msg,)),
        StmError::Unreachable(_) => raise(py, Exc::UnreachableError, (msg,)),
        _ => raise(py, Exc::InvalidArgument, (msg,)),
    }
}

/// A failure of joining, naming or reaching another address space.
pub(crate) fn net_error(py: Python<'_>, e: NetError) -> PyErr {
    let msg = e.to_string();
    match e {
        NetError::Config(_) => raise(py, Exc::ConfigError, (msg,)),
        NetError::Connect(_) => raise(py, Exc::ConnectError, (msg,)),
        NetError::AuthRejected(_) => raise(py, Exc::AuthRejected, (msg,)),
        NetError::NotFound(name) => raise(py, Exc::NotFound, (msg, name)),
        NetError::WrongKind { name, is } => raise(py, Exc::WrongKind, (msg, name, is.to_string())),
        NetError::InvalidName(_) => raise(py, Exc::InvalidName, (msg,)),
        NetError::Unreachable(_) => raise(py, Exc::UnreachableError, (msg,)),
        NetError::Protocol(_) => raise(py, Exc::ProtocolError, (msg,)),
        NetError::Stm(e) => stm_error(py, e),
        _ => raise(py, Exc::StampedeError, (msg,)),
    }
}

/// A local-only feature asked of a container (or connection) owned by another address space.
pub(crate) fn not_local(py: Python<'_>, what: &str, owner: Option<&str>) -> PyErr {
    let owner = owner.unwrap_or("another address space");
    raise(
        py,
        Exc::NotLocal,
        (format!(
            "{what} needs a container of this address space; this one lives in {owner}"
        ),),
    )
}

/// A put on a detached connection, handing the value back.
pub(crate) fn detached_put(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyErr {
    raise(
        py,
        Exc::Detached,
        ("the connection is detached", value.clone().unbind()),
    )
}
