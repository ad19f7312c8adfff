//! Block transfers (thesis §6.1.3, §7.3-7.4): asynchronous sends whose packets are
//! interleaved, paced by bandwidth matching, and the all-to-all exchange built on them.

use std::time::Instant;

use bytes::Bytes;
use stampede_core::Wait;

use crate::error::StrataError;
use crate::member::Member;
use crate::ops::BarrierKind;

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
            self.transfers
                .borrow_mut()
                .deliver(to, tag, data)
                .map_err(|detail| StrataError::BadTransfer { from: to, detail })?;
            self.count(|s| s.blocks_received += 1);
            return Ok(());
        }
        let at = self.transfers.borrow_mut().queue(to, tag, data);
        self.send_turn(at)?;
        Ok(())
    }

    /// Blocks queued and not yet fully sent.
    pub fn pending_sends(&self) -> usize {
        self.transfers.borrow().pending()
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
        Ok(self.transfers.borrow_mut().take(from, tag))
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
