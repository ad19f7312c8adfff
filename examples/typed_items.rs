//! Typed items: a custom type with marshal/unmarshal hooks, built-in bytes, text and arrays,
//! and lazy marshalling that happens only when an item needs its wire form.
//!
//! `cargo run --example typed_items`

use bytes::Bytes;
use stampede::{DType, Item, ItemType, MarshalError, NdArray, TypeTag};

/// A detection: a bounding box and a label. On the wire: four little-endian u32 and the label.
#[derive(Debug, Clone, PartialEq)]
struct Detection {
    bbox: [u32; 4],
    label: String,
}

impl ItemType for Detection {
    const TYPE_NAME: &'static str = "example.detection";

    fn marshal(&self) -> Bytes {
        let mut v = Vec::with_capacity(16 + self.label.len());
        for x in self.bbox {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(self.label.as_bytes());
        v.into()
    }

    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
        if wire.len() < 16 {
            return Err(MarshalError::Truncated);
        }
        let mut bbox = [0; 4];
        for (i, b) in bbox.iter_mut().enumerate() {
            *b = u32::from_le_bytes(wire[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        }
        let label =
            String::from_utf8(wire[16..].to_vec()).map_err(|_| MarshalError::InvalidUtf8)?;
        Ok(Detection { bbox, label })
    }
}

fn main() {
    let d = Item::new(Detection {
        bbox: [10, 20, 64, 48],
        label: "face".into(),
    });
    println!("tag {:?}, marshalled: {}", d.tag(), d.is_marshalled());
    println!("local access, no marshalling: {:?}", d.get::<Detection>());
    let remote = Item::from_wire(d.tag(), d.wire().clone()); // what another address space sees
    println!(
        "wire is {} bytes, marshalled now: {}",
        d.wire().len(),
        d.is_marshalled()
    );
    println!("decoded remotely: {:?}", remote.decode::<Detection>());

    let frame = NdArray::from_slice(&[2, 2], &[0.5f32, 1.0, 1.5, 2.0]).expect("4 elements");
    let item = Item::from(frame);
    let back: NdArray = Item::from_wire(TypeTag::NDARRAY, item.wire().clone())
        .decode()
        .expect("valid layout");
    assert_eq!(back.dtype(), DType::F32);
    println!("array {:?} -> {:?}", back.shape(), back.as_slice::<f32>());

    let bad = Item::from_wire(
        TypeTag::NDARRAY,
        Bytes::from_static(b"SNDA\x01\x63\x00\x00"),
    );
    println!(
        "a corrupt array is rejected: {:?}",
        bad.decode::<NdArray>().unwrap_err()
    );
    println!(
        "text: {:?}, bytes: {:?}",
        Item::from("hello").as_str(),
        Item::from(vec![1u8, 2]).as_bytes()
    );
}
