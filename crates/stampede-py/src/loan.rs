//! Loans: memory an output connection lends for one item, filled in place and put without a
//! copy (`ChannelOutput.loan`, `ChannelOutput.loan_array`). Into another address space's
//! channel on this host the memory is shared memory, so the item's bytes are written once,
//! by the producer, and reach the readers as they are.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use stampede_core::{DType, Item, TypeTag};

use crate::errors::{self, Exc};

enum State {
    /// Being filled.
    Lent(stampede_core::Loan),
    /// Put (or handed to a put): the item's type and bytes, kept so the memory outlives any
    /// array still viewing it.
    Frozen(TypeTag, Bytes),
}

/// Memory lent for one item: fill it through the buffer protocol (``memoryview(loan)``, or
/// the array ``loan_array`` returns), then put it. Put, it becomes read-only.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Loan {
    state: Mutex<State>,
    /// The part to fill (an array's elements): the same memory for the loan's whole life.
    addr: usize,
    len: usize,
    in_place: bool,
    /// An array loan's element type and shape (`None`: raw bytes).
    array: Option<(DType, Vec<usize>)>,
    /// Writable views of the memory given out and not yet released: while one is left
    /// besides the one being put, a put copies (the memory could still change).
    writable: AtomicUsize,
}

/// Marks a buffer view given out writable, so its release is counted.
const WRITABLE_VIEW: *mut std::ffi::c_void = 1 as *mut std::ffi::c_void;

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Loan {
    pub(crate) fn new(mut l: stampede_core::Loan, array: Option<(DType, Vec<usize>)>) -> Loan {
        let (addr, len) = (l.as_mut_ptr() as usize, l.len());
        Loan {
            in_place: l.in_place(),
            state: Mutex::new(State::Lent(l)),
            addr,
            len,
            array,
            writable: AtomicUsize::new(0),
        }
    }

    /// The item to put: the loan's memory as it is, unless more than `views` writable
    /// views of it are still out (then a copy). Taking it again (a retried put) gives the
    /// same memory.
    pub(crate) fn take(&self, views: usize) -> Item {
        let item = self.freeze();
        if self.writable.load(Ordering::Acquire) > views {
            return Item::from_wire(item.tag(), Bytes::copy_from_slice(item.wire()));
        }
        item
    }

    fn freeze(&self) -> Item {
        let mut st = lock(&self.state);
        if let State::Lent(_) = &*st {
            let State::Lent(l) =
                std::mem::replace(&mut *st, State::Frozen(TypeTag::BYTES, Bytes::new()))
            else {
                unreachable!("checked above")
            };
            let item = Item::from(l);
            *st = State::Frozen(item.tag(), item.wire().clone());
        }
        match &*st {
            State::Frozen(tag, bytes) => Item::from_wire(*tag, bytes.clone()),
            State::Lent(_) => unreachable!("frozen above"),
        }
    }
}

#[pymethods]
impl Loan {
    /// Whether the memory is shared memory that the put sends without a copy (``False``
    /// for plain memory, which a put into another address space copies once).
    #[getter]
    fn in_place(&self) -> bool {
        self.in_place
    }

    fn __len__(&self) -> usize {
        self.len
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer to fill"));
        }
        let this = slf.get();
        let writable = matches!(*lock(&this.state), State::Lent(_));
        if writable {
            this.writable.fetch_add(1, Ordering::AcqRel);
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE && !writable {
            return Err(PyBufferError::new_err("this loan was put: it is read-only"));
        }
        // SAFETY: `view` is the caller's buffer struct. `addr..addr+len` is the loan's memory,
        // which `this` keeps alive (lent, or frozen in `State::Frozen`) while the buffer holds
        // it through `obj`; it never moves.
        unsafe {
            (*view).buf = this.addr as *mut std::ffi::c_void;
            (*view).len = this.len as isize;
            (*view).readonly = c_int::from(!writable);
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"B".as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                std::ptr::addr_of_mut!((*view).len)
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                std::ptr::addr_of_mut!((*view).itemsize)
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = if writable {
                WRITABLE_VIEW
            } else {
                std::ptr::null_mut()
            };
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: `view` is a buffer this object filled in `__getbuffer__`.
        if !view.is_null() && unsafe { (*view).internal } == WRITABLE_VIEW {
            self.writable.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A numpy array over a new loan's elements, writable until it is put.
pub(crate) fn array<'py>(
    py: Python<'py>,
    loan: stampede_core::Loan,
    dtype: &Bound<'py, PyAny>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let owner = Bound::new(
        py,
        Loan::new(loan, Some((dtype_of_np(py, dtype)?, shape.to_vec()))),
    )?;
    let np = py.import("numpy")?;
    let flat = np.call_method1("frombuffer", (owner, dtype))?;
    flat.call_method1("reshape", (shape.to_vec(),))
}

/// The element type `dtype` (anything `numpy.dtype` takes) names, if the core has it.
pub(crate) fn dtype(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<(DType, Py<PyAny>)> {
    let dt = py.import("numpy")?.call_method1("dtype", (dtype,))?;
    let byteorder: String = dt.getattr("byteorder")?.extract()?;
    let code: String = dt.getattr("char")?.extract()?;
    let itemsize: isize = dt.getattr("itemsize")?.extract()?;
    let native = matches!(byteorder.as_str(), "=" | "|" | "<");
    crate::dtype::dtype_of(code.as_bytes(), itemsize)
        .filter(|_| native)
        .map(|d| (d, dt.unbind()))
        .ok_or_else(|| {
            errors::raise(
                py,
                Exc::InvalidArgument,
                (format!("dtype {dtype} is not one Stampede arrays have"),),
            )
        })
}

fn dtype_of_np(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    self::dtype(py, dtype).map(|d| d.0)
}

/// The item a numpy array puts when it is an array loan's elements, with the loan's type
/// and shape (it and the arrays it views become read-only); `None` for any other array,
/// which is stored as usual (copied).
pub(crate) fn from_array(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    ndarray: &Bound<'_, PyAny>,
) -> PyResult<Option<Item>> {
    // The array's memory, and the loan behind it through its bases (and memoryviews).
    let iface = obj.getattr("__array_interface__")?;
    let addr: usize = iface.get_item("data")?.get_item(0)?.extract()?;
    let nbytes: usize = obj.getattr("nbytes")?.extract()?;
    let contiguous: bool = obj.getattr("flags")?.getattr("c_contiguous")?.extract()?;
    let mut cur = obj.clone();
    for _ in 0..64 {
        let next = if let Ok(l) = cur.cast::<Loan>() {
            let l = l.get();
            let Some((dtype, shape)) = &l.array else {
                return Ok(None);
            };
            let same = contiguous
                && addr == l.addr
                && nbytes == l.len
                && obj.getattr("shape")?.extract::<Vec<usize>>()? == *shape
                && dtype_of_np(py, &obj.getattr("dtype")?).ok() == Some(*dtype);
            if !same {
                // Part of a loan, or another view of it: an ordinary array, copied.
                return Ok(None);
            }
            // The array the loan was lent as holds one writable view.
            let item = l.take(1);
            read_only(obj, ndarray)?;
            return Ok(Some(item));
        } else if cur.is_instance(ndarray)? {
            cur.getattr("base")?
        } else if let Ok(m) = cur.cast::<pyo3::types::PyMemoryView>() {
            m.getattr("obj")?
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

/// Makes `obj` and the arrays it views read-only: the memory is a stored item's now.
fn read_only(obj: &Bound<'_, PyAny>, ndarray: &Bound<'_, PyAny>) -> PyResult<()> {
    let mut cur = obj.clone();
    for _ in 0..64 {
        if !cur.is_instance(ndarray)? {
            break;
        }
        cur.getattr("flags")?.setattr("writeable", false)?;
        let base = cur.getattr("base")?;
        if base.is_none() {
            break;
        }
        cur = base;
    }
    Ok(())
}
