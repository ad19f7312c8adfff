//! What the address spaces of a cluster say to each other, as the argument items of the one
//! named code each serves, [`SERVICE`].
//!
//! A message is a kind byte and its fields: integers little-endian, strings and byte
//! strings a `u32` length and the bytes. Decoding checks every length and refuses trailing
//! bytes, so a malformed message is an error, never a panic or a partial message.

use bytes::{BufMut, Bytes, BytesMut};

/// The named code every address space of a cluster serves.
pub(crate) const SERVICE: &str = "stampede/cluster";

/// How a task ended, as its joiner learns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Returned(Bytes),
    Failed(String),
    Panicked(String),
    Cancelled,
    /// The space asked to run it has nothing registered under its name.
    Unknown,
}

/// A task as `stampede threads` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    pub origin: String,
    pub seq: u64,
    pub task: String,
    pub cancelling: bool,
    pub running_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Run `task` with `args` at virtual time `vt`, for the caller's handle `seq`.
    Run {
        seq: u64,
        task: String,
        args: Bytes,
        vt: i64,
    },
    /// The caller's task for handle `seq` ended.
    Exit { seq: u64, outcome: Outcome },
    /// Cancel the task the caller started with handle `seq`.
    Cancel { seq: u64 },
    /// The caller's request `seq` wants the mutex (or semaphore) `object`.
    Lock { object: String, seq: u64 },
    /// The holder granted by the caller's request `seq` releases `object`.
    Unlock { object: String, seq: u64 },
    /// The caller's request `seq` no longer waits for `object` (it timed out or was
    /// cancelled); if it was granted meanwhile, the grant is released.
    Withdraw { object: String, seq: u64 },
    /// The caller's request `seq` waits on condition `cond` (a call: answered once queued).
    CondWait { cond: String, seq: u64 },
    /// Wake one waiter of `cond`, or all of them.
    Signal { cond: String, all: bool },
    /// Add one to semaphore `sem`.
    Post { sem: String },
    /// The grant of the caller's request `seq` for `object` arrived after the request gave
    /// up: a mutex held by it is released, a semaphore gets its unit back.
    Return { object: String, seq: u64 },
    /// The home granted request `seq` for `object` (`owner_died`: the previous holder's
    /// space died holding it).
    Grant {
        object: String,
        seq: u64,
        owner_died: bool,
    },
    /// The home woke request `seq` waiting on condition `object`.
    Wake { object: String, seq: u64 },
    /// The home cannot serve request `seq`.
    Refused { seq: u64, why: String },
    /// A rank in barrier `barrier` of `size` members (a call: answered with the rank).
    Rank { barrier: String, size: u32 },
    /// The tasks running here (a call: answered with [`encode_list`]).
    List,
    /// Whether the callee is home to `object` of kind `kind` (a call: answered with one
    /// byte, 1 for yes).
    Claim { object: String, kind: u8 },
    /// Segment `segment`'s bytes unless the caller has version `have` (a call: answered
    /// with [`encode_fetched`]).
    Fetch { segment: String, have: u64 },
    /// Leave the cluster and end (the caller attached this space and it is idle).
    Detach,
    /// This space's counters (a call: answered with [`encode_counters`]).
    Stats,
    /// One release's writes to segment `segment`, applied at once (a call: answered with
    /// the new version, eight bytes).
    Store {
        segment: String,
        writes: Vec<(u64, Bytes)>,
    },
    /// Free the global heap's block at `addr`, of an arena of the callee's (one way).
    Free { addr: u64 },
    /// Lock `object` now or be refused, never queued (answered as [`Msg::Lock`] is).
    TryLock { object: String, seq: u64 },
}

const RUN: u8 = 1;
const EXIT: u8 = 2;
const CANCEL: u8 = 3;
const LOCK: u8 = 4;
const UNLOCK: u8 = 5;
const WITHDRAW: u8 = 6;
const COND_WAIT: u8 = 7;
const SIGNAL: u8 = 8;
const POST: u8 = 9;
const GRANT: u8 = 10;
const WAKE: u8 = 11;
const REFUSED: u8 = 12;
const RANK: u8 = 13;
const LIST: u8 = 14;
const RETURN: u8 = 15;
const CLAIM: u8 = 16;
const FETCH: u8 = 17;
const STORE: u8 = 18;
const DETACH: u8 = 19;
const STATS: u8 = 20;
const FREE: u8 = 21;
const TRY_LOCK: u8 = 22;

struct Writer(BytesMut);

impl Writer {
    fn new(kind: u8) -> Writer {
        let mut b = BytesMut::with_capacity(32);
        b.put_u8(kind);
        Writer(b)
    }
    fn u8(mut self, v: u8) -> Self {
        self.0.put_u8(v);
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.put_u32_le(v);
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.put_u64_le(v);
        self
    }
    fn bytes(mut self, v: &[u8]) -> Self {
        self.0.put_u32_le(v.len() as u32);
        self.0.put_slice(v);
        self
    }
    fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }
    fn done(self) -> Bytes {
        self.0.freeze()
    }
}

struct Reader {
    b: Bytes,
    at: usize,
}

impl Reader {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("a message cut short at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bytes(&mut self) -> Result<Bytes, String> {
        let n = self.u32()? as usize;
        self.take(n)?;
        Ok(self.b.slice(self.at - n..self.at))
    }
    fn str(&mut self) -> Result<String, String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| "a string that is not UTF-8".to_owned())
    }
    fn bool(&mut self) -> Result<bool, String> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("{b} is not a boolean")),
        }
    }
    fn end(self) -> Result<(), String> {
        if self.at == self.b.len() {
            Ok(())
        } else {
            Err(format!(
                "{} bytes after the message",
                self.b.len() - self.at
            ))
        }
    }
}

impl Msg {
    pub fn encode(&self) -> Bytes {
        match self {
            Msg::Run {
                seq,
                task,
                args,
                vt,
            } => Writer::new(RUN)
                .u64(*seq)
                .str(task)
                .bytes(args)
                .u64(*vt as u64)
                .done(),
            Msg::Exit { seq, outcome } => {
                let w = Writer::new(EXIT).u64(*seq);
                match outcome {
                    Outcome::Returned(b) => w.u8(0).bytes(b),
                    Outcome::Failed(m) => w.u8(1).str(m),
                    Outcome::Panicked(m) => w.u8(2).str(m),
                    Outcome::Cancelled => w.u8(3),
                    Outcome::Unknown => w.u8(4),
                }
                .done()
            }
            Msg::Cancel { seq } => Writer::new(CANCEL).u64(*seq).done(),
            Msg::Lock { object, seq } => Writer::new(LOCK).str(object).u64(*seq).done(),
            Msg::Unlock { object, seq } => Writer::new(UNLOCK).str(object).u64(*seq).done(),
            Msg::Withdraw { object, seq } => Writer::new(WITHDRAW).str(object).u64(*seq).done(),
            Msg::CondWait { cond, seq } => Writer::new(COND_WAIT).str(cond).u64(*seq).done(),
            Msg::Signal { cond, all } => Writer::new(SIGNAL).str(cond).u8(*all as u8).done(),
            Msg::Post { sem } => Writer::new(POST).str(sem).done(),
            Msg::Return { object, seq } => Writer::new(RETURN).str(object).u64(*seq).done(),
            Msg::Grant {
                object,
                seq,
                owner_died,
            } => Writer::new(GRANT)
                .str(object)
                .u64(*seq)
                .u8(*owner_died as u8)
                .done(),
            Msg::Wake { object, seq } => Writer::new(WAKE).str(object).u64(*seq).done(),
            Msg::Refused { seq, why } => Writer::new(REFUSED).u64(*seq).str(why).done(),
            Msg::Rank { barrier, size } => Writer::new(RANK).str(barrier).u32(*size).done(),
            Msg::List => Writer::new(LIST).done(),
            Msg::Claim { object, kind } => Writer::new(CLAIM).str(object).u8(*kind).done(),
            Msg::Detach => Writer::new(DETACH).done(),
            Msg::Stats => Writer::new(STATS).done(),
            Msg::Free { addr } => Writer::new(FREE).u64(*addr).done(),
            Msg::TryLock { object, seq } => Writer::new(TRY_LOCK).str(object).u64(*seq).done(),
            Msg::Fetch { segment, have } => Writer::new(FETCH).str(segment).u64(*have).done(),
            Msg::Store { segment, writes } => {
                let mut w = Writer::new(STORE).str(segment).u32(writes.len() as u32);
                for (at, b) in writes {
                    w = w.u64(*at).bytes(b);
                }
                w.done()
            }
        }
    }

    pub fn decode(b: Bytes) -> Result<Msg, String> {
        let mut r = Reader { b, at: 0 };
        let msg = match r.u8()? {
            RUN => Msg::Run {
                seq: r.u64()?,
                task: r.str()?,
                args: r.bytes()?,
                vt: r.u64()? as i64,
            },
            EXIT => {
                let seq = r.u64()?;
                let outcome = match r.u8()? {
                    0 => Outcome::Returned(r.bytes()?),
                    1 => Outcome::Failed(r.str()?),
                    2 => Outcome::Panicked(r.str()?),
                    3 => Outcome::Cancelled,
                    4 => Outcome::Unknown,
                    k => return Err(format!("unknown outcome {k}")),
                };
                Msg::Exit { seq, outcome }
            }
            CANCEL => Msg::Cancel { seq: r.u64()? },
            LOCK => Msg::Lock {
                object: r.str()?,
                seq: r.u64()?,
            },
            UNLOCK => Msg::Unlock {
                object: r.str()?,
                seq: r.u64()?,
            },
            WITHDRAW => Msg::Withdraw {
                object: r.str()?,
                seq: r.u64()?,
            },
            COND_WAIT => Msg::CondWait {
                cond: r.str()?,
                seq: r.u64()?,
            },
            SIGNAL => Msg::Signal {
                cond: r.str()?,
                all: r.bool()?,
            },
            POST => Msg::Post { sem: r.str()? },
            RETURN => Msg::Return {
                object: r.str()?,
                seq: r.u64()?,
            },
            GRANT => Msg::Grant {
                object: r.str()?,
                seq: r.u64()?,
                owner_died: r.bool()?,
            },
            WAKE => Msg::Wake {
                object: r.str()?,
                seq: r.u64()?,
            },
            REFUSED => Msg::Refused {
                seq: r.u64()?,
                why: r.str()?,
            },
            RANK => Msg::Rank {
                barrier: r.str()?,
                size: r.u32()?,
            },
            LIST => Msg::List,
            CLAIM => Msg::Claim {
                object: r.str()?,
                kind: r.u8()?,
            },
            DETACH => Msg::Detach,
            STATS => Msg::Stats,
            FREE => Msg::Free { addr: r.u64()? },
            TRY_LOCK => Msg::TryLock {
                object: r.str()?,
                seq: r.u64()?,
            },
            FETCH => Msg::Fetch {
                segment: r.str()?,
                have: r.u64()?,
            },
            STORE => {
                let segment = r.str()?;
                let n = r.u32()? as usize;
                let mut writes = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    writes.push((r.u64()?, r.bytes()?));
                }
                Msg::Store { segment, writes }
            }
            k => return Err(format!("unknown message kind {k}")),
        };
        r.end()?;
        Ok(msg)
    }
}

/// The answer to [`Msg::List`].
pub(crate) fn encode_list(tasks: &[Listed]) -> Bytes {
    let mut w = Writer::new(LIST).u32(tasks.len() as u32);
    for t in tasks {
        w = w
            .str(&t.origin)
            .u64(t.seq)
            .str(&t.task)
            .u8(t.cancelling as u8)
            .u64(t.running_ms);
    }
    w.done()
}

pub(crate) fn decode_list(b: Bytes) -> Result<Vec<Listed>, String> {
    let mut r = Reader { b, at: 0 };
    if r.u8()? != LIST {
        return Err("not a task list".into());
    }
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        out.push(Listed {
            origin: r.str()?,
            seq: r.u64()?,
            task: r.str()?,
            cancelling: r.bool()?,
            running_ms: r.u64()?,
        });
    }
    r.end()?;
    Ok(out)
}

/// The answer to [`Msg::Fetch`]: the version, and the bytes if the asker's are stale.
pub(crate) fn encode_fetched(version: u64, data: Option<&[u8]>) -> Bytes {
    let w = Writer(BytesMut::with_capacity(9 + data.map_or(0, <[u8]>::len))).u64(version);
    match data {
        Some(d) => w.u8(1).bytes(d),
        None => w.u8(0),
    }
    .done()
}

pub(crate) fn decode_fetched(b: Bytes) -> Result<(u64, Option<Bytes>), String> {
    let mut r = Reader { b, at: 0 };
    let version = r.u64()?;
    let data = match r.u8()? {
        0 => None,
        1 => Some(r.bytes()?),
        k => return Err(format!("{k} is not a fetch answer")),
    };
    r.end()?;
    Ok((version, data))
}

/// The answer to [`Msg::Stats`]: counters as little-endian `u64`s.
pub(crate) fn encode_counters(v: &[u64]) -> Bytes {
    let mut w = Writer::new(STATS).u32(v.len() as u32);
    for x in v {
        w = w.u64(*x);
    }
    w.done()
}

pub(crate) fn decode_counters(b: Bytes) -> Result<Vec<u64>, String> {
    let mut r = Reader { b, at: 0 };
    if r.u8()? != STATS {
        return Err("not counters".into());
    }
    let n = r.u32()? as usize;
    let v = (0..n.min(4096))
        .map(|_| r.u64())
        .collect::<Result<Vec<_>, _>>()?;
    r.end()?;
    Ok(v)
}

/// The answer to [`Msg::Rank`].
pub(crate) fn encode_rank(rank: u32) -> Bytes {
    Bytes::copy_from_slice(&rank.to_le_bytes())
}

pub(crate) fn decode_rank(b: &[u8]) -> Result<u32, String> {
    let a: [u8; 4] = b
        .try_into()
        .map_err(|_| "a rank is four bytes".to_string())?;
    Ok(u32::from_le_bytes(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-z/é]{0,12}"
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|v| Outcome::Returned(Bytes::from(v))),
            text().prop_map(Outcome::Failed),
            text().prop_map(Outcome::Panicked),
            Just(Outcome::Cancelled),
            Just(Outcome::Unknown),
        ]
    }

    fn msg() -> impl Strategy<Value = Msg> {
        prop_oneof![
            (
                any::<u64>(),
                text(),
                proptest::collection::vec(any::<u8>(), 0..40),
                any::<i64>()
            )
                .prop_map(|(seq, task, a, vt)| Msg::Run {
                    seq,
                    task,
                    args: Bytes::from(a),
                    vt
                }),
            (any::<u64>(), outcome()).prop_map(|(seq, outcome)| Msg::Exit { seq, outcome }),
            any::<u64>().prop_map(|seq| Msg::Cancel { seq }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::Lock { object, seq }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::Unlock { object, seq }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::Withdraw { object, seq }),
            (text(), any::<u64>()).prop_map(|(cond, seq)| Msg::CondWait { cond, seq }),
            (text(), any::<bool>()).prop_map(|(cond, all)| Msg::Signal { cond, all }),
            text().prop_map(|sem| Msg::Post { sem }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::Return { object, seq }),
            (text(), any::<u64>(), any::<bool>()).prop_map(|(object, seq, owner_died)| {
                Msg::Grant {
                    object,
                    seq,
                    owner_died,
                }
            }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::Wake { object, seq }),
            (any::<u64>(), text()).prop_map(|(seq, why)| Msg::Refused { seq, why }),
            (text(), any::<u32>()).prop_map(|(barrier, size)| Msg::Rank { barrier, size }),
            Just(Msg::List),
            Just(Msg::Detach),
            Just(Msg::Stats),
            any::<u64>().prop_map(|addr| Msg::Free { addr }),
            (text(), any::<u64>()).prop_map(|(object, seq)| Msg::TryLock { object, seq }),
            (text(), any::<u8>()).prop_map(|(object, kind)| Msg::Claim { object, kind }),
            (text(), any::<u64>()).prop_map(|(segment, have)| Msg::Fetch { segment, have }),
            (
                text(),
                proptest::collection::vec(
                    (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..9)),
                    0..4
                )
            )
                .prop_map(|(segment, w)| Msg::Store {
                    segment,
                    writes: w.into_iter().map(|(a, b)| (a, Bytes::from(b))).collect()
                }),
        ]
    }

    proptest! {
        #[test]
        fn messages_round_trip(m in msg()) {
            prop_assert_eq!(Msg::decode(m.encode()).unwrap(), m);
        }

        /// Any prefix of a message, or a message with bytes after it, is refused.
        #[test]
        fn cut_or_padded_messages_are_refused(m in msg(), extra in 1usize..4) {
            let b = m.encode();
            for n in 0..b.len() {
                prop_assert!(Msg::decode(b.slice(..n)).is_err());
            }
            let mut padded = b.to_vec();
            padded.extend(std::iter::repeat(0).take(extra));
            prop_assert!(Msg::decode(Bytes::from(padded)).is_err());
        }

        /// Random bytes decode to a message or an error, never a panic.
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Msg::decode(Bytes::from(b.clone()));
            let _ = decode_list(Bytes::from(b));
        }

        #[test]
        fn fetch_answers_round_trip(v in any::<u64>(), d in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20))) {
            let (got_v, got_d) = decode_fetched(encode_fetched(v, d.as_deref())).unwrap();
            prop_assert_eq!(got_v, v);
            prop_assert_eq!(got_d.map(|b| b.to_vec()), d);
        }

        #[test]
        fn lists_round_trip(v in proptest::collection::vec((text(), any::<u64>(), text(), any::<bool>(), any::<u64>()), 0..5)) {
            let list: Vec<Listed> = v.into_iter().map(|(origin, seq, task, cancelling, running_ms)| Listed { origin, seq, task, cancelling, running_ms }).collect();
            prop_assert_eq!(decode_list(encode_list(&list)).unwrap(), list);
        }
    }
}

/// Every decoder on `data`: none may panic, and what one accepts encodes to bytes that
/// decode to the same value. The fuzz target's body (`fuzz/`).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz(data: &[u8]) {
    let input = || Bytes::copy_from_slice(data);
    if let Ok(m) = Msg::decode(input()) {
        assert_eq!(Msg::decode(m.encode()), Ok(m));
    }
    if let Ok(l) = decode_list(input()) {
        assert_eq!(decode_list(encode_list(&l)), Ok(l));
    }
    if let Ok((version, fetched)) = decode_fetched(input()) {
        let again = decode_fetched(encode_fetched(version, fetched.as_deref()));
        assert_eq!(again, Ok((version, fetched)));
    }
    if let Ok(c) = decode_counters(input()) {
        assert_eq!(decode_counters(encode_counters(&c)), Ok(c));
    }
    if let Ok(r) = decode_rank(data) {
        assert_eq!(decode_rank(&encode_rank(r)), Ok(r));
    }
}
