//! The one error type of the collectives.

use std::fmt;
use std::time::Duration;

use stampede_core::{GetError, PutError, StmError};

/// Why a collective operation or a transfer failed. A failed collective leaves the group
/// unusable (the other members are at different points of the same operation), so each
/// variant names what the caller can do about it.
#[derive(Debug)]
#[non_exhaustive]
pub enum StrataError {
    /// A bad argument: a rank outside the group, a group of more than 65 535 members, a
    /// bitwise operation on floating-point numbers.
    InvalidArgument(String),
    /// Another member already joined the group with this rank.
    RankTaken { group: String, rank: usize },
    /// A member did not join within the join timeout.
    MemberMissing { rank: usize, waited: Duration },
    /// A member left or its address space died while others needed it.
    MemberLost { rank: usize },
    /// Members called different operations, or passed vectors of different lengths, at
    /// the same step of the group's sequence.
    Mismatch { from: usize, detail: String },
    /// Nothing arrived from the members named within the group's timeout.
    Timeout {
        operation: &'static str,
        waiting_for: Vec<usize>,
        waited: Duration,
    },
    /// Member `by` failed an operation and told the others: the group cannot go on.
    Aborted { by: usize, detail: String },
    /// A block transfer does not fit its announced length, or repeats a tag still being
    /// assembled.
    BadTransfer { from: usize, detail: String },
    /// A put into member `rank`'s inbox failed for a reason other than the member going.
    Put { rank: usize, error: PutError },
    /// Reading this member's own inbox failed (it was closed under the member).
    Inbox(GetError),
    /// The Space-Time Memory operation underneath failed.
    Stm(StmError),
}

impl fmt::Display for StrataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrataError::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            StrataError::RankTaken { group, rank } => {
                write!(f, "rank {rank} of group {group:?} has already joined")
            }
            StrataError::MemberMissing { rank, waited } => {
                write!(f, "member {rank} did not join within {waited:?}")
            }
            StrataError::MemberLost { rank } => {
                write!(f, "member {rank} left the group or its address space died")
            }
            StrataError::Mismatch { from, detail } => {
                write!(f, "member {from} disagrees: {detail}")
            }
            StrataError::Timeout {
                operation,
                waiting_for,
                waited,
            } => write!(
                f,
                "{operation}: nothing from members {waiting_for:?} within {waited:?}"
            ),
            StrataError::Aborted { by, detail } => {
                write!(f, "member {by} failed and stopped the group: {detail}")
            }
            StrataError::BadTransfer { from, detail } => {
                write!(f, "bad block transfer from member {from}: {detail}")
            }
            StrataError::Put { rank, error } => write!(f, "sending to member {rank}: {error}"),
            StrataError::Inbox(e) => write!(f, "reading this member's inbox: {e}"),
            StrataError::Stm(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StrataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StrataError::Stm(e) => Some(e),
            StrataError::Put { error, .. } => Some(error),
            StrataError::Inbox(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StmError> for StrataError {
    fn from(e: StmError) -> Self {
        StrataError::Stm(e)
    }
}

impl StrataError {
    /// A failed put to member `rank`'s inbox.
    pub(crate) fn put(rank: usize, error: PutError) -> Self {
        use stampede_core::PutErrorKind as K;
        match error.kind() {
            K::Closed | K::Unreachable => StrataError::MemberLost { rank },
            _ => StrataError::Put { rank, error },
        }
    }
}
