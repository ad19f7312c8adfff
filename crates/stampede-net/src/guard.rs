//! What an owner refuses: requests its access rules do not grant, requests from a space
//! under another user than the one it first asked as, and what goes over a quota. Each
//! refusal is counted and logged, never with a secret.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use stampede_core::{Permission, PutErrorKind, StmError};

use crate::space::{lock, Shared};
use crate::wire::Request;

/// Who each space that sends requests here is.
#[derive(Default)]
pub(crate) struct Guard {
    /// The user each space that sent requests here first came with.
    bound: Mutex<HashMap<String, String>>,
}

impl Guard {
    /// Checks that `space` asks as the user it first asked as.
    pub(crate) fn bind(&self, space: &str, user: &str) -> bool {
        let mut bound = lock(&self.bound);
        bound
            .entry(space.to_owned())
            .or_insert_with(|| user.to_owned())
            == user
    }

    /// Forgets a space that left.
    pub(crate) fn forget(&self, space: &str) {
        lock(&self.bound).remove(space);
    }
}

/// The user a request to an owner came from: the last chunk of its key.
pub(crate) fn sender(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or("")
}

/// Whether `user` may make request `req` here: what the owner's rules allow, from the space
/// that first asked as `user`. A refusal is counted and logged.
pub(crate) fn check(sh: &Shared, user: &str, req: &Request) -> Result<(), StmError> {
    use Permission::{Close, Create, Read, Write};
    let Some(rules) = &sh.cfg.access else {
        return Ok(());
    };
    let (space, op, target) = match req {
        Request::Attach {
            task,
            container,
            input,
            ..
        } => (
            Some(&task.space),
            if *input { Read } else { Write },
            Target::Id(*container),
        ),
        Request::Put { task, .. } => (Some(&task.space), Write, Target::Connection),
        Request::Get { task, .. }
        | Request::Take { task, .. }
        | Request::Consume { task, .. }
        | Request::Seen { task, .. }
        | Request::Visible { task, .. }
        | Request::Detach { task, .. } => (Some(&task.space), Read, Target::Connection),
        Request::Subscribe {
            space, container, ..
        } => (Some(space), Read, Target::Id(*container)),
        Request::Unsubscribe { space, .. } => (Some(space), Read, Target::Connection),
        Request::Close { container } => (None, Close, Target::Id(*container)),
        Request::Create { name, .. } => (None, Create, Target::Name(name)),
        Request::Explain { .. } => return Ok(()),
    };
    let name = match target {
        Target::Id(id) => match lock(&sh.owned).get(&id) {
            Some((_, name)) => name.clone().ok_or_else(|| format!("#{id}")),
            // Unknown here: the request fails as such.
            None => return Ok(()),
        },
        Target::Name("") => Err("a new unnamed container".to_owned()),
        Target::Name(n) => Ok(n.to_owned()),
        Target::Connection => Err("a connection of another user's space".to_owned()),
    };
    let impostor = space.is_some_and(|s| !sh.guard.bind(s, user));
    let allowed = match (&target, &name) {
        (Target::Connection, _) => true,
        (_, Ok(n)) => rules.allows(user, op, Some(n)),
        (_, Err(_)) => rules.allows(user, op, None),
    };
    if allowed && !impostor {
        return Ok(());
    }
    Err(refuse(
        sh,
        user,
        op,
        name.unwrap_or_else(|label| label),
        impostor,
    ))
}

/// The refusal of a pipelined put that `user` sent for a space that first asked here as
/// another user.
pub(crate) fn impostor(sh: &Shared, user: &str) -> StmError {
    refuse(
        sh,
        user,
        Permission::Write,
        "a connection of another user's space".to_owned(),
        true,
    )
}

fn refuse(sh: &Shared, user: &str, op: Permission, container: String, impostor: bool) -> StmError {
    sh.counters.denied.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(user, op = op.name(), container, impostor, "request denied");
    StmError::Denied {
        user: user.to_owned(),
        op,
        container,
    }
}

/// What a request names.
enum Target<'a> {
    Id(u64),
    Name(&'a str),
    /// One of the sender's connections, which was checked when attached.
    Connection,
}

fn refused(sh: &Shared, what: &str, space: &str) {
    sh.counters.quota_refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(space, what, "over its quota");
}

/// A put of `len` bytes from `space`, if that is more than the quota.
pub(crate) fn item(sh: &Shared, space: &str, len: usize) -> Option<PutErrorKind> {
    let limit = sh.cfg.quotas.max_item_bytes;
    (len > limit).then(|| {
        refused(sh, "item size", space);
        PutErrorKind::TooLarge {
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
        }
    })
}

/// Refuses a new connection of `space`, which holds `held`, once that is its quota.
pub(crate) fn connection(sh: &Shared, space: &str, held: usize) -> Result<(), StmError> {
    let limit = sh.cfg.quotas.max_connections;
    if held < limit {
        return Ok(());
    }
    refused(sh, "connections", space);
    Err(StmError::TooManyConnections(limit))
}

/// Whether a connection of `space` with `waiting` puts queued may queue one more.
pub(crate) fn waiting_put(sh: &Shared, space: &str, waiting: usize) -> Result<(), PutErrorKind> {
    if waiting < sh.cfg.quotas.max_waiting_puts {
        return Ok(());
    }
    refused(sh, "waiting puts", space);
    Err(PutErrorKind::Full)
}
