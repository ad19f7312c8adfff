//! Items: bytes, text and typed n-dimensional arrays, shared with Rust and Python unchanged.

use std::ffi::{c_char, c_void};

use bytes::Bytes;
use stampede_core::{DType, Item, NdArray, TypeTag};

use crate::error::{
    boxed, guard, guard_value, handle, need_out, put_out, release, stp_status, text, Error, Result,
};

/// What an item holds.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_item_kind {
    /// Raw bytes.
    STP_ITEM_BYTES = 0,
    /// UTF-8 text.
    STP_ITEM_TEXT = 1,
    /// An n-dimensional array (`stp_item_dtype`, `stp_item_shape`).
    STP_ITEM_ARRAY = 2,
    /// Another type (a Python object, say): `stp_item_data` gives its wire bytes.
    STP_ITEM_OTHER = 3,
}

/// Element types of array items; the codes are those of the shared layout.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_dtype {
    /// `bool`, one byte.
    STP_BOOL = 0,
    /// `uint8_t`.
    STP_U8 = 1,
    /// `int8_t`.
    STP_I8 = 2,
    /// `uint16_t`.
    STP_U16 = 3,
    /// `int16_t`.
    STP_I16 = 4,
    /// `uint32_t`.
    STP_U32 = 5,
    /// `int32_t`.
    STP_I32 = 6,
    /// `uint64_t`.
    STP_U64 = 7,
    /// `int64_t`.
    STP_I64 = 8,
    /// IEEE half precision, two bytes.
    STP_F16 = 9,
    /// `float`.
    STP_F32 = 10,
    /// `double`.
    STP_F64 = 11,
}

/// An item: the value of a put or a get. Immutable; free with `stp_item_free`.
#[allow(non_camel_case_types)]
pub struct stp_item {
    pub(crate) item: Item,
    /// The decoded array of an array item, kept so shape and data pointers stay valid.
    array: Option<NdArray>,
}

impl stp_item {
    pub(crate) fn new(item: Item) -> stp_item {
        let array = (item.tag() == TypeTag::NDARRAY)
            .then(|| {
                item.get::<NdArray>()
                    .cloned()
                    .or_else(|| item.decode().ok())
            })
            .flatten();
        stp_item { item, array }
    }

    fn kind(&self) -> stp_item_kind {
        let tag = self.item.tag();
        if tag == TypeTag::BYTES {
            stp_item_kind::STP_ITEM_BYTES
        } else if tag == TypeTag::UTF8 {
            stp_item_kind::STP_ITEM_TEXT
        } else if self.array.is_some() {
            stp_item_kind::STP_ITEM_ARRAY
        } else {
            stp_item_kind::STP_ITEM_OTHER
        }
    }

    fn data(&self) -> &[u8] {
        if let Some(a) = &self.array {
            return a.data();
        }
        if let Some(b) = self.item.as_bytes() {
            return b;
        }
        if let Some(s) = self.item.as_str() {
            return s.as_bytes();
        }
        self.item.wire()
    }
}

/// Makes a new item handle.
pub(crate) fn new_item(item: Item) -> *mut stp_item {
    boxed(stp_item::new(item))
}

/// # Safety
/// `data` is NULL with `len` 0, or readable for `len` bytes.
unsafe fn slice<'a>(data: *const c_void, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Error::invalid("data is NULL but len is not 0"));
    }
    // SAFETY: non-NULL and readable for len bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

/// The `ndim` dimensions at `shape` (which may be NULL when `ndim` is 0).
///
/// # Safety
/// `shape` is NULL or readable for `ndim` values.
pub(crate) unsafe fn dims<'a>(ndim: usize, shape: *const usize) -> Result<&'a [usize]> {
    if ndim == 0 {
        Ok(&[])
    } else if shape.is_null() {
        Err(Error::invalid("shape is NULL but ndim is not 0"))
    } else {
        // SAFETY: readable for ndim values by the caller's contract.
        Ok(unsafe { std::slice::from_raw_parts(shape, ndim) })
    }
}

pub(crate) fn dtype(code: i32) -> Result<DType> {
    u8::try_from(code)
        .ok()
        .and_then(|c| DType::from_code(c).ok())
        .ok_or_else(|| Error::invalid(format!("{code} is not an stp_dtype")))
}

/// A bytes item holding a copy of `len` bytes at `data`.
///
/// # Safety
/// `data` is readable for `len` bytes (or NULL with `len` 0); `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_bytes(
    data: *const c_void,
    len: usize,
    out: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let bytes = Bytes::copy_from_slice(unsafe { slice(data, len) }?);
        // SAFETY: forwarded contract.
        unsafe { put_out(out, new_item(Item::from(bytes)), "out") }
    })
}

/// A text item holding a copy of the NUL-terminated UTF-8 string `s`.
///
/// # Safety
/// `s` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_text(s: *const c_char, out: *mut *mut stp_item) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let s = unsafe { text(s, "s") }?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, new_item(Item::from(s.to_owned())), "out") }
    })
}

/// An array item: `dtype` (an `stp_dtype`), `ndim` dimensions in `shape`, and a copy of `len`
/// bytes of row-major little-endian data at `data`. `len` must equal the product of the shape
/// times the element size.
///
/// # Safety
/// `shape` is readable for `ndim` values; `data` for `len` bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_array(
    dtype_code: i32,
    ndim: usize,
    shape: *const usize,
    data: *const c_void,
    len: usize,
    out: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        let d = dtype(dtype_code)?;
        // SAFETY: forwarded contract.
        let dims = unsafe { dims(ndim, shape) }?;
        // SAFETY: forwarded contract.
        let bytes = Bytes::copy_from_slice(unsafe { slice(data, len) }?);
        let array =
            NdArray::new(d, dims, bytes).map_err(|e| Error::invalid(format!("array: {e}")))?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, new_item(Item::from(array)), "out") }
    })
}

/// An item of the user type called `type_name`, holding a copy of its `len` marshalled
/// bytes at `data`: tagged `stp_type_tag(type_name)`, so Python code that registered the
/// same name (`stampede.register_type`) reads it as its own object, and Rust code as its
/// `Stampede` type of that name. `stp_item_data` gives the bytes back.
///
/// # Safety
/// `type_name` is a NUL-terminated string; `data` is readable for `len` bytes (or NULL with
/// `len` 0); `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_typed(
    type_name: *const c_char,
    data: *const c_void,
    len: usize,
    out: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let name = unsafe { text(type_name, "type_name") }?;
        let tag = TypeTag::of_name(name);
        if [TypeTag::BYTES, TypeTag::UTF8, TypeTag::NDARRAY].contains(&tag) {
            return Err(Error::invalid(format!(
                "{name:?} names a built-in type: use its own constructor"
            )));
        }
        // SAFETY: forwarded contract.
        let bytes = Bytes::copy_from_slice(unsafe { slice(data, len) }?);
        // SAFETY: forwarded contract.
        unsafe { put_out(out, new_item(Item::from_wire(tag, bytes)), "out") }
    })
}

/// The 64-bit type tag of the type called `type_name` (FNV-1a of its UTF-8 bytes), as every
/// language computes it; 0 for NULL.
///
/// # Safety
/// `type_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_type_tag(type_name: *const c_char) -> u64 {
    guard_value(0, || {
        // SAFETY: forwarded contract.
        unsafe { text(type_name, "type_name") }.map_or(0, |n| TypeTag::of_name(n).0)
    })
}

/// Another handle to the same item (items are immutable and shared, not copied).
///
/// # Safety
/// `item` is a live item.
#[no_mangle]
pub unsafe extern "C" fn stp_item_clone(item: *const stp_item) -> *mut stp_item {
    guard_value(std::ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        match unsafe { handle(item, "item") } {
            Ok(i) => new_item(i.item.clone()),
            Err(_) => std::ptr::null_mut(),
        }
    })
}

/// What the item holds (an `stp_item_kind`); `STP_ITEM_OTHER` for NULL.
///
/// # Safety
/// `item` is NULL or a live item.
#[no_mangle]
pub unsafe extern "C" fn stp_item_kind_of(item: *const stp_item) -> stp_item_kind {
    guard_value(stp_item_kind::STP_ITEM_OTHER, || {
        // SAFETY: forwarded contract.
        unsafe { handle(item, "item") }.map_or(stp_item_kind::STP_ITEM_OTHER, |i| i.kind())
    })
}

/// The item's 64-bit type tag (shared by all languages for a type name).
///
/// # Safety
/// `item` is NULL or a live item.
#[no_mangle]
pub unsafe extern "C" fn stp_item_tag(item: *const stp_item) -> u64 {
    guard_value(0, || {
        // SAFETY: forwarded contract.
        unsafe { handle(item, "item") }.map_or(0, |i| i.item.tag().0)
    })
}

/// The item's bytes without copying: raw bytes, text (not NUL-terminated), an array's element
/// data, or the wire form of another type. Valid while the item handle lives; NULL for a NULL
/// item. `len` receives the length when not NULL.
///
/// # Safety
/// `item` is NULL or a live item; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_data(item: *const stp_item, len: *mut usize) -> *const c_void {
    guard_value(std::ptr::null(), || {
        // SAFETY: forwarded contract.
        let Ok(i) = (unsafe { handle(item, "item") }) else {
            return std::ptr::null();
        };
        let d = i.data();
        if !len.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { len.write(d.len()) };
        }
        d.as_ptr().cast()
    })
}

/// The element type of an array item.
///
/// # Safety
/// `item` is a live item; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_dtype(item: *const stp_item, out: *mut stp_dtype) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let a = array(unsafe { handle(item, "item") }?)?;
        let d = match a.dtype() {
            DType::Bool => stp_dtype::STP_BOOL,
            DType::U8 => stp_dtype::STP_U8,
            DType::I8 => stp_dtype::STP_I8,
            DType::U16 => stp_dtype::STP_U16,
            DType::I16 => stp_dtype::STP_I16,
            DType::U32 => stp_dtype::STP_U32,
            DType::I32 => stp_dtype::STP_I32,
            DType::U64 => stp_dtype::STP_U64,
            DType::I64 => stp_dtype::STP_I64,
            DType::F16 => stp_dtype::STP_F16,
            DType::F32 => stp_dtype::STP_F32,
            DType::F64 => stp_dtype::STP_F64,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, d, "out") }
    })
}

/// The shape of an array item: `*ndim` receives the number of dimensions and `*shape` a
/// pointer to them, valid while the item handle lives.
///
/// # Safety
/// `item` is a live item; `ndim` and `shape` are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_shape(
    item: *const stp_item,
    ndim: *mut usize,
    shape: *mut *const usize,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let a = array(unsafe { handle(item, "item") }?)?;
        // SAFETY: forwarded contract.
        unsafe {
            put_out(ndim, a.shape().len(), "ndim")?;
            put_out(shape, a.shape().as_ptr(), "shape")
        }
    })
}

fn array(i: &stp_item) -> Result<&NdArray> {
    i.array.as_ref().ok_or_else(|| {
        Error::new(
            stp_status::STP_WRONG_TYPE,
            format!("the item is not an array (tag {:#018x})", i.item.tag().0),
        )
    })
}

/// Releases an item handle. NULL is ignored.
///
/// # Safety
/// `item` is NULL or a live item, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_item_free(item: *mut stp_item) {
    // SAFETY: forwarded contract.
    unsafe { release(item) }
}
