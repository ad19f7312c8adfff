//! Every decoder of the Concurrent Collections graphs' messages between address spaces:
//! none may panic on any input, and whatever one accepts must survive a re-encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stampede_coord::fuzz_decoders(data));
