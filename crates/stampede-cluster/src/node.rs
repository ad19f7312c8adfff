//! Attaching and detaching address spaces on demand (CableS' node attach): a node agent per
//! host starts new address-space processes when a cluster asks; the new process joins the
//! application, starts its cluster and serves it until it is told to detach.
//!
//! An agent serves [`NODE_SERVICE`] and registers `cluster/node/<host>`. An attach names a
//! command (the program to run, usually the asker's own binary, or `python -m
//! stampede.cluster`), and a token; the agent starts it with the application, the endpoints
//! to connect to and the token in its environment ([`Worker::from_env`]), and the new
//! member registers its membership with the token, which is how the asker recognises it.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use stampede_core::Item;
use stampede_net::{Config, NameEvent, Space};

use crate::error::ClusterError;
use crate::shared::{lock, member_name, Cluster, ClusterOptions, Registry};
use crate::wire::Msg;

/// The named code a node agent serves.
pub(crate) const NODE_SERVICE: &str = "stampede/node";
/// The environment a started address space finds.
pub const ENV_APP: &str = "STAMPEDE_CLUSTER_APP";
pub const ENV_CONNECT: &str = "STAMPEDE_CLUSTER_CONNECT";
pub const ENV_TOKEN: &str = "STAMPEDE_CLUSTER_TOKEN";

fn node_name(host: &str) -> String {
    format!("cluster/node/{host}")
}

/// A request to a node agent: run `command` (program and arguments) with `env` added.
fn encode_attach(token: &str, command: &[String], env: &[(String, String)]) -> Bytes {
    let mut b = BytesMut::new();
    let mut s = |v: &str| {
        b.put_u32_le(v.len() as u32);
        b.put_slice(v.as_bytes());
    };
    s(token);
    s(&command.len().to_string());
    for c in command {
        s(c);
    }
    s(&env.len().to_string());
    for (k, v) in env {
        s(k);
        s(v);
    }
    b.freeze()
}

type AttachRequest = (String, Vec<String>, Vec<(String, String)>);

fn decode_attach(b: &[u8]) -> Result<AttachRequest, String> {
    let mut at = 0usize;
    let mut s = || -> Result<String, String> {
        let n = b
            .get(at..at.checked_add(4).ok_or("too long")?)
            .ok_or("an attach request cut short")?
            .try_into()
            .map(u32::from_le_bytes)
            .map_err(|_| "four bytes")? as usize;
        let end = at
            .checked_add(4)
            .and_then(|a| a.checked_add(n))
            .ok_or("too long")?;
        let v = b.get(at + 4..end).ok_or("an attach request cut short")?;
        at += 4 + n;
        String::from_utf8(v.to_vec()).map_err(|_| "not UTF-8".to_string())
    };
    let token = s()?;
    let n: usize = s()?.parse().map_err(|_| "a bad count")?;
    let command = (0..n.min(4096))
        .map(|_| s())
        .collect::<Result<Vec<_>, _>>()?;
    let m: usize = s()?.parse().map_err(|_| "a bad count")?;
    let env = (0..m.min(4096))
        .map(|_| Ok((s()?, s()?)))
        .collect::<Result<Vec<_>, String>>()?;
    if command.is_empty() {
        return Err("an attach request with no command".into());
    }
    Ok((token, command, env))
}

/// A node agent: starts address-space processes for the clusters of its application.
pub struct NodeAgent {
    space: Space,
    host: String,
    children: Arc<Mutex<Vec<Child>>>,
}

impl std::fmt::Debug for NodeAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeAgent")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl NodeAgent {
    /// Serves `space`'s application as the agent of host `host`; the processes it starts
    /// connect to `connect` (the endpoints the new spaces join through).
    pub fn start(
        space: &Space,
        host: &str,
        connect: Vec<String>,
    ) -> Result<NodeAgent, ClusterError> {
        let children: Arc<Mutex<Vec<Child>>> = Arc::new(Mutex::new(Vec::new()));
        let kids = children.clone();
        let app = space.app().to_owned();
        space.serve(NODE_SERVICE, move |_from, item| {
            let b = item.as_bytes().cloned().unwrap_or_default();
            let (token, command, env) = decode_attach(&b)?;
            let mut cmd = Command::new(&command[0]);
            cmd.args(&command[1..])
                .envs(env)
                .env(ENV_APP, &app)
                .env(ENV_CONNECT, connect.join(","))
                .env(ENV_TOKEN, &token)
                .stdin(Stdio::null());
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {:?}: {e}", command[0]))?;
            let pid = child.id();
            let mut k = lock(&kids);
            // Reap those that ended.
            k.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
            k.push(child);
            Ok(Item::from(Bytes::copy_from_slice(&pid.to_le_bytes())))
        })?;
        if let Err(e) = space.register_service(&node_name(host), host) {
            space.unserve(NODE_SERVICE);
            return Err(e.into());
        }
        Ok(NodeAgent {
            space: space.clone(),
            host: host.to_owned(),
            children,
        })
    }

    /// The processes it started that still run.
    pub fn running(&self) -> usize {
        let mut k = lock(&self.children);
        k.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        k.len()
    }

    /// Stops serving; the processes it started run on.
    pub fn stop(self) {
        self.space.unserve(NODE_SERVICE);
        self.space.unregister(&node_name(&self.host));
    }
}

/// An address space started by a node agent, from its environment.
#[derive(Debug)]
pub struct Worker {
    app: String,
    connect: Vec<String>,
    token: String,
}

impl Worker {
    /// The worker this process was started as, if a node agent started it.
    pub fn from_env() -> Option<Worker> {
        let app = std::env::var(ENV_APP).ok()?;
        let token = std::env::var(ENV_TOKEN).ok()?;
        let connect = std::env::var(ENV_CONNECT)
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Some(Worker {
            app,
            connect,
            token,
        })
    }

    /// Joins the application and starts this space's cluster with `registry`, for faces
    /// that keep the cluster themselves; they wait with [`Cluster::wait_detached`], then
    /// stop the cluster and leave.
    pub fn start(
        self,
        registry: Registry,
        opts: ClusterOptions,
    ) -> Result<(Space, Cluster), ClusterError> {
        let mut cfg = Config::peer();
        cfg.connect = self.connect;
        let space = Space::join(&self.app, cfg)?;
        match Cluster::start_attached(&space, registry, opts, &self.token) {
            Ok(c) => Ok((space, c)),
            Err(e) => {
                space.leave();
                Err(e)
            }
        }
    }

    /// Joins the application, starts this space's cluster with `registry` and serves it
    /// until the cluster detaches it; then leaves.
    pub fn run(self, registry: Registry, opts: ClusterOptions) -> Result<(), ClusterError> {
        let (space, c) = self.start(registry, opts)?;
        c.wait_detached();
        c.stop();
        space.leave();
        Ok(())
    }
}

impl Cluster {
    /// Attaches a new address space: asks a node agent (the next in turn, by host name) to
    /// start `command` (program and arguments), which must run [`Worker::from_env`], and
    /// waits until the new space is a member, up to `timeout`; returns its id.
    pub fn attach(&self, command: &[String], timeout: Duration) -> Result<String, ClusterError> {
        let sh = &self.sh;
        let prefix = node_name("");
        let mut agents: Vec<(String, String)> = sh
            .space
            .records()
            .into_iter()
            .filter_map(|r| {
                r.name
                    .strip_prefix(&prefix)
                    .map(|h| (h.to_owned(), r.space))
            })
            .collect();
        agents.sort();
        if agents.is_empty() {
            return Err(ClusterError::NoSpace(
                "no node agent serves this application: start `stampede node` on a host".into(),
            ));
        }
        if command.is_empty() {
            return Err(ClusterError::InvalidArgument(
                "an attach needs a command".into(),
            ));
        }
        let (_, agent) = &agents[sh.turn.fetch_add(1, Ordering::Relaxed) % agents.len()];
        let token = format!("{}-{}", sh.id, sh.next_seq());
        let started = Instant::now();
        // Watch before asking, so the new member's registration is not missed.
        let events = sh.space.watch_under(&member_name(""))?;
        sh.space
            .call(agent, NODE_SERVICE, encode_attach(&token, command, &[]))?
            .wait()?;
        let prefix = member_name("");
        loop {
            let left = timeout
                .checked_sub(started.elapsed())
                .ok_or(ClusterError::Timeout {
                    operation: "attaching an address space",
                    waited: started.elapsed(),
                })?;
            match events.recv_timeout(left.min(Duration::from_millis(50))) {
                Some(NameEvent::Added(rec))
                    if rec.name.starts_with(&prefix) && rec.meta == token =>
                {
                    sh.space_joined(&rec.space);
                    lock(&sh.attached).insert(rec.space.clone(), Instant::now());
                    sh.counters.attached.fetch_add(1, Ordering::Relaxed);
                    return Ok(rec.space);
                }
                _ => {}
            }
        }
    }

    /// Tells space `space` (a member) to leave the cluster and end; returns once its
    /// membership is gone, up to `timeout`.
    pub fn detach(&self, space: &str, timeout: Duration) -> Result<(), ClusterError> {
        let sh = &self.sh;
        if space == sh.id {
            return Err(ClusterError::InvalidArgument(
                "a space detaches others, not itself (use stop)".into(),
            ));
        }
        let started = Instant::now();
        sh.send(space, &Msg::Detach)?;
        lock(&sh.attached).remove(space);
        sh.counters.detached.fetch_add(1, Ordering::Relaxed);
        while sh.space.record(&member_name(space)).is_some() {
            if started.elapsed() > timeout {
                return Err(ClusterError::Timeout {
                    operation: "detaching an address space",
                    waited: started.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        sh.space_left(space);
        Ok(())
    }

    /// Waits until another member tells this space to detach.
    pub fn wait_detached(&self) {
        self.sh.detach.wait();
    }

    /// Whether another member told this space to detach.
    pub fn detach_asked(&self) -> bool {
        self.sh.detach.asked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_requests_round_trip_and_bad_ones_are_refused() {
        let cmd = vec!["/bin/prog".to_string(), "--worker".into()];
        let env = vec![("A".to_string(), "1".to_string())];
        let b = encode_attach("tok", &cmd, &env);
        assert_eq!(decode_attach(&b).unwrap(), ("tok".into(), cmd, env));
        for n in 0..b.len() {
            assert!(decode_attach(&b[..n]).is_err());
        }
        assert!(decode_attach(&encode_attach("t", &[], &[])).is_err());
    }
}
