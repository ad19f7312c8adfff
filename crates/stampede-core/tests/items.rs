//! Tests for typed items: built-in round trips, lazy cached marshalling, the array layout's
//! error cases, user item types and run-time marshal hooks.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use stampede_core::{
    ContainerOptions, DType, Item, ItemType, MarshalError, MarshalFn, NdArray, Runtime, Selector,
    TypeTag, INFINITY,
};

/// A user type whose marshal hook counts its calls.
#[derive(Debug, PartialEq)]
struct Point {
    x: i32,
    y: i32,
}

static POINT_MARSHALS: AtomicUsize = AtomicUsize::new(0);

impl ItemType for Point {
    const TYPE_NAME: &'static str = "tests.point";
    fn marshal(&self) -> Bytes {
        POINT_MARSHALS.fetch_add(1, Ordering::SeqCst);
        let mut v = self.x.to_le_bytes().to_vec();
        v.extend_from_slice(&self.y.to_le_bytes());
        v.into()
    }
    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
        let b: [u8; 8] = wire[..]
            .try_into()
            .map_err(|_| MarshalError::Custom(format!("a point is 8 bytes, not {}", wire.len())))?;
        Ok(Point {
            x: i32::from_le_bytes(b[..4].try_into().unwrap()),
            y: i32::from_le_bytes(b[4..].try_into().unwrap()),
        })
    }
}

/// The array header of the shared layout.
fn header(version: u8, dtype: u8, shape: &[u64]) -> Vec<u8> {
    let mut v = b"SNDA".to_vec();
    v.extend_from_slice(&[version, dtype, shape.len() as u8, 0]);
    for d in shape {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v
}

fn decode_array(wire: Vec<u8>) -> Result<NdArray, MarshalError> {
    Item::from_wire(TypeTag::NDARRAY, wire.into()).decode::<NdArray>()
}

#[test]
fn type_tags_are_fnv1a_of_the_name() {
    assert_eq!(TypeTag::of_name("stampede.bytes"), TypeTag::BYTES);
    assert_eq!(TypeTag::of_name("stampede.utf8"), TypeTag::UTF8);
    assert_eq!(TypeTag::of_name("stampede.ndarray"), TypeTag::NDARRAY);
    // FNV-1a test vectors.
    assert_eq!(TypeTag::of_name("").0, 0xcbf2_9ce4_8422_2325);
    assert_eq!(TypeTag::of_name("a").0, 0xaf63_dc4c_8601_ec8c);
    assert_ne!(TypeTag::BYTES, TypeTag::UTF8);
    assert_eq!(
        Item::new(Point { x: 0, y: 0 }).tag(),
        TypeTag::of_name("tests.point")
    );
}

#[test]
fn bytes_round_trip() {
    let raw = Bytes::from_static(b"\x00\x01\xfe\xff raw");
    let item = Item::from(raw.clone());
    assert_eq!(item.tag(), TypeTag::BYTES);
    assert_eq!(item.as_bytes(), Some(&raw));
    assert_eq!(item.as_str(), None);
    assert_eq!(item.get::<Bytes>(), Some(&raw));
    assert_eq!(item.decode::<Bytes>().unwrap(), raw);
    assert_eq!(
        Item::from(vec![1u8, 2, 3]).as_bytes().unwrap()[..],
        [1, 2, 3]
    );
    let stat: &'static [u8] = b"static";
    assert_eq!(&Item::from(stat).as_bytes().unwrap()[..], b"static");

    // From another address space.
    let remote = Item::from_wire(TypeTag::BYTES, item.wire().clone());
    assert_eq!(remote.as_bytes(), Some(&raw));
    assert!(remote.get::<Bytes>().is_none());
    assert!(remote.native().is_none());
}

#[test]
fn utf8_round_trip() {
    let item = Item::from("héllo, wörld");
    assert_eq!(item.tag(), TypeTag::UTF8);
    assert_eq!(item.as_str(), Some("héllo, wörld"));
    assert_eq!(item.as_bytes(), None);
    assert_eq!(item.decode::<String>().unwrap(), "héllo, wörld");
    assert_eq!(&item.wire()[..], "héllo, wörld".as_bytes());
    assert_eq!(Item::from(String::from("owned")).as_str(), Some("owned"));

    let remote = Item::from_wire(TypeTag::UTF8, item.wire().clone());
    assert_eq!(remote.as_str(), Some("héllo, wörld"));

    let bad = Item::from_wire(TypeTag::UTF8, Bytes::from_static(&[0xff, 0xfe]));
    assert_eq!(bad.as_str(), None);
    assert_eq!(
        bad.decode::<String>().unwrap_err(),
        MarshalError::InvalidUtf8
    );
}

#[test]
fn ndarray_round_trip() {
    let a = NdArray::from_slice(&[2, 3], &[1.5f32, -2.0, 3.25, 0.0, 1e-3, 7.0]).unwrap();
    assert_eq!(a.dtype(), DType::F32);
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(a.len(), 6);
    assert!(!a.is_empty());
    assert_eq!(a.data().len(), 24);
    assert_eq!(a.as_slice::<f32>().unwrap()[2], 3.25);
    assert!(a.as_slice::<i32>().is_none(), "wrong element type");

    let item = Item::from(a.clone());
    assert_eq!(item.tag(), TypeTag::NDARRAY);
    let wire = item.wire().clone();
    assert_eq!(&wire[..4], b"SNDA");
    assert_eq!(wire[4], 1, "layout version");
    assert_eq!(wire[5], DType::F32.code());
    assert_eq!(wire[6], 2, "ndim");
    assert_eq!(wire.len(), 8 + 2 * 8 + 24);
    // Little-endian, row-major data after the header.
    assert_eq!(&wire[24..28], &1.5f32.to_le_bytes());

    let back: NdArray = Item::from_wire(TypeTag::NDARRAY, wire).decode().unwrap();
    assert_eq!(back, a);
    assert_eq!(
        back.as_slice::<f32>().unwrap(),
        a.as_slice::<f32>().unwrap()
    );

    // Every dtype, including a zero-dimensional scalar and an empty array.
    for code in 0..12u8 {
        let dt = DType::from_code(code).unwrap();
        assert_eq!(dt.code(), code);
        assert!(!dt.numpy_name().is_empty());
        let data = Bytes::from(vec![0xab; dt.itemsize() * 3]);
        let arr = NdArray::new(dt, &[3], data).unwrap();
        let back: NdArray = Item::from(arr.clone()).decode().unwrap();
        assert_eq!(back, arr);
    }
    let scalar = NdArray::from_slice::<i64>(&[], &[42]).unwrap();
    let back: NdArray = Item::from(scalar.clone()).decode().unwrap();
    assert_eq!(
        (back.shape(), back.as_slice::<i64>()),
        (&[][..], Some(&[42i64][..]))
    );
    let empty = NdArray::from_slice::<u16>(&[0, 4], &[]).unwrap();
    assert!(empty.is_empty());
    let back: NdArray = Item::from(empty.clone()).decode().unwrap();
    assert_eq!(back, empty);
    assert_eq!(DType::U8.numpy_name(), "uint8");
    assert_eq!(DType::F64.numpy_name(), "float64");
}

#[test]
fn ndarray_construction_checks_the_length() {
    assert_eq!(
        NdArray::new(DType::U16, &[2, 2], Bytes::from_static(&[0; 7])).unwrap_err(),
        MarshalError::LengthMismatch {
            expected: 8,
            actual: 7
        }
    );
    assert!(matches!(
        NdArray::from_slice(&[4], &[1u8, 2, 3]),
        Err(MarshalError::LengthMismatch {
            expected: 4,
            actual: 3
        })
    ));
    // A shape whose size overflows is a length mismatch, not a panic.
    assert!(matches!(
        NdArray::new(DType::F64, &[usize::MAX, 2], Bytes::new()),
        Err(MarshalError::LengthMismatch { .. })
    ));
}

#[test]
fn ndarray_decode_errors() {
    let good = Item::from(NdArray::from_slice(&[2], &[1u32, 2]).unwrap())
        .wire()
        .to_vec();

    // Truncated: shorter than the fixed header, shorter than the shape.
    assert_eq!(
        decode_array(b"SNDA".to_vec()).unwrap_err(),
        MarshalError::Truncated
    );
    assert_eq!(
        decode_array(Vec::new()).unwrap_err(),
        MarshalError::Truncated
    );
    let mut short_shape = header(1, DType::U8.code(), &[1, 1, 1]);
    short_shape.truncate(8 + 2 * 8 + 3);
    assert_eq!(
        decode_array(short_shape).unwrap_err(),
        MarshalError::Truncated
    );

    // Bad magic.
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(decode_array(bad).unwrap_err(), MarshalError::BadMagic);

    // Unknown version.
    let mut bad = good.clone();
    bad[4] = 9;
    assert_eq!(
        decode_array(bad).unwrap_err(),
        MarshalError::UnsupportedVersion(9)
    );

    // Unknown dtype.
    let mut bad = good.clone();
    bad[5] = 12;
    assert_eq!(
        decode_array(bad).unwrap_err(),
        MarshalError::UnknownDType(12)
    );
    assert_eq!(
        DType::from_code(200).unwrap_err(),
        MarshalError::UnknownDType(200)
    );

    // Data length does not match dtype and shape.
    let mut long = good.clone();
    long.push(0);
    assert_eq!(
        decode_array(long).unwrap_err(),
        MarshalError::LengthMismatch {
            expected: 8,
            actual: 9
        }
    );
    let mut short = good.clone();
    short.pop();
    assert_eq!(
        decode_array(short).unwrap_err(),
        MarshalError::LengthMismatch {
            expected: 8,
            actual: 7
        }
    );
    let mut wire = header(1, DType::F64.code(), &[3]);
    wire.extend_from_slice(&[0; 16]);
    assert_eq!(
        decode_array(wire).unwrap_err(),
        MarshalError::LengthMismatch {
            expected: 24,
            actual: 16
        }
    );
    // Huge dimensions do not panic.
    let wire = header(1, DType::U8.code(), &[u64::MAX, u64::MAX]);
    assert!(matches!(
        decode_array(wire),
        Err(MarshalError::LengthMismatch { .. })
    ));
    assert!(decode_array(good).is_ok());
    assert!(!MarshalError::BadMagic.to_string().is_empty());
}

#[test]
fn ndarray_with_many_dimensions_round_trips_or_is_rejected() {
    let shape = [1usize; 256];
    match NdArray::new(DType::U8, &shape, Bytes::from_static(&[7])) {
        Err(_) => {} // rejecting it up front is fine
        Ok(a) => {
            let back = Item::from(a.clone()).decode::<NdArray>();
            assert_eq!(back, Ok(a));
        }
    }
}

#[test]
fn decode_checks_the_type_tag() {
    let item = Item::from("text");
    assert_eq!(
        item.decode::<NdArray>().unwrap_err(),
        MarshalError::WrongType {
            expected: TypeTag::NDARRAY,
            found: TypeTag::UTF8
        }
    );
    assert!(item.get::<Bytes>().is_none());
    assert!(!item.is_marshalled(), "a refused decode marshals nothing");
}

#[test]
fn marshalling_is_lazy_and_cached() {
    let before = POINT_MARSHALS.load(Ordering::SeqCst);
    let item = Item::new(Point { x: 3, y: -4 });
    assert_eq!(item.get::<Point>(), Some(&Point { x: 3, y: -4 }));
    assert!(!item.is_marshalled());
    assert_eq!(POINT_MARSHALS.load(Ordering::SeqCst), before);

    // Passing it through a channel in one address space marshals nothing.
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    p.attach_output(&ch).unwrap().put(0, item.clone()).unwrap();
    let (_, got) = input.get(Selector::Exact(0)).unwrap();
    assert!(Item::ptr_eq(&got, &item));
    assert!(!got.is_marshalled());
    assert_eq!(POINT_MARSHALS.load(Ordering::SeqCst), before);

    // The first use of the wire form marshals, once, for every handle.
    let wire = got.wire().clone();
    assert_eq!(wire.len(), 8);
    assert!(item.is_marshalled());
    assert_eq!(item.decode::<Point>().unwrap(), Point { x: 3, y: -4 });
    assert_eq!(got.decode::<Point>().unwrap(), Point { x: 3, y: -4 });
    assert_eq!(
        item.wire().as_ptr(),
        wire.as_ptr(),
        "the cached bytes are reused"
    );
    assert_eq!(POINT_MARSHALS.load(Ordering::SeqCst), before + 1);
}

#[test]
fn custom_unmarshal_errors_are_reported() {
    let item = Item::from_wire(
        TypeTag::of_name("tests.point"),
        Bytes::from_static(&[1, 2, 3]),
    );
    assert!(matches!(item.decode::<Point>(), Err(MarshalError::Custom(m)) if m.contains('3')));
    assert!(item.get::<Point>().is_none());
}

#[test]
fn with_hook_marshals_once_with_the_given_hook() {
    let calls = Arc::new(AtomicUsize::new(0));
    let hook: MarshalFn = {
        let calls = calls.clone();
        Arc::new(move |v: &(dyn Any + Send + Sync)| {
            calls.fetch_add(1, Ordering::SeqCst);
            let n = v.downcast_ref::<u64>().expect("the hooked value");
            Bytes::copy_from_slice(&n.to_be_bytes())
        })
    };
    let tag = TypeTag::of_name("py.int");
    let item = Item::with_hook(tag, Box::new(0x0102_0304_0506_0708u64), hook);
    assert_eq!(item.tag(), tag);
    assert_eq!(
        item.native().unwrap().downcast_ref::<u64>(),
        Some(&0x0102_0304_0506_0708)
    );
    assert!(!item.is_marshalled());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(&item.wire()[..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let clone = item.clone();
    assert_eq!(&clone.wire()[..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(clone.is_marshalled());
    // Not one of the built-in types.
    assert_eq!(item.as_bytes(), None);
    assert_eq!(item.as_str(), None);
}

#[test]
fn the_wire_cache_is_freed_with_the_item() {
    let item = Item::from(NdArray::from_slice(&[1024], &[7u8; 1024]).unwrap());
    let wire = item.wire().clone();
    // The cache and `wire` share one buffer; once the item is gone, `wire` is its only owner.
    assert!(!wire.is_unique());
    let other = item.clone();
    drop(item);
    assert!(!wire.is_unique(), "still cached by the other handle");
    drop(other);
    assert!(wire.is_unique());
    assert_eq!(wire.len(), 8 + 8 + 1024);
}

#[test]
fn debug_output_shows_tag_and_state() {
    let item = Item::from("x");
    let s = format!("{item:?}");
    assert!(
        s.contains("TypeTag") && s.contains("marshalled: false"),
        "{s}"
    );
    let a = NdArray::from_slice(&[1], &[1u8]).unwrap();
    assert!(format!("{a:?}").contains("U8"));
}

/// Found by the `items` fuzz target: an array header with a non-zero reserved byte decoded
/// as if it were 0, so two byte strings meant one array. It is refused now.
#[test]
fn an_array_header_with_a_reserved_byte_set_is_refused() {
    let mut wire = header(1, 2, &[2, 3]);
    wire.extend_from_slice(&[0; 6]);
    assert!(decode_array(wire.clone()).is_ok());
    wire[7] = 10;
    assert_eq!(decode_array(wire), Err(MarshalError::ReservedByte(10)));
}
