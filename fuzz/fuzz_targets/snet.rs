//! The S-Net language front end on any text: parsing and checking may refuse a program
//! with diagnostics but must not panic, and rendering the diagnostics (source lines and
//! carets) must not panic either, whatever the characters; a program's canonical form is a
//! fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stampede_coord::snet::{canonical, Network};

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(d) = Network::parse("fuzz.snet", source) {
        let _ = d.to_string();
    }
    if let Ok(once) = canonical(source) {
        let twice = canonical(&once).expect("a canonical form parses");
        assert_eq!(once, twice);
    }
});
