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
//! // A tracker: always takes the newest frame it has not seen, skipping stale ones.
//! let tracker = rt.task(INFINITY).unwrap();
//! let input = tracker.attach_input(&frames).unwrap();
//! let mut last = -1;
//! while let Ok((ts, frame)) = input.get(Selector::NewestUnseen) {
//!     assert!(ts > last && frame.as_bytes().unwrap()[0] == ts as u8);
//!     last = ts;
//!     input.consume_until(ts).unwrap();
//! }
//! digitizer.join().unwrap();
//! assert_eq!(last, 99);
//! ```
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
mod item;
mod notify;
mod pacing;
mod queue;
mod register;
mod runtime;
mod sync;
mod task;
mod time;

pub use channel::{Channel, ChannelStats, Selector, Wait};
pub use connection::{InputConnection, OutputConnection, PutOptions};
pub use container::{Container, ContainerHandle, ContainerOptions, Named};
pub use correlate::{Correlated, Correlator, Match};
pub use error::{GetError, Neighbors, PutError, PutErrorKind, StmError};
pub use gc::{ConnId, ContainerId, GcStats, Hold, HoldCause, WatermarkReport};
pub use item::{DType, Element, Item, ItemType, MarshalError, MarshalFn, NdArray, TypeTag};
pub use notify::{Arrivals, SubscriptionId};
pub use pacing::{LateAction, Lateness, Pacer, PacerStats, Tick};
pub use queue::{Queue, QueueItem, QueueStats};
pub use register::Register;
pub use runtime::{Runtime, RuntimeBuilder};
pub use task::{Task, TaskBuilder, TaskId};
pub use time::{Timestamp, ZoneId, INFINITY};
