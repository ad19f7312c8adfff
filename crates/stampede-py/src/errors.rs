//! The one place where error kinds become Python exceptions (`stampede.errors`): the core's,
//! and those of joining and naming in a distributed application (`NetError`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::PyErrArguments;
use stampede_coord::{GraphError, Tag};
use stampede_core::{ErrorCode, GetError, MarshalError, PutError, PutErrorKind, StmError};
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
    Denied,
    TooLarge,
    NotFound,
    WrongKind,
    InvalidName,
    ProtocolError,
    GraphError,
    StepFailed,
    DuplicatePut,
    FreedItem,
    Deadlock,
    RemoteGraphError,
    ParticipantLost,
    ParticipantUnreachable,
    NoSuchRank,
    DistributionFailed,
    NetworkError,
    CheckFailed,
    BoxFailed,
    RecordRejected,
    TuneError,
    ClusterError,
    TaskFailed,
    TaskCancelled,
    SpaceLost,
    UnknownTask,
    NoSpace,
    BarrierFailed,
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

/// `TypeName: message` of a Python exception, for errors reported from Rust (a step's, a
/// box's).
pub(crate) fn describe(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .qualname()
        .map_or_else(|_| "exception".to_owned(), |n| n.to_string());
    format!("{ty}: {}", e.value(py))
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

/// The exception class of each of the core's stable codes: the one table of Python
/// exceptions. Failures with no class of their own raise the package's base class.
fn class(code: ErrorCode) -> Exc {
    match code {
        ErrorCode::InvalidArgument => Exc::InvalidArgument,
        ErrorCode::Full => Exc::Full,
        ErrorCode::Timeout => Exc::Timeout,
        ErrorCode::Unavailable => Exc::Unavailable,
        ErrorCode::Gone => Exc::Gone,
        ErrorCode::Closed => Exc::Closed,
        ErrorCode::Detached => Exc::Detached,
        ErrorCode::DuplicateTimestamp => Exc::DuplicateTimestamp,
        ErrorCode::BelowVisibility => Exc::BelowVisibility,
        ErrorCode::Unreachable => Exc::UnreachableError,
        ErrorCode::NameTaken => Exc::NameTaken,
        ErrorCode::NotFound => Exc::NotFound,
        ErrorCode::WrongKind => Exc::WrongKind,
        ErrorCode::InvalidName => Exc::InvalidName,
        ErrorCode::Config => Exc::ConfigError,
        ErrorCode::Connect => Exc::ConnectError,
        ErrorCode::AuthRejected => Exc::AuthRejected,
        ErrorCode::Protocol => Exc::ProtocolError,
        ErrorCode::WrongType => Exc::MarshalError,
        ErrorCode::TaskExited => Exc::TaskExited,
        ErrorCode::ZoneMismatch => Exc::ZoneMismatch,
        ErrorCode::TooManyConnections => Exc::TooManyConnections,
        ErrorCode::UnknownTicket => Exc::UnknownTicket,
        ErrorCode::InvalidTimestamp => Exc::InvalidTimestamp,
        ErrorCode::ZeroConsumers => Exc::ZeroConsumers,
        ErrorCode::Unsupported => Exc::NotLocal,
        ErrorCode::Denied => Exc::Denied,
        ErrorCode::TooLarge => Exc::TooLarge,
        _ => Exc::StampedeError,
    }
}

/// A failed put: the kind's exception, carrying the timestamp and the value handed back
/// (the very object the caller passed, or for a deferred error the earlier put's value,
/// which the caller rebuilds from its item; see `deferred`).
pub(crate) fn put_error(py: Python<'_>, e: PutError, item: Py<PyAny>) -> PyErr {
    let msg = e.to_string();
    let ts = e.timestamp();
    let kind = e.kind();
    let cls = class(kind.code().0);
    match kind {
        PutErrorKind::BelowVisibility { visibility } => raise(py, cls, (msg, ts, visibility, item)),
        PutErrorKind::Closed | PutErrorKind::Detached | PutErrorKind::Unreachable => {
            raise(py, cls, (msg, item))
        }
        PutErrorKind::Interrupted => raise(py, cls, (msg,)),
        _ => raise(py, cls, (msg, ts, item)),
    }
}

/// Marks `err`, raised for an earlier put the owner refused, as deferred: its message says
/// so, and `unsent` is the `(ts, value)` of the put that was not made because of it.
pub(crate) fn deferred(
    py: Python<'_>,
    err: PyErr,
    msg: String,
    unsent: Option<(i64, Py<PyAny>)>,
) -> PyErr {
    let exc = err.value(py);
    let set = exc
        .setattr("deferred", true)
        .and_then(|()| exc.setattr("unsent", unsent))
        .and_then(|()| exc.setattr("args", (msg,)));
    match set {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// A get that returned nothing.
pub(crate) fn get_error(py: Python<'_>, e: GetError) -> PyErr {
    let msg = e.to_string();
    let cls = class(e.code().0);
    match e {
        GetError::Unavailable(n) | GetError::Timeout(n) => raise(py, cls, (msg, n.below, n.above)),
        GetError::Gone(ts) => raise(py, cls, (msg, ts)),
        _ => raise(py, cls, (msg,)),
    }
}

pub(crate) fn stm_error(py: Python<'_>, e: StmError) -> PyErr {
    let msg = e.to_string();
    let cls = class(e.code().0);
    match e {
        StmError::BelowVisibility {
            requested,
            visibility,
        } => raise(py, cls, (msg, requested, visibility)),
        StmError::NotFound(name) => raise(py, cls, (msg, name)),
        StmError::WrongKind { name, is } => raise(py, cls, (msg, name, is.to_string())),
        StmError::Denied {
            user,
            op,
            container,
        } => raise(py, cls, (msg, user, op.name(), container)),
        _ => raise(py, cls, (msg,)),
    }
}

/// A failure of joining, naming or reaching another address space.
pub(crate) fn net_error(py: Python<'_>, e: NetError) -> PyErr {
    let msg = e.to_string();
    let cls = class(e.code());
    match e {
        NetError::Stm(e) => stm_error(py, e),
        _ => raise(py, cls, (msg,)),
    }
}

/// A failure of cluster threads.
pub(crate) fn cluster_error(py: Python<'_>, e: stampede_cluster::ClusterError) -> PyErr {
    use stampede_cluster::ClusterError as C;
    let msg = e.to_string();
    match e {
        C::Failed { task, message } | C::Panicked { task, message } => {
            raise(py, Exc::TaskFailed, (msg, task, message))
        }
        C::Cancelled => raise(py, Exc::TaskCancelled, (msg,)),
        C::Lost { space } => raise(py, Exc::SpaceLost, (msg, space)),
        C::UnknownTask { space, task } => raise(py, Exc::UnknownTask, (msg, space, task)),
        C::NoSpace(_) => raise(py, Exc::NoSpace, (msg,)),
        C::Timeout { .. } => raise(py, Exc::Timeout, (msg,)),
        C::InvalidArgument(_) | C::NotOwner { .. } => raise(py, Exc::InvalidArgument, (msg,)),
        C::Invoke(_) => raise(py, Exc::UnreachableError, (msg,)),
        C::Net(e) => net_error(py, e),
        C::Barrier(_) => raise(py, Exc::BarrierFailed, (msg,)),
        _ => raise(py, Exc::ClusterError, (msg,)),
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

/// A Concurrent Collections graph's failure; `tag` makes a tag's Python form.
pub(crate) fn graph_error(
    py: Python<'_>,
    e: &GraphError,
    tag: impl Fn(Python<'_>, &Tag) -> PyResult<Py<PyAny>>,
) -> PyErr {
    graph_error_with(py, e, &tag)
}

fn graph_error_with(
    py: Python<'_>,
    e: &GraphError,
    tag: &dyn Fn(Python<'_>, &Tag) -> PyResult<Py<PyAny>>,
) -> PyErr {
    let msg = e.to_string();
    let built = (|| -> PyResult<PyErr> {
        Ok(match e {
            GraphError::StepFailed {
                step,
                tag: t,
                message,
            } => raise(
                py,
                Exc::StepFailed,
                (msg, step.clone(), tag(py, t)?, message.clone()),
            ),
            GraphError::DuplicatePut {
                collection,
                tag: t,
                by,
            } => raise(
                py,
                Exc::DuplicatePut,
                (msg, collection.clone(), tag(py, t)?, by.clone()),
            ),
            GraphError::Freed {
                collection,
                tag: t,
                step,
            } => raise(
                py,
                Exc::FreedItem,
                (msg, collection.clone(), tag(py, t)?, step.clone()),
            ),
            GraphError::Deadlock(unmet) => {
                let class = py.import("stampede.errors")?.getattr("Unmet")?;
                let mut list = Vec::with_capacity(unmet.len());
                for u in unmet {
                    let waiting = u
                        .waiting
                        .iter()
                        .map(|(s, t)| Ok((s.clone(), tag(py, t)?)))
                        .collect::<PyResult<Vec<_>>>()?;
                    list.push(class.call1((u.collection.clone(), tag(py, &u.tag)?, waiting))?);
                }
                raise(
                    py,
                    Exc::Deadlock,
                    (msg, list.into_iter().map(Bound::unbind).collect::<Vec<_>>()),
                )
            }
            GraphError::Remote { space, rank, error } => {
                let err = raise(py, Exc::RemoteGraphError, (msg, space.clone(), *rank));
                err.set_cause(py, Some(graph_error_with(py, error, tag)));
                err
            }
            GraphError::SpaceLost { space, rank } => {
                raise(py, Exc::ParticipantLost, (msg, space.clone(), *rank))
            }
            GraphError::Network {
                space,
                rank,
                reason,
            } => raise(
                py,
                Exc::ParticipantUnreachable,
                (msg, space.clone(), *rank, reason.clone()),
            ),
            GraphError::NoSuchRank {
                tuner,
                tag: t,
                rank,
                ranks,
            } => raise(
                py,
                Exc::NoSuchRank,
                (msg, tuner.clone(), tag(py, t)?, *rank, *ranks),
            ),
            GraphError::Distribution(why) => raise(py, Exc::DistributionFailed, (msg, why.clone())),
            _ => raise(py, Exc::GraphError, (msg,)),
        })
    })();
    built.unwrap_or_else(|e| e)
}
