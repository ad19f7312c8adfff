//! Cluster barriers: the Strata barrier (the project's one barrier) over the tasks that
//! join a named barrier, wherever they run. The barrier's home hands out the members'
//! ranks; each participant then waits as a Strata member, so a wait costs the
//! dissemination barrier's messages and never a round trip to the home, and a member that
//! leaves or dies makes the others' waits fail instead of hang.

use stampede_strata::{GroupOptions, Member};

use crate::error::ClusterError;
use crate::home::Kind;
use crate::segment;
use crate::shared::{lock, Cluster};
use crate::wire::{decode_rank, Msg};

/// One task's place in a cluster barrier of a fixed number of members; reusable. Each
/// participating task joins the barrier itself (the handle is not shared between tasks).
#[derive(Debug)]
pub struct Barrier {
    member: Member,
    name: String,
    cluster: Cluster,
}

impl Cluster {
    /// Joins barrier `name` of `size` members (made if no space has made it), taking the
    /// next free place. The first wait waits for the others to join, up to the cluster's
    /// timeout (30 s without one). Once all `size` places are taken, the next `size`
    /// joiners form a new group under the same name (a barrier made again per phase).
    pub fn barrier(&self, name: &str, size: usize) -> Result<Barrier, ClusterError> {
        let sh = &self.sh;
        if size == 0 || size > u16::MAX as usize {
            return Err(ClusterError::InvalidArgument(format!(
                "a barrier of {size} members"
            )));
        }
        let home = sh.home(name, Kind::Barrier, size as u64)?;
        let place = if home == sh.id {
            lock(&sh.homes)
                .rank(name, size as u32)
                .map_err(ClusterError::InvalidArgument)?
        } else {
            let b = sh
                .call(
                    &home,
                    &Msg::Rank {
                        barrier: name.to_owned(),
                        size: size as u32,
                    },
                )
                .map_err(|e| match e {
                    ClusterError::Invoke(stampede_net::InvokeError::Failed { message, .. }) => {
                        ClusterError::InvalidArgument(message)
                    }
                    e => e,
                })?;
            decode_rank(&b).map_err(ClusterError::InvalidArgument)?
        };
        let mut opts = GroupOptions::default().timeout(sh.opts.timeout);
        if let Some(t) = sh.opts.timeout {
            opts = opts.join_timeout(t);
        }
        let (generation, rank) = (place as usize / size, place as usize % size);
        let member = Member::join(
            &sh.space,
            &format!("cluster/{name}/{generation}"),
            rank,
            size,
            opts,
        )?;
        Ok(Barrier {
            member,
            name: name.to_owned(),
            cluster: self.clone(),
        })
    }
}

impl Barrier {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// This task's place, from 0.
    pub fn rank(&self) -> usize {
        self.member.rank()
    }
    /// Its number of members.
    pub fn size(&self) -> usize {
        self.member.size()
    }

    /// Waits until every member has reached this wait. Fails with
    /// [`ClusterError::Barrier`] when a member left or died (or the timeout passed); the
    /// barrier cannot be used after a failure.
    pub fn wait(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        let started = std::time::Instant::now();
        // Release consistency: writes to segments before the barrier are seen after it. The
        // barrier is entered even when a release failed (the others would wait for ever);
        // the failure is reported.
        let released = segment::release_all(sh);
        let r = self
            .member
            .barrier()
            .map_err(ClusterError::from)
            .map(|()| segment::acquire_all(sh))
            .and(released);
        sh.counters.timed(crate::ClusterOp::Barrier, started);
        r
    }
}
