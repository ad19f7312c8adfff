//! Application kernels that must run without the GIL: video textures' sum of squared
//! differences between frames, compared in stripes of lines so the working set stays in
//! cache (the Stampede paper's Fig. 12).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Exact sums of squared differences between every frame of ``rows`` and every frame of
/// ``cols`` (C-contiguous uint8 buffers of whole frames of ``frame_len`` bytes, each
/// ``line_len`` bytes per line), stripe by stripe of ``stripe_lines`` lines; returns them
/// row-major (``len(rows) × len(cols)``). With ``lower``, only pairs below the diagonal
/// (``col < row``) are computed (the rest are 0): for a tile on the diagonal.
#[pyfunction]
#[pyo3(signature = (rows, cols, frame_len, line_len, stripe_lines, lower = false))]
pub(crate) fn _ssd_stripes(
    py: Python<'_>,
    rows: PyBuffer<u8>,
    cols: PyBuffer<u8>,
    frame_len: usize,
    line_len: usize,
    stripe_lines: usize,
    lower: bool,
) -> PyResult<Vec<u64>> {
    if frame_len == 0 || line_len == 0 || stripe_lines == 0 || frame_len % line_len != 0 {
        return Err(PyValueError::new_err(
            "frames need a length that is a whole number of lines, and stripes a line",
        ));
    }
    for b in [&rows, &cols] {
        if !b.is_c_contiguous() || b.len_bytes() % frame_len != 0 {
            return Err(PyValueError::new_err(
                "frames must be C-contiguous uint8 buffers of whole frames",
            ));
        }
    }
    let (nr, nc) = (rows.len_bytes() / frame_len, cols.len_bytes() / frame_len);
    // Plain addresses cross into the GIL-free closure; the buffers stay exported (and the
    // arrays alive and unresized) until this function returns.
    let (rp, cp) = (rows.buf_ptr() as usize, cols.buf_ptr() as usize);
    let (rl, cl) = (rows.len_bytes(), cols.len_bytes());
    Ok(py.detach(move || {
        // SAFETY: the exported buffers cover these ranges while this call runs.
        let (r, c) = unsafe {
            (
                std::slice::from_raw_parts(rp as *const u8, rl),
                std::slice::from_raw_parts(cp as *const u8, cl),
            )
        };
        let mut acc = vec![0u64; nr * nc];
        let stripe = stripe_lines * line_len;
        let mut at = 0;
        while at < frame_len {
            let end = (at + stripe).min(frame_len);
            for i in 0..nr {
                let a = &r[i * frame_len + at..i * frame_len + end];
                let limit = if lower { i.min(nc) } else { nc };
                for j in 0..limit {
                    let b = &c[j * frame_len + at..j * frame_len + end];
                    acc[i * nc + j] += ssd(a, b);
                }
            }
            at = end;
        }
        acc
    }))
}

/// The sum of squared differences of two equal-length byte slices, exactly: in 32-bit
/// lanes over blocks short enough not to overflow (which the compiler vectorises).
fn ssd(a: &[u8], b: &[u8]) -> u64 {
    const BLOCK: usize = 1 << 15; // 2^15 * 255^2 < 2^32
    a.chunks(BLOCK)
        .zip(b.chunks(BLOCK))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                // Differences in 16 bits, squares summed in 32: the shape the compiler
                // turns into multiply-add instructions.
                .map(|(&p, &q)| {
                    let d = i32::from(i16::from(p) - i16::from(q));
                    (d * d) as u32
                })
                .fold(0u32, u32::wrapping_add) as u64
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::ssd;

    #[test]
    fn ssd_is_exact_at_the_extremes() {
        let a = vec![255u8; 100_000];
        let b = vec![0u8; 100_000];
        assert_eq!(ssd(&a, &b), 100_000 * 255 * 255);
        assert_eq!(ssd(&a, &a), 0);
        assert_eq!(ssd(&[1, 5], &[4, 1]), 9 + 16);
    }
}
