//! Who may take a name. Names are first come, first served, but "first" is only as good as
//! the view of the space that decides it: a space cut off from the name's holder sees no
//! record and would take the name too, so each side of a partition would have its own
//! container or cluster object under one name. In an application with a router, the router
//! settles its clients' claims: a client takes a name only when its router grants it, and a
//! client that cannot reach its router cannot take one (`Unreachable`). A client's router
//! carries all of its traffic anyway, so this costs a client nothing it could otherwise do.
//! Peers without a router settle claims among the peers they reach (see `Space::publish`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stampede_core::{Item, StmError};
use zenoh::Wait as _;

use crate::config::Mode;
use crate::error::NetError;
use crate::space::{lock, Shared, Space};

/// The named code of a router that settles a claim: the argument is the name, the answer
/// empty for granted or the id of the space that holds it.
pub(crate) const SERVICE: &str = "stampede/names/settle";

/// A router's grants, and a client's router.
#[derive(Default)]
pub(crate) struct Registrar {
    /// Names granted lately, to whom and when: a grant stands until the claimant's name
    /// token has had time to reach the router, and then the token speaks for it.
    granted: Mutex<HashMap<String, (String, Instant)>>,
    /// The router that settles this client's claims, once seen: a client whose router is
    /// gone cannot fall back to settling claims itself.
    router: Mutex<Option<String>>,
}

/// Who settles a client's claims.
pub(crate) enum Settler {
    /// Its router, now connected or last seen.
    Router(String),
    /// Nobody: the client is connected to a peer, which routes for it but settles nothing.
    Nobody,
    /// It is connected to nothing and has never seen a router.
    Unknown,
}

impl Registrar {
    /// The router this client is connected to, remembered; or the one it last was.
    pub(crate) fn router(&self, sh: &Shared) -> Settler {
        let info = sh.session.info();
        let current = info.routers_zid().wait().next().map(|z| z.to_string());
        let mut known = lock(&self.router);
        if current.is_some() {
            known.clone_from(&current);
        }
        match known.clone() {
            Some(r) => Settler::Router(r),
            None if info.peers_zid().wait().next().is_some() => Settler::Nobody,
            None => Settler::Unknown,
        }
    }
}

/// Settles `space`'s claim of `name` before it registers it: `Ok` when it may go on.
pub(crate) fn claim(space: &Space, name: &str) -> Result<(), NetError> {
    let sh = &space.sh;
    let taken = || NetError::Stm(StmError::NameTaken(name.to_owned()));
    let unreachable = |why: String| {
        sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
        NetError::Unreachable(format!("name {name:?} not registered: {why}"))
    };
    match sh.cfg.mode {
        Mode::Peer => return Ok(()),
        Mode::Router => {
            return match settle(sh, &sh.id, name) {
                Settled::Granted => Ok(()),
                Settled::Held(_) => Err(taken()),
                Settled::Failed(why) => Err(unreachable(why)),
            }
        }
        Mode::Client => {}
    }
    let router = match sh.registrar.router(sh) {
        Settler::Router(r) => r,
        // A client of a peer: claims are first come, first served among those reached.
        Settler::Nobody => return Ok(()),
        Settler::Unknown => {
            return Err(unreachable(
                "this client reaches no router to settle names".into(),
            ))
        }
    };
    let unreachable = |why: &str| {
        unreachable(format!(
            "this space's router {router}, which settles names, {why}"
        ))
    };
    // A client that has just joined, or a router that has just started, may not have seen
    // the other's liveliness yet: the router is asked once it is known alive.
    let deadline = Instant::now() + sh.cfg.op_timeout;
    while !sh.members.is_live(&router) {
        if sh.is_dead(&router) {
            return Err(unreachable("was lost"));
        }
        if Instant::now() >= deadline {
            return Err(unreachable("has not appeared"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The router answers within one liveliness query of its own.
    let limit = 2 * sh.cfg.op_timeout + sh.cfg.wait_slice;
    let answer = space
        .call(&router, SERVICE, Item::from(name.as_bytes().to_vec()))
        .and_then(|c| c.wait_timeout(limit))
        .map_err(|e| unreachable(&format!("did not answer: {e}")))?;
    if answer.wire().is_empty() {
        Ok(())
    } else {
        Err(taken())
    }
}

/// A router's answer to a claim.
enum Settled {
    Granted,
    /// Another space holds the name.
    Held(String),
    /// The router could not find out.
    Failed(String),
}

/// A router's answer to `claimant`'s claim of `name`.
fn settle(sh: &Shared, claimant: &str, name: &str) -> Settled {
    // One claim at a time, so that two claimants of a free name cannot both be granted.
    let mut granted = lock(&sh.registrar.granted);
    let grace = 3 * sh.cfg.op_timeout;
    granted.retain(|_, (s, at)| at.elapsed() < grace && !sh.is_dead(s));
    if let Some((s, _)) = granted.get(name) {
        if s != claimant {
            return Settled::Held(s.clone());
        }
    }
    if let Some((rec, _)) = lock(&sh.names).get(name) {
        if rec.space != claimant {
            return Settled::Held(rec.space.clone());
        }
    }
    // Names are liveliness tokens, which a router knows without asking their spaces: a
    // stopped space cannot hold this up.
    let prefix = sh.key("name", "");
    let holders = match sh
        .session
        .liveliness()
        .get(format!("{prefix}*/{name}"))
        .timeout(sh.cfg.op_timeout)
        .wait()
    {
        Ok(h) => h,
        Err(e) => return Settled::Failed(format!("could not look {name:?} up: {e}")),
    };
    while let Ok(r) = holders.recv() {
        let Ok(s) = r.result() else { continue };
        let holder = s
            .key_expr()
            .as_str()
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once('/'))
            .map(|(space, _)| space);
        if let Some(h) = holder {
            if h != claimant && !sh.is_dead(h) {
                return Settled::Held(h.to_owned());
            }
        }
    }
    granted.insert(name.to_owned(), (claimant.to_owned(), Instant::now()));
    Settled::Granted
}

/// Serves claims at a router.
pub(crate) fn serve(space: &Space) -> Result<(), NetError> {
    if space.sh.cfg.mode != Mode::Router {
        return Ok(());
    }
    let weak = Arc::downgrade(&space.sh);
    space.serve(SERVICE, move |claimant, arg| {
        let sh = weak.upgrade().ok_or("the router is leaving")?;
        let name = std::str::from_utf8(arg.wire()).map_err(|_| "a name is text")?;
        match settle(&sh, claimant, name) {
            Settled::Granted => Ok(Item::from(Vec::<u8>::new())),
            Settled::Held(holder) => Ok(Item::from(holder.into_bytes())),
            Settled::Failed(why) => Err(why),
        }
    })
}
