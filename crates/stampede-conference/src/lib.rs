//! The video conference of the D-Stampede paper (§4, §5.2): participants with a camera and a
//! display, a mixer that composes one image per time slot from everybody's frames, and the
//! paper's socket baseline to measure it against.
//!
//! * [`run_mixer`] is the Stampede mixer: a Zenoh router owning the channel of composites
//!   `conf/mix` and the register `conf/clock`; it follows every participant's camera channel
//!   `conf/cam/<id>` as it appears in the name server, one thread per participant
//!   ([`Threads::Multi`]) or one loop for all ([`Threads::Single`]).
//! * [`run_participant`] joins as a Zenoh client, puts frames into its own camera channel
//!   and takes the newest composite from `conf/mix`, checking every tile.
//! * [`run_baseline_mixer`] and [`run_baseline_participant`] do the same over plain TCP with a
//!   single-threaded mixer, the paper's first version.
//! * [`run_bench`] measures both, as in the paper's Figures 14-15 and Table 1.
//!
//! Frames, composites and their checks are in [`compose`], [`verify_composite`] and
//! friends; participants written in C or Python follow the same layout (see
//! `docs/conference.md`).
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod baseline;
mod bench;
mod error;
mod frame;
mod join;
mod mixer;
mod participant;
mod protocol;
mod report;
mod stop;

pub use baseline::{
    run_baseline_mixer, run_baseline_participant, socket_addr, BaselineMixerOptions,
    BaselineParticipantOptions, DEFAULT_BASELINE_ADDR,
};
pub use bench::{
    bandwidth_mbps, render_tables, run_bench, write_results, BenchOptions, BenchResults, Host,
    Point, Ratio, System,
};
pub use error::ConferenceError;
pub use frame::{
    compose, fill_byte, fill_frame, frame_bytes, frame_item, read_header, verify_composite,
    Composite, FrameSize, Grid, Tile, Verdict, DEFAULT_WIDTH, HEADER_LEN,
};
pub use join::JoinOptions;
pub use mixer::{run_mixer, MixerOptions, Threads, AHEAD};
pub use participant::{run_participant, ParticipantOptions};
pub use protocol::{
    cam_name, clock_item, decode_clock, lead, parse_cam_name, CAM_CAPACITY, CAM_PREFIX,
    CLOCK_REGISTER, DEFAULT_APP, DEFAULT_ENDPOINT, MIX_CAPACITY, MIX_CHANNEL, MIX_ZONE,
};
pub use report::{emit, DisplayReport, DisplayStats, FpsMeter, MixerReport, Summary};
pub use stop::Stop;
