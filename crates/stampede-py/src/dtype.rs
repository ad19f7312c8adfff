//! Core element types and the buffer-protocol formats numpy uses for them, both ways.

use stampede_core::DType;

const LONG_IS_64: bool = std::mem::size_of::<std::ffi::c_long>() == 8;

/// The buffer-protocol format of a core dtype, as numpy spells it here.
pub(crate) fn buffer_format(d: DType) -> &'static str {
    match d {
        DType::Bool => "?",
        DType::U8 => "B",
        DType::I8 => "b",
        DType::U16 => "H",
        DType::I16 => "h",
        DType::U32 => "I",
        DType::I32 => "i",
        // numpy's default integer is C `long` where that has 64 bits.
        DType::U64 if LONG_IS_64 => "L",
        DType::I64 if LONG_IS_64 => "l",
        DType::U64 => "Q",
        DType::I64 => "q",
        DType::F16 => "e",
        DType::F32 => "f",
        DType::F64 => "d",
    }
}

/// The core dtype of a buffer format string, if it has one (native or little-endian only).
pub(crate) fn dtype_of(format: &[u8], itemsize: isize) -> Option<DType> {
    let code = match format {
        [b'@' | b'=' | b'<', c] | [c] => *c,
        _ => return None,
    };
    Some(match (code, itemsize) {
        (b'?', 1) => DType::Bool,
        (b'b' | b'h' | b'i' | b'l' | b'q' | b'n', 1) => DType::I8,
        (b'b' | b'h' | b'i' | b'l' | b'q' | b'n', 2) => DType::I16,
        (b'b' | b'h' | b'i' | b'l' | b'q' | b'n', 4) => DType::I32,
        (b'b' | b'h' | b'i' | b'l' | b'q' | b'n', 8) => DType::I64,
        (b'B' | b'H' | b'I' | b'L' | b'Q' | b'N', 1) => DType::U8,
        (b'B' | b'H' | b'I' | b'L' | b'Q' | b'N', 2) => DType::U16,
        (b'B' | b'H' | b'I' | b'L' | b'Q' | b'N', 4) => DType::U32,
        (b'B' | b'H' | b'I' | b'L' | b'Q' | b'N', 8) => DType::U64,
        (b'e', 2) => DType::F16,
        (b'f', 4) => DType::F32,
        (b'd', 8) => DType::F64,
        _ => return None,
    })
}
