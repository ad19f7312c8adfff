//! Starting and stopping an address space's cluster, and listing the tasks it runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use stampede_net::Space;

use crate::error::ClusterError;
use crate::serve::{handle, listed, watch};
use crate::shared::{lock, member_name, Cluster, ClusterOp, ClusterOptions, Registry, Shared};
use crate::wire::{decode_list, Msg, SERVICE};

/// A task as [`Cluster::tasks`] and [`list_tasks`] report it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The space that spawned it and its number there.
    pub id: crate::ThreadId,
    /// The name it was spawned under.
    pub task: String,
    /// Whether it was asked to stop and has not yet.
    pub cancelling: bool,
    /// How long it has run.
    pub running: std::time::Duration,
}

/// The tasks one address space runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpaceTasks {
    pub space: String,
    /// Why the space did not answer, if it did not.
    pub error: Option<String>,
    pub tasks: Vec<TaskInfo>,
}

fn info(l: crate::wire::Listed) -> TaskInfo {
    TaskInfo {
        id: crate::ThreadId {
            origin: l.origin,
            seq: l.seq,
        },
        task: l.task,
        cancelling: l.cancelling,
        running: std::time::Duration::from_millis(l.running_ms),
    }
}

impl Cluster {
    /// Makes `space` a member of its application's cluster, able to run the tasks of
    /// `registry` for any member and to be home to synchronisation objects. One cluster
    /// per space: a second start fails with [`ClusterError::InvalidArgument`].
    pub fn start(
        space: &Space,
        registry: Registry,
        opts: ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        Cluster::start_attached(space, registry, opts, "")
    }

    /// As [`start`](Cluster::start), registering the membership with `token`, the one a
    /// node agent passed a started process (how the attaching space recognises it); for
    /// faces that join by themselves ([`Worker::run`](crate::Worker::run) does this).
    pub fn start_attached(
        space: &Space,
        registry: Registry,
        opts: ClusterOptions,
        token: &str,
    ) -> Result<Cluster, ClusterError> {
        let sh = Arc::new(Shared::new(space, registry, opts));
        let weak = Arc::downgrade(&sh);
        space
            .serve(SERVICE, move |from, item| match weak.upgrade() {
                Some(sh) => handle(&sh, from, item),
                None => Err("the cluster stopped in this space".into()),
            })
            .map_err(|e| match e {
                stampede_net::NetError::Stm(stampede_core::StmError::NameTaken(_)) => {
                    ClusterError::InvalidArgument(
                        "this address space is a cluster member already".into(),
                    )
                }
                e => e.into(),
            })?;
        // The watch starts before this space announces itself, so no member's
        // departure is missed; its history brings the members already there.
        let events = match space.watch_under(&member_name("")) {
            Ok(w) => w,
            Err(e) => {
                space.unserve(SERVICE);
                return Err(e.into());
            }
        };
        if let Err(e) = space.register_service(&member_name(space.id()), token) {
            space.unserve(SERVICE);
            return Err(e.into());
        }
        let weak = Arc::downgrade(&sh);
        std::thread::Builder::new()
            .name("cluster members".into())
            .spawn(move || watch(weak, events))
            .map_err(|e| ClusterError::InvalidArgument(format!("no thread: {e}")))?;
        let c = Cluster { sh };
        // The first cluster of a process serves its global heap, so tasks it runs may
        // follow pointers into it; `heap()` says why when this one cannot.
        #[cfg(target_os = "linux")]
        let _ = c.heap();
        Ok(c)
    }

    /// This space's id.
    pub fn id(&self) -> &str {
        &self.sh.id
    }

    /// The address space.
    pub fn space(&self) -> &Space {
        &self.sh.space
    }

    /// The tasks this space runs.
    pub fn tasks(&self) -> Vec<TaskInfo> {
        listed(&self.sh).into_iter().map(info).collect()
    }

    /// What this space's cluster did: tasks spawned from here, tasks run here, malformed
    /// messages received and answers that arrived after their request gave up.
    pub fn stats(&self) -> ClusterStats {
        self.sh.stats()
    }

    /// Leaves the cluster: this space stops serving it and its membership goes from the
    /// name server, so the others handle it as gone. Tasks running here run on, but their
    /// ends reach nobody.
    pub fn stop(self) {
        self.sh.stop();
    }
}

/// Counters of one space's cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterStats {
    pub spawned: u64,
    pub ran: u64,
    pub running: u64,
    pub malformed: u64,
    pub unclaimed: u64,
    pub attached: u64,
    pub detached: u64,
    /// Unlocks refused at homes here: the sender no longer held the mutex (its space was
    /// dropped, silent past its lease, and the mutex went to the next waiter).
    pub stale_unlocks: u64,
    op_calls: [u64; 10],
    op_nanos: [u64; 10],
}

impl ClusterStats {
    /// The counters in one list, the order of [`from_counters`](Self::from_counters).
    fn to_counters(self) -> Vec<u64> {
        let mut v = vec![
            self.spawned,
            self.ran,
            self.running,
            self.malformed,
            self.unclaimed,
            self.attached,
            self.detached,
            self.stale_unlocks,
        ];
        v.extend(self.op_calls);
        v.extend(self.op_nanos);
        v
    }

    fn from_counters(v: &[u64]) -> Result<ClusterStats, String> {
        if v.len() != 8 + 2 * 10 {
            return Err(format!("{} counters, not {}", v.len(), 8 + 2 * 10));
        }
        Ok(ClusterStats {
            spawned: v[0],
            ran: v[1],
            running: v[2],
            malformed: v[3],
            unclaimed: v[4],
            attached: v[5],
            detached: v[6],
            stale_unlocks: v[7],
            op_calls: v[8..18].try_into().expect("ten"),
            op_nanos: v[18..28].try_into().expect("ten"),
        })
    }

    /// How many calls of `op` this space made, and their total time (waits included).
    pub fn op(&self, op: ClusterOp) -> (u64, std::time::Duration) {
        let i = op.index();
        (
            self.op_calls[i],
            std::time::Duration::from_nanos(self.op_nanos[i]),
        )
    }
}

impl Shared {
    pub(crate) fn stats(&self) -> ClusterStats {
        let c = &self.counters;
        ClusterStats {
            spawned: c.spawned.load(Ordering::Relaxed),
            ran: c.ran.load(Ordering::Relaxed),
            running: lock(&self.running).len() as u64,
            malformed: c.malformed.load(Ordering::Relaxed),
            unclaimed: c.unclaimed.load(Ordering::Relaxed),
            attached: c.attached.load(Ordering::Relaxed),
            detached: c.detached.load(Ordering::Relaxed),
            stale_unlocks: c.stale_unlocks.load(Ordering::Relaxed),
            op_calls: std::array::from_fn(|i| c.op_calls[i].load(Ordering::Relaxed)),
            op_nanos: std::array::from_fn(|i| c.op_nanos[i].load(Ordering::Relaxed)),
        }
    }

    /// [`Msg::Stats`]'s answer.
    pub(crate) fn encoded_stats(&self) -> bytes::Bytes {
        crate::wire::encode_counters(&self.stats().to_counters())
    }

    pub(crate) fn stop(&self) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            #[cfg(target_os = "linux")]
            crate::heap::unbind(self);
            self.space.unserve(SERVICE);
            self.space.unregister(&member_name(&self.id));
            // The objects homed here go with it: others make them afresh elsewhere.
            for name in lock(&self.claimed).keys() {
                self.space.unregister(&crate::shared::object_name(name));
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every member's counters, asked of each (any space can ask, a member or not).
pub fn cluster_stats(space: &Space) -> Vec<(String, Result<ClusterStats, String>)> {
    members_of(space)
        .into_iter()
        .map(|m| {
            let answer = space
                .call(&m, SERVICE, Msg::Stats.encode())
                .map_err(|e| e.to_string())
                .and_then(|c| c.wait().map_err(|e| e.to_string()))
                .and_then(|item| {
                    crate::wire::decode_counters(item.as_bytes().cloned().unwrap_or_default())
                })
                .and_then(|v| ClusterStats::from_counters(&v));
            (m, answer)
        })
        .collect()
}

/// The cluster's members, from the name server.
fn members_of(space: &Space) -> Vec<String> {
    let prefix = member_name("");
    let mut members: Vec<String> = space
        .records()
        .into_iter()
        .filter_map(|r| r.name.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    members.sort();
    members.dedup();
    members
}

/// The tasks every member of `space`'s application cluster runs, asked of each member
/// (any space can ask, a member or not: what `stampede threads` shows).
pub fn list_tasks(space: &Space) -> Vec<SpaceTasks> {
    members_of(space)
        .into_iter()
        .map(|m| {
            let answer = space
                .call(&m, SERVICE, Msg::List.encode())
                .map_err(|e| e.to_string())
                .and_then(|c| c.wait().map_err(|e| e.to_string()))
                .and_then(|item| decode_list(item.as_bytes().cloned().unwrap_or_default()));
            match answer {
                Ok(l) => SpaceTasks {
                    space: m,
                    error: None,
                    tasks: l.into_iter().map(info).collect(),
                },
                Err(e) => SpaceTasks {
                    space: m,
                    error: Some(e),
                    tasks: Vec::new(),
                },
            }
        })
        .collect()
}
