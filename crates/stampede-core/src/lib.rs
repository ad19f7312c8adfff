//! Space-Time Memory: the core of Stampede.
//!
//! Tasks exchange time-stamped items through *containers*: [`Channel`]s (one item per
//! timestamp, random access), [`Queue`]s (FIFO, each item delivered once) and [`Register`]s
//! (a shared variable with full/empty signalling). Every operation goes through a
//! connection held by a [`Task`], whose virtual time, together with what its connections have
//! not yet consumed, lets the runtime reclaim items that can never be reached again (see the
//! invariants in the `gc` module's documentation and [`Runtime::explain`]).
//!
//! ```
//! use stampede_core::{ContainerOptions, Runtime, Selector, INFINITY};
//!
//! let rt = Runtime::new();
//! let frames = rt.channel(ContainerOptions::bounded(8).name("video/frames")).unwrap();
//!
//! // A tracker that takes the newest frame it has not seen, skipping stale ones. It attaches
//! // before the digitizer starts, so it cannot miss the first frames.
//! let tracker = rt.task(INFINITY).unwrap();
//! let input = tracker.attach_input(&frames).unwrap();
//!
//! // A digitizer: puts frame n at timestamp n and advances its virtual time.
//! let digitizer = rt.spawn(0, {
//!     let frames = frames.clone();
//!     move |task| {
//!         let out = task.attach_output(&frames).unwrap();
//!         for n in 0..100 {
//!             out.put(n, vec![n as u8; 64]).unwrap();
//!             task.set_virtual_time(n + 1).unwrap();
//!         }
//!         frames.close();
//!     }
//! }).unwrap();
//!
//! let mut last = -1;
//! while let Ok((ts, frame)) = input.get(Selector::NewestUnseen) {
//!     assert!(ts > last && frame.as_bytes().unwrap()[0] == ts as u8);
//!     last = ts;
//!     input.consume_until(ts).unwrap();
//! }
//! digitizer.join().unwrap();
//! assert_eq!(last, 99);
//! ```
//!
//! # Rules where the papers leave room
//!
//! - **Selectors.** Items consumed on a connection are invisible to it. `NewestUnseen` is the
//!   newest visible item never gotten on this connection; `NextUnseen` is the oldest visible
//!   item newer than this connection's last get (of any selector). A `NewestUnseen` get counts
//!   the unseen items it passes over in [`ChannelStats::skipped`].
//! - **Gone.** `Exact(t)` fails at once with [`GetError::Gone`] when `t` is below the zone's
//!   floor, consumed on this connection, `INFINITY`, or was reclaimed by a reference count
//!   (such a timestamp can also never be put again). A failed non-blocking get reports the nearest
//!   visible timestamps below and above the request.
//! - **Consume** may name any timestamp, present or not; `consume_until(t)` also covers items
//!   that arrive later. Both are idempotent.
//! - **Rule 3** marks the items *present* below the task's visibility consumed on the new
//!   connection (so a task at `INFINITY` sees only items put after it attached); the marking
//!   does not count as a consume for reference counts.
//! - **Reference counts.** An item put with `consumers(n)` is reclaimed once `n` connections
//!   consumed it and none still has it open.
//! - **Root tasks** (created from the [`Runtime`] rather than a parent) start at or above
//!   their zone's floor. The floor never passes one above the newest timestamp ever put in the
//!   zone, and a zone without live tasks keeps its floor, so sources can join late;
//!   [`Runtime::explain`] then names that term ([`HoldCause::NoLiveTask`]).
//! - **Time zones.** A task puts only into containers of its own zone
//!   ([`StmError::ZoneMismatch`]). It may read from other zones: such items do not lower its
//!   visibility, and rule 3 uses that zone's floor. A child in another zone starts at or
//!   above that zone's floor.
//! - **Queues** count items waiting to be gotten against their capacity; held items are
//!   extra. A held item keeps its getter's visibility at the item's timestamp. When a
//!   connection detaches (or its task exits) its held items go back among the waiting items
//!   in their original (ticket) order, for another getter.
//! - **Bounded channels** never store more than their capacity. A put that finds a channel
//!   full runs a collection pass first if none looked at the channel within the last 2 ms
//!   (a non-waiting put always does, before it reports `Full`). A waiting put holds the
//!   watermark at its timestamp and runs passes itself: after every batch of consumes on the
//!   channel (half its capacity), when a getter of the channel is about to park, and at
//!   least every 2 ms. Virtual-time raises, detaches, task exits and consumes on other
//!   channels run a pass for it.
//! - **Input connections:** a channel accepts up to 64 at a time
//!   ([`StmError::TooManyConnections`]); detaching frees a place.
//! - **Registers** are outside garbage collection; a new reader's first read returns the
//!   current value if there is one.
//! - **Close** makes puts fail with `Closed`; gets return what is still visible and then
//!   `Closed`; arrival streams end. From then on a channel item consumed on some connection
//!   that no present input connection can still read is reclaimed at once: this releases
//!   what a finished run leaves when its zone keeps the floor. Items nobody consumed stay
//!   for readers that attach later.
//! - **Interrupts.** A put waiting for space (and a pacer's sleep) can take an interrupt
//!   check, asked every 50 ms or so with no lock held; the put stays one waiting put (a
//!   watermark term, in its place among waiting puts) until the check stops it with
//!   [`PutErrorKind::Interrupted`], handing the item back. Bindings use it for signals.
//! - **Callbacks** (garbage handlers, arrival callbacks) run on the thread whose operation
//!   caused them, outside every lock.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod channel;
mod connection;
mod container;
mod correlate;
mod error;
mod gc;
mod ids;
mod item;
mod kind;
mod loan;
mod notify;
mod pacing;
pub mod provider;
mod queue;
mod register;
mod report;
mod runtime;
mod sync;
mod task;
mod time;
mod wait;

pub use channel::{Channel, ChannelStats, Selector};
pub use connection::{InputConnection, OutputConnection, PutOptions};
pub use container::{Container, ContainerOptions, Named};
pub use correlate::{Correlated, Correlator, Match};
pub use error::{
    ErrorCode, Figures, GetError, Neighbors, Permission, PutError, PutErrorKind, StmError,
};
pub use gc::{GcStats, Hold, HoldCause, WatermarkReport};
pub use ids::{ConnId, ContainerId, TaskId};
pub use item::{
    DType, Element, Item, ItemType, MarshalError, MarshalFn, NdArray, TypeTag, MAX_NDIM,
};
pub use kind::Kind;
pub use loan::{Loan, LoanBuffer};
pub use notify::{Arrivals, SubscriptionId};
pub use pacing::{LateAction, Lateness, Pacer, PacerStats, Tick};
pub use queue::{Queue, QueueItem, QueueStats};
pub use register::Register;
pub use report::{ConnectionReport, Direction, TaskReport};
pub use runtime::{Runtime, RuntimeBuilder};
pub use task::{Task, TaskBuilder};
pub use time::{Timestamp, ZoneId, INFINITY};
pub use wait::Wait;
