//! The item decoders: an item's wire bytes under every built-in type tag (bytes, UTF-8
//! text, n-dimensional arrays with their header). A decoder may refuse the input but must
//! not panic; an array it accepts has as many elements as its shape says, and marshals back
//! to exactly the input, since the array layout is canonical.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stampede_core::{Item, ItemType, NdArray, TypeTag};

fuzz_target!(|data: &[u8]| {
    let item = |tag| Item::from_wire(tag, Bytes::copy_from_slice(data));
    if let Ok(a) = item(TypeTag::NDARRAY).decode::<NdArray>() {
        let elements: usize = a.shape().iter().product();
        assert_eq!(elements * a.dtype().itemsize(), a.data().len());
        assert_eq!(a.marshal(), data);
    }
    if let Ok(text) = item(TypeTag::UTF8).decode::<String>() {
        assert_eq!(text.as_bytes(), data);
    }
    let bytes = item(TypeTag::BYTES)
        .decode::<Bytes>()
        .expect("any bytes are bytes");
    assert_eq!(bytes, data);
    // A tag the bytes were not made with is refused, never reinterpreted.
    assert!(item(TypeTag::BYTES).decode::<NdArray>().is_err());
});
