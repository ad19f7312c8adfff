//! Loans: memory an output connection lends for one item, filled in place and put without a
//! copy (`ChannelOutput.loan`, `ChannelOutput.loan_array`). Into another address space's
//! channel on this host the memory is shared memory, so the item's bytes are written once,
//! by the producer, and reach the readers as they are.

use std::ffi::c_int;
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
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Loan {
    pub(crate) fn new(mut l: stampede_core::Loan) -> Loan {
        let (addr, len) = (l.as_mut_ptr() as usize, l.len());
        Loan {
            in_place: l.in_place(),
            state: Mutex::new(State::Lent(l)),
            addr,
            len,
        }
    }

    /// The item to put: the loan's memory as it is. Taking it again (a retried put) gives
    /// the same memory.
    pub(crate) fn take(&self) -> Item {
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
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

/// A numpy array over a new loan's elements, writable until it is put.
pub(crate) fn array<'py>(
    py: Python<'py>,
    loan: stampede_core::Loan,
    dtype: &Bound<'py, PyAny>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let owner = Bound::new(py, Loan::new(loan))?;
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
    crate::items::dtype_of(code.as_bytes(), itemsize)
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

/// The item a numpy array puts when it spans a whole loan's elements (it then becomes
/// read-only); `None` for any other array, which is stored as usual.
pub(crate) fn from_array(
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
            if !(contiguous && addr == l.addr && nbytes == l.len) {
                // Part of a loan: an ordinary array, copied.
                return Ok(None);
            }
            let item = l.take();
            obj.getattr("flags")?.setattr("writeable", false)?;
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
