//! Every decoder of the cluster threads' messages (spawn, join, locks, barriers, the global
//! heap): none may panic on any input, and whatever one accepts must survive a re-encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stampede_cluster::fuzz_decoders(data));
