//! Typed items.
//!
//! An item is an immutable value plus a [`TypeTag`]. Inside one address space it travels as
//! a shared pointer: a put stores the pointer and a get hands out another, so copy-in and
//! copy-out hold because nobody can mutate it. Marshalling into wire bytes happens only when
//! an item must leave the address space, once, and the bytes are cached in the item and
//! reclaimed with it.
//!
//! # Array layout
//!
//! [`NdArray`] is the n-dimensional array shared by Rust, Python (numpy) and C: a dtype, a
//! shape, and the elements in row-major (C) order, little-endian, with no strides. Its wire
//! form is
//!
//! ```text
//! "SNDA" | version: u8 = 1 | dtype: u8 | ndim: u8 | 0u8 | shape: ndim x u64 LE | data
//! ```

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};

/// Identifies an item's type across address spaces and languages.
///
/// Tags are the 64-bit FNV-1a hash of the type's name, so every language computes the same
/// tag from the same name without a registry.
///
/// ```
/// use stampede_core::TypeTag;
/// assert_eq!(TypeTag::of_name("stampede.bytes"), TypeTag::BYTES);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeTag(pub u64);

impl TypeTag {
    /// Raw bytes.
    pub const BYTES: TypeTag = TypeTag::of_name("stampede.bytes");
    /// UTF-8 text.
    pub const UTF8: TypeTag = TypeTag::of_name("stampede.utf8");
    /// An [`NdArray`].
    pub const NDARRAY: TypeTag = TypeTag::of_name("stampede.ndarray");

    /// The tag of the type called `name`.
    pub const fn of_name(name: &str) -> TypeTag {
        let bytes = name.as_bytes();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut i = 0;
        while i < bytes.len() {
            hash ^= bytes[i] as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        TypeTag(hash)
    }
}

impl fmt::Debug for TypeTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TypeTag({:#018x})", self.0)
    }
}

/// Why wire bytes could not be turned back into a value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MarshalError {
    /// The bytes end before the value does.
    Truncated,
    /// The bytes do not start with the expected magic number.
    BadMagic,
    /// A layout version this build does not know.
    UnsupportedVersion(u8),
    /// An unknown element type code.
    UnknownDType(u8),
    /// The data length does not match dtype and shape.
    LengthMismatch {
        /// Bytes that dtype and shape call for.
        expected: usize,
        /// Bytes present.
        actual: usize,
    },
    /// More dimensions than the layout can describe ([`MAX_NDIM`]).
    TooManyDimensions(usize),
    /// A header byte the layout reserves is not 0 (an array's eighth byte).
    ReservedByte(u8),
    /// Text that is not valid UTF-8.
    InvalidUtf8,
    /// The item has another type.
    WrongType {
        /// The tag asked for.
        expected: TypeTag,
        /// The item's tag.
        found: TypeTag,
    },
    /// A user hook rejected the bytes.
    Custom(String),
}

impl fmt::Display for MarshalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarshalError::Truncated => f.write_str("truncated item bytes"),
            MarshalError::BadMagic => f.write_str("bad magic number"),
            MarshalError::UnsupportedVersion(v) => write!(f, "unsupported layout version {v}"),
            MarshalError::UnknownDType(c) => write!(f, "unknown dtype code {c}"),
            MarshalError::LengthMismatch { expected, actual } => {
                write!(f, "expected {expected} data bytes, found {actual}")
            }
            MarshalError::TooManyDimensions(n) => {
                write!(f, "{n} dimensions; the layout allows {MAX_NDIM}")
            }
            MarshalError::ReservedByte(b) => write!(f, "reserved header byte is {b}, not 0"),
            MarshalError::InvalidUtf8 => f.write_str("invalid UTF-8"),
            MarshalError::WrongType { expected, found } => {
                write!(f, "expected type {expected:?}, found {found:?}")
            }
            MarshalError::Custom(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for MarshalError {}

/// A type that can be stored in Space-Time Memory: its name and its marshal/unmarshal hooks.
///
/// ```
/// use bytes::Bytes;
/// use stampede_core::{Item, ItemType, MarshalError};
///
/// #[derive(Debug, PartialEq)]
/// struct Point { x: i32, y: i32 }
///
/// impl ItemType for Point {
///     const TYPE_NAME: &'static str = "example.point";
///     fn marshal(&self) -> Bytes {
///         let mut v = self.x.to_le_bytes().to_vec();
///         v.extend_from_slice(&self.y.to_le_bytes());
///         v.into()
///     }
///     fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
///         let b: [u8; 8] = wire[..].try_into().map_err(|_| MarshalError::Truncated)?;
///         Ok(Point {
///             x: i32::from_le_bytes(b[..4].try_into().unwrap()),
///             y: i32::from_le_bytes(b[4..].try_into().unwrap()),
///         })
///     }
/// }
///
/// let item = Item::new(Point { x: 3, y: -4 });
/// assert_eq!(item.get::<Point>(), Some(&Point { x: 3, y: -4 }));
/// assert!(!item.is_marshalled());
/// assert_eq!(item.decode::<Point>().unwrap(), Point { x: 3, y: -4 }); // via the wire form
/// assert!(item.is_marshalled()); // cached from now on
/// ```
pub trait ItemType: Any + Send + Sync + Sized {
    /// The type's name, from which its [`TypeTag`] is derived.
    const TYPE_NAME: &'static str;
    /// Turns the value into wire bytes.
    fn marshal(&self) -> Bytes;
    /// Rebuilds a value from wire bytes.
    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError>;
}

type DynValue = dyn Any + Send + Sync;
/// A marshal hook supplied at run time (used by language bindings).
pub type MarshalFn = Arc<dyn Fn(&DynValue) -> Bytes + Send + Sync>;

/// What every stored representation offers; one allocation per item.
trait Stored: Send + Sync {
    fn tag(&self) -> TypeTag;
    fn native(&self) -> Option<&DynValue>;
    fn wire_cell(&self) -> &OnceLock<Bytes>;
    fn marshal(&self) -> Bytes;
}

struct Typed<T> {
    tag: TypeTag,
    value: T,
    wire: OnceLock<Bytes>,
}

impl<T: ItemType> Stored for Typed<T> {
    fn tag(&self) -> TypeTag {
        self.tag
    }
    fn native(&self) -> Option<&DynValue> {
        Some(&self.value)
    }
    fn wire_cell(&self) -> &OnceLock<Bytes> {
        &self.wire
    }
    fn marshal(&self) -> Bytes {
        self.value.marshal()
    }
}

struct Hooked {
    tag: TypeTag,
    value: Box<DynValue>,
    marshal: MarshalFn,
    wire: OnceLock<Bytes>,
}

impl Stored for Hooked {
    fn tag(&self) -> TypeTag {
        self.tag
    }
    fn native(&self) -> Option<&DynValue> {
        Some(&*self.value)
    }
    fn wire_cell(&self) -> &OnceLock<Bytes> {
        &self.wire
    }
    fn marshal(&self) -> Bytes {
        (self.marshal)(&*self.value)
    }
}

struct Wire {
    tag: TypeTag,
    wire: OnceLock<Bytes>,
}

impl Stored for Wire {
    fn tag(&self) -> TypeTag {
        self.tag
    }
    fn native(&self) -> Option<&DynValue> {
        None
    }
    fn wire_cell(&self) -> &OnceLock<Bytes> {
        &self.wire
    }
    fn marshal(&self) -> Bytes {
        self.wire.get().cloned().unwrap_or_default()
    }
}

/// An immutable, cheaply cloned, typed value stored in a container.
#[derive(Clone)]
pub struct Item(Arc<dyn Stored>);

impl Item {
    /// Wraps a value; nothing is marshalled until the item leaves its address space.
    pub fn new<T: ItemType>(value: T) -> Item {
        Item(Arc::new(Typed {
            tag: TypeTag::of_name(T::TYPE_NAME),
            value,
            wire: OnceLock::new(),
        }))
    }

    /// Wraps a value with a marshal hook given at run time.
    pub fn with_hook(tag: TypeTag, value: Box<DynValue>, marshal: MarshalFn) -> Item {
        Item(Arc::new(Hooked {
            tag,
            value,
            marshal,
            wire: OnceLock::new(),
        }))
    }

    /// An item that arrived as wire bytes from another address space.
    pub fn from_wire(tag: TypeTag, wire: Bytes) -> Item {
        Item(Arc::new(Wire {
            tag,
            wire: OnceLock::from(wire),
        }))
    }

    /// The item's type tag.
    pub fn tag(&self) -> TypeTag {
        self.0.tag()
    }

    /// The value, if the item holds a native `T` (it was created in this address space).
    pub fn get<T: ItemType>(&self) -> Option<&T> {
        self.0.native()?.downcast_ref::<T>()
    }

    /// The native value as `Any`, whatever its type.
    pub fn native(&self) -> Option<&DynValue> {
        self.0.native()
    }

    /// The wire form, marshalled on first use and cached for the item's lifetime.
    pub fn wire(&self) -> &Bytes {
        self.0.wire_cell().get_or_init(|| self.0.marshal())
    }

    /// Whether the wire form exists yet.
    pub fn is_marshalled(&self) -> bool {
        self.0.wire_cell().get().is_some()
    }

    /// Rebuilds a `T` from the wire form (marshalling first if needed).
    pub fn decode<T: ItemType>(&self) -> Result<T, MarshalError> {
        let expected = TypeTag::of_name(T::TYPE_NAME);
        if self.tag() != expected {
            return Err(MarshalError::WrongType {
                expected,
                found: self.tag(),
            });
        }
        T::unmarshal(self.wire().clone())
    }

    /// Raw bytes of a [`TypeTag::BYTES`] item, without copying.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        if self.tag() != TypeTag::BYTES {
            return None;
        }
        Some(self.get::<Bytes>().unwrap_or_else(|| self.wire()))
    }

    /// Text of a [`TypeTag::UTF8`] item.
    pub fn as_str(&self) -> Option<&str> {
        if self.tag() != TypeTag::UTF8 {
            return None;
        }
        match self.get::<String>() {
            Some(s) => Some(s),
            None => std::str::from_utf8(self.wire()).ok(),
        }
    }

    /// Whether two handles share one stored item.
    pub fn ptr_eq(a: &Item, b: &Item) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl fmt::Debug for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Item")
            .field("tag", &self.tag())
            .field("marshalled", &self.is_marshalled())
            .finish()
    }
}

impl ItemType for Bytes {
    const TYPE_NAME: &'static str = "stampede.bytes";
    fn marshal(&self) -> Bytes {
        self.clone()
    }
    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
        Ok(wire)
    }
}

impl ItemType for String {
    const TYPE_NAME: &'static str = "stampede.utf8";
    fn marshal(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
        String::from_utf8(wire.to_vec()).map_err(|_| MarshalError::InvalidUtf8)
    }
}

impl From<Bytes> for Item {
    fn from(b: Bytes) -> Item {
        Item::new(b)
    }
}
impl From<Vec<u8>> for Item {
    fn from(b: Vec<u8>) -> Item {
        Item::new(Bytes::from(b))
    }
}
impl From<&'static [u8]> for Item {
    fn from(b: &'static [u8]) -> Item {
        Item::new(Bytes::from_static(b))
    }
}
impl From<String> for Item {
    fn from(s: String) -> Item {
        Item::new(s)
    }
}
impl From<&str> for Item {
    fn from(s: &str) -> Item {
        Item::new(s.to_owned())
    }
}
impl From<NdArray> for Item {
    fn from(a: NdArray) -> Item {
        Item::new(a)
    }
}

/// Element type of an [`NdArray`]; codes are part of the shared layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum DType {
    Bool = 0,
    U8 = 1,
    I8 = 2,
    U16 = 3,
    I16 = 4,
    U32 = 5,
    I32 = 6,
    U64 = 7,
    I64 = 8,
    F16 = 9,
    F32 = 10,
    F64 = 11,
}

impl DType {
    const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];

    /// Size of one element in bytes.
    pub const fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The layout code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The dtype with this layout code.
    pub fn from_code(code: u8) -> Result<DType, MarshalError> {
        DType::ALL
            .get(code as usize)
            .copied()
            .ok_or(MarshalError::UnknownDType(code))
    }

    /// numpy's name for the dtype (`"uint8"`, `"float32"`, ...).
    pub const fn numpy_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
}

/// A Rust element type with a [`DType`].
pub trait Element: bytemuck::Pod + Send + Sync {
    /// The matching dtype.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64,
         i64 => I64, f32 => F32, f64 => F64);

/// An n-dimensional array: dtype, shape, row-major little-endian data.
///
/// ```
/// use stampede_core::{DType, Item, NdArray};
/// let frame = NdArray::from_slice(&[2, 3], &[1u8, 2, 3, 4, 5, 6]).unwrap();
/// assert_eq!(frame.dtype(), DType::U8);
/// assert_eq!(frame.as_slice::<u8>().unwrap()[4], 5);
///
/// let item = Item::from(frame);
/// let back: NdArray = item.decode().unwrap(); // through the shared wire layout
/// assert_eq!(back.shape(), &[2, 3]);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct NdArray {
    dtype: DType,
    shape: Vec<usize>,
    data: Bytes,
}

const NDARRAY_MAGIC: &[u8; 4] = b"SNDA";
/// The layout stores the number of dimensions in one byte.
pub const MAX_NDIM: usize = 255;
const NDARRAY_VERSION: u8 = 1;

impl NdArray {
    /// An array over `data`, which must hold exactly `product(shape) * itemsize` bytes.
    pub fn new(dtype: DType, shape: &[usize], data: Bytes) -> Result<NdArray, MarshalError> {
        if shape.len() > MAX_NDIM {
            return Err(MarshalError::TooManyDimensions(shape.len()));
        }
        let expected = shape
            .iter()
            .try_fold(dtype.itemsize(), |acc, &d| acc.checked_mul(d))
            .ok_or(MarshalError::LengthMismatch {
                expected: usize::MAX,
                actual: data.len(),
            })?;
        if expected != data.len() {
            return Err(MarshalError::LengthMismatch {
                expected,
                actual: data.len(),
            });
        }
        Ok(NdArray {
            dtype,
            shape: shape.to_vec(),
            data,
        })
    }

    /// An array copied from a slice of elements.
    pub fn from_slice<T: Element>(shape: &[usize], elems: &[T]) -> Result<NdArray, MarshalError> {
        let raw: &[u8] = bytemuck::cast_slice(elems);
        NdArray::new(T::DTYPE, shape, Bytes::copy_from_slice(raw))
    }

    /// Bytes of the marshalled header of an array of `ndim` dimensions (the elements follow).
    pub(crate) const fn header_len(ndim: usize) -> usize {
        8 + 8 * ndim
    }

    /// The marshalled header of an array of `dtype` and `shape`.
    pub(crate) fn header(dtype: DType, shape: &[usize]) -> Vec<u8> {
        let mut out = Vec::with_capacity(NdArray::header_len(shape.len()));
        out.extend_from_slice(NDARRAY_MAGIC);
        out.extend_from_slice(&[NDARRAY_VERSION, dtype.code(), shape.len() as u8, 0]);
        for &d in shape {
            out.extend_from_slice(&(d as u64).to_le_bytes());
        }
        out
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The raw row-major data.
    pub fn data(&self) -> &Bytes {
        &self.data
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.itemsize()
    }
    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements as `&[T]`, if `T` matches the dtype and the data is aligned for it.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        if T::DTYPE != self.dtype {
            return None;
        }
        bytemuck::try_cast_slice(&self.data).ok()
    }
}

impl fmt::Debug for NdArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdArray")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl ItemType for NdArray {
    const TYPE_NAME: &'static str = "stampede.ndarray";

    fn marshal(&self) -> Bytes {
        let mut out =
            BytesMut::with_capacity(NdArray::header_len(self.shape.len()) + self.data.len());
        out.put_slice(&NdArray::header(self.dtype, &self.shape));
        out.put_slice(&self.data);
        out.freeze()
    }

    fn unmarshal(wire: Bytes) -> Result<Self, MarshalError> {
        if wire.len() < 8 {
            return Err(MarshalError::Truncated);
        }
        if &wire[..4] != NDARRAY_MAGIC {
            return Err(MarshalError::BadMagic);
        }
        if wire[4] != NDARRAY_VERSION {
            return Err(MarshalError::UnsupportedVersion(wire[4]));
        }
        let dtype = DType::from_code(wire[5])?;
        let ndim = wire[6] as usize;
        // One array, one encoding: a later layout may give the byte a meaning.
        if wire[7] != 0 {
            return Err(MarshalError::ReservedByte(wire[7]));
        }
        let header = 8 + 8 * ndim;
        if wire.len() < header {
            return Err(MarshalError::Truncated);
        }
        let shape = (0..ndim)
            .map(|i| {
                let at = 8 + 8 * i;
                let d = u64::from_le_bytes(wire[at..at + 8].try_into().expect("8 bytes"));
                usize::try_from(d).map_err(|_| MarshalError::LengthMismatch {
                    expected: usize::MAX,
                    actual: wire.len() - header,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        NdArray::new(dtype, &shape, wire.slice(header..))
    }
}
