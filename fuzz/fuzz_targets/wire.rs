//! Feeds every input to every decoder of the distribution layer's wire format. A decoder may refuse the input
//! but must not panic; whatever it accepts must survive a re-encoding unchanged, and be
//! exactly the input, since the encoding is canonical.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stampede_net::wire;

fuzz_target!(|data: &[u8]| {
    let input = || Bytes::copy_from_slice(data);
    if let Ok(r) = wire::decode_request(input()) {
        let again = wire::encode_request(&r).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_request(again), Ok(r));
    }
    if let Ok(r) = wire::decode_reply(input()) {
        let again = wire::encode_reply(&r).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_reply(again), Ok(r));
    }
    if let Ok(n) = wire::decode_name(input()) {
        let again = wire::encode_name(&n);
        assert_eq!(again, data);
        assert_eq!(wire::decode_name(again), Ok(n));
    }
    if let Ok(m) = wire::decode_marks(input()) {
        let again = wire::encode_marks(&m);
        assert_eq!(again, data);
        assert_eq!(wire::decode_marks(again), Ok(m));
    }
    if let Ok(p) = wire::decode_push(input()) {
        let again = wire::encode_push(&p).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_push(again), Ok(p));
    }
    if let Ok(e) = wire::decode_event(input()) {
        let again = wire::encode_event(&e).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_event(again), Ok(e));
    }
    if let Ok(m) = wire::decode_send(input()) {
        let again = wire::encode_send(&m).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_send(again), Ok(m));
    }
    if let Ok(m) = wire::decode_ack(input()) {
        let again = wire::encode_ack(&m);
        assert_eq!(again, data);
        assert_eq!(wire::decode_ack(again), Ok(m));
    }
    if let Ok(m) = wire::decode_invoke(input()) {
        let again = wire::encode_invoke(&m).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_invoke(again), Ok(m));
    }
    if let Ok(m) = wire::decode_answer(input()) {
        let again = wire::encode_answer(&m).to_vec();
        assert_eq!(again, data);
        assert_eq!(wire::decode_answer(again), Ok(m));
    }
});
