//! Every decoder of the Strata collectives' notices, messages and block packets: none may
//! panic on any input, and whatever one accepts must survive a re-encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stampede_strata::fuzz_decoders(data));
