//! What a graph reports when it cannot finish, and what a step returns.

use std::fmt;

use crate::tag::Tag;

/// Why a step did not complete. Steps return it with `?` from
/// [`StepCtx::get`](crate::StepCtx::get) or make their own with [`StepError::failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// A get found no item yet: the step runs again once it arrives. Returned by gets only.
    Missing,
    /// The step failed; the graph fails with this message.
    Failed(String),
}

impl StepError {
    /// A failure with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        StepError::Failed(message.into())
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Missing => f.write_str("an item the step gets is not there yet"),
            StepError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StepError {}

/// A get nothing will ever answer: what a graph that cannot make progress waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The item collection.
    pub collection: String,
    /// The tag nobody put.
    pub tag: Tag,
    /// The step instances waiting for it, as `(step collection, tag)`.
    pub waiting: Vec<(String, Tag)>,
}

/// Why [`Graph::wait`](crate::Graph::wait) did not reach a clean end.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// A step failed (returned [`StepError::Failed`] or panicked).
    StepFailed {
        /// The step collection.
        step: String,
        /// The instance's tag.
        tag: Tag,
        /// What it said.
        message: String,
    },
    /// A second put of a tag into an item collection (items are written once).
    DuplicatePut {
        /// The item collection.
        collection: String,
        /// The tag.
        tag: Tag,
        /// Who put it the second time: a step collection, or `"environment"`.
        by: String,
    },
    /// A get of an item freed after its declared number of gets.
    Freed {
        /// The item collection.
        collection: String,
        /// The tag.
        tag: Tag,
        /// The step collection that got it once too often.
        step: String,
    },
    /// Nothing can run and step instances still wait: each unmet get, with its waiters.
    Deadlock(Vec<Unmet>),
    /// A failure in another address space of a distributed graph.
    Remote {
        /// The address space.
        space: String,
        /// Its rank in the graph.
        rank: usize,
        /// What failed there.
        error: Box<GraphError>,
    },
    /// A participant of a distributed graph left or died before the graph finished.
    SpaceLost {
        /// The address space.
        space: String,
        /// Its rank in the graph.
        rank: usize,
    },
    /// A placement tuner (`compute_on`, `home`) named a rank the graph does not have.
    NoSuchRank {
        /// The step or item collection whose tuner it was.
        tuner: String,
        /// The tag it was asked about.
        tag: Tag,
        /// The rank it gave.
        rank: usize,
        /// How many ranks the graph has.
        ranks: usize,
    },
    /// A message between the address spaces of a distributed graph could not be sent, was
    /// refused, or could not be understood.
    Network {
        /// The other address space.
        space: String,
        /// Its rank in the graph.
        rank: usize,
        /// Why.
        reason: String,
    },
    /// The graph could not be distributed: says why.
    Distribution(String),
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::StepFailed { step, tag, message } => {
                write!(f, "step {step}{tag} failed: {message}")
            }
            GraphError::DuplicatePut {
                collection,
                tag,
                by,
            } => {
                write!(
                    f,
                    "{by} put {collection}{tag} a second time (items are written once)"
                )
            }
            GraphError::Freed {
                collection,
                tag,
                step,
            } => write!(
                f,
                "step {step} got {collection}{tag} after its last declared get freed it"
            ),
            GraphError::Deadlock(unmet) => {
                write!(f, "no step can run, and {} gets are unmet:", unmet.len())?;
                for u in unmet.iter().take(10) {
                    write!(f, " {}{} (wanted by", u.collection, u.tag)?;
                    for (s, t) in u.waiting.iter().take(3) {
                        write!(f, " {s}{t}")?;
                    }
                    f.write_str(")")?;
                }
                Ok(())
            }
            GraphError::Remote { space, rank, error } => {
                write!(f, "in address space {space} (rank {rank}): {error}")
            }
            GraphError::SpaceLost { space, rank } => write!(
                f,
                "address space {space} (rank {rank}) left or died before the graph finished"
            ),
            GraphError::NoSuchRank {
                tuner,
                tag,
                rank,
                ranks,
            } => write!(
                f,
                "the placement of {tuner}{tag} is rank {rank}, but the graph has {ranks} ranks"
            ),
            GraphError::Network {
                space,
                rank,
                reason,
            } => write!(f, "address space {space} (rank {rank}): {reason}"),
            GraphError::Distribution(why) => write!(f, "cannot distribute the graph: {why}"),
        }
    }
}

impl std::error::Error for GraphError {}

/// What an S-Net network reports: a program that does not check, a record it cannot take,
/// or a failure while it runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SnetError {
    /// The program did not parse or check; the diagnostics render like a compiler's.
    Check(crate::snet::Diagnostics),
    /// Boxes the program declares have no function bound to them.
    Unbound(Vec<String>),
    /// The network does not accept records of this type: the record comes back unchanged.
    Rejected {
        /// The record, as sent.
        record: crate::snet::Record,
        /// What the network accepts.
        accepts: Vec<String>,
    },
    /// A box returned an error or panicked on a record; the record produced nothing.
    BoxFailed {
        /// The box.
        name: String,
        /// The record it was given.
        record: String,
        /// What it said.
        message: String,
    },
    /// A box emitted values that its signature does not allow; nothing was emitted.
    BrokeSignature {
        /// The box.
        name: String,
        /// The record it was given.
        record: String,
        /// What was wrong.
        message: String,
    },
    /// A tag expression had no value (division by zero, overflow) for a record.
    TagExpression {
        /// Where the expression is written, `file:line:col`.
        at: String,
        /// The record.
        record: String,
        /// Why.
        message: String,
    },
    /// A record reached a point where no route takes it: a box emitted a type its signature
    /// allows but the network around it cannot take, or a guard sent it where its type fails.
    Unroutable {
        /// Where, `file:line:col`.
        at: String,
        /// The record.
        record: String,
        /// Why.
        message: String,
    },
    /// Moving records between the network and a Space-Time Memory container failed.
    Stream(String),
    /// The run was closed: no more records can be sent.
    Closed,
    /// Waiting ended before the network finished.
    Timeout,
}

impl fmt::Display for SnetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnetError::Check(d) => write!(f, "{d}"),
            SnetError::Unbound(names) => {
                write!(f, "no function is bound to box(es) {}", names.join(", "))
            }
            SnetError::Rejected { record, accepts } => write!(
                f,
                "the network does not accept {record}; it accepts {}",
                accepts.join(" | ")
            ),
            SnetError::BoxFailed {
                name,
                record,
                message,
            } => write!(f, "box {name} failed on {record}: {message}"),
            SnetError::BrokeSignature {
                name,
                record,
                message,
            } => write!(f, "box {name} broke its signature on {record}: {message}"),
            SnetError::TagExpression {
                at,
                record,
                message,
            } => write!(f, "{at}: tag expression failed on {record}: {message}"),
            SnetError::Unroutable {
                at,
                record,
                message,
            } => write!(f, "{at}: cannot route {record}: {message}"),
            SnetError::Stream(why) => write!(f, "stream: {why}"),
            SnetError::Closed => f.write_str("the run is closed to new records"),
            SnetError::Timeout => f.write_str("the network did not finish in time"),
        }
    }
}

impl std::error::Error for SnetError {}
