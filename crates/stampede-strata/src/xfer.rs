//! Block transfers (thesis §6.1.3, §7.3-7.4): asynchronous sends whose packets are
//! interleaved, paced by bandwidth matching, and the all-to-all exchange built on them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stampede_core::Wait;

use crate::error::StrataError;
use crate::member::Member;
use crate::ops::BarrierKind;
use crate::wire::{self, Kind, Packet};

/// A block being sent.
struct Outgoing {
    to: usize,
    tag: u64,
    data: Bytes,
    sent: usize,
}

/// A block being received.
struct Assembly {
    buf: Vec<u8>,
    got: usize,
}

/// A member's transfers in both directions.
pub(crate) struct Transfers {
    /// In the fixed pseudo-random order they were queued into (thesis §7.4: one random
    /// number per transfer, and each member's order differs, so no receiver is every
    /// sender's first target at once).
    outgoing: Vec<Outgoing>,
    rng: StdRng,
    /// Packets sent to each member so far (their timestamps' counter).
    counters: Vec<u64>,
    assembling: HashMap<(usize, u64), Assembly>,
    complete: HashMap<(usize, u64), Bytes>,
}

impl Transfers {
    pub fn new(rank: usize, size: usize) -> Transfers {
        Transfers {
            outgoing: Vec::new(),
            rng: StdRng::seed_from_u64(
                0x5354_5241 ^ (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ),
            counters: vec![0; size],
            assembling: HashMap::new(),
            complete: HashMap::new(),
        }
    }
}

/// How [`Member::all_to_all`] schedules its P − 1 transfers per member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exchange {
    /// Round `k` sends to member `rank + k` (a cyclic-shift permutation), with a
    /// split-phase barrier every `every` rounds, so rounds never overlap and no receiver
    /// gets two senders at once (thesis §7.3; `every` > 1 amortises the barrier over small
    /// blocks, eq. 52).
    Barriers { every: usize },
    /// Every transfer queued at once, their packets interleaved (thesis §7.4).
    Interleaved,
    /// The rounds back to back with no barrier: what a plain message-passing loop does.
    Direct,
}

impl Member {
    /// Queues `data` for member `to` under `tag` and sends its first packets; the rest go
    /// out as this member serves transfers ([`service_all`](Member::service_all), or
    /// while it waits in any operation). The receiver gets the block with
    /// [`recv_block`](Member::recv_block)`(this rank, tag)`; a tag must not repeat between a
    /// sender and a receiver until the receiver took the earlier block.
    pub fn send_block(
        &self,
        to: usize,
        tag: u64,
        data: impl Into<Bytes>,
    ) -> Result<(), StrataError> {
        if to >= self.size() {
            return Err(StrataError::InvalidArgument(format!(
                "member {to} in a group of {}",
                self.size()
            )));
        }
        let data = data.into();
        if to == self.rank() {
            return self.deliver(to, tag, data);
        }
        let at = {
            let mut t = self.transfers.borrow_mut();
            let n = t.outgoing.len();
            let at = t.rng.gen_range(0..=n);
            t.outgoing.insert(
                at,
                Outgoing {
                    to,
                    tag,
                    data,
                    sent: 0,
                },
            );
            at
        };
        self.send_turn(at)?;
        Ok(())
    }

    /// Blocks queued and not yet fully sent.
    pub fn pending_sends(&self) -> usize {
        self.transfers.borrow().outgoing.len()
    }

    /// Sends every queued block, interleaving their packets, and handles arrivals between
    /// packets.
    pub fn service_all(&self) -> Result<(), StrataError> {
        while self.serve_some()? {}
        Ok(())
    }

    /// The block `tag` from member `from`, waiting for all of it.
    pub fn recv_block(&self, from: usize, tag: u64) -> Result<Bytes, StrataError> {
        let started = Instant::now();
        loop {
            if let Some(b) = self.try_recv_block(from, tag)? {
                return Ok(b);
            }
            self.wait_for("block transfer", &[from], started)
                .map_err(|e| self.fail(e))?;
        }
    }

    /// The block `tag` from member `from` if all of it has arrived.
    pub fn try_recv_block(&self, from: usize, tag: u64) -> Result<Option<Bytes>, StrataError> {
        self.poll(Wait::Never)?;
        Ok(self.transfers.borrow_mut().complete.remove(&(from, tag)))
    }

    /// One turn of the interleaving: up to [`packets_per_turn`](crate::GroupOptions)
    /// packets of each queued block. Returns whether anything was sent.
    pub(crate) fn serve_some(&self) -> Result<bool, StrataError> {
        let mut i = 0;
        let mut sent = false;
        while i < self.pending_sends() {
            sent = true;
            if !self.send_turn(i)? {
                i += 1;
            }
        }
        Ok(sent)
    }

    /// Sends up to a turn's packets of the `i`-th queued block; true if that finished it
    /// (it left the queue).
    fn send_turn(&self, i: usize) -> Result<bool, StrataError> {
        let size = self.opts.packet_bytes;
        for _ in 0..self.opts.packets_per_turn {
            let (to, ts, bytes, len, last) = {
                let mut t = self.transfers.borrow_mut();
                let o = &mut t.outgoing[i];
                let start = o.sent;
                let end = (start + size).min(o.data.len());
                let bytes = Packet::encode(
                    o.tag,
                    o.data.len() as u64,
                    start as u64,
                    &o.data[start..end],
                );
                o.sent = end;
                let (to, last) = (o.to, end == o.data.len());
                if last {
                    t.outgoing.remove(i);
                }
                let counter = t.counters[to];
                t.counters[to] += 1;
                (
                    to,
                    wire::stamp(counter, Kind::Packet, self.rank()),
                    bytes,
                    end - start,
                    last,
                )
            };
            self.send(to, ts, bytes)?;
            self.count(|s| {
                s.packets_sent += 1;
                s.bytes_sent += len as u64;
            });
            self.bandwidth_match()?;
            if last {
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
    pub(crate) fn receive_packet(&self, from: usize, bytes: &[u8]) -> Result<(), StrataError> {
        let bad = |detail: String| StrataError::BadTransfer { from, detail };
        let p = Packet::decode(bytes).map_err(bad)?;
        self.count(|s| {
            s.packets_received += 1;
            s.bytes_received += p.data.len() as u64;
        });
        let total = usize::try_from(p.total).map_err(|_| bad("a block too long".into()))?;
        let offset = usize::try_from(p.offset).map_err(|_| bad("an offset too far".into()))?;
        if offset
            .checked_add(p.data.len())
            .map_or(true, |end| end > total)
        {
            return Err(bad(format!(
                "{} bytes at offset {offset} of a block of {total}",
                p.data.len()
            )));
        }
        let done = {
            let mut t = self.transfers.borrow_mut();
            let a = t
                .assembling
                .entry((from, p.tag))
                .or_insert_with(|| Assembly {
                    buf: vec![0; total],
                    got: 0,
                });
            if a.buf.len() != total {
                return Err(bad(format!(
                    "block {} announced as {} bytes and as {total}",
                    p.tag,
                    a.buf.len()
                )));
            }
            a.buf[offset..offset + p.data.len()].copy_from_slice(p.data);
            a.got += p.data.len();
            if a.got >= total {
                t.assembling.remove(&(from, p.tag)).map(|a| a.buf)
            } else {
                None
            }
        };
        if let Some(buf) = done {
            self.deliver(from, p.tag, Bytes::from(buf))?;
        }
        Ok(())
    }

    fn deliver(&self, from: usize, tag: u64, data: Bytes) -> Result<(), StrataError> {
        let mut t = self.transfers.borrow_mut();
        if t.complete.insert((from, tag), data).is_some() {
            return Err(StrataError::BadTransfer {
                from,
                detail: format!("block {tag} arrived again before the first was taken"),
            });
        }
        self.count(|s| s.blocks_received += 1);
        Ok(())
    }

    /// The transpose (thesis §7.3): `blocks[j]` goes to member `j`; returns the block each
    /// member sent here, by sender. Every member calls it with the same `how`.
    pub fn all_to_all(&self, blocks: Vec<Bytes>, how: Exchange) -> Result<Vec<Bytes>, StrataError> {
        let (rank, size) = (self.rank(), self.size());
        if blocks.len() != size {
            return Err(StrataError::InvalidArgument(format!(
                "{} blocks for a group of {size}",
                blocks.len()
            )));
        }
        if let Exchange::Barriers { every: 0 } = how {
            return Err(StrataError::InvalidArgument(
                "a barrier every 0 rounds".into(),
            ));
        }
        // The exchange takes a step of the sequence, whose number tags its blocks.
        let tag = self.step();
        let mut out: Vec<Option<Bytes>> = vec![None; size];
        out[rank] = Some(blocks[rank].clone());
        match how {
            Exchange::Interleaved => {
                for k in 1..size {
                    let to = (rank + k) % size;
                    self.send_block(to, tag, blocks[to].clone())?;
                }
                self.service_all()?;
            }
            Exchange::Direct | Exchange::Barriers { .. } => {
                for k in 1..size {
                    let to = (rank + k) % size;
                    self.send_block(to, tag, blocks[to].clone())?;
                    self.service_all()?;
                    if let Exchange::Barriers { every } = how {
                        if k % every == 0 || k == size - 1 {
                            // Split-phase: arrivals keep being handled while waiting.
                            self.start_barrier_with(BarrierKind::Dissemination)?
                                .complete()?;
                        }
                    }
                }
            }
        }
        for k in 1..size {
            let from = (rank + size - k) % size;
            out[from] = Some(self.recv_block(from, tag)?);
        }
        self.count(|s| s.operations += 1);
        Ok(out
            .into_iter()
            .map(|b| b.expect("every block received"))
            .collect())
    }
}
