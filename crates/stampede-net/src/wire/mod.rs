//! The message format of STM operations inside Zenoh payloads.
//!
//! Every message starts with the magic bytes `SP`, a format version and a message code;
//! integers are little-endian and fixed-width; strings are a `u16` length and UTF-8; an item
//! is its type tag (`u64`) and a `u32` length followed by its marshalled bytes, always last
//! so that a receiver can keep them without copying. Any violation (short buffer, unknown
//! code, bad UTF-8, trailing bytes, lengths beyond the buffer) is a [`DecodeError`]; a
//! decoder never panics and never allocates more than the input's size. See
//! `docs/wire-format.md` for the table of messages.
//!
//! Private to the crate: other crates see only [`NameRecord`] and [`Kind`]. The fuzz target
//! reaches it through the `fuzzing` feature, which is why its items are `pub`.
#![allow(unreachable_pub)]

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use stampede_core::{Selector, Timestamp, TypeTag, Wait};

/// The first two bytes of every message.
pub const MAGIC: [u8; 2] = *b"SP";
/// The format version this build speaks. A message of another version gets an error reply.
pub const VERSION: u8 = 6;

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The message ended early.
    Truncated,
    /// The message does not start with [`MAGIC`].
    BadMagic,
    /// The message is of another format version.
    Version(u8),
    /// An unknown message, selector or wait code.
    UnknownCode(&'static str, u8),
    /// A string is not UTF-8.
    BadUtf8,
    /// Bytes remain after the message.
    Trailing(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("message truncated"),
            DecodeError::BadMagic => f.write_str("not a Stampede message (bad magic)"),
            DecodeError::Version(v) => {
                write!(f, "message format version {v}, this build speaks {VERSION}")
            }
            DecodeError::UnknownCode(what, c) => write!(f, "unknown {what} code {c}"),
            DecodeError::BadUtf8 => f.write_str("string is not UTF-8"),
            DecodeError::Trailing(n) => write!(f, "{n} bytes after the message"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The task an operation acts for: its address space, its id there and its time zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRef {
    /// The address space of the task.
    pub space: String,
    /// The task's id in its address space.
    pub task: u64,
    /// The task's time zone.
    pub zone: u32,
}

/// A marshalled item: its type tag and bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireItem {
    /// The item's type.
    pub tag: TypeTag,
    /// The marshalled bytes.
    pub data: Bytes,
}

/// An operation sent to the address space that owns a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Attach an input (`input`) or output connection; rule 3 uses `vis`.
    Attach {
        /// The acting task.
        task: TaskRef,
        /// The container.
        container: u64,
        /// Input rather than output.
        input: bool,
        /// The task's visibility.
        vis: Timestamp,
    },
    /// Drop a connection.
    Detach {
        /// The acting task.
        task: TaskRef,
        /// The connection.
        conn: u64,
    },
    /// Put into a channel or queue, or write a register.
    Put {
        /// The acting task.
        task: TaskRef,
        /// The output connection.
        conn: u64,
        /// The task's visibility.
        vis: Timestamp,
        /// The timestamp (ignored by registers).
        ts: Timestamp,
        /// The reference count, 0 for none.
        consumers: u32,
        /// How long the owner may wait for space.
        wait: Wait,
        /// The item.
        item: WireItem,
    },
    /// Get from a channel (`sel`), a queue or a register (`sel` ignored).
    Get {
        /// The acting task.
        task: TaskRef,
        /// The input connection.
        conn: u64,
        /// Which item.
        sel: Selector,
        /// How long the owner may wait.
        wait: Wait,
        /// Timestamps whose items the requester has cached: the reply omits their bytes.
        cached: Vec<Timestamp>,
    },
    /// Get from a queue, then take up to `more` further waiting items at once: the owner
    /// answers with one `Item` reply per item (the first as a `Get` would be answered), and
    /// the items stay held by the connection until consumed or it detaches (a *lease*).
    Take {
        /// The acting task.
        task: TaskRef,
        /// The input connection.
        conn: u64,
        /// How long the owner may wait for the first item.
        wait: Wait,
        /// How many more items to take if they are waiting.
        more: u32,
    },
    /// Consume a channel item (`until`: and everything below) or free a queue item (`ts`
    /// is the ticket).
    Consume {
        /// The acting task.
        task: TaskRef,
        /// The input connection.
        conn: u64,
        /// Timestamp, or queue ticket.
        ts: Timestamp,
        /// `consume_until` rather than `consume`.
        until: bool,
    },
    /// Close the container.
    Close {
        /// The container.
        container: u64,
    },
    /// Report what holds the watermark of `zone`.
    Explain {
        /// The zone.
        zone: u32,
    },
    /// Create a container owned by the receiver (a name registers it application-wide).
    Create {
        /// Channel, queue or register.
        kind: Kind,
        /// Its name; empty for none.
        name: String,
        /// Its time zone.
        zone: u32,
        /// Its capacity; 0 for unbounded.
        capacity: u64,
        /// Metadata published with the name.
        meta: String,
    },
    /// Forward `event`s of `container` to the address space `space`, until unsubscribed or
    /// `space` leaves.
    Subscribe {
        /// The subscribing address space.
        space: String,
        /// The container.
        container: u64,
        /// Which events.
        event: EventKind,
    },
    /// Report the channel items visible on an input connection above `after` (for a
    /// correlator).
    Visible {
        /// The acting task.
        task: TaskRef,
        /// The input connection.
        conn: u64,
        /// Only timestamps above this one, if any.
        after: Option<Timestamp>,
    },
    /// A get the requester answered itself from the items it was sent: the owner applies it
    /// to the connection (its last get, the item open on it). Sent without waiting.
    Seen {
        /// The acting task.
        task: TaskRef,
        /// The input connection.
        conn: u64,
        /// The selector the get used.
        sel: Selector,
        /// The item it selected; on a register connection, the write number it read.
        ts: Timestamp,
    },
    /// Stop forwarding `event`s of `container` to `space`.
    Unsubscribe {
        /// The subscribing address space.
        space: String,
        /// The container.
        container: u64,
        /// Which events.
        event: EventKind,
    },
}

/// What an owner forwards to subscribed address spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// An item was put (its timestamp).
    Arrival,
    /// An item was reclaimed (its timestamp and the item).
    Garbage,
}

impl EventKind {
    fn code(self) -> u8 {
        match self {
            EventKind::Arrival => 0,
            EventKind::Garbage => 1,
        }
    }
    fn from_code(c: u8) -> Result<EventKind, DecodeError> {
        match c {
            0 => Ok(EventKind::Arrival),
            1 => Ok(EventKind::Garbage),
            c => Err(DecodeError::UnknownCode("event", c)),
        }
    }
}

/// What a [`Reply::Error`] reports: a failure of the operation, by the core's stable
/// [`stampede_core::ErrorCode`] (so it is rebuilt at the requester exactly as the owner's
/// core reported it), or a failure of the exchange itself. `a` and `b` carry the figures
/// the code names (see [`stampede_core::Figures`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The operation failed; the core's code, on the wire as its number (1 to 199).
    Stm(stampede_core::ErrorCode),
    /// A malformed request (the text says why): 200.
    Malformed,
    /// No such container here: 201.
    UnknownContainer,
    /// No such connection here (detached, or the session expired): 202.
    UnknownConnection,
    /// Any other failure (the text says what): 255.
    Other,
}

impl ErrorCode {
    fn to_u8(self) -> u8 {
        match self {
            ErrorCode::Stm(c) => c as u8,
            ErrorCode::Malformed => 200,
            ErrorCode::UnknownContainer => 201,
            ErrorCode::UnknownConnection => 202,
            ErrorCode::Other => 255,
        }
    }

    fn from_u8(c: u8) -> Result<Self, DecodeError> {
        Ok(match c {
            200 => ErrorCode::Malformed,
            201 => ErrorCode::UnknownContainer,
            202 => ErrorCode::UnknownConnection,
            255 => ErrorCode::Other,
            c => ErrorCode::Stm(
                stampede_core::ErrorCode::from_u8(c).ok_or(DecodeError::UnknownCode("error", c))?,
            ),
        })
    }
}

/// The owner's answer to a [`Request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done, nothing to return.
    Ok,
    /// A new connection.
    Attached {
        /// Its id at the owner.
        conn: u64,
    },
    /// A put was stored; the queue ticket, the register sequence number, or the channel's
    /// arrival number (see [`Push`]) once it was stored.
    Stored {
        /// Ticket, sequence number or arrival number.
        seq: u64,
        /// The version of the owner's marks message that covers the stored item (see
        /// [`Marks`]).
        marks: u64,
    },
    /// A gotten item. `item` is `None` when the request said it was cached.
    Item {
        /// Its timestamp.
        ts: Timestamp,
        /// Queue ticket, register sequence number, or the channel's arrival number (see
        /// [`Push`]) when the get was answered.
        seq: u64,
        /// The owner's floor: cached items below it can be dropped.
        floor: Timestamp,
        /// The item, unless cached by the requester.
        item: Option<WireItem>,
    },
    /// The owner waited as long as it waits in one piece; ask again.
    Again,
    /// The operation failed.
    Error {
        /// What failed.
        code: ErrorCode,
        /// First figure.
        a: i64,
        /// Second figure.
        b: i64,
        /// Details for people.
        text: String,
    },
    /// The items visible on a connection, ascending, and whether the channel is closed.
    Visible {
        /// The channel is closed.
        closed: bool,
        /// The channel's arrival number (see [`Push`]) read before the timestamps were.
        seq: u64,
        /// Visible timestamps, ascending.
        timestamps: Vec<Timestamp>,
    },
    /// A container was created.
    Created {
        /// Its id at the owner.
        container: u64,
    },
    /// A watermark explanation.
    Explain {
        /// The local mark.
        local: Timestamp,
        /// The floor.
        floor: Timestamp,
        /// The watermark.
        watermark: Timestamp,
        /// One line per term.
        text: String,
    },
}

impl Reply {
    /// An error reply without figures.
    pub fn error(code: ErrorCode, text: impl Into<String>) -> Reply {
        Reply::Error {
            code,
            a: 0,
            b: 0,
            text: text.into(),
        }
    }
}

impl Reply {
    /// The error reply for a failure the owner's core reported.
    pub fn failure(
        code: stampede_core::ErrorCode,
        (a, b): stampede_core::Figures,
        text: String,
    ) -> Reply {
        Reply::Error {
            code: ErrorCode::Stm(code),
            a,
            b,
            text,
        }
    }
}

// Message codes.
const REQ_ATTACH: u8 = 1;
const REQ_DETACH: u8 = 2;
// 3 was version 2's TaskExit: an owner now drops a proxy with its last connection.
const REQ_PUT: u8 = 4;
const REQ_GET: u8 = 5;
const REQ_CONSUME: u8 = 6;
const REQ_CLOSE: u8 = 7;
const REQ_EXPLAIN: u8 = 8;
const REQ_CREATE: u8 = 9;
const REQ_SUBSCRIBE: u8 = 10;
const REQ_UNSUBSCRIBE: u8 = 11;
const REQ_VISIBLE: u8 = 12;
const REQ_SEEN: u8 = 13;
const REQ_TAKE: u8 = 14;
const REP_OK: u8 = 64;
const REP_ATTACHED: u8 = 65;
const REP_STORED: u8 = 66;
const REP_ITEM: u8 = 67;
const REP_AGAIN: u8 = 68;
const REP_ERROR: u8 = 69;
const REP_EXPLAIN: u8 = 70;
const REP_CREATED: u8 = 71;
const REP_VISIBLE: u8 = 72;

/// At most this many cached timestamps travel with a get.
pub const MAX_CACHED: usize = 64;

struct Writer(BytesMut);

impl Writer {
    fn new(code: u8, extra: usize) -> Writer {
        let mut b = BytesMut::with_capacity(64 + extra);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&[VERSION, code]);
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
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        // Longer strings are cut at a character boundary: they are names and messages.
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.0.extend_from_slice(&(end as u16).to_le_bytes());
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
    fn task(&mut self, t: &TaskRef) {
        self.str(&t.space);
        self.u64(t.task);
        self.u32(t.zone);
    }
    fn wait(&mut self, w: Wait) {
        match w {
            Wait::Never => self.u8(0),
            Wait::Forever => self.u8(1),
            Wait::For(d) => {
                self.u8(2);
                self.u64(d.as_micros().min(u64::MAX as u128) as u64);
            }
        }
    }
    fn selector(&mut self, s: Selector) {
        match s {
            Selector::Exact(t) => {
                self.u8(0);
                self.i64(t);
            }
            Selector::Oldest => self.u8(1),
            Selector::Newest => self.u8(2),
            Selector::NewestUnseen => self.u8(3),
            Selector::NextUnseen => self.u8(4),
        }
    }
    /// The item header; the bytes follow as the message's tail.
    fn item_header(&mut self, i: &WireItem) {
        self.u64(i.tag.0);
        self.u32(i.data.len() as u32);
    }
    /// A `bool` present flag, then the item header if present.
    fn opt_item_header(&mut self, i: Option<&WireItem>) {
        self.u8(u8::from(i.is_some()));
        if let Some(i) = i {
            self.item_header(i);
        }
    }
}

/// An encoded message: a header and, for messages that carry an item, its bytes. Sending
/// them as two slices lets large items travel without a copy into the header.
#[derive(Clone, Debug)]
pub struct Encoded {
    /// Everything before the item's bytes.
    pub head: Bytes,
    /// The item's bytes, if any.
    pub tail: Option<Bytes>,
}

impl From<Bytes> for Encoded {
    fn from(head: Bytes) -> Encoded {
        Encoded { head, tail: None }
    }
}

impl From<Vec<u8>> for Encoded {
    fn from(v: Vec<u8>) -> Encoded {
        Bytes::from(v).into()
    }
}

impl Encoded {
    /// Both parts in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = self.head.to_vec();
        if let Some(t) = &self.tail {
            v.extend_from_slice(t);
        }
        v
    }
}

fn finish(w: Writer, tail: Option<&WireItem>) -> Encoded {
    Encoded {
        head: w.0.freeze(),
        tail: tail.map(|i| i.data.clone()),
    }
}

/// Encodes a request.
pub fn encode_request(r: &Request) -> Encoded {
    match r {
        Request::Attach {
            task,
            container,
            input,
            vis,
        } => {
            let mut w = Writer::new(REQ_ATTACH, 0);
            w.task(task);
            w.u64(*container);
            w.u8(u8::from(*input));
            w.i64(*vis);
            finish(w, None)
        }
        Request::Detach { task, conn } => {
            let mut w = Writer::new(REQ_DETACH, 0);
            w.task(task);
            w.u64(*conn);
            finish(w, None)
        }
        Request::Put {
            task,
            conn,
            vis,
            ts,
            consumers,
            wait,
            item,
        } => {
            let mut w = Writer::new(REQ_PUT, 0);
            w.task(task);
            w.u64(*conn);
            w.i64(*vis);
            w.i64(*ts);
            w.u32(*consumers);
            w.wait(*wait);
            w.item_header(item);
            finish(w, Some(item))
        }
        Request::Get {
            task,
            conn,
            sel,
            wait,
            cached,
        } => {
            let n = cached.len().min(MAX_CACHED);
            let mut w = Writer::new(REQ_GET, n * 8);
            w.task(task);
            w.u64(*conn);
            w.selector(*sel);
            w.wait(*wait);
            w.u8(n as u8);
            for &t in &cached[..n] {
                w.i64(t);
            }
            finish(w, None)
        }
        Request::Take {
            task,
            conn,
            wait,
            more,
        } => {
            let mut w = Writer::new(REQ_TAKE, 0);
            w.task(task);
            w.u64(*conn);
            w.wait(*wait);
            w.u32(*more);
            finish(w, None)
        }
        Request::Consume {
            task,
            conn,
            ts,
            until,
        } => {
            let mut w = Writer::new(REQ_CONSUME, 0);
            w.task(task);
            w.u64(*conn);
            w.i64(*ts);
            w.u8(u8::from(*until));
            finish(w, None)
        }
        Request::Close { container } => {
            let mut w = Writer::new(REQ_CLOSE, 0);
            w.u64(*container);
            finish(w, None)
        }
        Request::Explain { zone } => {
            let mut w = Writer::new(REQ_EXPLAIN, 0);
            w.u32(*zone);
            finish(w, None)
        }
        Request::Visible { task, conn, after } => {
            let mut w = Writer::new(REQ_VISIBLE, 0);
            w.task(task);
            w.u64(*conn);
            w.u8(u8::from(after.is_some()));
            if let Some(a) = after {
                w.i64(*a);
            }
            finish(w, None)
        }
        Request::Seen {
            task,
            conn,
            sel,
            ts,
        } => {
            let mut w = Writer::new(REQ_SEEN, 0);
            w.task(task);
            w.u64(*conn);
            w.selector(*sel);
            w.i64(*ts);
            finish(w, None)
        }
        Request::Create {
            kind,
            name,
            zone,
            capacity,
            meta,
        } => {
            let mut w = Writer::new(REQ_CREATE, name.len() + meta.len());
            w.u8(kind.code());
            w.str(name);
            w.u32(*zone);
            w.u64(*capacity);
            w.str(meta);
            finish(w, None)
        }
        Request::Subscribe {
            space,
            container,
            event,
        }
        | Request::Unsubscribe {
            space,
            container,
            event,
        } => {
            let code = if matches!(r, Request::Subscribe { .. }) {
                REQ_SUBSCRIBE
            } else {
                REQ_UNSUBSCRIBE
            };
            let mut w = Writer::new(code, space.len());
            w.str(space);
            w.u64(*container);
            w.u8(event.code());
            finish(w, None)
        }
    }
}

/// Encodes a reply.
pub fn encode_reply(r: &Reply) -> Encoded {
    match r {
        Reply::Ok => finish(Writer::new(REP_OK, 0), None),
        Reply::Again => finish(Writer::new(REP_AGAIN, 0), None),
        Reply::Attached { conn } => {
            let mut w = Writer::new(REP_ATTACHED, 0);
            w.u64(*conn);
            finish(w, None)
        }
        Reply::Stored { seq, marks } => {
            let mut w = Writer::new(REP_STORED, 0);
            w.u64(*seq);
            w.u64(*marks);
            finish(w, None)
        }
        Reply::Created { container } => {
            let mut w = Writer::new(REP_CREATED, 0);
            w.u64(*container);
            finish(w, None)
        }
        Reply::Visible {
            closed,
            seq,
            timestamps,
        } => {
            let n = timestamps.len().min(u32::MAX as usize);
            let mut w = Writer::new(REP_VISIBLE, n * 8);
            w.u8(u8::from(*closed));
            w.u64(*seq);
            w.u32(n as u32);
            for &t in &timestamps[..n] {
                w.i64(t);
            }
            finish(w, None)
        }
        Reply::Item {
            ts,
            seq,
            floor,
            item,
        } => {
            let mut w = Writer::new(REP_ITEM, 0);
            w.i64(*ts);
            w.u64(*seq);
            w.i64(*floor);
            w.opt_item_header(item.as_ref());
            finish(w, item.as_ref())
        }
        Reply::Error { code, a, b, text } => {
            let mut w = Writer::new(REP_ERROR, text.len());
            w.u8(code.to_u8());
            w.i64(*a);
            w.i64(*b);
            w.str(text);
            finish(w, None)
        }
        Reply::Explain {
            local,
            floor,
            watermark,
            text,
        } => {
            let mut w = Writer::new(REP_EXPLAIN, text.len());
            w.i64(*local);
            w.i64(*floor);
            w.i64(*watermark);
            w.str(text);
            finish(w, None)
        }
    }
}

struct Reader {
    buf: Bytes,
    pos: usize,
    /// An item's bytes received apart from the rest of the message.
    tail: Option<Bytes>,
}

impl Reader {
    /// Checks the magic and version; returns the reader and the message code.
    fn open(msg: impl Into<Encoded>) -> Result<(Reader, u8), DecodeError> {
        let Encoded { head, tail } = msg.into();
        let mut r = Reader {
            buf: head,
            pos: 0,
            tail,
        };
        if r.take(2)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let v = r.u8()?;
        if v != VERSION {
            return Err(DecodeError::Version(v));
        }
        let code = r.u8()?;
        Ok((r, code))
    }
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        if end > self.buf.len() {
            // The parts were split elsewhere than before an item's bytes: join them.
            if let Some(t) = self.tail.take() {
                let mut joined = BytesMut::with_capacity(self.buf.len() + t.len());
                joined.extend_from_slice(&self.buf);
                joined.extend_from_slice(&t);
                self.buf = joined.freeze();
            }
        }
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            c => Err(DecodeError::UnknownCode("flag", c)),
        }
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn str(&mut self) -> Result<String, DecodeError> {
        let n = u16::from_le_bytes(self.array()?) as usize;
        let s = self.take(n)?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8)
    }
    fn task(&mut self) -> Result<TaskRef, DecodeError> {
        Ok(TaskRef {
            space: self.str()?,
            task: self.u64()?,
            zone: self.u32()?,
        })
    }
    fn wait(&mut self) -> Result<Wait, DecodeError> {
        Ok(match self.u8()? {
            0 => Wait::Never,
            1 => Wait::Forever,
            2 => Wait::For(Duration::from_micros(self.u64()?)),
            c => return Err(DecodeError::UnknownCode("wait", c)),
        })
    }
    fn selector(&mut self) -> Result<Selector, DecodeError> {
        Ok(match self.u8()? {
            0 => Selector::Exact(self.i64()?),
            1 => Selector::Oldest,
            2 => Selector::Newest,
            3 => Selector::NewestUnseen,
            4 => Selector::NextUnseen,
            c => return Err(DecodeError::UnknownCode("selector", c)),
        })
    }
    /// An item: header, then its bytes as a zero-copy slice of the message (or the part
    /// received apart, when the header ends the first part).
    fn item(&mut self) -> Result<WireItem, DecodeError> {
        let tag = TypeTag(self.u64()?);
        let n = self.u32()? as usize;
        if self.pos == self.buf.len() {
            if let Some(t) = self.tail.take_if(|t| t.len() == n) {
                return Ok(WireItem { tag, data: t });
            }
        }
        let start = self.pos;
        self.take(n)?;
        Ok(WireItem {
            tag,
            data: self.buf.slice(start..start + n),
        })
    }
    /// An item after a `bool` present flag.
    fn opt_item(&mut self) -> Result<Option<WireItem>, DecodeError> {
        if self.bool()? {
            self.item().map(Some)
        } else {
            Ok(None)
        }
    }
    fn end<T>(self, v: T) -> Result<T, DecodeError> {
        match self.buf.len() - self.pos + self.tail.map_or(0, |t| t.len()) {
            0 => Ok(v),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// Decodes a request; item bytes are slices of `buf`.
pub fn decode_request(buf: impl Into<Encoded>) -> Result<Request, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    let req = match code {
        REQ_ATTACH => Request::Attach {
            task: r.task()?,
            container: r.u64()?,
            input: r.bool()?,
            vis: r.i64()?,
        },
        REQ_DETACH => Request::Detach {
            task: r.task()?,
            conn: r.u64()?,
        },
        REQ_PUT => Request::Put {
            task: r.task()?,
            conn: r.u64()?,
            vis: r.i64()?,
            ts: r.i64()?,
            consumers: r.u32()?,
            wait: r.wait()?,
            item: r.item()?,
        },
        REQ_GET => {
            let task = r.task()?;
            let conn = r.u64()?;
            let sel = r.selector()?;
            let wait = r.wait()?;
            let n = r.u8()? as usize;
            if n > MAX_CACHED {
                return Err(DecodeError::UnknownCode("cached count", n as u8));
            }
            let mut cached = Vec::with_capacity(n);
            for _ in 0..n {
                cached.push(r.i64()?);
            }
            Request::Get {
                task,
                conn,
                sel,
                wait,
                cached,
            }
        }
        REQ_TAKE => Request::Take {
            task: r.task()?,
            conn: r.u64()?,
            wait: r.wait()?,
            more: r.u32()?,
        },
        REQ_CONSUME => Request::Consume {
            task: r.task()?,
            conn: r.u64()?,
            ts: r.i64()?,
            until: r.bool()?,
        },
        REQ_CLOSE => Request::Close {
            container: r.u64()?,
        },
        REQ_EXPLAIN => Request::Explain { zone: r.u32()? },
        REQ_CREATE => Request::Create {
            kind: kind_from_code(r.u8()?)?,
            name: r.str()?,
            zone: r.u32()?,
            capacity: r.u64()?,
            meta: r.str()?,
        },
        REQ_SUBSCRIBE => Request::Subscribe {
            space: r.str()?,
            container: r.u64()?,
            event: EventKind::from_code(r.u8()?)?,
        },
        REQ_VISIBLE => Request::Visible {
            task: r.task()?,
            conn: r.u64()?,
            after: if r.bool()? { Some(r.i64()?) } else { None },
        },
        REQ_SEEN => Request::Seen {
            task: r.task()?,
            conn: r.u64()?,
            sel: r.selector()?,
            ts: r.i64()?,
        },
        REQ_UNSUBSCRIBE => Request::Unsubscribe {
            space: r.str()?,
            container: r.u64()?,
            event: EventKind::from_code(r.u8()?)?,
        },
        c => return Err(DecodeError::UnknownCode("request", c)),
    };
    r.end(req)
}

/// Decodes a reply; item bytes are slices of `buf`.
pub fn decode_reply(buf: impl Into<Encoded>) -> Result<Reply, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    let rep = match code {
        REP_OK => Reply::Ok,
        REP_AGAIN => Reply::Again,
        REP_ATTACHED => Reply::Attached { conn: r.u64()? },
        REP_STORED => Reply::Stored {
            seq: r.u64()?,
            marks: r.u64()?,
        },
        REP_CREATED => Reply::Created {
            container: r.u64()?,
        },
        REP_VISIBLE => {
            let closed = r.bool()?;
            let seq = r.u64()?;
            let n = r.u32()? as usize;
            // Sized by the bytes present, not by the count claimed.
            let mut timestamps = Vec::with_capacity(n.min((r.buf.len() - r.pos) / 8));
            for _ in 0..n {
                timestamps.push(r.i64()?);
            }
            Reply::Visible {
                closed,
                seq,
                timestamps,
            }
        }
        REP_ITEM => {
            let ts = r.i64()?;
            let seq = r.u64()?;
            let floor = r.i64()?;
            let item = r.opt_item()?;
            Reply::Item {
                ts,
                seq,
                floor,
                item,
            }
        }
        REP_ERROR => Reply::Error {
            code: ErrorCode::from_u8(r.u8()?)?,
            a: r.i64()?,
            b: r.i64()?,
            text: r.str()?,
        },
        REP_EXPLAIN => Reply::Explain {
            local: r.i64()?,
            floor: r.i64()?,
            watermark: r.i64()?,
            text: r.str()?,
        },
        c => return Err(DecodeError::UnknownCode("reply", c)),
    };
    r.end(rep)
}

const MSG_MARKS: u8 = 100;
const MSG_PUSH: u8 = 101;
const MSG_NAME: u8 = 102;
const MSG_EVENT: u8 = 103;
const MSG_SEND: u8 = 104;
const MSG_ACK: u8 = 105;
const MSG_INVOKE: u8 = 106;
const MSG_ANSWER: u8 = 107;

pub use stampede_core::Kind;

fn kind_from_code(c: u8) -> Result<Kind, DecodeError> {
    Kind::from_code(c).ok_or(DecodeError::UnknownCode("kind", c))
}

/// What the name server holds for a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameRecord {
    /// The name.
    pub name: String,
    /// The owning address space.
    pub space: String,
    /// Container or service.
    pub kind: Kind,
    /// The container's id at its owner (0 for services).
    pub container: u64,
    /// The container's time zone.
    pub zone: u32,
    /// The container's capacity; 0 for unbounded.
    pub capacity: u64,
    /// Free-form metadata.
    pub meta: String,
}

/// Encodes a name record.
pub fn encode_name(n: &NameRecord) -> Vec<u8> {
    let mut w = Writer::new(MSG_NAME, n.meta.len() + n.name.len());
    w.str(&n.name);
    w.str(&n.space);
    w.u8(n.kind.code());
    w.u64(n.container);
    w.u32(n.zone);
    w.u64(n.capacity);
    w.str(&n.meta);
    w.0.to_vec()
}

/// Decodes a name record.
pub fn decode_name(buf: impl Into<Encoded>) -> Result<NameRecord, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_NAME {
        return Err(DecodeError::UnknownCode("name message", code));
    }
    let n = NameRecord {
        name: r.str()?,
        space: r.str()?,
        kind: kind_from_code(r.u8()?)?,
        container: r.u64()?,
        zone: r.u32()?,
        capacity: r.u64()?,
        meta: r.str()?,
    };
    r.end(n)
}

/// An address space's watermark message: its lowest term per zone, and the holds it moved
/// to owners that those owners' messages may not have covered yet everywhere.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// Numbers the sender's messages from 1; a receiver keeps the newest.
    pub version: u64,
    /// (zone, lowest term) per zone.
    pub marks: Vec<(u32, Timestamp)>,
    /// Holds moved to other spaces' containers.
    pub transfers: Vec<Transfer>,
}

/// A hold the sender moved to `owner` by a put: a receiver keeps `ts` as a bound on the
/// owner's term in `zone` until it has seen the owner's message `version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The space that stored the item.
    pub owner: String,
    /// The item's zone.
    pub zone: u32,
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The owner's first message that covers it.
    pub version: u64,
}

/// Encodes a marks message; at most `u16::MAX` marks and transfers each.
pub fn encode_marks(m: &Marks) -> Vec<u8> {
    let n = m.marks.len().min(u16::MAX as usize);
    let k = m.transfers.len().min(u16::MAX as usize);
    let mut w = Writer::new(MSG_MARKS, 12 + n * 12 + k * 48);
    w.u64(m.version);
    w.0.extend_from_slice(&(n as u16).to_le_bytes());
    for &(z, ts) in &m.marks[..n] {
        w.u32(z);
        w.i64(ts);
    }
    w.0.extend_from_slice(&(k as u16).to_le_bytes());
    for t in &m.transfers[..k] {
        w.str(&t.owner);
        w.u32(t.zone);
        w.i64(t.ts);
        w.u64(t.version);
    }
    w.0.to_vec()
}

/// Decodes a marks message.
pub fn decode_marks(buf: impl Into<Encoded>) -> Result<Marks, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_MARKS {
        return Err(DecodeError::UnknownCode("marks message", code));
    }
    let version = r.u64()?;
    let n = u16::from_le_bytes(r.array()?) as usize;
    let mut marks = Vec::with_capacity(n.min(r.buf.len() / 12));
    for _ in 0..n {
        marks.push((r.u32()?, r.i64()?));
    }
    let k = u16::from_le_bytes(r.array()?) as usize;
    // A transfer takes at least 22 bytes on the wire.
    let mut transfers = Vec::with_capacity(k.min(r.buf.len() / 22));
    for _ in 0..k {
        transfers.push(Transfer {
            owner: r.str()?,
            zone: r.u32()?,
            ts: r.i64()?,
            version: r.u64()?,
        });
    }
    r.end(Marks {
        version,
        marks,
        transfers,
    })
}

/// An item an owner sends ahead to an address space with input connections to its channel.
///
/// The owner numbers the items stored in each channel from 1 in the order they arrived (the
/// *arrival number*); every arrival is pushed, so a reader that has every number up to `n`
/// knows every item stored up to then, and a gap says a push was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Push {
    /// The channel's id at the owner.
    pub container: u64,
    /// The item's arrival number.
    pub seq: u64,
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The item carries a reference count: it may be reclaimed before the reader consumed
    /// it, so the reader asks the owner before using it.
    pub counted: bool,
    /// The item; `None` when it was reclaimed before it could be sent.
    pub item: Option<WireItem>,
}

/// Encodes a pushed item.
pub fn encode_push(p: &Push) -> Encoded {
    let mut w = Writer::new(MSG_PUSH, 0);
    w.u64(p.container);
    w.u64(p.seq);
    w.i64(p.ts);
    w.u8(u8::from(p.counted));
    w.opt_item_header(p.item.as_ref());
    finish(w, p.item.as_ref())
}

/// Decodes a pushed item; its bytes are a slice of `buf`.
pub fn decode_push(buf: impl Into<Encoded>) -> Result<Push, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_PUSH {
        return Err(DecodeError::UnknownCode("push message", code));
    }
    let p = Push {
        container: r.u64()?,
        seq: r.u64()?,
        ts: r.i64()?,
        counted: r.bool()?,
        item: r.opt_item()?,
    };
    r.end(p)
}

/// An event an owner forwards to an address space that subscribed to it. Events of one
/// container and kind are numbered from 1 in the order they happened, so a receiver that
/// sees a gap knows how many it lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The owning address space.
    pub owner: String,
    /// The container's id at the owner.
    pub container: u64,
    /// What happened.
    pub kind: EventKind,
    /// The event's number.
    pub seq: u64,
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The reclaimed item (garbage events).
    pub item: Option<WireItem>,
}

/// Encodes an event.
pub fn encode_event(e: &Event) -> Encoded {
    let mut w = Writer::new(MSG_EVENT, e.owner.len());
    w.str(&e.owner);
    w.u64(e.container);
    w.u8(e.kind.code());
    w.u64(e.seq);
    w.i64(e.ts);
    w.opt_item_header(e.item.as_ref());
    finish(w, e.item.as_ref())
}

/// Decodes an event; an item's bytes are a slice of `buf`.
pub fn decode_event(buf: impl Into<Encoded>) -> Result<Event, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_EVENT {
        return Err(DecodeError::UnknownCode("event message", code));
    }
    let owner = r.str()?;
    let container = r.u64()?;
    let kind = EventKind::from_code(r.u8()?)?;
    let seq = r.u64()?;
    let ts = r.i64()?;
    let item = r.opt_item()?;
    r.end(Event {
        owner,
        container,
        kind,
        seq,
        ts,
        item,
    })
}

#[cfg(test)]
mod tests;

/// A channel put published to the owner without waiting for its answer: the owner stores
/// the puts of one connection in the order of `seq` and answers each with an [`Ack`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    /// The putting task.
    pub task: TaskRef,
    /// Its connection at the owner.
    pub conn: u64,
    /// Numbers the connection's sent puts from 1.
    pub seq: u64,
    /// The task's visibility when it put.
    pub vis: Timestamp,
    /// The item's timestamp.
    pub ts: Timestamp,
    /// A reference count; 0 for none.
    pub consumers: u32,
    /// The item.
    pub item: WireItem,
}

/// Encodes a sent put.
pub fn encode_send(m: &Send) -> Encoded {
    let mut w = Writer::new(MSG_SEND, m.task.space.len());
    w.task(&m.task);
    w.u64(m.conn);
    w.u64(m.seq);
    w.i64(m.vis);
    w.i64(m.ts);
    w.u32(m.consumers);
    w.item_header(&m.item);
    finish(w, Some(&m.item))
}

/// Decodes a sent put; its item's bytes are a slice of `buf`.
pub fn decode_send(buf: impl Into<Encoded>) -> Result<Send, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_SEND {
        return Err(DecodeError::UnknownCode("send message", code));
    }
    let m = Send {
        task: r.task()?,
        conn: r.u64()?,
        seq: r.u64()?,
        vis: r.i64()?,
        ts: r.i64()?,
        consumers: r.u32()?,
        item: r.item()?,
    };
    r.end(m)
}

/// The owner's answer to a [`Send`]: stored (covered by its marks message `marks`, as in
/// [`Reply::Stored`]) or refused with `failure`'s (code, a, b, text) as in [`Reply::Error`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The connection at the owner.
    pub conn: u64,
    /// The put's number.
    pub seq: u64,
    /// The owner's marks version that holds the item (0 when refused).
    pub marks: u64,
    /// The channel's arrival number (see [`Push`]) once the item was stored (0 when
    /// refused).
    pub arrival: u64,
    /// Why it was refused.
    pub failure: Option<(ErrorCode, i64, i64, String)>,
}

/// Encodes an acknowledgement.
pub fn encode_ack(m: &Ack) -> Vec<u8> {
    let text = m.failure.as_ref().map_or(0, |f| f.3.len());
    let mut w = Writer::new(MSG_ACK, text);
    w.u64(m.conn);
    w.u64(m.seq);
    w.u64(m.marks);
    w.u64(m.arrival);
    w.u8(u8::from(m.failure.is_some()));
    if let Some((code, a, b, text)) = &m.failure {
        w.u8(code.to_u8());
        w.i64(*a);
        w.i64(*b);
        w.str(text);
    }
    w.0.to_vec()
}

/// Decodes an acknowledgement.
pub fn decode_ack(buf: impl Into<Encoded>) -> Result<Ack, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_ACK {
        return Err(DecodeError::UnknownCode("ack message", code));
    }
    let conn = r.u64()?;
    let seq = r.u64()?;
    let marks = r.u64()?;
    let arrival = r.u64()?;
    let failure = if r.bool()? {
        Some((ErrorCode::from_u8(r.u8()?)?, r.i64()?, r.i64()?, r.str()?))
    } else {
        None
    };
    r.end(Ack {
        conn,
        seq,
        marks,
        arrival,
        failure,
    })
}

/// An invocation of code another address space serves by name (see `code`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invoke {
    /// Numbers the caller's invocations from 1; the answer names it.
    pub seq: u64,
    /// The caller waits for the answer (a call); otherwise only a failure is answered.
    pub answer: bool,
    /// The name the code is served under.
    pub name: String,
    /// The argument.
    pub arg: WireItem,
}

/// Encodes an invocation.
pub fn encode_invoke(m: &Invoke) -> Encoded {
    let mut w = Writer::new(MSG_INVOKE, m.name.len());
    w.u64(m.seq);
    w.u8(u8::from(m.answer));
    w.str(&m.name);
    w.item_header(&m.arg);
    finish(w, Some(&m.arg))
}

/// Decodes an invocation; its argument's bytes are a slice of `buf`.
pub fn decode_invoke(buf: impl Into<Encoded>) -> Result<Invoke, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_INVOKE {
        return Err(DecodeError::UnknownCode("invoke message", code));
    }
    let m = Invoke {
        seq: r.u64()?,
        answer: r.bool()?,
        name: r.str()?,
        arg: r.item()?,
    };
    r.end(m)
}

/// How an invocation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The handler's result.
    Done(WireItem),
    /// Nothing is served under the name there.
    Unknown,
    /// The handler failed (returned an error or panicked); says why.
    Failed(String),
}

/// The answer to an [`Invoke`]: to every call, and to an invocation without a caller
/// waiting only when it failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The invocation's number.
    pub seq: u64,
    /// The name it invoked.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// Encodes an answer.
pub fn encode_answer(m: &Answer) -> Encoded {
    let text = match &m.outcome {
        Outcome::Failed(t) => t.len(),
        _ => 0,
    };
    let mut w = Writer::new(MSG_ANSWER, m.name.len() + text);
    w.u64(m.seq);
    w.str(&m.name);
    match &m.outcome {
        Outcome::Done(item) => {
            w.u8(0);
            w.item_header(item);
            return finish(w, Some(item));
        }
        Outcome::Unknown => w.u8(1),
        Outcome::Failed(t) => {
            w.u8(2);
            w.str(t);
        }
    }
    finish(w, None)
}

/// Decodes an answer; a result's bytes are a slice of `buf`.
pub fn decode_answer(buf: impl Into<Encoded>) -> Result<Answer, DecodeError> {
    let (mut r, code) = Reader::open(buf)?;
    if code != MSG_ANSWER {
        return Err(DecodeError::UnknownCode("answer message", code));
    }
    let seq = r.u64()?;
    let name = r.str()?;
    let outcome = match r.u8()? {
        0 => Outcome::Done(r.item()?),
        1 => Outcome::Unknown,
        2 => Outcome::Failed(r.str()?),
        c => return Err(DecodeError::UnknownCode("outcome", c)),
    };
    r.end(Answer { seq, name, outcome })
}
