//! Python values as items, and back.
//!
//! | Python value | stored as | a get returns |
//! |---|---|---|
//! | `bytes`, `str` | the object itself (tag `stampede.bytes` / `stampede.utf8`) | the same object |
//! | a loan, or a numpy array over a whole loan (`loan_array`) | the loan's memory, no copy | a read-only view |
//! | numpy array of a core dtype | an `NdArray`; copied unless its memory is immutable | a read-only view |
//! | instance of a registered class | the class's marshal hook output | its unmarshal hook's result |
//! | anything else | a pickle, taken at the put (copy-in) | a fresh unpickled copy |
//!
//! An array's memory is immutable when it belongs to a stored item (an array gotten from
//! Stampede and put again, or a slice of one) or to a `bytes` object; everything else may be
//! written after the put, so it is copied.

use std::collections::HashMap;
use std::ffi::{c_int, CString};
use std::mem::MaybeUninit;
use std::sync::Mutex;

use bytes::Bytes;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString, PyType};
use stampede_core::{Item, ItemType, MarshalError, NdArray, TypeTag};

use crate::dtype::{buffer_format, dtype_of};
use crate::errors;

/// Items holding a pickle of a Python object.
pub(crate) const PICKLE: TypeTag = TypeTag::of_name("stampede.pickle");

/// Memory owned by a Python object that nobody can change while the object lives.
struct PyOwned {
    _obj: Py<PyAny>,
    addr: usize,
    len: usize,
}

impl AsRef<[u8]> for PyOwned {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `addr..addr+len` lies in the memory of `_obj` (a `bytes` object, or the
        // UTF-8 form cached in a `str`), which is immutable and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

fn owned_bytes(obj: &Bound<'_, PyAny>, data: &[u8]) -> Bytes {
    Bytes::from_owner(PyOwned {
        _obj: obj.clone().unbind(),
        addr: data.as_ptr() as usize,
        len: data.len(),
    })
}

/// A Python `bytes` or `str` stored as itself: gets return the same object, and Rust sees
/// its bytes without a copy.
struct PyBlob {
    obj: Py<PyAny>,
    data: Bytes,
}

struct PyBytesItem(PyBlob);
struct PyStrItem(PyBlob);

fn not_from_wire() -> MarshalError {
    MarshalError::Custom("values owned by Python are only created from Python objects".into())
}

impl ItemType for PyBytesItem {
    const TYPE_NAME: &'static str = "stampede.bytes";
    fn marshal(&self) -> Bytes {
        self.0.data.clone()
    }
    fn unmarshal(_: Bytes) -> Result<Self, MarshalError> {
        Err(not_from_wire())
    }
}

impl ItemType for PyStrItem {
    const TYPE_NAME: &'static str = "stampede.utf8";
    fn marshal(&self) -> Bytes {
        self.0.data.clone()
    }
    fn unmarshal(_: Bytes) -> Result<Self, MarshalError> {
        Err(not_from_wire())
    }
}

struct Registered {
    tag: TypeTag,
    marshal: Py<PyAny>,
    // Keeps the class (whose address is the key) alive.
    _class: Py<PyType>,
}

/// Classes with marshal hooks, by type object address; unmarshal hooks by tag.
static BY_CLASS: Mutex<Option<HashMap<usize, Registered>>> = Mutex::new(None);
static BY_TAG: Mutex<Option<HashMap<u64, Py<PyAny>>>> = Mutex::new(None);

/// Installs marshal hooks for instances of exactly `cls`; returns the type tag.
pub(crate) fn register_type(
    cls: &Bound<'_, PyType>,
    name: &str,
    marshal: Py<PyAny>,
    unmarshal: Py<PyAny>,
) -> u64 {
    let tag = TypeTag::of_name(name);
    let key = cls.as_ptr() as usize;
    lock(&BY_CLASS).get_or_insert_with(HashMap::new).insert(
        key,
        Registered {
            tag,
            marshal,
            _class: cls.clone().unbind(),
        },
    );
    lock(&BY_TAG)
        .get_or_insert_with(HashMap::new)
        .insert(tag.0, unmarshal);
    tag.0
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cached<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import(module)?.getattr(name)?.unbind())
    })
    .map(|v| v.bind(py))
}

static PICKLE_DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PICKLE_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static NP_NDARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static NP_ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Turns a Python value into an item (see the module docs for the rules).
pub(crate) fn to_item(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Item> {
    if let Ok(l) = obj.cast::<crate::loan::Loan>() {
        return Ok(l.get().take(0));
    }
    if let Ok(b) = obj.cast_exact::<PyBytes>() {
        let data = owned_bytes(obj, b.as_bytes());
        return Ok(Item::new(PyBytesItem(PyBlob {
            obj: obj.clone().unbind(),
            data,
        })));
    }
    if let Ok(s) = obj.cast_exact::<PyString>() {
        let data = owned_bytes(obj, s.to_str()?.as_bytes());
        return Ok(Item::new(PyStrItem(PyBlob {
            obj: obj.clone().unbind(),
            data,
        })));
    }
    if let Some(tag_and_hook) = registered_marshal(py, obj) {
        let (tag, hook) = tag_and_hook;
        let out = hook.bind(py).call1((obj,)).map_err(|e| {
            errors::caused(
                py,
                format!("the marshal hook of {} failed", obj.get_type()),
                e,
            )
        })?;
        let b = out.cast::<PyBytes>().map_err(|_| {
            errors::marshal(
                py,
                format!("marshal hook returned {}, not bytes", out.get_type()),
            )
        })?;
        return Ok(Item::from_wire(tag, owned_bytes(&out, b.as_bytes())));
    }
    let ndarray = cached(py, &NP_NDARRAY, "numpy", "ndarray")?;
    if obj.is_instance(ndarray)? {
        if let Some(item) = crate::loan::from_array(py, obj, ndarray)? {
            return Ok(item);
        }
        if let Some(item) = array_item(py, obj)? {
            return Ok(item);
        }
    }
    let pickled = cached(py, &PICKLE_DUMPS, "pickle", "dumps")?
        .call1((obj, -1))
        .map_err(|e| {
            errors::marshal(
                py,
                format!(
                    "{} is neither bytes, str, a numpy array nor picklable: {e}",
                    obj.get_type()
                ),
            )
        })?;
    let b = pickled.cast::<PyBytes>()?;
    Ok(Item::from_wire(PICKLE, owned_bytes(&pickled, b.as_bytes())))
}

fn registered_marshal(py: Python<'_>, obj: &Bound<'_, PyAny>) -> Option<(TypeTag, Py<PyAny>)> {
    let key = obj.get_type().as_ptr() as usize;
    let map = lock(&BY_CLASS);
    let r = map.as_ref()?.get(&key)?;
    Some((r.tag, r.marshal.clone_ref(py)))
}

/// The Python value of an item.
pub(crate) fn to_python(py: Python<'_>, item: &Item) -> PyResult<Py<PyAny>> {
    let tag = item.tag();
    if tag == TypeTag::BYTES {
        if let Some(v) = item.get::<PyBytesItem>() {
            return Ok(v.0.obj.clone_ref(py));
        }
        let b = item.as_bytes().expect("bytes item");
        return Ok(PyBytes::new(py, b).into_any().unbind());
    }
    if tag == TypeTag::UTF8 {
        if let Some(v) = item.get::<PyStrItem>() {
            return Ok(v.0.obj.clone_ref(py));
        }
        let s = item
            .as_str()
            .ok_or_else(|| errors::from_marshal(py, MarshalError::InvalidUtf8))?;
        return Ok(PyString::new(py, s).into_any().unbind());
    }
    if tag == TypeTag::NDARRAY {
        let array = match item.get::<NdArray>() {
            Some(a) => a.clone(),
            None => item
                .decode::<NdArray>()
                .map_err(|e| errors::from_marshal(py, e))?,
        };
        let view = Bound::new(py, ItemView::of_array(&array))?;
        return Ok(cached(py, &NP_ASARRAY, "numpy", "asarray")?
            .call1((view,))?
            .unbind());
    }
    if tag == PICKLE {
        let view = Bound::new(py, ItemView::raw(item.wire().clone()))?;
        return Ok(cached(py, &PICKLE_LOADS, "pickle", "loads")?
            .call1((view,))
            .map_err(|e| errors::caused(py, "a pickled item could not be unpickled", e))?
            .unbind());
    }
    let hook = lock(&BY_TAG)
        .as_ref()
        .and_then(|m| m.get(&tag.0).map(|h| h.clone_ref(py)));
    let wire = PyBytes::new(py, item.wire());
    match hook {
        Some(h) => Ok(h
            .bind(py)
            .call1((wire,))
            .map_err(|e| {
                errors::caused(
                    py,
                    format!("the unmarshal hook of tag {:#018x} failed", tag.0),
                    e,
                )
            })?
            .unbind()),
        None => Ok(Bound::new(
            py,
            Opaque {
                tag: tag.0,
                data: wire.unbind(),
            },
        )?
        .into_any()
        .unbind()),
    }
}

/// An item of a type this process has no unmarshal hook for: its type tag and wire bytes.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct Opaque {
    /// The item's 64-bit type tag.
    tag: u64,
    /// The item's wire bytes.
    data: Py<PyBytes>,
}

#[pymethods]
impl Opaque {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Opaque(tag={:#018x}, {} bytes)",
            self.tag,
            self.data.bind(py).as_bytes().len()
        )
    }
}

/// Read-only memory of a stored item, exported through the buffer protocol.
#[pyclass(module = "stampede", frozen, name = "_ItemView")]
pub(crate) struct ItemView {
    data: Bytes,
    format: CString,
    itemsize: isize,
    shape: Vec<isize>,
    strides: Vec<isize>,
}

impl ItemView {
    fn of_array(a: &NdArray) -> ItemView {
        let itemsize = a.dtype().itemsize() as isize;
        let shape: Vec<isize> = a.shape().iter().map(|&d| d as isize).collect();
        let mut strides = vec![itemsize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        ItemView {
            data: a.data().clone(),
            format: CString::new(buffer_format(a.dtype())).expect("no NUL"),
            itemsize,
            shape,
            strides,
        }
    }

    fn raw(data: Bytes) -> ItemView {
        let len = data.len() as isize;
        ItemView {
            data,
            format: CString::new("B").expect("no NUL"),
            itemsize: 1,
            shape: vec![len],
            strides: vec![1],
        }
    }
}

#[pymethods]
impl ItemView {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("stored items are read-only"));
        }
        let this = slf.get();
        // SAFETY: `view` is the caller's buffer struct; every pointer stored in it points into
        // `this`, which the buffer keeps alive through `obj` and never changes (frozen).
        unsafe {
            (*view).buf = this.data.as_ptr() as *mut std::ffi::c_void;
            (*view).len = this.data.len() as isize;
            (*view).readonly = 1;
            (*view).itemsize = this.itemsize;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                this.format.as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = this.shape.len() as c_int;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                this.shape.as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                this.strides.as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

/// A buffer obtained from an object, released on drop (with the GIL held, as the caller is).
struct BufferGuard(Box<MaybeUninit<ffi::Py_buffer>>);

impl BufferGuard {
    fn get(obj: &Bound<'_, PyAny>) -> Option<BufferGuard> {
        let mut b = Box::new(MaybeUninit::<ffi::Py_buffer>::uninit());
        // SAFETY: `b` is a writable Py_buffer; on success it is released in `drop`.
        let rc =
            unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), b.as_mut_ptr(), ffi::PyBUF_RECORDS_RO) };
        if rc == 0 {
            Some(BufferGuard(b))
        } else {
            // SAFETY: the failed call set an exception; clear it (the caller falls back).
            unsafe { ffi::PyErr_Clear() };
            None
        }
    }

    fn view(&self) -> &ffi::Py_buffer {
        // SAFETY: initialised by a successful PyObject_GetBuffer.
        unsafe { self.0.assume_init_ref() }
    }
}

impl Drop for BufferGuard {
    fn drop(&mut self) {
        // SAFETY: the buffer was filled by PyObject_GetBuffer and is released once.
        unsafe { ffi::PyBuffer_Release(self.0.as_mut_ptr()) }
    }
}

/// An `NdArray` item for a numpy array of a core dtype; `None` for other dtypes.
fn array_item(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<Item>> {
    let Some(buf) = BufferGuard::get(obj) else {
        return Ok(None);
    };
    let v = buf.view();
    if v.format.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-null format is a NUL-terminated string owned by the exporter.
    let format = unsafe { std::ffi::CStr::from_ptr(v.format) }.to_bytes();
    let Some(dtype) = dtype_of(format, v.itemsize) else {
        return Ok(None);
    };
    let ndim = v.ndim as usize;
    let shape: Vec<usize> = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: RECORDS requests fill `shape` with `ndim` entries.
        unsafe { std::slice::from_raw_parts(v.shape, ndim) }
            .iter()
            .map(|&d| d as usize)
            .collect()
    };
    let len = v.len as usize;
    // SAFETY: `v` is a valid buffer view.
    let contiguous = unsafe { ffi::PyBuffer_IsContiguous(v, b'C' as std::ffi::c_char) } == 1;
    let data = if contiguous && len > 0 {
        // SAFETY: a C-contiguous buffer is `len` readable bytes at `buf`.
        let mem = unsafe { std::slice::from_raw_parts(v.buf as *const u8, len) };
        let shared = if v.readonly != 0 {
            immutable_owner(py, obj, mem)?
        } else {
            None
        };
        shared.unwrap_or_else(|| Bytes::copy_from_slice(mem))
    } else if len == 0 {
        Bytes::new()
    } else {
        let mut out = vec![0u8; len];
        // SAFETY: `out` has `len` bytes, the size of the buffer's data.
        let rc = unsafe {
            ffi::PyBuffer_ToContiguous(out.as_mut_ptr().cast(), v, v.len, b'C' as std::ffi::c_char)
        };
        if rc != 0 {
            return Err(PyErr::fetch(py));
        }
        Bytes::from(out)
    };
    let array = NdArray::new(dtype, &shape, data).map_err(|e| errors::from_marshal(py, e))?;
    Ok(Some(Item::new(array)))
}

/// The stored bytes behind `mem` when the array's memory can never change: it belongs to a
/// stored item or to a `bytes` object.
fn immutable_owner(py: Python<'_>, obj: &Bound<'_, PyAny>, mem: &[u8]) -> PyResult<Option<Bytes>> {
    let ndarray = cached(py, &NP_NDARRAY, "numpy", "ndarray")?;
    let mut cur = obj.clone();
    for _ in 0..64 {
        if let Ok(view) = cur.cast::<ItemView>() {
            let data = &view.get().data;
            return Ok(contains(data, mem).then(|| data.slice_ref(mem)));
        }
        if let Ok(b) = cur.cast_exact::<PyBytes>() {
            let all = b.as_bytes();
            return Ok(contains(all, mem).then(|| owned_bytes(&cur, mem)));
        }
        let next = if cur.is_instance(ndarray)? {
            cur.getattr("base")?
        } else if let Ok(mv) = cur.cast::<pyo3::types::PyMemoryView>() {
            mv.getattr("obj")?
        } else {
            return Ok(None);
        };
        if next.is_none() {
            return Ok(None);
        }
        cur = next;
    }
    Ok(None)
}

fn contains(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}
