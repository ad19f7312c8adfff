//! A member of a group: its inbox, its connections to the others' inboxes, and the polling
//! that moves arrived messages to where operations look for them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede_core::{
    Channel, ContainerOptions, GetError, InputConnection, OutputConnection, PutOptions, Runtime,
    Selector, StmError, Task, Wait, ZoneId,
};

use crate::blocks::Transfers;
use crate::error::StrataError;
use crate::wire::{self, Kind, Notice};

/// How a member joins and waits.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GroupOptions {
    /// The zone of the group's inboxes and tasks. Members hold their zone's watermark at
    /// zero (messages are reclaimed as they are read), so the group gets its own zone.
    pub zone: ZoneId,
    /// How long a member waits for another to join before [`StrataError::MemberMissing`].
    pub join_timeout: Duration,
    /// How long an operation waits for a message before [`StrataError::Timeout`]; `None`
    /// waits as long as the members it waits for are alive.
    pub timeout: Option<Duration>,
    /// How often a waiting member checks that the members it waits for are still there.
    pub liveness_check: Duration,
    /// Bytes of data per block-transfer packet.
    pub packet_bytes: usize,
    /// Packets sent from one transfer before the next transfer's turn (thesis §7.4: two).
    pub packets_per_turn: usize,
    /// Bandwidth matching (thesis §6.1.3): the pause after sending a packet when nothing
    /// has arrived, so senders do not outrun receivers. Zero sends back to back.
    pub packet_delay: Duration,
    /// How long a waiting member keeps polling its inbox, yielding the processor between
    /// polls, before it blocks. Waking a blocked thread costs tens of microseconds, more on
    /// a virtual machine whose idle processor was descheduled, and a collective waits
    /// several times: on a 2-core virtual machine a 400-key radix sort over two threads
    /// took 0.9 ms blocking at once and 0.1 ms polling first. Zero blocks at once.
    pub spin: Duration,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            zone: ZoneId(0x5354_5241),
            join_timeout: Duration::from_secs(30),
            timeout: None,
            liveness_check: Duration::from_millis(250),
            packet_bytes: 64 * 1024,
            packets_per_turn: 2,
            packet_delay: Duration::ZERO,
            spin: Duration::from_millis(1),
        }
    }
}

impl GroupOptions {
    /// The zone of the group's inboxes and tasks.
    pub fn zone(mut self, zone: ZoneId) -> Self {
        self.zone = zone;
        self
    }
    /// How long to wait for the other members to join.
    pub fn join_timeout(mut self, t: Duration) -> Self {
        self.join_timeout = t;
        self
    }
    /// How long an operation waits for a message.
    pub fn timeout(mut self, t: Option<Duration>) -> Self {
        self.timeout = t;
        self
    }
    /// Bytes of data per packet.
    pub fn packet_bytes(mut self, n: usize) -> Self {
        self.packet_bytes = n.max(1);
        self
    }
    /// Packets per transfer per turn of the interleaving.
    pub fn packets_per_turn(mut self, n: usize) -> Self {
        self.packets_per_turn = n.max(1);
        self
    }
    /// The bandwidth-matching pause.
    pub fn packet_delay(mut self, d: Duration) -> Self {
        self.packet_delay = d;
        self
    }
    /// How long a waiting member polls before it blocks.
    pub fn spin(mut self, d: Duration) -> Self {
        self.spin = d;
        self
    }
}

/// What a member has done, for monitoring and models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberStats {
    /// Collective operations completed.
    pub operations: u64,
    /// Collective messages sent and received.
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Block-transfer packets sent and received, and their data bytes.
    pub packets_sent: u64,
    pub packets_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Blocks fully received.
    pub blocks_received: u64,
    /// Bandwidth-matching pauses taken.
    pub delays: u64,
    /// Split-phase operations dropped before completion (completed by the drop).
    pub completed_on_drop: u64,
}

/// One member of a group of `size` tasks, the member of rank `rank`. All members run the
/// same collective operations in the same order (SPMD); each operation returns once this
/// member's part is done. A member belongs to one thread at a time (it is `Send`, not
/// `Sync`).
pub struct Member {
    group: String,
    rank: usize,
    size: usize,
    pub(crate) opts: GroupOptions,
    rt: Runtime,
    task: Task,
    // Keeps the inbox's name registered while the member lives; closed when it leaves.
    inbox: Channel,
    input: InputConnection<Channel>,
    peers: RefCell<Vec<Option<OutputConnection<Channel>>>>,
    next_step: Cell<u64>,
    mail: RefCell<HashMap<(u64, usize), Bytes>>,
    // Members known to have joined: a missing inbox means lost, not yet joined.
    seen: RefCell<Vec<bool>>,
    // Members that said they left.
    left: RefCell<Vec<bool>>,
    // The first member that said it failed, and why.
    aborted: RefCell<Option<(usize, String)>>,
    // Whether this member told the others it failed.
    told: Cell<bool>,
    // The next member whose liveness a waiting member checks beyond those it waits for.
    next_check: Cell<usize>,
    pub(crate) transfers: RefCell<Transfers>,
    pub(crate) stats: Cell<MemberStats>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("group", &self.group)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("step", &self.next_step.get())
            .finish()
    }
}

fn inbox_name(group: &str, rank: usize) -> String {
    format!("strata/{group}/{rank}")
}

impl Member {
    /// Joins `group` as member `rank` of `size` on `rt` (a local runtime, or an address
    /// space's: members may live in several). Creates this member's inbox; the others'
    /// are found when first needed, waiting up to the join timeout.
    pub fn join(
        rt: &Runtime,
        group: &str,
        rank: usize,
        size: usize,
        opts: GroupOptions,
    ) -> Result<Member, StrataError> {
        if size == 0 || size > wire::MAX_MEMBERS {
            return Err(StrataError::InvalidArgument(format!(
                "a group has 1 to {} members, not {size}",
                wire::MAX_MEMBERS
            )));
        }
        if rank >= size {
            return Err(StrataError::InvalidArgument(format!(
                "rank {rank} in a group of {size}"
            )));
        }
        let inbox = rt
            .channel(
                ContainerOptions::unbounded()
                    .name(inbox_name(group, rank))
                    .zone(opts.zone),
            )
            .map_err(|e| match e {
                StmError::NameTaken(_) => StrataError::RankTaken {
                    group: group.to_owned(),
                    rank,
                },
                e => e.into(),
            })?;
        let task = rt
            .task_builder()
            .name(format!("strata {group}#{rank}"))
            .zone(opts.zone)
            .virtual_time(0)
            .create()?;
        let input = task.attach_input(&inbox)?;
        Ok(Member {
            group: group.to_owned(),
            rank,
            size,
            rt: rt.clone(),
            task,
            inbox,
            input,
            peers: RefCell::new((0..size).map(|_| None).collect()),
            next_step: Cell::new(1),
            mail: RefCell::new(HashMap::new()),
            seen: RefCell::new((0..size).map(|r| r == rank).collect()),
            left: RefCell::new(vec![false; size]),
            aborted: RefCell::new(None),
            told: Cell::new(false),
            next_check: Cell::new(0),
            transfers: RefCell::new(Transfers::new(rank, size)),
            stats: Cell::new(MemberStats::default()),
            opts,
        })
    }

    /// This member's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// What this member has done so far.
    pub fn stats(&self) -> MemberStats {
        self.stats.get()
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut MemberStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// The next step of the group's sequence.
    pub(crate) fn step(&self) -> u64 {
        let s = self.next_step.get();
        self.next_step.set(s + 1);
        s
    }

    /// Sends `bytes` to member `to`'s inbox at `ts`.
    pub(crate) fn send(&self, to: usize, ts: i64, bytes: Vec<u8>) -> Result<(), StrataError> {
        let mut peers = self.peers.borrow_mut();
        if peers[to].is_none() {
            let ch = self
                .rt
                .lookup_channel(&inbox_name(&self.group, to), self.opts.join_timeout)
                .map_err(|e| match e {
                    StmError::NotFound(_) => StrataError::MemberMissing {
                        rank: to,
                        waited: self.opts.join_timeout,
                    },
                    e => e.into(),
                })?;
            peers[to] = Some(self.task.attach_output(&ch)?);
            self.seen.borrow_mut()[to] = true;
        }
        let out = peers[to].as_ref().expect("attached above");
        out.put_with(ts, Bytes::from(bytes), PutOptions::default().consumers(1))
            .map_err(|e| StrataError::put(to, e))
    }

    /// Sends a collective message of step `step`.
    pub(crate) fn send_message(
        &self,
        to: usize,
        step: u64,
        bytes: Vec<u8>,
    ) -> Result<(), StrataError> {
        self.send(to, wire::stamp(step, Kind::Collective, self.rank), bytes)?;
        self.count(|s| s.messages_sent += 1);
        Ok(())
    }

    /// The collective message of `step` from `from`, if it arrived.
    pub(crate) fn take_message(&self, step: u64, from: usize) -> Option<Bytes> {
        self.mail.borrow_mut().remove(&(step, from))
    }

    /// Moves what arrived to where operations look for it: waits up to `wait` for the
    /// first item, then takes every item already there. Returns whether anything arrived.
    pub(crate) fn poll(&self, wait: Wait) -> Result<bool, StrataError> {
        let mut got = false;
        let mut wait = wait;
        loop {
            match self.input.get_with(Selector::Oldest, wait) {
                Ok((ts, item)) => {
                    got = true;
                    wait = Wait::Never;
                    self.input.consume(ts)?;
                    let bytes = item.as_bytes().cloned().unwrap_or_default();
                    // Only members put here; anything else is left alone.
                    let Some((counter, kind, from)) = wire::unstamp(ts) else {
                        continue;
                    };
                    if from >= self.size {
                        continue;
                    }
                    self.seen.borrow_mut()[from] = true;
                    match kind {
                        Kind::Collective => {
                            self.count(|s| s.messages_received += 1);
                            self.mail.borrow_mut().insert((counter, from), bytes);
                        }
                        Kind::Packet => self.receive_packet(from, &bytes)?,
                        Kind::Notice => match Notice::decode(&bytes) {
                            Ok(Notice::Left) => self.left.borrow_mut()[from] = true,
                            Ok(Notice::Aborted(why)) => {
                                self.aborted.borrow_mut().get_or_insert((from, why));
                            }
                            Err(_) => {}
                        },
                    }
                }
                Err(GetError::Unavailable(_) | GetError::Timeout(_)) => return Ok(got),
                Err(e) => return Err(StrataError::Inbox(e)),
            }
        }
    }

    /// Fails if another member stopped the group, or one of `waiting_for` left (its
    /// messages came before its notice, so what is missing now never comes).
    fn check_others(&self, waiting_for: &[usize]) -> Result<(), StrataError> {
        if let Some((by, detail)) = self.aborted.borrow().clone() {
            return Err(StrataError::Aborted { by, detail });
        }
        let left = self.left.borrow();
        if let Some(&rank) = waiting_for.iter().find(|&&r| left[r]) {
            return Err(StrataError::MemberLost { rank });
        }
        Ok(())
    }

    /// Tells the other members this one failed (once), so they fail too rather than wait;
    /// returns the error.
    pub(crate) fn fail(&self, e: StrataError) -> StrataError {
        if !self.told.replace(true) && !matches!(e, StrataError::Aborted { .. }) {
            self.notify_all(&Notice::Aborted(e.to_string()));
        }
        e
    }

    /// Best effort: a member that is gone cannot be told.
    fn notify_all(&self, notice: &Notice) {
        let ts = wire::stamp(notice.counter(), Kind::Notice, self.rank);
        for r in (0..self.size).filter(|&r| r != self.rank) {
            let attached = self.peers.borrow()[r].is_some();
            if !attached {
                let Ok(ch) = self
                    .rt
                    .lookup_channel(&inbox_name(&self.group, r), Duration::ZERO)
                else {
                    continue;
                };
                let Ok(out) = self.task.attach_output(&ch) else {
                    continue;
                };
                self.peers.borrow_mut()[r] = Some(out);
            }
            if let Some(out) = &self.peers.borrow()[r] {
                let _ = out.put_with(
                    ts,
                    Bytes::from(notice.encode()),
                    PutOptions::default().consumers(1).wait(Wait::Never),
                );
            }
        }
    }

    /// Waits until something arrives or `deadline` passes, checking every
    /// [`GroupOptions::liveness_check`] that the members in `waiting_for` are still there.
    /// Pending transfers are served meanwhile.
    pub(crate) fn wait_for(
        &self,
        operation: &'static str,
        waiting_for: &[usize],
        started: Instant,
    ) -> Result<(), StrataError> {
        self.check_others(waiting_for)?;
        if self.serve_some()? {
            return Ok(());
        }
        if !self.opts.spin.is_zero() {
            let until = Instant::now() + self.opts.spin;
            while Instant::now() < until {
                if self.poll(Wait::Never)? {
                    return Ok(());
                }
                std::thread::yield_now();
            }
        }
        let slice = self.opts.liveness_check;
        if let Some(limit) = self.opts.timeout {
            let waited = started.elapsed();
            if waited >= limit {
                return Err(StrataError::Timeout {
                    operation,
                    waiting_for: waiting_for.to_vec(),
                    waited,
                });
            }
            if self.poll(Wait::For(slice.min(limit - waited)))? {
                return Ok(());
            }
        } else if self.poll(Wait::For(slice))? {
            return Ok(());
        }
        // The members waited for, and one other in turn: any dead member dooms the group,
        // even one this member does not wait for yet.
        let other = self.next_check.get() % self.size;
        self.next_check.set(other + 1);
        for &r in waiting_for.iter().chain(std::iter::once(&other)) {
            if r == self.rank
                || self
                    .rt
                    .lookup_channel(&inbox_name(&self.group, r), Duration::ZERO)
                    .is_ok()
            {
                continue;
            }
            if self.seen.borrow()[r] {
                return Err(StrataError::MemberLost { rank: r });
            }
            if started.elapsed() >= self.opts.join_timeout {
                return Err(StrataError::MemberMissing {
                    rank: r,
                    waited: self.opts.join_timeout,
                });
            }
        }
        Ok(())
    }
}

impl Member {
    /// One turn of the interleaving: up to [`GroupOptions::packets_per_turn`] packets of
    /// each queued block. Returns whether anything was sent.
    pub(crate) fn serve_some(&self) -> Result<bool, StrataError> {
        let mut i = 0;
        let mut sent = false;
        while i < self.transfers.borrow().pending() {
            sent = true;
            if !self.send_turn(i)? {
                i += 1;
            }
        }
        Ok(sent)
    }

    /// Sends up to a turn's packets of the `i`-th queued block; true if that finished it
    /// (it left the queue).
    pub(crate) fn send_turn(&self, i: usize) -> Result<bool, StrataError> {
        for _ in 0..self.opts.packets_per_turn {
            let p = self
                .transfers
                .borrow_mut()
                .next_packet(i, self.opts.packet_bytes);
            self.send(
                p.to,
                wire::stamp(p.counter, Kind::Packet, self.rank),
                p.bytes,
            )?;
            self.count(|s| {
                s.packets_sent += 1;
                s.bytes_sent += p.data_len as u64;
            });
            self.bandwidth_match()?;
            if p.last {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// After a packet: handle what arrived, or pause so as not to outrun the receivers.
    fn bandwidth_match(&self) -> Result<(), StrataError> {
        let delay = self.opts.packet_delay;
        if self.poll(Wait::Never)? || delay.is_zero() {
            return Ok(());
        }
        self.count(|s| s.delays += 1);
        if delay < Duration::from_micros(200) {
            let until = Instant::now() + delay;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        } else {
            std::thread::sleep(delay);
        }
        Ok(())
    }

    /// Stores an arrived packet.
    fn receive_packet(&self, from: usize, bytes: &[u8]) -> Result<(), StrataError> {
        let before = self.transfers.borrow().completed();
        let len = self
            .transfers
            .borrow_mut()
            .receive(from, bytes)
            .map_err(|detail| StrataError::BadTransfer { from, detail })?;
        let blocks = self.transfers.borrow().completed() - before;
        self.count(|s| {
            s.packets_received += 1;
            s.bytes_received += len as u64;
            s.blocks_received += blocks;
        });
        Ok(())
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Whoever still waits for this member learns it left instead of waiting on.
        self.notify_all(&Notice::Left);
        let _ = stampede_core::Container::close(&self.inbox);
    }
}
