//! Buffers a producer fills in place: a put of a loaned buffer copies nothing.
//!
//! [`OutputConnection::loan`](crate::OutputConnection::loan) and
//! [`loan_array`](crate::OutputConnection::loan_array) lend memory for one item: plain
//! memory for a channel of this address space, or, for a channel served elsewhere, memory
//! its provider chooses (shared memory between processes of one host), so the item's bytes
//! are written once, by the producer, and never copied on the way to the readers.

use std::fmt;
use std::ops::{Deref, DerefMut};

use bytes::{Bytes, BytesMut};

use crate::item::{DType, Item, ItemType, NdArray, TypeTag};

/// Memory a provider lends for one item (see [`provider::Link::loan`](crate::provider::Link::loan)).
pub trait LoanBuffer: Send + 'static {
    /// The whole buffer.
    fn as_slice(&self) -> &[u8];
    /// The whole buffer, to fill.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// The filled buffer as an item's bytes, without a copy.
    fn freeze(self: Box<Self>) -> Bytes;
    /// Whether this is the transport's own memory, which it sends without a copy.
    fn in_place(&self) -> bool;
}

/// Plain memory, for a channel of this address space (or a provider without a better kind).
struct Heap(BytesMut);

impl LoanBuffer for Heap {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
    fn freeze(self: Box<Self>) -> Bytes {
        self.0.freeze()
    }
    fn in_place(&self) -> bool {
        false
    }
}

/// A buffer lent for one item: fill it (it dereferences to the item's bytes, or to an
/// array's elements), then put it (`Item::from(loan)`).
///
/// ```
/// use stampede_core::{ContainerOptions, DType, NdArray, Runtime, Selector};
/// let rt = Runtime::new();
/// let ch = rt.channel(ContainerOptions::default()).unwrap();
/// let t = rt.task(0).unwrap();
/// let (out, input) = (t.attach_output(&ch).unwrap(), t.attach_input(&ch).unwrap());
/// let mut frame = out.loan_array(DType::U8, &[2, 3]).unwrap();
/// frame.copy_from_slice(&[1, 2, 3, 4, 5, 6]);
/// out.put(0, frame).unwrap();
/// let a: NdArray = input.get(Selector::Oldest).unwrap().1.decode().unwrap();
/// assert_eq!((a.shape(), a.as_slice::<u8>().unwrap()), (&[2, 3][..], &[1, 2, 3, 4, 5, 6][..]));
/// ```
pub struct Loan {
    buf: Box<dyn LoanBuffer>,
    /// The item's type, and where the part to fill starts (after an array's header).
    tag: TypeTag,
    start: usize,
}

impl fmt::Debug for Loan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan")
            .field("len", &self.len())
            .field("in_place", &self.in_place())
            .finish()
    }
}

impl Loan {
    /// `len` bytes of plain memory, zeroed.
    pub fn heap(len: usize) -> Loan {
        Loan::bytes(Loan::heap_buffer(len))
    }

    pub(crate) fn heap_buffer(len: usize) -> Box<dyn LoanBuffer> {
        Box::new(Heap(BytesMut::zeroed(len)))
    }

    /// A raw-bytes item in `buf` (a provider's memory).
    pub fn bytes(buf: Box<dyn LoanBuffer>) -> Loan {
        Loan {
            buf,
            tag: TypeTag::BYTES,
            start: 0,
        }
    }

    /// The bytes an array of `dtype` and `shape` needs in a buffer: its header and elements.
    pub fn array_len(dtype: DType, shape: &[usize]) -> Option<usize> {
        if shape.len() > crate::item::MAX_NDIM {
            return None;
        }
        let n = shape
            .iter()
            .try_fold(dtype.itemsize(), |acc, &d| acc.checked_mul(d))?;
        n.checked_add(NdArray::header_len(shape.len()))
    }

    /// An array of `dtype` and `shape` in `buf`, which holds [`array_len`](Loan::array_len)
    /// bytes: the header is written here, the elements are the caller's to fill.
    pub fn array(mut buf: Box<dyn LoanBuffer>, dtype: DType, shape: &[usize]) -> Loan {
        let header = NdArray::header(dtype, shape);
        buf.as_mut_slice()[..header.len()].copy_from_slice(&header);
        Loan {
            buf,
            tag: TypeTag::of_name(NdArray::TYPE_NAME),
            start: header.len(),
        }
    }

    /// Bytes to fill (an array's elements, without its header).
    pub fn len(&self) -> usize {
        self.buf.as_slice().len() - self.start
    }

    /// Whether there is nothing to fill.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the buffer is the transport's own memory, so the put copies nothing (`false`
    /// for plain memory, which a put into another address space's channel copies once).
    pub fn in_place(&self) -> bool {
        self.buf.in_place()
    }
}

impl Deref for Loan {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf.as_slice()[self.start..]
    }
}

impl DerefMut for Loan {
    fn deref_mut(&mut self) -> &mut [u8] {
        let start = self.start;
        &mut self.buf.as_mut_slice()[start..]
    }
}

impl From<Loan> for Item {
    fn from(l: Loan) -> Item {
        // Already in its marshalled form: the buffer becomes the item's bytes as it is.
        Item::from_wire(l.tag, l.buf.freeze())
    }
}
