//! What the address spaces of a distributed graph say to each other, as the argument items
//! of named code.
//!
//! A message is one byte buffer, typed [`MESSAGE`]: a kind byte and its fields. Integers are
//! little-endian; strings a `u32` length and UTF-8; a tag a `u8` count of parts, each `0`
//! and an `i64` or `1` and a string; an item its type tag (`u64`), a `u32` length and its
//! marshalled bytes, so a value arrives with the type it left with (a numpy array stays one).
//! Decoding checks every length and refuses trailing bytes; an item's bytes are a slice of
//! the received buffer, not a copy.

use bytes::{Bytes, BytesMut};
use stampede_core::{Item, TypeTag};

use crate::error::{GraphError, Unmet};
use crate::tag::{Tag, TagPart};

/// The type of a message item.
pub(crate) const MESSAGE: TypeTag = TypeTag::of_name("stampede.cnc.message");

/// Work between the spaces: each counts in the quiescence totals.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    /// Run an instance of `steps` for `tag` (`memo`: its tag collection is a set).
    Run { steps: String, tag: Tag, memo: bool },
    /// Store an item at its home.
    Put {
        items: String,
        tag: Tag,
        gets: Option<u32>,
        by: String,
        value: Item,
    },
    /// Send the item to the asking space, now or once it is put.
    Want { items: String, tag: Tag },
    /// The item a space asked for (`counted`: its gets are counted at the home).
    Copy {
        items: String,
        tag: Tag,
        counted: bool,
        value: Item,
    },
    /// The item asked for was freed after its last declared get.
    Gone { items: String, tag: Tag },
    /// `step` completed a get of a copy of a counted item.
    Got {
        items: String,
        tag: Tag,
        step: String,
    },
    /// The home freed the item: drop the copy.
    Free { items: String, tag: Tag },
}

/// Control between the environment and the others: not counted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Control {
    /// Report your state (a call); tell the asker once you are next quiet.
    Probe,
    /// A probed space became quiet.
    Idle,
    /// The graph failed in the sender.
    Failed(GraphError),
    /// Report your unmet gets (a call).
    Report,
    /// Send the item if it is here (a call).
    Fetch { items: String, tag: Tag },
    /// The run is over: stop serving (a call).
    Release,
}

/// An answer to a control call.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// A space's state for the quiescence wave.
    Status {
        quiet: bool,
        sent: u64,
        received: u64,
    },
    Unmet(Vec<Unmet>),
    Fetched(Option<Item>),
    Done,
}

const RUN: u8 = 1;
const PUT: u8 = 2;
const WANT: u8 = 3;
const COPY: u8 = 4;
const GONE: u8 = 5;
const GOT: u8 = 6;
const FREE: u8 = 7;
const PROBE: u8 = 16;
const IDLE: u8 = 17;
const FAILED: u8 = 18;
const REPORT: u8 = 19;
const FETCH: u8 = 20;
const RELEASE: u8 = 21;
const STATUS: u8 = 32;
const UNMET: u8 = 33;
const FETCHED: u8 = 34;
const DONE: u8 = 35;

const STEP_FAILED: u8 = 1;
const DUPLICATE_PUT: u8 = 2;
const FREED: u8 = 3;
const DEADLOCK: u8 = 4;
const REMOTE: u8 = 5;
const SPACE_LOST: u8 = 6;
const NO_SUCH_RANK: u8 = 7;
const NETWORK: u8 = 8;
const DISTRIBUTION: u8 = 9;
const OTHER: u8 = 255;

struct Writer(BytesMut);

impl Writer {
    fn new(kind: u8) -> Writer {
        let mut b = BytesMut::with_capacity(64);
        b.extend_from_slice(&[kind]);
        Writer(b)
    }
    fn u8(&mut self, v: u8) {
        self.0.extend_from_slice(&[v]);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn tag(&mut self, t: &Tag) {
        self.u8(t.parts().len() as u8);
        for p in t.parts() {
            match p {
                TagPart::Int(v) => {
                    self.u8(0);
                    self.0.extend_from_slice(&v.to_le_bytes());
                }
                TagPart::Str(s) => {
                    self.u8(1);
                    self.str(s);
                }
            }
        }
    }
    fn item(&mut self, i: &Item) {
        let wire = i.wire();
        self.u64(i.tag().0);
        self.u32(wire.len() as u32);
        self.0.extend_from_slice(wire);
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        match v {
            None => self.u8(0),
            Some(n) => {
                self.u8(1);
                self.u32(n);
            }
        }
    }
    fn error(&mut self, e: &GraphError) {
        match e {
            GraphError::StepFailed { step, tag, message } => {
                self.u8(STEP_FAILED);
                self.str(step);
                self.tag(tag);
                self.str(message);
            }
            GraphError::DuplicatePut {
                collection,
                tag,
                by,
            } => {
                self.u8(DUPLICATE_PUT);
                self.str(collection);
                self.tag(tag);
                self.str(by);
            }
            GraphError::Freed {
                collection,
                tag,
                step,
            } => {
                self.u8(FREED);
                self.str(collection);
                self.tag(tag);
                self.str(step);
            }
            GraphError::Deadlock(unmet) => {
                self.u8(DEADLOCK);
                self.unmet(unmet);
            }
            GraphError::Remote { space, rank, error } => {
                self.u8(REMOTE);
                self.str(space);
                self.u64(*rank as u64);
                self.error(error);
            }
            GraphError::SpaceLost { space, rank } => {
                self.u8(SPACE_LOST);
                self.str(space);
                self.u64(*rank as u64);
            }
            GraphError::NoSuchRank {
                tuner,
                tag,
                rank,
                ranks,
            } => {
                self.u8(NO_SUCH_RANK);
                self.str(tuner);
                self.tag(tag);
                self.u64(*rank as u64);
                self.u64(*ranks as u64);
            }
            GraphError::Network {
                space,
                rank,
                reason,
            } => {
                self.u8(NETWORK);
                self.str(space);
                self.u64(*rank as u64);
                self.str(reason);
            }
            GraphError::Distribution(why) => {
                self.u8(DISTRIBUTION);
                self.str(why);
            }
        }
    }
    fn unmet(&mut self, unmet: &[Unmet]) {
        self.u32(unmet.len() as u32);
        for u in unmet {
            self.str(&u.collection);
            self.tag(&u.tag);
            self.u32(u.waiting.len() as u32);
            for (s, t) in &u.waiting {
                self.str(s);
                self.tag(t);
            }
        }
    }
    fn finish(self) -> Item {
        Item::from_wire(MESSAGE, self.0.freeze())
    }
}

/// Why a message could not be read.
pub(crate) type DecodeError = String;

struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    fn open(item: &Item) -> Result<(Reader, u8), DecodeError> {
        if item.tag() != MESSAGE {
            return Err(format!(
                "an item of type {:#x}, not a message",
                item.tag().0
            ));
        }
        let mut r = Reader {
            buf: item.wire().clone(),
            pos: 0,
        };
        let kind = r.u8()?;
        Ok((r, kind))
    }
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("the message ended early")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.u64()?).map_err(|e| e.to_string())
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("a flag of {b}")),
        }
    }
    fn str(&mut self) -> Result<String, DecodeError> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| "a string that is not UTF-8".to_owned())
    }
    fn tag(&mut self) -> Result<Tag, DecodeError> {
        let n = self.u8()?;
        let mut parts = Vec::with_capacity(n as usize);
        for _ in 0..n {
            parts.push(match self.u8()? {
                0 => TagPart::Int(i64::from_le_bytes(
                    self.take(8)?.try_into().expect("8 bytes"),
                )),
                1 => TagPart::Str(self.str()?.into()),
                k => return Err(format!("a tag part of kind {k}")),
            });
        }
        Ok(Tag::new(parts))
    }
    fn item(&mut self) -> Result<Item, DecodeError> {
        let tag = TypeTag(self.u64()?);
        let n = self.u32()? as usize;
        let start = self.pos;
        self.take(n)?;
        Ok(Item::from_wire(tag, self.buf.slice(start..start + n)))
    }
    fn opt_u32(&mut self) -> Result<Option<u32>, DecodeError> {
        Ok(if self.bool()? {
            Some(self.u32()?)
        } else {
            None
        })
    }
    fn error(&mut self, depth: u8) -> Result<GraphError, DecodeError> {
        Ok(match self.u8()? {
            STEP_FAILED => GraphError::StepFailed {
                step: self.str()?,
                tag: self.tag()?,
                message: self.str()?,
            },
            DUPLICATE_PUT => GraphError::DuplicatePut {
                collection: self.str()?,
                tag: self.tag()?,
                by: self.str()?,
            },
            FREED => GraphError::Freed {
                collection: self.str()?,
                tag: self.tag()?,
                step: self.str()?,
            },
            DEADLOCK => GraphError::Deadlock(self.unmet()?),
            REMOTE if depth < 4 => GraphError::Remote {
                space: self.str()?,
                rank: self.usize()?,
                error: Box::new(self.error(depth + 1)?),
            },
            SPACE_LOST => GraphError::SpaceLost {
                space: self.str()?,
                rank: self.usize()?,
            },
            NO_SUCH_RANK => GraphError::NoSuchRank {
                tuner: self.str()?,
                tag: self.tag()?,
                rank: self.usize()?,
                ranks: self.usize()?,
            },
            NETWORK => GraphError::Network {
                space: self.str()?,
                rank: self.usize()?,
                reason: self.str()?,
            },
            DISTRIBUTION | OTHER => GraphError::Distribution(self.str()?),
            k => return Err(format!("an error of kind {k}")),
        })
    }
    fn unmet(&mut self) -> Result<Vec<Unmet>, DecodeError> {
        let n = self.u32()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let collection = self.str()?;
            let tag = self.tag()?;
            let w = self.u32()?;
            let mut waiting = Vec::new();
            for _ in 0..w {
                waiting.push((self.str()?, self.tag()?));
            }
            out.push(Unmet {
                collection,
                tag,
                waiting,
            });
        }
        Ok(out)
    }
    fn end<T>(self, v: T) -> Result<T, DecodeError> {
        match self.buf.len() - self.pos {
            0 => Ok(v),
            n => Err(format!("{n} bytes after the message")),
        }
    }
}

impl Work {
    pub(crate) fn encode(&self) -> Item {
        match self {
            Work::Run { steps, tag, memo } => {
                let mut w = Writer::new(RUN);
                w.str(steps);
                w.tag(tag);
                w.u8(u8::from(*memo));
                w.finish()
            }
            Work::Put {
                items,
                tag,
                gets,
                by,
                value,
            } => {
                let mut w = Writer::new(PUT);
                w.str(items);
                w.tag(tag);
                w.opt_u32(*gets);
                w.str(by);
                w.item(value);
                w.finish()
            }
            Work::Want { items, tag } => {
                let mut w = Writer::new(WANT);
                w.str(items);
                w.tag(tag);
                w.finish()
            }
            Work::Copy {
                items,
                tag,
                counted,
                value,
            } => {
                let mut w = Writer::new(COPY);
                w.str(items);
                w.tag(tag);
                w.u8(u8::from(*counted));
                w.item(value);
                w.finish()
            }
            Work::Gone { items, tag } => {
                let mut w = Writer::new(GONE);
                w.str(items);
                w.tag(tag);
                w.finish()
            }
            Work::Got { items, tag, step } => {
                let mut w = Writer::new(GOT);
                w.str(items);
                w.tag(tag);
                w.str(step);
                w.finish()
            }
            Work::Free { items, tag } => {
                let mut w = Writer::new(FREE);
                w.str(items);
                w.tag(tag);
                w.finish()
            }
        }
    }

    pub(crate) fn decode(item: &Item) -> Result<Work, DecodeError> {
        let (mut r, kind) = Reader::open(item)?;
        let m = match kind {
            RUN => Work::Run {
                steps: r.str()?,
                tag: r.tag()?,
                memo: r.bool()?,
            },
            PUT => Work::Put {
                items: r.str()?,
                tag: r.tag()?,
                gets: r.opt_u32()?,
                by: r.str()?,
                value: r.item()?,
            },
            WANT => Work::Want {
                items: r.str()?,
                tag: r.tag()?,
            },
            COPY => Work::Copy {
                items: r.str()?,
                tag: r.tag()?,
                counted: r.bool()?,
                value: r.item()?,
            },
            GONE => Work::Gone {
                items: r.str()?,
                tag: r.tag()?,
            },
            GOT => Work::Got {
                items: r.str()?,
                tag: r.tag()?,
                step: r.str()?,
            },
            FREE => Work::Free {
                items: r.str()?,
                tag: r.tag()?,
            },
            k => return Err(format!("a work message of kind {k}")),
        };
        r.end(m)
    }
}

impl Control {
    pub(crate) fn encode(&self) -> Item {
        match self {
            Control::Probe => Writer::new(PROBE).finish(),
            Control::Idle => Writer::new(IDLE).finish(),
            Control::Failed(e) => {
                let mut w = Writer::new(FAILED);
                w.error(e);
                w.finish()
            }
            Control::Report => Writer::new(REPORT).finish(),
            Control::Fetch { items, tag } => {
                let mut w = Writer::new(FETCH);
                w.str(items);
                w.tag(tag);
                w.finish()
            }
            Control::Release => Writer::new(RELEASE).finish(),
        }
    }

    pub(crate) fn decode(item: &Item) -> Result<Control, DecodeError> {
        let (mut r, kind) = Reader::open(item)?;
        let m = match kind {
            PROBE => Control::Probe,
            IDLE => Control::Idle,
            FAILED => Control::Failed(r.error(0)?),
            REPORT => Control::Report,
            FETCH => Control::Fetch {
                items: r.str()?,
                tag: r.tag()?,
            },
            RELEASE => Control::Release,
            k => return Err(format!("a control message of kind {k}")),
        };
        r.end(m)
    }
}

impl Reply {
    pub(crate) fn encode(&self) -> Item {
        match self {
            Reply::Status {
                quiet,
                sent,
                received,
            } => {
                let mut w = Writer::new(STATUS);
                w.u8(u8::from(*quiet));
                w.u64(*sent);
                w.u64(*received);
                w.finish()
            }
            Reply::Unmet(unmet) => {
                let mut w = Writer::new(UNMET);
                w.unmet(unmet);
                w.finish()
            }
            Reply::Fetched(item) => {
                let mut w = Writer::new(FETCHED);
                match item {
                    None => w.u8(0),
                    Some(i) => {
                        w.u8(1);
                        w.item(i);
                    }
                }
                w.finish()
            }
            Reply::Done => Writer::new(DONE).finish(),
        }
    }

    pub(crate) fn decode(item: &Item) -> Result<Reply, DecodeError> {
        let (mut r, kind) = Reader::open(item)?;
        let m = match kind {
            STATUS => Reply::Status {
                quiet: r.bool()?,
                sent: r.u64()?,
                received: r.u64()?,
            },
            UNMET => Reply::Unmet(r.unmet()?),
            FETCHED => Reply::Fetched(if r.bool()? { Some(r.item()?) } else { None }),
            DONE => Reply::Done,
            k => return Err(format!("a reply of kind {k}")),
        };
        r.end(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_core::NdArray;

    /// Decoded, a message encodes to the same bytes.
    fn round_work(m: Work) {
        let sent = m.encode();
        let back = Work::decode(&sent).unwrap();
        assert_eq!(back.encode().wire(), sent.wire(), "{m:?}");
    }

    #[test]
    fn messages_survive_the_round_trip_with_their_items_typed() {
        let tile = Item::from(NdArray::from_slice(&[2, 2], &[1.0f64, 2.0, 3.0, 4.0]).unwrap());
        let tag = Tag::new([TagPart::Int(-3), TagPart::Str("é".into()), TagPart::Int(9)]);
        let run = Work::Run {
            steps: "potrf".into(),
            tag: tag.clone(),
            memo: true,
        };
        match Work::decode(&run.encode()).unwrap() {
            Work::Run {
                steps,
                tag: t,
                memo,
            } => assert_eq!((steps.as_str(), &t, memo), ("potrf", &tag, true)),
            other => panic!("{other:?}"),
        }
        let put = Work::Put {
            items: "lkji".into(),
            tag: tag.clone(),
            gets: Some(3),
            by: "environment".into(),
            value: tile.clone(),
        };
        let back = Work::decode(&put.encode()).unwrap();
        let Work::Put { value, .. } = &back else {
            panic!("{back:?}")
        };
        assert_eq!(value.tag(), tile.tag());
        assert_eq!(value.decode::<NdArray>().unwrap().shape(), &[2, 2]);
        round_work(Work::Copy {
            items: "x".into(),
            tag: Tag::from(1),
            counted: false,
            value: Item::from(vec![1u8, 2, 3]),
        });
        for m in [
            Work::Want {
                items: "x".into(),
                tag: Tag::default(),
            },
            Work::Gone {
                items: "x".into(),
                tag: Tag::from(2),
            },
            Work::Got {
                items: "x".into(),
                tag: Tag::from(2),
                step: "s".into(),
            },
            Work::Free {
                items: "x".into(),
                tag: Tag::from(2),
            },
        ] {
            round_work(m);
        }
        let failed = Control::Failed(GraphError::Remote {
            space: "abc".into(),
            rank: 1,
            error: Box::new(GraphError::StepFailed {
                step: "s".into(),
                tag: tag.clone(),
                message: "no".into(),
            }),
        });
        assert_eq!(Control::decode(&failed.encode()), Ok(failed));
        let unmet = Reply::Unmet(vec![Unmet {
            collection: "x".into(),
            tag,
            waiting: vec![("s".into(), Tag::from(4))],
        }]);
        let sent = unmet.encode();
        let back = Reply::decode(&sent).unwrap();
        assert!(matches!(&back, Reply::Unmet(u) if u[0].waiting[0].0 == "s"));
        assert_eq!(back.encode().wire(), sent.wire());
    }

    #[test]
    fn bad_messages_are_refused() {
        let whole = Work::Got {
            items: "x".into(),
            tag: Tag::from(2),
            step: "s".into(),
        }
        .encode();
        let bytes = whole.wire().clone();
        for n in 0..bytes.len() {
            let cut = Item::from_wire(MESSAGE, bytes.slice(..n));
            assert!(Work::decode(&cut).is_err(), "a prefix of {n}");
        }
        let mut long = bytes.to_vec();
        long.push(0);
        assert!(Work::decode(&Item::from_wire(MESSAGE, long.into())).is_err());
        assert!(
            Work::decode(&Item::from(vec![1u8])).is_err(),
            "not a message"
        );
        assert!(Control::decode(&whole).is_err(), "work is no control");
    }
}

/// Every decoder on `data` as a message item: none may panic, and what one accepts encodes
/// to an item that decodes and encodes again to the same bytes. The fuzz target's body
/// (`fuzz/`).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz(data: &[u8]) {
    let item = Item::from_wire(MESSAGE, bytes::Bytes::copy_from_slice(data));
    let stable = |once: Item, again: Item| assert_eq!(once.wire(), again.wire());
    if let Ok(w) = Work::decode(&item) {
        let once = w.encode();
        let again = Work::decode(&once).expect("an encoded message decodes");
        stable(once, again.encode());
    }
    if let Ok(c) = Control::decode(&item) {
        let once = c.encode();
        let again = Control::decode(&once).expect("an encoded message decodes");
        assert_eq!(again, c);
        stable(once, again.encode());
    }
    if let Ok(r) = Reply::decode(&item) {
        let once = r.encode();
        let again = Reply::decode(&once).expect("an encoded message decodes");
        stable(once, again.encode());
    }
}
