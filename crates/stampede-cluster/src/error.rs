//! The one error type of cluster threads.

use std::fmt;
use std::time::Duration;

use stampede_core::ErrorCode;
use stampede_net::{InvokeError, NetError};
use stampede_strata::StrataError;

/// Why a cluster operation failed, or how a task ended other than by returning a value.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// A bad argument: an empty name, a barrier of no members, a semaphore created again
    /// with another kind.
    InvalidArgument(String),
    /// The address space asked to run a task has no task registered under that name.
    UnknownTask { space: String, task: String },
    /// The task returned an error.
    Failed { task: String, message: String },
    /// The task panicked.
    Panicked { task: String, message: String },
    /// The task was cancelled, or this wait was cut short because the calling task was.
    Cancelled,
    /// The address space running the task, or holding the object, left or died.
    Lost { space: String },
    /// No address space of the cluster can take the task.
    NoSpace(String),
    /// Nothing happened within the time allowed.
    Timeout {
        operation: &'static str,
        waited: Duration,
    },
    /// An unlock by a task that does not hold the mutex, or a condition wait without it.
    NotOwner { object: String },
    /// Sending to another address space failed.
    Invoke(InvokeError),
    /// The distribution layer failed (names, serving).
    Net(NetError),
    /// The barrier's collective failed (a member left or died, a timeout).
    Barrier(StrataError),
    /// The global heap cannot be used here: it could not be mapped, or another cluster of
    /// this process serves it.
    Heap(String),
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            ClusterError::UnknownTask { space, task } => {
                write!(
                    f,
                    "address space {space} has no task registered as {task:?}"
                )
            }
            ClusterError::Failed { task, message } => write!(f, "task {task} failed: {message}"),
            ClusterError::Panicked { task, message } => {
                write!(f, "task {task} panicked: {message}")
            }
            ClusterError::Cancelled => write!(f, "cancelled"),
            ClusterError::Lost { space } => {
                write!(f, "address space {space} left or died")
            }
            ClusterError::NoSpace(why) => write!(f, "no address space can take the task: {why}"),
            ClusterError::Timeout { operation, waited } => {
                write!(f, "{operation} did not complete within {waited:?}")
            }
            ClusterError::NotOwner { object } => {
                write!(f, "this task does not hold {object}")
            }
            ClusterError::Invoke(e) => write!(f, "{e}"),
            ClusterError::Net(e) => write!(f, "{e}"),
            ClusterError::Barrier(e) => write!(f, "barrier: {e}"),
            ClusterError::Heap(s) => write!(f, "global heap: {s}"),
        }
    }
}

impl ClusterError {
    /// The project's stable code for this error, which every face reports.
    pub fn code(&self) -> ErrorCode {
        match self {
            ClusterError::InvalidArgument(_) | ClusterError::NotOwner { .. } => {
                ErrorCode::InvalidArgument
            }
            ClusterError::UnknownTask { .. } => ErrorCode::NotFound,
            ClusterError::Failed { .. } | ClusterError::Panicked { .. } => ErrorCode::TaskFailed,
            ClusterError::Cancelled => ErrorCode::Cancelled,
            ClusterError::Lost { .. } | ClusterError::Barrier(_) => ErrorCode::Unreachable,
            ClusterError::NoSpace(_) => ErrorCode::Unavailable,
            ClusterError::Timeout { .. } => ErrorCode::Timeout,
            ClusterError::Invoke(e) => e.code(),
            ClusterError::Net(e) => e.code(),
            ClusterError::Heap(_) => ErrorCode::Unsupported,
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Invoke(e) => Some(e),
            ClusterError::Net(e) => Some(e),
            ClusterError::Barrier(e) => Some(e),
            _ => None,
        }
    }
}

impl From<InvokeError> for ClusterError {
    fn from(e: InvokeError) -> Self {
        ClusterError::Invoke(e)
    }
}

impl From<NetError> for ClusterError {
    fn from(e: NetError) -> Self {
        ClusterError::Net(e)
    }
}

impl From<StrataError> for ClusterError {
    fn from(e: StrataError) -> Self {
        ClusterError::Barrier(e)
    }
}

/// How a task body reports failure: any error converts into it with `?`, and so does a
/// string (`Err("why".into())`). When the task was cancelled, an error return ends it as
/// cancelled.
pub type TaskError = Box<dyn std::error::Error + Send + Sync>;
