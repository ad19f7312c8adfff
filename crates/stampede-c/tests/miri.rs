//! The C API called as a C program calls it: handles made, passed back and freed, strings
//! and buffers read through the pointers the library hands out, out-pointers written, and
//! callbacks given a context. Everything stays in one embedded runtime, with short waits and
//! few items, so that Miri can check each pointer the library takes or returns
//! (`make miri`); the C suite (`tests/c`) covers behaviour at length.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, Ordering};
use std::sync::Mutex;

use stampede_c::*;

use stp_status::*;

fn last_error() -> String {
    // SAFETY: stp_last_error returns a NUL-terminated string valid until the next failing
    // call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(stp_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Checks a call failed with `status` and a message containing `part`.
#[track_caller]
fn fails(got: stp_status, status: stp_status, part: &str) {
    assert_eq!(got, status, "{}", last_error());
    let msg = last_error();
    assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
}

#[track_caller]
fn ok(got: stp_status) {
    assert_eq!(got, STP_OK, "{}", last_error());
}

/// The bytes an item's data pointer shows.
///
/// # Safety
/// `item` is a live item.
unsafe fn data(item: *const stp_item) -> Vec<u8> {
    let mut len = usize::MAX;
    // SAFETY: forwarded contract.
    let p = unsafe { stp_item_data(item, &mut len) };
    assert!(!p.is_null());
    // SAFETY: valid for `len` bytes while the item lives.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec()
}

/// A text item.
fn text_item(s: &CStr) -> *mut stp_item {
    let mut it = null_mut();
    // SAFETY: a NUL-terminated string and a writable out-pointer.
    ok(unsafe { stp_item_text(s.as_ptr(), &mut it) });
    it
}

/// A runtime with a channel of `capacity`, a producer at 0 and a consumer at infinity.
struct Fixture {
    rt: *mut stp_runtime,
    ch: *mut stp_channel,
    prod: *mut stp_task,
    cons: *mut stp_task,
    out: *mut stp_channel_out,
    input: *mut stp_channel_in,
}

impl Fixture {
    fn new(name: Option<&CStr>, capacity: usize) -> Fixture {
        let mut f = Fixture {
            rt: null_mut(),
            ch: null_mut(),
            prod: null_mut(),
            cons: null_mut(),
            out: null_mut(),
            input: null_mut(),
        };
        // SAFETY: every out-pointer is writable, every handle live, names NUL-terminated.
        unsafe {
            ok(stp_runtime_new(&mut f.rt));
            let name = name.map_or(null(), CStr::as_ptr);
            ok(stp_channel_new(f.rt, name, capacity, 0, &mut f.ch));
            ok(stp_task_new(f.rt, 0, c"producer".as_ptr(), &mut f.prod));
            ok(stp_task_new(
                f.rt,
                STP_INFINITY,
                c"consumer".as_ptr(),
                &mut f.cons,
            ));
            ok(stp_channel_attach_output(f.prod, f.ch, &mut f.out));
            ok(stp_channel_attach_input(f.cons, f.ch, &mut f.input));
        }
        f
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // SAFETY: the handles are live (or NULL) and freed once, runtime last.
        unsafe {
            stp_channel_in_free(self.input);
            stp_channel_out_free(self.out);
            stp_task_free(self.cons);
            stp_task_free(self.prod);
            stp_channel_free(self.ch);
            stp_runtime_free(self.rt);
        }
    }
}

#[test]
fn items_lend_their_bytes_and_shape() {
    // SAFETY: the calls get live handles, writable out-pointers and readable buffers, as
    // their contracts ask; each handle is freed once.
    unsafe {
        let mut it = null_mut();
        ok(stp_item_bytes(b"abc".as_ptr().cast(), 3, &mut it));
        assert_eq!(stp_item_kind_of(it), stp_item_kind::STP_ITEM_BYTES);
        assert_eq!(data(it), b"abc");
        // Another handle to the same item outlives the first.
        let copy = stp_item_clone(it);
        stp_item_free(it);
        assert_eq!(data(copy), b"abc");
        assert_eq!(stp_item_tag(copy), stp_type_tag(c"stampede.bytes".as_ptr()));
        stp_item_free(copy);

        // Empty bytes may come from NULL; a length without data may not.
        ok(stp_item_bytes(null(), 0, &mut it));
        assert_eq!(data(it), b"");
        stp_item_free(it);
        fails(
            stp_item_bytes(null(), 4, &mut it),
            STP_INVALID_ARGUMENT,
            "NULL",
        );
        fails(
            stp_item_bytes(b"x".as_ptr().cast(), 1, null_mut()),
            STP_INVALID_ARGUMENT,
            "out",
        );

        let t = text_item(c"héllo");
        assert_eq!(stp_item_kind_of(t), stp_item_kind::STP_ITEM_TEXT);
        assert_eq!(data(t), "héllo".as_bytes());
        let mut dt = stp_dtype::STP_BOOL;
        fails(stp_item_dtype(t, &mut dt), STP_WRONG_TYPE, "not an array");
        stp_item_free(t);
        let bad = [0xffu8, 0];
        fails(
            stp_item_text(bad.as_ptr().cast(), &mut it),
            STP_INVALID_ARGUMENT,
            "UTF-8",
        );

        // A 2×3 array of int16: its shape and elements stay valid while the item lives.
        let shape = [2usize, 3];
        let elems: [i16; 6] = [1, -2, 3, -4, 5, -6];
        let bytes: Vec<u8> = elems.iter().flat_map(|e| e.to_le_bytes()).collect();
        ok(stp_item_array(
            stp_dtype::STP_I16 as i32,
            2,
            shape.as_ptr(),
            bytes.as_ptr().cast(),
            bytes.len(),
            &mut it,
        ));
        assert_eq!(stp_item_kind_of(it), stp_item_kind::STP_ITEM_ARRAY);
        ok(stp_item_dtype(it, &mut dt));
        assert_eq!(dt, stp_dtype::STP_I16);
        let (mut ndim, mut at) = (0usize, null());
        ok(stp_item_shape(it, &mut ndim, &mut at));
        assert_eq!(std::slice::from_raw_parts(at, ndim), &shape);
        assert_eq!(data(it), bytes);
        fails(
            stp_item_shape(it, null_mut(), &mut at),
            STP_INVALID_ARGUMENT,
            "ndim",
        );
        stp_item_free(it);
        let mut none = null_mut();
        fails(
            stp_item_array(
                stp_dtype::STP_I16 as i32,
                2,
                shape.as_ptr(),
                bytes.as_ptr().cast(),
                bytes.len() - 1,
                &mut none,
            ),
            STP_INVALID_ARGUMENT,
            "array",
        );
        fails(
            stp_item_array(99, 0, null(), null(), 0, &mut none),
            STP_INVALID_ARGUMENT,
            "stp_dtype",
        );
        fails(
            stp_item_array(1, 2, null(), null(), 0, &mut none),
            STP_INVALID_ARGUMENT,
            "shape",
        );
        // A scalar: no dimensions, no shape pointer.
        ok(stp_item_array(
            1,
            0,
            null(),
            [7u8].as_ptr().cast(),
            1,
            &mut it,
        ));
        ok(stp_item_shape(it, &mut ndim, &mut at));
        assert_eq!(ndim, 0);
        stp_item_free(it);
        assert!(none.is_null());

        // A user type: its wire bytes, under its name's tag.
        ok(stp_item_typed(
            c"Point".as_ptr(),
            [1u8, 2].as_ptr().cast(),
            2,
            &mut it,
        ));
        assert_eq!(stp_item_kind_of(it), stp_item_kind::STP_ITEM_OTHER);
        assert_eq!(stp_item_tag(it), stp_type_tag(c"Point".as_ptr()));
        assert_eq!(data(it), [1, 2]);
        stp_item_free(it);
        fails(
            stp_item_typed(c"stampede.utf8".as_ptr(), null(), 0, &mut it),
            STP_INVALID_ARGUMENT,
            "built-in",
        );

        // NULL handles: defaults from accessors, nothing from frees.
        assert_eq!(stp_type_tag(null()), 0);
        assert!(stp_item_clone(null()).is_null());
        assert!(stp_item_data(null(), null_mut()).is_null());
        assert_eq!(stp_item_kind_of(null()), stp_item_kind::STP_ITEM_OTHER);
        stp_item_free(null_mut());
    }
}

#[test]
fn errors_are_kept_per_thread() {
    // SAFETY: static strings from the library; a NULL out-pointer is refused, not written.
    unsafe {
        let version = CStr::from_ptr(stp_version()).to_str().unwrap();
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        let name = |s: i32| CStr::from_ptr(stp_status_name(s)).to_str().unwrap();
        assert_eq!(name(STP_TIMEOUT as i32), "STP_TIMEOUT");
        assert_eq!(name(12345), "STP_UNKNOWN");

        fails(stp_runtime_new(null_mut()), STP_INVALID_ARGUMENT, "out");
        // Another thread has its own last error, and its strings are its own.
        let other = std::thread::spawn(|| {
            let before = last_error();
            let mut it = null_mut();
            let st = stp_item_bytes(null(), 1, &mut it);
            (before, st, last_error())
        })
        .join()
        .unwrap();
        assert_eq!(other.0, "");
        assert_eq!(other.1, STP_INVALID_ARGUMENT);
        assert!(other.2.contains("data is NULL"), "{}", other.2);
        assert!(last_error().contains("out is NULL"), "{}", last_error());
    }
}

/// A handle passed to another thread, as C code passes pointers to its threads.
struct Shared<T>(*mut T);

// SAFETY: every handle of the library may be used from any thread.
unsafe impl<T> Send for Shared<T> {}

impl<T> Shared<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

#[test]
fn waits_end_from_other_threads() {
    let f = Fixture::new(None, 1);
    // SAFETY: the fixture's handles, the item and the stop flag live until the threads
    // using them are joined; the flag is written only atomically while a put reads it.
    unsafe {
        // A get blocks until another thread puts.
        let input = Shared(f.input);
        let getter = std::thread::spawn(move || {
            let (mut ts, mut it) = (0i64, null_mut());
            let st = stp_channel_get(input.get(), 4, 0, STP_FOREVER, &mut ts, &mut it);
            let d = (st == STP_OK).then(|| data(it));
            stp_item_free(it);
            (st, ts, d)
        });
        let it = text_item(c"one");
        ok(stp_channel_put(f.out, 1, it, 0, 0));
        assert_eq!(getter.join().unwrap(), (STP_OK, 1, Some(b"one".to_vec())));

        // A put blocked on the full channel gives up once another thread sets its flag.
        let stop = Box::new(AtomicI32::new(0));
        let (out, it2, flag) = (Shared(f.out), Shared(it), Shared(stop.as_ptr()));
        let putter = std::thread::spawn(move || {
            stp_channel_put_interruptible(out.get(), 2, it2.get(), 0, STP_FOREVER, flag.get())
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(1, Ordering::SeqCst);
        assert_eq!(putter.join().unwrap(), STP_INTERRUPTED);
        stp_item_free(it);
    }
}

#[test]
fn containers_move_items_between_tasks() {
    let f = Fixture::new(Some(c"frames"), 1);
    // SAFETY: the fixture's handles are live; out-pointers are writable; strings are
    // NUL-terminated; every handle made here is freed once.
    unsafe {
        assert!(stp_channel_is_local(f.ch));
        assert!(!stp_channel_is_local(null()));
        assert_eq!(CStr::from_ptr(stp_runtime_id(f.rt)).to_bytes(), b"");
        ok(stp_runtime_wait_for(f.rt, c"frames".as_ptr(), 0));
        let mut found = null_mut();
        ok(stp_channel_lookup(f.rt, c"frames".as_ptr(), 0, &mut found));
        stp_channel_free(found);
        fails(
            stp_channel_lookup(f.rt, c"nothing".as_ptr(), 0, &mut found),
            STP_NOT_FOUND,
            "nothing",
        );

        let it = text_item(c"five");
        ok(stp_channel_put(f.out, 5, it, 0, 0));
        // Full (capacity 1): a put gives up at once, or when its stop flag is set.
        fails(stp_channel_put(f.out, 6, it, 0, 0), STP_FULL, "");
        let stop = AtomicI32::new(1);
        fails(
            stp_channel_put_interruptible(f.out, 6, it, 0, STP_FOREVER, stop.as_ptr()),
            STP_INTERRUPTED,
            "",
        );
        // A stop flag must be aligned for an int32_t.
        let raw = [0u64; 2];
        let odd = raw.as_ptr().cast::<u8>().wrapping_add(1).cast::<i32>();
        fails(
            stp_channel_put_interruptible(f.out, 6, it, 0, 0, odd),
            STP_INVALID_ARGUMENT,
            "aligned",
        );
        ok(stp_channel_flush(f.out));

        let (mut ts, mut got) = (0i64, null_mut());
        fails(
            stp_channel_get(f.input, 0, 4, 0, &mut ts, &mut got),
            STP_UNAVAILABLE,
            "",
        );
        let n = stp_last_neighbors();
        assert!(!n.has_below && n.has_above && n.above == 5, "{n:?}");
        ok(stp_channel_get(f.input, 1, 0, 0, &mut ts, &mut got));
        assert_eq!((ts, data(got)), (5, b"five".to_vec()));
        stp_item_free(got);
        fails(
            stp_channel_get(f.input, 9, 0, 0, &mut ts, &mut got),
            STP_INVALID_ARGUMENT,
            "stp_selector",
        );
        ok(stp_channel_consume(f.input, 5));
        ok(stp_channel_consume_until(f.input, 5));
        // Consumed by its one reader, the item leaves room for the next put.
        ok(stp_task_set_virtual_time(f.prod, 10));
        stop.store(0, Ordering::SeqCst);
        ok(stp_channel_put_interruptible(
            f.out,
            10,
            it,
            1,
            5000,
            stop.as_ptr(),
        ));
        stp_item_free(it);

        // Tasks: a child at the parent's time, virtual time and visibility.
        let mut child = null_mut();
        ok(stp_task_child(f.prod, 10, &mut child));
        assert_eq!(stp_task_virtual_time(child), 10);
        assert!(stp_task_visibility(child) <= 10);
        fails(
            stp_task_set_virtual_time(child, -1),
            STP_BELOW_VISIBILITY,
            "",
        );
        stp_task_free(child);
        assert_eq!(stp_task_virtual_time(null()), STP_INFINITY);
        let mut floor = null_mut();
        ok(stp_task_new_in(f.rt, STP_AT_FLOOR, 0, null(), &mut floor));
        assert!(stp_task_virtual_time(floor) >= 0);
        stp_task_free(floor);

        // Statistics, the watermark's report and the metrics, through out-pointers.
        let mut cs = stp_channel_stats::default();
        ok(stp_channel_get_stats(f.ch, &mut cs));
        assert_eq!((cs.puts, cs.gets, cs.connections), (2, 1, 1));
        ok(stp_runtime_collect(f.rt));
        let mut gs = stp_gc_stats::default();
        ok(stp_runtime_gc_stats(f.rt, 0, &mut gs));
        assert!(gs.passes > 0);
        assert_eq!(stp_runtime_floor(f.rt, 0), gs.floor);
        let hold = stp_hold {
            ts: 0,
            cause: stp_hold_cause::STP_HOLD_OTHER,
            task: 0,
            container: 0,
        };
        let mut holds = [hold; 2];
        let mut w = std::mem::MaybeUninit::<stp_watermark>::uninit();
        let mut text: *mut c_char = null_mut();
        ok(stp_runtime_explain(
            f.rt,
            0,
            w.as_mut_ptr(),
            holds.as_mut_ptr(),
            holds.len(),
            &mut text,
        ));
        let w = w.assume_init();
        assert!(w.holds >= 1);
        assert!(holds[..w.holds.min(2)].iter().all(|h| h.ts >= w.watermark));
        assert!(CStr::from_ptr(text).to_str().unwrap().contains("consumer"));
        stp_string_free(text);
        let mut again = w;
        fails(
            stp_runtime_explain(f.rt, 0, &mut again, null_mut(), 3, null_mut()),
            STP_INVALID_ARGUMENT,
            "holds",
        );
        ok(stp_runtime_metrics(f.rt, &mut text));
        let m = CStr::from_ptr(text).to_str().unwrap().to_owned();
        assert!(m.contains("stampede_zone_watermark"), "{m}");
        stp_string_free(text);
        stp_string_free(null_mut());
        let mut ss = stp_space_stats::default();
        fails(
            stp_runtime_space_stats(f.rt, &mut ss),
            STP_UNSUPPORTED,
            "embedded",
        );
        ok(stp_channel_close(f.ch));
    }
}

#[test]
fn queues_and_registers_hand_out_tickets_and_sequences() {
    let f = Fixture::new(None, 0);
    // SAFETY: as in the test above.
    unsafe {
        let (mut q, mut qout, mut qin) = (null_mut(), null_mut(), null_mut());
        ok(stp_queue_new(f.rt, c"jobs".as_ptr(), 1, 0, &mut q));
        assert!(stp_queue_is_local(q));
        ok(stp_queue_attach_output(f.prod, q, &mut qout));
        ok(stp_queue_attach_input(f.cons, q, &mut qin));
        let it = text_item(c"job");
        let mut ticket = u64::MAX;
        ok(stp_queue_put(qout, 1, it, 0, &mut ticket));
        fails(
            stp_queue_put_interruptible(qout, 2, it, 0, null(), null_mut()),
            STP_FULL,
            "",
        );
        let stop = AtomicI32::new(1);
        fails(
            stp_queue_put_interruptible(qout, 2, it, STP_FOREVER, stop.as_ptr(), &mut ticket),
            STP_INTERRUPTED,
            "",
        );
        let (mut ts, mut t2, mut got) = (0i64, 0u64, null_mut());
        ok(stp_queue_get(qin, 0, &mut ts, &mut t2, &mut got));
        assert_eq!((ts, t2, data(got)), (1, ticket, b"job".to_vec()));
        stp_item_free(got);
        ok(stp_queue_consume(qin, t2));
        fails(stp_queue_consume(qin, t2), STP_UNKNOWN_TICKET, "");
        let mut qs = stp_queue_stats::default();
        ok(stp_queue_get_stats(q, &mut qs));
        assert_eq!((qs.puts, qs.consumed), (1, 1));
        let mut again = null_mut();
        ok(stp_queue_lookup(f.rt, c"jobs".as_ptr(), 0, &mut again));
        ok(stp_queue_close(again));
        stp_queue_free(again);
        stp_queue_in_free(qin);
        stp_queue_out_free(qout);
        stp_queue_free(q);

        let (mut r, mut rout, mut rin) = (null_mut(), null_mut(), null_mut());
        ok(stp_register_new(f.rt, null(), 0, 0, &mut r));
        assert!(stp_register_is_local(r));
        ok(stp_register_attach_output(f.prod, r, &mut rout));
        ok(stp_register_attach_input(f.cons, r, &mut rin));
        let mut seq = 0u64;
        ok(stp_register_write(rout, it, &mut seq));
        ok(stp_register_write(rout, it, null_mut()));
        let (mut read, mut got) = (0u64, null_mut());
        ok(stp_register_read(rin, 0, &mut read, &mut got));
        assert!(read > seq, "{read} after {seq}");
        assert_eq!(data(got), b"job");
        stp_item_free(got);
        fails(
            stp_register_read(rin, 0, &mut read, &mut got),
            STP_UNAVAILABLE,
            "",
        );
        ok(stp_register_close(r));
        stp_register_in_free(rin);
        stp_register_out_free(rout);
        stp_register_free(r);
        stp_item_free(it);
    }
}

#[test]
fn loans_are_filled_in_place_and_put() {
    let f = Fixture::new(None, 0);
    // SAFETY: as above; a loan's memory is written only before it is finished.
    unsafe {
        let (mut loan, mut at) = (null_mut(), null_mut::<c_void>());
        ok(stp_item_loan(f.out, 5, &mut loan, &mut at));
        assert!(!stp_loan_in_place(loan));
        std::ptr::copy_nonoverlapping(b"hello".as_ptr(), at.cast::<u8>(), 5);
        let mut it = null_mut();
        ok(stp_loan_finish(loan, &mut it));
        ok(stp_channel_put(f.out, 1, it, 0, 0));
        stp_item_free(it);

        let shape = [2usize, 2];
        ok(stp_item_loan_array(
            f.out,
            stp_dtype::STP_U16 as i32,
            2,
            shape.as_ptr(),
            &mut loan,
            &mut at,
        ));
        // Elements are filled one at a time, as C code would, after a look at the loan.
        assert!(!stp_loan_in_place(loan));
        for (i, v) in [1u16, 2, 3, 0xbeef].iter().enumerate() {
            at.cast::<u8>()
                .add(2 * i)
                .cast::<[u8; 2]>()
                .write(v.to_le_bytes());
        }
        ok(stp_loan_finish(loan, &mut it));
        ok(stp_channel_put(f.out, 2, it, 0, 0));
        stp_item_free(it);

        let (mut ts, mut got) = (0i64, null_mut());
        ok(stp_channel_get(f.input, 0, 1, 0, &mut ts, &mut got));
        assert_eq!(data(got), b"hello");
        stp_item_free(got);
        ok(stp_channel_get(f.input, 0, 2, 0, &mut ts, &mut got));
        let (mut ndim, mut dims) = (0, null());
        ok(stp_item_shape(got, &mut ndim, &mut dims));
        assert_eq!(std::slice::from_raw_parts(dims, ndim), &shape);
        assert_eq!(data(got), [1, 0, 2, 0, 3, 0, 0xef, 0xbe]);
        stp_item_free(got);

        // An unfinished loan is given back; a finish always releases the loan.
        ok(stp_item_loan(f.out, 64, &mut loan, &mut at));
        at.cast::<u8>().write_bytes(7, 64);
        stp_loan_free(loan);
        ok(stp_item_loan(f.out, 1, &mut loan, &mut at));
        fails(
            stp_loan_finish(loan, null_mut()),
            STP_INVALID_ARGUMENT,
            "out",
        );
        fails(
            stp_loan_finish(null_mut(), &mut it),
            STP_INVALID_ARGUMENT,
            "loan",
        );
        fails(
            stp_item_loan(f.out, 1, null_mut(), &mut at),
            STP_INVALID_ARGUMENT,
            "out",
        );
        fails(
            stp_item_loan_array(f.out, 99, 1, shape.as_ptr(), &mut loan, &mut at),
            STP_INVALID_ARGUMENT,
            "stp_dtype",
        );
        assert!(!stp_loan_in_place(null()));
        stp_loan_free(null_mut());
    }
}

#[test]
fn correlators_take_their_connections_over() {
    // SAFETY: as above; the inputs belong to the correlator once it is made.
    unsafe {
        let mut rt = null_mut();
        ok(stp_runtime_new(&mut rt));
        let (mut video, mut audio) = (null_mut(), null_mut());
        ok(stp_channel_new(rt, null(), 0, 0, &mut video));
        ok(stp_channel_new(rt, null(), 0, 0, &mut audio));
        let (mut src, mut fusion) = (null_mut(), null_mut());
        ok(stp_task_new(rt, 0, c"src".as_ptr(), &mut src));
        ok(stp_task_new(
            rt,
            STP_INFINITY,
            c"fusion".as_ptr(),
            &mut fusion,
        ));
        let (mut vout, mut aout) = (null_mut(), null_mut());
        ok(stp_channel_attach_output(src, video, &mut vout));
        ok(stp_channel_attach_output(src, audio, &mut aout));
        let mut ins = [null_mut(); 2];
        ok(stp_channel_attach_input(fusion, video, &mut ins[0]));
        ok(stp_channel_attach_input(fusion, audio, &mut ins[1]));

        // Refused arguments leave the connections to the caller.
        let mut c = null_mut();
        let twice = [ins[0], ins[0]];
        fails(
            stp_correlator_new(twice.as_ptr(), 2, 0, 0, &mut c),
            STP_INVALID_ARGUMENT,
            "twice",
        );
        let with_null = [ins[0], null_mut()];
        fails(
            stp_correlator_new(with_null.as_ptr(), 2, 0, 0, &mut c),
            STP_INVALID_ARGUMENT,
            "NULL",
        );
        fails(
            stp_correlator_new(ins.as_ptr(), 2, 1, -1, &mut c),
            STP_INVALID_ARGUMENT,
            "negative",
        );
        ok(stp_correlator_new(ins.as_ptr(), 2, 1, 2, &mut c));

        for (out, ts, s) in [(vout, 10, c"frame"), (aout, 11, c"chunk")] {
            let it = text_item(s);
            ok(stp_channel_put(out, ts, it, 0, 0));
            stp_item_free(it);
        }
        let mut set = null_mut();
        ok(stp_correlator_get(c, 0, &mut set));
        assert_eq!((stp_set_ts(set), stp_set_len(set)), (10, 2));
        let (mut ts, mut it) = (0i64, null_mut());
        ok(stp_set_item(set, 1, &mut ts, &mut it));
        assert_eq!((ts, data(it)), (11, b"chunk".to_vec()));
        stp_item_free(it);
        fails(
            stp_set_item(set, 2, &mut ts, &mut it),
            STP_INVALID_ARGUMENT,
            "input 2",
        );
        ok(stp_correlator_consume(c, set));
        ok(stp_correlator_consume_until(c, set));
        assert_eq!(stp_correlator_skipped(c), 0);
        stp_set_free(set);
        set = null_mut();
        fails(stp_correlator_get(c, 0, &mut set), STP_UNAVAILABLE, "");
        assert!(set.is_null());
        assert_eq!((stp_set_ts(null()), stp_set_len(null())), (0, 0));
        assert_eq!(stp_correlator_skipped(null()), 0);

        stp_correlator_free(c);
        stp_channel_out_free(vout);
        stp_channel_out_free(aout);
        stp_task_free(fusion);
        stp_task_free(src);
        stp_channel_free(video);
        stp_channel_free(audio);
        stp_runtime_free(rt);
    }
}

/// What callbacks saw, behind the context pointer they are given.
struct Seen {
    calls: AtomicU32,
    last_ts: AtomicI64,
    text: Mutex<Vec<u8>>,
}

impl Seen {
    const fn new() -> Seen {
        Seen {
            calls: AtomicU32::new(0),
            last_ts: AtomicI64::new(0),
            text: Mutex::new(Vec::new()),
        }
    }

    fn ctx(&'static self) -> *mut c_void {
        std::ptr::from_ref(self).cast_mut().cast()
    }

    /// Waits for `n` calls. A collection pass on the runtime's own thread may be calling
    /// the handler when `stp_runtime_collect` returns, having taken the item first.
    fn wait_for(&self, n: u32) {
        for _ in 0..10_000 {
            if self.calls.load(Ordering::SeqCst) >= n {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(self.calls.load(Ordering::SeqCst), n);
    }
}

// Statics, as a handler may run on the collector's thread for as long as its channel lives.
static ARRIVED: Seen = Seen::new();
static COLLECTED: Seen = Seen::new();
static QUEUED: Seen = Seen::new();

unsafe extern "C" fn on_arrival(ctx: *mut c_void, ts: i64) {
    // SAFETY: registered with a `Seen` that outlives the subscription.
    let seen = unsafe { &*ctx.cast::<Seen>() };
    seen.last_ts.store(ts, Ordering::SeqCst);
    seen.calls.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn on_garbage(ctx: *mut c_void, ts: i64, item: *const stp_item) {
    // SAFETY: registered with a `Seen` that outlives the container; `item` is valid during
    // the call, and a clone of it after.
    unsafe {
        let seen = &*ctx.cast::<Seen>();
        let kept = stp_item_clone(item);
        *seen.text.lock().unwrap() = data(item);
        assert_eq!(data(kept), data(item));
        stp_item_free(kept);
        seen.last_ts.store(ts, Ordering::SeqCst);
        seen.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn callbacks_get_their_context_and_items() {
    let f = Fixture::new(None, 0);
    // SAFETY: as above; the contexts outlive the subscriptions and containers.
    unsafe {
        let mut sub = null_mut();
        ok(stp_channel_on_arrival(
            f.ch,
            Some(on_arrival),
            ARRIVED.ctx(),
            &mut sub,
        ));
        ok(stp_channel_on_garbage(
            f.ch,
            Some(on_garbage),
            COLLECTED.ctx(),
        ));
        let it = text_item(c"first");
        ok(stp_channel_put(f.out, 4, it, 0, 0));
        stp_item_free(it);
        assert_eq!(ARRIVED.calls.load(Ordering::SeqCst), 1);
        assert_eq!(ARRIVED.last_ts.load(Ordering::SeqCst), 4);
        stp_subscription_free(sub);
        let it = text_item(c"second");
        ok(stp_channel_put(f.out, 5, it, 0, 0));
        stp_item_free(it);
        assert_eq!(ARRIVED.calls.load(Ordering::SeqCst), 1);

        let (mut ts, mut got) = (0, null_mut());
        ok(stp_channel_get(f.input, 0, 4, 0, &mut ts, &mut got));
        stp_item_free(got);
        ok(stp_channel_consume(f.input, 4));
        ok(stp_task_set_virtual_time(f.prod, STP_INFINITY));
        ok(stp_runtime_collect(f.rt));
        COLLECTED.wait_for(1);
        assert_eq!(COLLECTED.last_ts.load(Ordering::SeqCst), 4);
        assert_eq!(*COLLECTED.text.lock().unwrap(), b"first");
        fails(
            stp_channel_on_arrival(f.ch, None, null_mut(), &mut sub),
            STP_INVALID_ARGUMENT,
            "NULL",
        );
        fails(
            stp_channel_on_garbage(f.ch, None, null_mut()),
            STP_INVALID_ARGUMENT,
            "NULL",
        );
        stp_subscription_free(null_mut());

        // A queue's handler is told of each item consumed.
        let (mut q, mut qout, mut qin, mut qsub) = (null_mut(), null_mut(), null_mut(), null_mut());
        ok(stp_queue_new(f.rt, null(), 0, 0, &mut q));
        ok(stp_queue_on_arrival(
            q,
            Some(on_arrival),
            QUEUED.ctx(),
            &mut qsub,
        ));
        ok(stp_queue_on_garbage(q, Some(on_garbage), QUEUED.ctx()));
        let mut t = null_mut();
        ok(stp_task_new(f.rt, STP_AT_FLOOR, c"jobs".as_ptr(), &mut t));
        ok(stp_queue_attach_output(t, q, &mut qout));
        ok(stp_queue_attach_input(f.cons, q, &mut qin));
        let it = text_item(c"job");
        let mut ticket = 0;
        ok(stp_queue_put(qout, 7, it, 0, &mut ticket));
        stp_item_free(it);
        ok(stp_queue_get(qin, 0, &mut ts, &mut ticket, &mut got));
        stp_item_free(got);
        ok(stp_queue_consume(qin, ticket));
        assert_eq!(QUEUED.calls.load(Ordering::SeqCst), 2);
        assert_eq!(*QUEUED.text.lock().unwrap(), b"job");
        stp_subscription_free(qsub);
        stp_queue_in_free(qin);
        stp_queue_out_free(qout);
        stp_task_free(t);
        stp_queue_free(q);
    }
}

#[test]
fn pacers_report_through_out_pointers() {
    // SAFETY: a live pacer, writable out-pointers, an aligned stop flag.
    unsafe {
        let mut p = null_mut();
        fails(
            stp_pacer_new(0, 0, 0, &mut p),
            STP_INVALID_ARGUMENT,
            "period",
        );
        fails(
            stp_pacer_new(1000, 0, 3, &mut p),
            STP_INVALID_ARGUMENT,
            "stp_late_action",
        );
        // Ticks of 1 µs with 1 s of tolerance: on time, never a long sleep.
        ok(stp_pacer_new(1, 1_000_000, 1, &mut p));
        let (mut tick, mut skip_to) = (stp_tick::STP_TICK_LATE, -1i64);
        ok(stp_pacer_sync(p, 0, &mut tick, &mut skip_to));
        assert_eq!((tick, skip_to), (stp_tick::STP_TICK_ON_TIME, 0));
        ok(stp_pacer_sync(p, 1, &mut tick, null_mut()));
        let stop = AtomicI32::new(0);
        ok(stp_pacer_sync_interruptible(
            p,
            2,
            stop.as_ptr(),
            &mut tick,
            &mut skip_to,
        ));
        assert_eq!(skip_to, 2);
        // Set, the flag stops a sync that would wait (tick 10⁹ is due in a quarter hour).
        stop.store(1, Ordering::SeqCst);
        fails(
            stp_pacer_sync_interruptible(p, 1_000_000_000, stop.as_ptr(), &mut tick, null_mut()),
            STP_INTERRUPTED,
            "interrupted",
        );
        let mut s = stp_pacer_stats::default();
        ok(stp_pacer_get_stats(p, &mut s));
        assert_eq!(s.on_time + s.late, 3);
        fails(
            stp_pacer_get_stats(p, null_mut()),
            STP_INVALID_ARGUMENT,
            "out",
        );
        fails(
            stp_pacer_sync(null(), 0, &mut tick, null_mut()),
            STP_INVALID_ARGUMENT,
            "pacer",
        );
        stp_pacer_free(p);
        stp_pacer_free(null_mut());
    }
}

#[test]
fn configs_are_filled_through_setters() {
    // SAFETY: a live config and NUL-terminated strings; freed once.
    unsafe {
        assert!(stp_config_new(9).is_null());
        let cfg = stp_config_new(1);
        assert!(!cfg.is_null());
        ok(stp_config_listen(cfg, c"tcp/127.0.0.1:0".as_ptr()));
        ok(stp_config_connect(cfg, c"tcp/127.0.0.1:7447".as_ptr()));
        ok(stp_config_credentials(
            cfg,
            c"user".as_ptr(),
            c"secret".as_ptr(),
        ));
        ok(stp_config_tls(cfg, c"ca.pem".as_ptr(), null(), null()));
        ok(stp_config_credentials_file(cfg, c"users.txt".as_ptr()));
        ok(stp_config_metrics_listen(cfg, c"127.0.0.1:0".as_ptr()));
        ok(stp_config_timeouts(cfg, 1000, 5000, 5000));
        fails(
            stp_config_timeouts(cfg, 0, 1, 1),
            STP_INVALID_ARGUMENT,
            "positive",
        );
        fails(
            stp_config_listen(cfg, null()),
            STP_INVALID_ARGUMENT,
            "endpoint",
        );
        fails(
            stp_config_listen(null_mut(), c"x".as_ptr()),
            STP_INVALID_ARGUMENT,
            "cfg",
        );
        stp_config_free(cfg);
        stp_config_free(null_mut());
    }
}

/// The calls of the cluster and the pthreads face that need no cluster: argument checks,
/// the per-thread frames, and `malloc` and friends before the face starts (the C
/// library's).
#[cfg(target_os = "linux")]
#[test]
fn cluster_calls_check_their_arguments() {
    unsafe extern "C" fn body(
        _: *mut stp_cluster_task,
        _: *const u8,
        _: usize,
        _: *mut c_void,
    ) -> i32 {
        0
    }
    // SAFETY: NUL-terminated strings, writable out-pointers, and blocks of the C library
    // passed back to it once.
    unsafe {
        fails(
            stp_cluster_register(c"c:1".as_ptr(), Some(body), null_mut()),
            STP_INVALID_ARGUMENT,
            "cannot name",
        );
        fails(
            stp_cluster_register(c"t".as_ptr(), None, null_mut()),
            STP_INVALID_ARGUMENT,
            "body",
        );
        ok(stp_cluster_register(c"t".as_ptr(), Some(body), null_mut()));
        let mut served = true;
        ok(stp_cluster_serve_attached(0, &mut served));
        assert!(!served);
        fails(
            stp_cluster_task_return(null_mut(), null(), 0),
            STP_INVALID_ARGUMENT,
            "task",
        );
        fails(
            stp_cluster_task_fail(null_mut(), c"why".as_ptr()),
            STP_INVALID_ARGUMENT,
            "task",
        );
        assert!(!stp_cluster_task_cancelled(null()));
        assert!(stp_cluster_id(null()).is_null());
        let mut c = null_mut();
        let mut rt = null_mut();
        ok(stp_runtime_new(&mut rt));
        fails(
            stp_cluster_start(rt, 0, &mut c),
            STP_INVALID_ARGUMENT,
            "stp_runtime_join",
        );
        stp_runtime_free(rt);

        // Before the face starts: the C library's allocator, and no cluster objects.
        let p = stp_malloc(24).cast::<u8>();
        assert!(!p.is_null());
        p.write_bytes(0xab, 24);
        let p = stp_realloc(p.cast(), 4096).cast::<u8>();
        assert!(!p.is_null());
        assert_eq!(std::slice::from_raw_parts(p, 24), [0xab; 24]);
        stp_free(p.cast());
        let z = stp_calloc(4, 8).cast::<u64>();
        assert_eq!(std::slice::from_raw_parts(z, 4), [0; 4]);
        stp_free(z.cast());
        assert!(stp_calloc(usize::MAX, 2).is_null());
        stp_free(null_mut());
        let r = stp_realloc(null_mut(), 8);
        assert!(!r.is_null());
        stp_free(r);

        let mut m = std::mem::MaybeUninit::<stp_pthread_mutex_t>::zeroed();
        assert_eq!(stp_pthread_mutex_lock(m.as_mut_ptr()), libc::EPERM);
        let mut b = std::mem::MaybeUninit::<stp_pthread_barrier_t>::zeroed();
        assert_eq!(stp_pthread_barrier_init(b.as_mut_ptr(), null(), 2), 0);
        assert_eq!(
            stp_pthread_barrier_init(null_mut(), null(), 2),
            libc::EINVAL
        );
        assert_eq!(stp_pthread_barrier_wait(b.as_mut_ptr()), libc::EPERM);
        assert_eq!(stp_pthread_self(), 0);
        assert!(!stp_pthread_cancelled());
        let mut jb = 0u64;
        let jb = std::ptr::from_mut(&mut jb).cast::<c_void>();
        let prev = stp_pthread_frame_enter(jb);
        assert_eq!(
            stp_pthread_frame_exit(null_mut::<u8>().wrapping_add(7).cast()),
            jb
        );
        assert_eq!(stp_pthread_exit_value() as usize, 7);
        stp_pthread_cleanup_set(jb);
        assert_eq!(stp_pthread_cleanup_top(), jb);
        stp_pthread_frame_leave(prev);
        assert!(stp_pthread_exit_value().is_null());
    }
}
