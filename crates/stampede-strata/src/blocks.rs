//! A member's block transfers as plain state: the queue of blocks being sent, in the order
//! their packets interleave, and the blocks being assembled from arrived packets.

use std::collections::HashMap;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::wire::Packet;

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

/// The next packet to send.
pub(crate) struct NextPacket {
    pub to: usize,
    /// How many packets went to `to` before this one.
    pub counter: u64,
    pub bytes: Vec<u8>,
    pub data_len: usize,
    /// Whether this packet finished its block (which left the queue).
    pub last: bool,
}

pub(crate) struct Transfers {
    /// In the fixed pseudo-random order they were queued into (thesis §7.4: one random
    /// number per transfer, and each member's order differs, so no receiver is every
    /// sender's first target at once).
    outgoing: Vec<Outgoing>,
    rng: StdRng,
    counters: Vec<u64>,
    assembling: HashMap<(usize, u64), Assembly>,
    complete: HashMap<(usize, u64), Bytes>,
    completed: u64,
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
            completed: 0,
        }
    }

    /// Queues a block at a random place; returns its index.
    pub fn queue(&mut self, to: usize, tag: u64, data: Bytes) -> usize {
        let at = self.rng.gen_range(0..=self.outgoing.len());
        self.outgoing.insert(
            at,
            Outgoing {
                to,
                tag,
                data,
                sent: 0,
            },
        );
        at
    }

    pub fn pending(&self) -> usize {
        self.outgoing.len()
    }

    /// The next packet of the `i`-th queued block, of at most `size` data bytes.
    pub fn next_packet(&mut self, i: usize, size: usize) -> NextPacket {
        let o = &mut self.outgoing[i];
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
            self.outgoing.remove(i);
        }
        let counter = self.counters[to];
        self.counters[to] += 1;
        NextPacket {
            to,
            counter,
            bytes,
            data_len: end - start,
            last,
        }
    }

    /// Stores an arrived packet from `from`; returns its data bytes.
    pub fn receive(&mut self, from: usize, bytes: &[u8]) -> Result<usize, String> {
        let p = Packet::decode(bytes)?;
        let total = usize::try_from(p.total).map_err(|_| "a block too long".to_string())?;
        let offset = usize::try_from(p.offset).map_err(|_| "an offset too far".to_string())?;
        let end = offset.checked_add(p.data.len()).filter(|&e| e <= total);
        let Some(end) = end else {
            return Err(format!(
                "{} bytes at offset {offset} of a block of {total}",
                p.data.len()
            ));
        };
        let a = self
            .assembling
            .entry((from, p.tag))
            .or_insert_with(|| Assembly {
                buf: vec![0; total],
                got: 0,
            });
        if a.buf.len() != total {
            return Err(format!(
                "block {} announced as {} bytes and as {total}",
                p.tag,
                a.buf.len()
            ));
        }
        a.buf[offset..end].copy_from_slice(p.data);
        a.got += p.data.len();
        if a.got >= total {
            let buf = self
                .assembling
                .remove(&(from, p.tag))
                .expect("just assembled")
                .buf;
            self.deliver(from, p.tag, Bytes::from(buf))?;
        }
        Ok(p.data.len())
    }

    /// A whole block from `from` (also one a member sends itself).
    pub fn deliver(&mut self, from: usize, tag: u64, data: Bytes) -> Result<(), String> {
        if self.complete.insert((from, tag), data).is_some() {
            return Err(format!(
                "block {tag} arrived again before the first was taken"
            ));
        }
        self.completed += 1;
        Ok(())
    }

    /// Blocks completed so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// The whole block `tag` from `from`, if it arrived.
    pub fn take(&mut self, from: usize, tag: u64) -> Option<Bytes> {
        self.complete.remove(&(from, tag))
    }
}
