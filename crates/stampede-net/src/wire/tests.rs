//! Tests of the wire format: every message survives a round trip,
//! the layout is the one `docs/wire-format.md` documents, and no input (random, cut short,
//! padded, mislabelled or lying about a length) makes a decoder panic, accept it, or
//! allocate much more than the input's size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use super::{
    decode_ack, decode_answer, decode_event, decode_invoke, decode_marks, decode_name, decode_push,
    decode_reply, decode_request, decode_send, encode_ack, encode_answer, encode_event,
    encode_invoke, encode_marks, encode_name, encode_push, encode_reply, encode_request,
    encode_send, Ack, Answer, DecodeError, ErrorCode, Event, EventKind, Invoke, Kind, Marks,
    NameRecord, Outcome, Push, Reply, Request, Send, TaskRef, Transfer, WireItem, MAGIC,
    MAX_CACHED, VERSION,
};
use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use stampede_core::{Selector, TypeTag, Wait};

// Counts what each thread allocates, so that a test can show a decoder sizes its
// allocations by the bytes it has rather than by the lengths those bytes claim.
struct CountingAlloc;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(n: usize) {
    // `try_with`: the allocator also runs while a thread's locals are torn down.
    let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(n)));
}

// SAFETY: every method forwards its arguments unchanged to `System`.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Runs `f`; returns its result and the bytes this thread allocated meanwhile.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let v = f();
    (v, ALLOCATED.with(Cell::get) - before)
}

/// The most a decoder may allocate for `n` input bytes: its strings and lists are copies
/// of the input (a transfer in a marks message takes 48 bytes of memory for at least 22 on
/// the wire), plus small constants.
fn allocation_limit(n: usize) -> usize {
    4 * n + 1024
}

/// The kinds of message, each with its own decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Request,
    Reply,
    Name,
    Marks,
    Push,
    Event,
    Send,
    Ack,
    Invoke,
    Answer,
}

const FAMILIES: [Family; 10] = [
    Family::Request,
    Family::Reply,
    Family::Name,
    Family::Marks,
    Family::Push,
    Family::Event,
    Family::Send,
    Family::Ack,
    Family::Invoke,
    Family::Answer,
];

impl Family {
    /// The message codes this family's decoder knows (docs/wire-format.md).
    fn codes(self) -> &'static [u8] {
        match self {
            Family::Request => &[1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
            Family::Reply => &[64, 65, 66, 67, 68, 69, 70, 71, 72],
            Family::Marks => &[100],
            Family::Push => &[101],
            Family::Name => &[102],
            Family::Event => &[103],
            Family::Send => &[104],
            Family::Ack => &[105],
            Family::Invoke => &[106],
            Family::Answer => &[107],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Message {
    Request(Request),
    Reply(Reply),
    Name(NameRecord),
    Marks(Marks),
    Push(Push),
    Event(Event),
    Send(Send),
    Ack(Ack),
    Invoke(Invoke),
    Answer(Answer),
}

impl Message {
    fn family(&self) -> Family {
        match self {
            Message::Request(_) => Family::Request,
            Message::Reply(_) => Family::Reply,
            Message::Name(_) => Family::Name,
            Message::Marks(_) => Family::Marks,
            Message::Push(_) => Family::Push,
            Message::Event(_) => Family::Event,
            Message::Send(_) => Family::Send,
            Message::Ack(_) => Family::Ack,
            Message::Invoke(_) => Family::Invoke,
            Message::Answer(_) => Family::Answer,
        }
    }

    fn encode(&self) -> Bytes {
        match self {
            Message::Request(r) => encode_request(r).to_vec(),
            Message::Reply(r) => encode_reply(r).to_vec(),
            Message::Name(n) => encode_name(n),
            Message::Marks(m) => encode_marks(m),
            Message::Push(p) => encode_push(p).to_vec(),
            Message::Event(e) => encode_event(e).to_vec(),
            Message::Send(m) => encode_send(m).to_vec(),
            Message::Ack(m) => encode_ack(m),
            Message::Invoke(m) => encode_invoke(m).to_vec(),
            Message::Answer(m) => encode_answer(m).to_vec(),
        }
        .into()
    }
}

fn decode(family: Family, buf: Bytes) -> Result<Message, DecodeError> {
    match family {
        Family::Request => decode_request(buf).map(Message::Request),
        Family::Reply => decode_reply(buf).map(Message::Reply),
        Family::Name => decode_name(buf).map(Message::Name),
        Family::Marks => decode_marks(buf).map(Message::Marks),
        Family::Push => decode_push(buf).map(Message::Push),
        Family::Event => decode_event(buf).map(Message::Event),
        Family::Send => decode_send(buf).map(Message::Send),
        Family::Ack => decode_ack(buf).map(Message::Ack),
        Family::Invoke => decode_invoke(buf).map(Message::Invoke),
        Family::Answer => decode_answer(buf).map(Message::Answer),
    }
}

fn decode_parts(family: Family, m: super::Encoded) -> Result<Message, DecodeError> {
    match family {
        Family::Request => decode_request(m).map(Message::Request),
        Family::Reply => decode_reply(m).map(Message::Reply),
        Family::Name => decode_name(m).map(Message::Name),
        Family::Marks => decode_marks(m).map(Message::Marks),
        Family::Push => decode_push(m).map(Message::Push),
        Family::Event => decode_event(m).map(Message::Event),
        Family::Send => decode_send(m).map(Message::Send),
        Family::Ack => decode_ack(m).map(Message::Ack),
        Family::Invoke => decode_invoke(m).map(Message::Invoke),
        Family::Answer => decode_answer(m).map(Message::Answer),
    }
}

// Strategies.

/// Every error code a reply can carry: the core's table and the protocol's own.
fn error_codes() -> Vec<ErrorCode> {
    let mut v: Vec<ErrorCode> = stampede_core::ErrorCode::ALL
        .iter()
        .map(|&c| ErrorCode::Stm(c))
        .collect();
    v.extend([
        ErrorCode::Malformed,
        ErrorCode::UnknownContainer,
        ErrorCode::UnknownConnection,
        ErrorCode::Other,
    ]);
    v
}

/// Names, address space ids and messages for people: any characters, ASCII or not.
fn text() -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..300).prop_map(String::from_iter)
}

fn item() -> impl Strategy<Value = WireItem> {
    (any::<u64>(), vec(any::<u8>(), 0..4096)).prop_map(|(tag, data)| WireItem {
        tag: TypeTag(tag),
        data: data.into(),
    })
}

fn task() -> impl Strategy<Value = TaskRef> {
    (text(), any::<u64>(), any::<u32>()).prop_map(|(space, task, zone)| TaskRef {
        space,
        task,
        zone,
    })
}

/// Waits travel in whole microseconds, so only those round-trip.
fn wait() -> impl Strategy<Value = Wait> {
    prop_oneof![
        Just(Wait::Never),
        Just(Wait::Forever),
        any::<u64>().prop_map(|us| Wait::For(Duration::from_micros(us))),
    ]
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        any::<i64>().prop_map(Selector::Exact),
        Just(Selector::Oldest),
        Just(Selector::Newest),
        Just(Selector::NewestUnseen),
        Just(Selector::NextUnseen),
    ]
}

fn request() -> BoxedStrategy<Request> {
    prop_oneof![
        (task(), any::<u64>(), any::<bool>(), any::<i64>()).prop_map(
            |(task, container, input, vis)| Request::Attach {
                task,
                container,
                input,
                vis,
            }
        ),
        (task(), any::<u64>()).prop_map(|(task, conn)| Request::Detach { task, conn }),
        (
            task(),
            any::<u64>(),
            any::<i64>(),
            any::<i64>(),
            any::<u32>(),
            wait(),
            item()
        )
            .prop_map(
                |(task, conn, vis, ts, consumers, wait, item)| Request::Put {
                    task,
                    conn,
                    vis,
                    ts,
                    consumers,
                    wait,
                    item,
                }
            ),
        (
            task(),
            any::<u64>(),
            selector(),
            wait(),
            vec(any::<i64>(), 0..=MAX_CACHED)
        )
            .prop_map(|(task, conn, sel, wait, cached)| Request::Get {
                task,
                conn,
                sel,
                wait,
                cached,
            }),
        (task(), any::<u64>(), wait(), any::<u32>()).prop_map(|(task, conn, wait, more)| {
            Request::Take {
                task,
                conn,
                wait,
                more,
            }
        }),
        (task(), any::<u64>(), any::<i64>(), any::<bool>()).prop_map(|(task, conn, ts, until)| {
            Request::Consume {
                task,
                conn,
                ts,
                until,
            }
        }),
        any::<u64>().prop_map(|container| Request::Close { container }),
        any::<u32>().prop_map(|zone| Request::Explain { zone }),
        (task(), any::<u64>(), proptest::option::of(any::<i64>()))
            .prop_map(|(task, conn, after)| Request::Visible { task, conn, after }),
        (task(), any::<u64>(), selector(), any::<i64>()).prop_map(|(task, conn, sel, ts)| {
            Request::Seen {
                task,
                conn,
                sel,
                ts,
            }
        }),
        (kind(), text(), any::<u32>(), any::<u64>(), text()).prop_map(
            |(kind, name, zone, capacity, meta)| Request::Create {
                kind,
                name,
                zone,
                capacity,
                meta,
            }
        ),
        (text(), any::<u64>(), event_kind(), any::<bool>()).prop_map(
            |(space, container, event, on)| if on {
                Request::Subscribe {
                    space,
                    container,
                    event,
                }
            } else {
                Request::Unsubscribe {
                    space,
                    container,
                    event,
                }
            }
        ),
    ]
    .boxed()
}

fn reply() -> BoxedStrategy<Reply> {
    prop_oneof![
        Just(Reply::Ok),
        any::<u64>().prop_map(|conn| Reply::Attached { conn }),
        (any::<u64>(), any::<u64>()).prop_map(|(seq, marks)| Reply::Stored { seq, marks }),
        any::<u64>().prop_map(|container| Reply::Created { container }),
        (any::<bool>(), any::<u64>(), vec(any::<i64>(), 0..100)).prop_map(
            |(closed, seq, timestamps)| Reply::Visible {
                closed,
                seq,
                timestamps
            }
        ),
        (
            any::<i64>(),
            any::<u64>(),
            any::<i64>(),
            proptest::option::of(item())
        )
            .prop_map(|(ts, seq, floor, item)| Reply::Item {
                ts,
                seq,
                floor,
                item,
            }),
        Just(Reply::Again),
        (select(error_codes()), any::<i64>(), any::<i64>(), text())
            .prop_map(|(code, a, b, text)| Reply::Error { code, a, b, text }),
        (any::<i64>(), any::<i64>(), any::<i64>(), text()).prop_map(
            |(local, floor, watermark, text)| Reply::Explain {
                local,
                floor,
                watermark,
                text,
            }
        ),
    ]
    .boxed()
}

fn kind() -> impl Strategy<Value = Kind> {
    select(Kind::ALL.to_vec())
}

fn event_kind() -> impl Strategy<Value = EventKind> {
    select(vec![EventKind::Arrival, EventKind::Garbage])
}

fn send() -> impl Strategy<Value = Send> {
    (
        task(),
        any::<u64>(),
        any::<u64>(),
        any::<i64>(),
        any::<i64>(),
        any::<u32>(),
        item(),
    )
        .prop_map(|(task, conn, seq, vis, ts, consumers, item)| Send {
            task,
            conn,
            seq,
            vis,
            ts,
            consumers,
            item,
        })
}

fn ack() -> impl Strategy<Value = Ack> {
    let failure =
        proptest::option::of((select(error_codes()), any::<i64>(), any::<i64>(), ".{0,40}"));
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        failure,
    )
        .prop_map(|(conn, seq, marks, arrival, failure)| Ack {
            conn,
            seq,
            marks,
            arrival,
            failure,
        })
}

fn invoke() -> impl Strategy<Value = Invoke> {
    (any::<u64>(), any::<bool>(), text(), item()).prop_map(|(seq, answer, name, arg)| Invoke {
        seq,
        answer,
        name,
        arg,
    })
}

fn answer() -> impl Strategy<Value = Answer> {
    let outcome = prop_oneof![
        item().prop_map(Outcome::Done),
        Just(Outcome::Unknown),
        text().prop_map(Outcome::Failed),
    ];
    (any::<u64>(), text(), outcome).prop_map(|(seq, name, outcome)| Answer { seq, name, outcome })
}

fn event() -> impl Strategy<Value = Event> {
    (
        text(),
        any::<u64>(),
        event_kind(),
        any::<u64>(),
        any::<i64>(),
        proptest::option::of(item()),
    )
        .prop_map(|(owner, container, kind, seq, ts, item)| Event {
            owner,
            container,
            kind,
            seq,
            ts,
            item,
        })
}

fn name() -> impl Strategy<Value = NameRecord> {
    (
        text(),
        text(),
        kind(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        text(),
    )
        .prop_map(
            |(name, space, kind, container, zone, capacity, meta)| NameRecord {
                name,
                space,
                kind,
                container,
                zone,
                capacity,
                meta,
            },
        )
}

fn marks() -> impl Strategy<Value = Marks> {
    let transfer = ("[a-f0-9]{0,32}", any::<u32>(), any::<i64>(), any::<u64>()).prop_map(
        |(owner, zone, ts, version)| Transfer {
            owner,
            zone,
            ts,
            version,
        },
    );
    (
        any::<u64>(),
        vec((any::<u32>(), any::<i64>()), 0..200),
        vec(transfer, 0..20),
    )
        .prop_map(|(version, marks, transfers)| Marks {
            version,
            marks,
            transfers,
        })
}

fn push() -> impl Strategy<Value = Push> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<i64>(),
        any::<bool>(),
        proptest::option::of(item()),
    )
        .prop_map(|(container, seq, ts, counted, item)| Push {
            container,
            seq,
            ts,
            counted,
            item,
        })
}

fn message() -> BoxedStrategy<Message> {
    prop_oneof![
        request().prop_map(Message::Request),
        reply().prop_map(Message::Reply),
        name().prop_map(Message::Name),
        marks().prop_map(Message::Marks),
        push().prop_map(Message::Push),
        event().prop_map(Message::Event),
        send().prop_map(Message::Send),
        ack().prop_map(Message::Ack),
        invoke().prop_map(Message::Invoke),
        answer().prop_map(Message::Answer),
    ]
    .boxed()
}

/// A known or unknown message code after a valid header: gets past the header checks,
/// which random bytes almost never do.
fn headed_body() -> impl Strategy<Value = Vec<u8>> {
    let known: Vec<u8> = FAMILIES.iter().flat_map(|f| f.codes()).copied().collect();
    (
        prop_oneof![select(known), any::<u8>()],
        vec(any::<u8>(), 0..512),
    )
        .prop_map(|(code, body)| {
            let mut v = vec![MAGIC[0], MAGIC[1], VERSION, code];
            v.extend(body);
            v
        })
}

fn request_item(r: &Request) -> Option<&WireItem> {
    match r {
        Request::Put { item, .. } => Some(item),
        _ => None,
    }
}

fn reply_item(r: &Reply) -> Option<&WireItem> {
    match r {
        Reply::Item { item, .. } => item.as_ref(),
        _ => None,
    }
}

/// Decodes `buf` with every decoder. None may panic or allocate beyond
/// [`allocation_limit`], and whatever one accepts must encode back to exactly `buf`: the
/// encoding is canonical, so that is what being a valid message means.
fn check_any_input(buf: &[u8]) -> Result<(), TestCaseError> {
    for family in FAMILIES {
        let input = Bytes::copy_from_slice(buf);
        let (decoded, allocated) = allocated_by(|| decode(family, input));
        prop_assert!(
            allocated <= allocation_limit(buf.len()),
            "{:?} decoder allocated {} bytes for {} input bytes",
            family,
            allocated,
            buf.len()
        );
        if let Ok(m) = decoded {
            prop_assert_eq!(
                &m.encode()[..],
                buf,
                "{:?} decoder accepted {:?}",
                family,
                m
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn requests_round_trip(r in request()) {
        let enc = encode_request(&r);
        prop_assert_eq!(&enc.tail, &request_item(&r).map(|i| i.data.clone()));
        prop_assert_eq!(decode_request(enc.to_vec()), Ok(r));
    }

    #[test]
    fn replies_round_trip(r in reply()) {
        let enc = encode_reply(&r);
        prop_assert_eq!(&enc.tail, &reply_item(&r).map(|i| i.data.clone()));
        prop_assert_eq!(decode_reply(enc.to_vec()), Ok(r));
    }

    #[test]
    fn names_round_trip(n in name()) {
        prop_assert_eq!(decode_name(encode_name(&n)), Ok(n));
    }

    /// A message received in two parts, split anywhere, decodes as the whole.
    #[test]
    fn a_message_split_anywhere_decodes_as_the_whole(m in message(), at in any::<Index>()) {
        let whole = m.encode();
        let k = at.index(whole.len() + 1);
        let parts = super::Encoded {
            head: whole.slice(..k),
            tail: Some(whole.slice(k..)),
        };
        prop_assert_eq!(decode_parts(m.family(), parts), Ok(m));
    }

    #[test]
    fn marks_round_trip(m in marks()) {
        prop_assert_eq!(decode_marks(encode_marks(&m)), Ok(m));
    }

    #[test]
    fn pushes_round_trip(p in push()) {
        let enc = encode_push(&p);
        prop_assert_eq!(&enc.tail, &p.item.as_ref().map(|i| i.data.clone()));
        prop_assert_eq!(decode_push(enc.to_vec()), Ok(p));
    }

    #[test]
    fn events_round_trip(e in event()) {
        let enc = encode_event(&e);
        prop_assert_eq!(&enc.tail, &e.item.as_ref().map(|i| i.data.clone()));
        prop_assert_eq!(decode_event(enc.to_vec()), Ok(e));
    }

    #[test]
    fn invocations_round_trip(m in invoke()) {
        let enc = encode_invoke(&m);
        prop_assert_eq!(&enc.tail, &Some(m.arg.data.clone()));
        prop_assert_eq!(decode_invoke(enc.to_vec()), Ok(m));
    }

    #[test]
    fn answers_round_trip(m in answer()) {
        let enc = encode_answer(&m);
        let result = match &m.outcome {
            Outcome::Done(item) => Some(item.data.clone()),
            _ => None,
        };
        prop_assert_eq!(&enc.tail, &result);
        prop_assert_eq!(decode_answer(enc.to_vec()), Ok(m));
    }

    #[test]
    fn random_bytes_are_rejected_without_panic(buf in vec(any::<u8>(), 0..512)) {
        check_any_input(&buf)?;
    }

    #[test]
    fn random_bodies_are_rejected_without_panic(buf in headed_body()) {
        check_any_input(&buf)?;
    }

    #[test]
    fn changed_bytes_are_rejected_without_panic(m in message(), at in any::<Index>(), b in any::<u8>()) {
        let mut buf = m.encode().to_vec();
        let at = at.index(buf.len());
        buf[at] = b;
        check_any_input(&buf)?;
    }

    #[test]
    fn every_strict_prefix_is_truncated(m in message()) {
        let full = m.encode();
        for n in 0..full.len() {
            prop_assert_eq!(
                decode(m.family(), full.slice(..n)),
                Err(DecodeError::Truncated),
                "prefix of {} of {} bytes", n, full.len()
            );
        }
    }

    #[test]
    fn appended_bytes_are_trailing(m in message(), extra in vec(any::<u8>(), 1..64)) {
        let mut buf = m.encode().to_vec();
        buf.extend_from_slice(&extra);
        prop_assert_eq!(decode(m.family(), buf.into()), Err(DecodeError::Trailing(extra.len())));
    }

    #[test]
    fn wrong_magic_is_bad_magic(
        m in message(),
        magic in any::<[u8; 2]>().prop_filter("not the magic", |g| *g != MAGIC),
    ) {
        let mut buf = m.encode().to_vec();
        buf[..2].copy_from_slice(&magic);
        for family in FAMILIES {
            prop_assert_eq!(decode(family, buf.clone().into()), Err(DecodeError::BadMagic));
        }
    }

    #[test]
    fn other_versions_are_refused(
        m in message(),
        v in any::<u8>().prop_filter("another version", |v| *v != VERSION),
    ) {
        let mut buf = m.encode().to_vec();
        buf[2] = v;
        for family in FAMILIES {
            prop_assert_eq!(decode(family, buf.clone().into()), Err(DecodeError::Version(v)));
        }
    }

    #[test]
    fn unknown_message_codes_are_refused(m in message(), code in any::<u8>()) {
        let mut buf = m.encode().to_vec();
        buf[3] = code;
        for family in FAMILIES.into_iter().filter(|f| !f.codes().contains(&code)) {
            let r = decode(family, buf.clone().into());
            prop_assert!(
                matches!(r, Err(DecodeError::UnknownCode(_, c)) if c == code),
                "{:?} decoder gave {:?} for code {}", family, r, code
            );
        }
    }
}

// The layout, pinned to docs/wire-format.md.

fn task_ref() -> TaskRef {
    TaskRef {
        space: "s".into(),
        task: 1,
        zone: 2,
    }
}

fn small_item() -> WireItem {
    WireItem {
        tag: TypeTag(9),
        data: Bytes::from_static(&[0xaa, 0xbb]),
    }
}

#[test]
fn message_codes_match_the_documented_table() {
    let task = task_ref;
    let cases = [
        (
            Message::Request(Request::Attach {
                task: task(),
                container: 1,
                input: true,
                vis: 0,
            }),
            1,
        ),
        (
            Message::Request(Request::Detach {
                task: task(),
                conn: 1,
            }),
            2,
        ),
        (
            Message::Request(Request::Put {
                task: task(),
                conn: 1,
                vis: 0,
                ts: 0,
                consumers: 0,
                wait: Wait::Never,
                item: small_item(),
            }),
            4,
        ),
        (
            Message::Request(Request::Get {
                task: task(),
                conn: 1,
                sel: Selector::Oldest,
                wait: Wait::Never,
                cached: vec![],
            }),
            5,
        ),
        (
            Message::Request(Request::Consume {
                task: task(),
                conn: 1,
                ts: 0,
                until: false,
            }),
            6,
        ),
        (
            Message::Request(Request::Take {
                task: task(),
                conn: 1,
                wait: Wait::Never,
                more: 3,
            }),
            14,
        ),
        (Message::Request(Request::Close { container: 1 }), 7),
        (Message::Request(Request::Explain { zone: 0 }), 8),
        (Message::Reply(Reply::Ok), 64),
        (Message::Reply(Reply::Attached { conn: 1 }), 65),
        (Message::Reply(Reply::Stored { seq: 1, marks: 2 }), 66),
        (
            Message::Reply(Reply::Item {
                ts: 0,
                seq: 0,
                floor: 0,
                item: None,
            }),
            67,
        ),
        (Message::Reply(Reply::Again), 68),
        (Message::Reply(Reply::error(ErrorCode::Other, "x")), 69),
        (
            Message::Reply(Reply::Explain {
                local: 0,
                floor: 0,
                watermark: 0,
                text: String::new(),
            }),
            70,
        ),
        (Message::Marks(Marks::default()), 100),
        (
            Message::Push(Push {
                container: 1,
                seq: 1,
                ts: 0,
                counted: false,
                item: Some(small_item()),
            }),
            101,
        ),
        (
            Message::Name(NameRecord {
                name: "n".into(),
                space: "s".into(),
                kind: Kind::Channel,
                container: 1,
                zone: 0,
                capacity: 0,
                meta: String::new(),
            }),
            102,
        ),
    ];
    let cases = cases.into_iter().chain([
        (
            Message::Send(Send {
                task: task_ref(),
                conn: 1,
                seq: 1,
                vis: 0,
                ts: 0,
                consumers: 0,
                item: small_item(),
            }),
            104,
        ),
        (
            Message::Ack(Ack {
                conn: 1,
                seq: 1,
                marks: 1,
                arrival: 1,
                failure: None,
            }),
            105,
        ),
        (
            Message::Invoke(Invoke {
                seq: 1,
                answer: true,
                name: "n".into(),
                arg: small_item(),
            }),
            106,
        ),
        (
            Message::Answer(Answer {
                seq: 1,
                name: "n".into(),
                outcome: Outcome::Unknown,
            }),
            107,
        ),
    ]);
    for (m, code) in cases {
        assert_eq!(&m.encode()[..3], b"SP\x06", "{m:?}");
        assert_eq!(m.encode()[3], code, "{m:?}");
        assert!(m.family().codes().contains(&code), "{m:?}");
    }
}

#[test]
fn error_codes_match_the_documented_table() {
    // The core's codes travel as their numbers; the protocol's own from 200.
    let byte = |code: ErrorCode| encode_reply(&Reply::error(code, "")).to_vec()[4];
    for &c in stampede_core::ErrorCode::ALL {
        assert_eq!(byte(ErrorCode::Stm(c)), c as u8, "{c}");
        assert!((1..200).contains(&(c as u8)));
    }
    assert_eq!(byte(ErrorCode::Malformed), 200);
    assert_eq!(byte(ErrorCode::UnknownContainer), 201);
    assert_eq!(byte(ErrorCode::UnknownConnection), 202);
    assert_eq!(byte(ErrorCode::Other), 255);
    for bad in [0, 32, 98, 100, 199, 203, 254] {
        let mut buf = encode_reply(&Reply::error(ErrorCode::Other, "")).to_vec();
        buf[4] = bad;
        assert_eq!(
            decode_reply(buf),
            Err(DecodeError::UnknownCode("error", bad))
        );
    }
}

/// An owner's error comes back as the same error: the code, its figures and its detail
/// survive the wire.
#[test]
fn errors_cross_the_wire_without_loss() {
    use stampede_core::{GetError, Neighbors, PutErrorKind, StmError, ZoneId};
    let round = |r: Reply| decode_reply(encode_reply(&r).to_vec()).unwrap();
    let stm = [
        StmError::InvalidArgument("capacity must be at least 1".into()),
        StmError::BelowVisibility {
            requested: 3,
            visibility: 9,
        },
        StmError::ZoneMismatch {
            task: ZoneId(1),
            container: ZoneId(2),
        },
        StmError::TaskExited,
        StmError::UnknownTicket(77),
        StmError::NameTaken("video/frames".into()),
        StmError::TooManyConnections(64),
        StmError::Unreachable("space x".into()),
        StmError::Denied {
            user: "alice".into(),
            op: stampede_core::Permission::Close,
            container: "#12".into(),
        },
    ];
    for e in stm {
        let (code, figures) = e.code();
        let Reply::Error {
            code: ErrorCode::Stm(c),
            a,
            b,
            text,
        } = round(Reply::failure(code, figures, e.detail().into_owned()))
        else {
            panic!("{e:?}")
        };
        assert_eq!(StmError::from_code(c, (a, b), &text), Some(e));
    }
    let gets = [
        GetError::Unavailable(Neighbors {
            below: Some(-4),
            above: None,
        }),
        GetError::Timeout(Neighbors {
            below: None,
            above: Some(i64::MAX - 1),
        }),
        GetError::Gone(5),
        GetError::Closed,
        GetError::Detached,
        GetError::Unreachable,
    ];
    for e in gets {
        let (code, figures) = e.code();
        let Reply::Error {
            code: ErrorCode::Stm(c),
            a,
            b,
            ..
        } = round(Reply::failure(code, figures, e.to_string()))
        else {
            panic!("{e:?}")
        };
        assert_eq!(GetError::from_code(c, (a, b)), Some(e));
    }
    for k in [
        PutErrorKind::Full,
        PutErrorKind::DuplicateTimestamp,
        PutErrorKind::BelowVisibility { visibility: -7 },
        PutErrorKind::InvalidTimestamp,
        PutErrorKind::ZeroConsumers,
        PutErrorKind::Closed,
        PutErrorKind::Detached,
        PutErrorKind::Unreachable,
        PutErrorKind::Interrupted,
    ] {
        let (code, a) = k.code();
        let Reply::Error {
            code: ErrorCode::Stm(c),
            a,
            ..
        } = round(Reply::failure(code, (a, 0), String::new()))
        else {
            panic!("{k:?}")
        };
        assert_eq!(PutErrorKind::from_code(c, a), Some(k));
    }
}

#[test]
fn a_put_is_laid_out_as_documented() {
    let put = Request::Put {
        task: TaskRef {
            space: "é".into(),
            task: 2,
            zone: 3,
        },
        conn: 4,
        vis: -5,
        ts: 6,
        consumers: 7,
        wait: Wait::For(Duration::from_micros(8)),
        item: small_item(),
    };
    let mut want = b"SP\x06\x04".to_vec();
    want.extend_from_slice(&2u16.to_le_bytes());
    want.extend_from_slice("é".as_bytes());
    want.extend_from_slice(&2u64.to_le_bytes());
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&4u64.to_le_bytes());
    want.extend_from_slice(&(-5i64).to_le_bytes());
    want.extend_from_slice(&6i64.to_le_bytes());
    want.extend_from_slice(&7u32.to_le_bytes());
    want.push(2);
    want.extend_from_slice(&8u64.to_le_bytes());
    want.extend_from_slice(&9u64.to_le_bytes());
    want.extend_from_slice(&2u32.to_le_bytes());
    let head_len = want.len();
    want.extend_from_slice(&[0xaa, 0xbb]);

    let enc = encode_request(&put);
    assert_eq!(enc.head.len(), head_len);
    assert_eq!(enc.to_vec(), want);
}

#[test]
fn item_bytes_are_sent_and_received_without_a_copy() {
    let data = Bytes::from(vec![7u8; 1000]);
    let push = Push {
        container: 1,
        seq: 1,
        ts: 2,
        counted: false,
        item: Some(WireItem {
            tag: TypeTag(3),
            data: data.clone(),
        }),
    };
    let enc = encode_push(&push);
    assert_eq!(enc.tail.as_ref().map(|t| t.as_ptr()), Some(data.as_ptr()));

    let buf = Bytes::from(enc.to_vec());
    let got = decode_push(buf.clone()).unwrap();
    let got = got.item.expect("an item");
    assert_eq!(got.data.as_ptr(), buf[enc.head.len()..].as_ptr());
}

// What the encoder cuts: values a peer cannot receive whole.

#[test]
fn at_most_max_cached_timestamps_travel() {
    let get = Request::Get {
        task: task_ref(),
        conn: 1,
        sel: Selector::Newest,
        wait: Wait::Forever,
        cached: (0..100).collect(),
    };
    match decode_request(encode_request(&get).to_vec()) {
        Ok(Request::Get { cached, .. }) => {
            assert_eq!(cached, (0..MAX_CACHED as i64).collect::<Vec<_>>())
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_strings_are_cut_at_a_character_boundary() {
    let long = "é".repeat(40_000); // 80 000 bytes, two per character
    match decode_reply(encode_reply(&Reply::error(ErrorCode::Other, long.clone())).to_vec()) {
        Ok(Reply::Error { text, .. }) => {
            assert_eq!(text.len(), 65_534);
            assert!(long.starts_with(&text));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn waits_travel_in_whole_microseconds() {
    let get = |wait| Request::Get {
        task: task_ref(),
        conn: 1,
        sel: Selector::Oldest,
        wait,
        cached: vec![],
    };
    let sent = get(Wait::For(Duration::from_nanos(1_999)));
    assert_eq!(
        decode_request(encode_request(&sent).to_vec()),
        Ok(get(Wait::For(Duration::from_micros(1))))
    );
}

// Codes inside a message, and lengths that claim more than the message holds.

/// A message's encoding with `patch` applied.
fn patched(m: &Message, patch: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut buf = m.encode().to_vec();
    patch(&mut buf);
    buf.into()
}

#[test]
fn unknown_inner_codes_are_refused() {
    // An empty space string puts the fields after the task at fixed offsets: header 4,
    // task 2 + 8 + 4.
    let task = || TaskRef {
        space: String::new(),
        task: 0,
        zone: 0,
    };
    let attach = Message::Request(Request::Attach {
        task: task(),
        container: 0,
        input: false,
        vis: 0,
    });
    let put = Message::Request(Request::Put {
        task: task(),
        conn: 0,
        vis: 0,
        ts: 0,
        consumers: 0,
        wait: Wait::Never,
        item: small_item(),
    });
    let get = Message::Request(Request::Get {
        task: task(),
        conn: 0,
        sel: Selector::Oldest,
        wait: Wait::Never,
        cached: vec![],
    });
    let item = Message::Reply(Reply::Item {
        ts: 0,
        seq: 0,
        floor: 0,
        item: None,
    });
    let name = Message::Name(NameRecord {
        name: String::new(),
        space: String::new(),
        kind: Kind::Queue,
        container: 0,
        zone: 0,
        capacity: 0,
        meta: String::new(),
    });
    let cases: [(&Message, usize, u8, &str); 7] = [
        (&attach, 26, 2, "flag"),
        (&put, 46, 3, "wait"),
        (&get, 26, 5, "selector"),
        (&get, 28, MAX_CACHED as u8 + 1, "cached count"),
        (&item, 28, 2, "flag"),
        (&name, 8, 4, "kind"),
        (
            &Message::Reply(Reply::error(ErrorCode::Other, "")),
            4,
            0,
            "error",
        ),
    ];
    for (m, at, code, what) in cases {
        let buf = patched(m, |b| b[at] = code);
        assert_eq!(
            decode(m.family(), buf),
            Err(DecodeError::UnknownCode(what, code)),
            "{m:?}"
        );
    }
}

#[test]
fn strings_that_are_not_utf8_are_refused() {
    let m = Message::Reply(Reply::error(ErrorCode::Other, "ab"));
    let buf = patched(&m, |b| {
        let n = b.len();
        b[n - 2..].copy_from_slice(&[0xc3, 0x28]);
    });
    assert_eq!(decode_reply(buf), Err(DecodeError::BadUtf8));
}

#[test]
fn lengths_beyond_the_message_are_truncated_without_allocating() {
    let empty_item = WireItem {
        tag: TypeTag(1),
        data: Bytes::new(),
    };
    let with_items = [
        Message::Request(Request::Put {
            task: task_ref(),
            conn: 0,
            vis: 0,
            ts: 0,
            consumers: 1,
            wait: Wait::Forever,
            item: empty_item.clone(),
        }),
        Message::Reply(Reply::Item {
            ts: 0,
            seq: 0,
            floor: 0,
            item: Some(empty_item.clone()),
        }),
        Message::Push(Push {
            container: 0,
            seq: 0,
            ts: 0,
            counted: false,
            item: Some(empty_item),
        }),
    ];
    // The item length is the last field before the item's bytes.
    let mut cases: Vec<(Family, Bytes)> = with_items
        .iter()
        .map(|m| {
            let buf = patched(m, |b| {
                let n = b.len();
                b[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
                b.extend_from_slice(&[0; 16]);
            });
            (m.family(), buf)
        })
        .collect();
    // A string length, and a count of marks.
    cases.push((
        Family::Reply,
        patched(&Message::Reply(Reply::error(ErrorCode::Other, "")), |b| {
            let n = b.len();
            b[n - 2..].copy_from_slice(&u16::MAX.to_le_bytes());
            b.extend_from_slice(b"short");
        }),
    ));
    cases.push((
        Family::Marks,
        patched(
            &Message::Marks(Marks {
                version: 1,
                marks: vec![(1, 2)],
                transfers: Vec::new(),
            }),
            |b| b[12..14].copy_from_slice(&u16::MAX.to_le_bytes()),
        ),
    ));
    // A count of transfers.
    cases.push((
        Family::Marks,
        patched(&Message::Marks(Marks::default()), |b| {
            let n = b.len();
            b[n - 2..].copy_from_slice(&u16::MAX.to_le_bytes())
        }),
    ));

    for (family, buf) in cases {
        let len = buf.len();
        let (r, allocated) = allocated_by(|| decode(family, buf));
        assert_eq!(r, Err(DecodeError::Truncated), "{family:?}");
        assert!(
            allocated <= allocation_limit(len),
            "{family:?} allocated {allocated} bytes for {len}"
        );
    }
}
