//! Transposing copies between strided matrices, the gathers and scatters of the CPU FFT's
//! strided passes: 4x4 blocks of 8-byte elements (`Complex<f32>`) and 2x2 blocks of
//! 16-byte ones (`Complex<f64>`) through AVX registers where the CPU has AVX, else one
//! element at a time.
//!
//! Why: one element at a time, the gather and the scatter of the column pass of a 256x256
//! complex64 `fft2` took as long as its column transforms (`perf record` of the sim step:
//! 26 % of the step in the copy loops, one 8-byte load and store per element).

/// `dst[c * ds + r] = src[r * ss + c]` for `r < rows`, `c < cols`.
///
/// # Safety
/// `src` is readable and `dst` writable at every index named above, and the two ranges do
/// not overlap.
pub(super) unsafe fn transpose_copy<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let size = std::mem::size_of::<E>();
        if (size == 8 || size == 16) && std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the caller's contract; AVX is available (checked above); the
            // elements are copied as their bytes (8 or 16 per element, lanes of f64 that
            // loads, shuffles and stores move without interpreting them).
            unsafe {
                if size == 8 {
                    avx::transpose8(src.cast(), ss, dst.cast(), ds, rows, cols);
                } else {
                    avx::transpose16(src.cast(), ss, dst.cast(), ds, rows, cols);
                }
            }
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { scalar(src, ss, dst, ds, 0, rows, cols) }
}

/// Rows `r0..rows` of [`transpose_copy`], one element at a time.
///
/// # Safety
/// As [`transpose_copy`].
unsafe fn scalar<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    r0: usize,
    rows: usize,
    cols: usize,
) {
    for r in r0..rows {
        for c in 0..cols {
            // SAFETY: the caller's contract.
            unsafe { *dst.add(c * ds + r) = *src.add(r * ss + c) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// [`super::transpose_copy`] of 8-byte elements, as f64 lanes (strides in elements).
    ///
    /// # Safety
    /// As `transpose_copy`, and the CPU has AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose8(
        src: *const f64,
        ss: usize,
        dst: *mut f64,
        ds: usize,
        rows: usize,
        cols: usize,
    ) {
        let (r4, c4) = (rows / 4 * 4, cols / 4 * 4);
        for r in (0..r4).step_by(4) {
            for c in (0..c4).step_by(4) {
                // SAFETY: rows r..r+4 and columns c..c+4 are inside the matrices (the
                // caller's contract); unaligned loads and stores.
                unsafe {
                    let s = src.add(r * ss + c);
                    let a0 = _mm256_loadu_pd(s);
                    let a1 = _mm256_loadu_pd(s.add(ss));
                    let a2 = _mm256_loadu_pd(s.add(2 * ss));
                    let a3 = _mm256_loadu_pd(s.add(3 * ss));
                    // per 128-bit half: [a0[0], a1[0] | a0[2], a1[2]] and so on
                    let t0 = _mm256_unpacklo_pd(a0, a1);
                    let t1 = _mm256_unpackhi_pd(a0, a1);
                    let t2 = _mm256_unpacklo_pd(a2, a3);
                    let t3 = _mm256_unpackhi_pd(a2, a3);
                    let d = dst.add(c * ds + r);
                    _mm256_storeu_pd(d, _mm256_permute2f128_pd::<0x20>(t0, t2));
                    _mm256_storeu_pd(d.add(ds), _mm256_permute2f128_pd::<0x20>(t1, t3));
                    _mm256_storeu_pd(d.add(2 * ds), _mm256_permute2f128_pd::<0x31>(t0, t2));
                    _mm256_storeu_pd(d.add(3 * ds), _mm256_permute2f128_pd::<0x31>(t1, t3));
                }
            }
            for c in c4..cols {
                for i in r..r + 4 {
                    // SAFETY: inside the matrices (the caller's contract).
                    unsafe { *dst.add(c * ds + i) = *src.add(i * ss + c) };
                }
            }
        }
        // SAFETY: the caller's contract.
        unsafe { super::scalar(src, ss, dst, ds, r4, rows, cols) }
    }

    /// [`super::transpose_copy`] of 16-byte elements, each two f64 lanes (strides in
    /// elements).
    ///
    /// # Safety
    /// As `transpose_copy`, and the CPU has AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose16(
        src: *const [f64; 2],
        ss: usize,
        dst: *mut [f64; 2],
        ds: usize,
        rows: usize,
        cols: usize,
    ) {
        let (r2, c2) = (rows / 2 * 2, cols / 2 * 2);
        for r in (0..r2).step_by(2) {
            for c in (0..c2).step_by(2) {
                // SAFETY: rows r..r+2 and columns c..c+2 are inside the matrices (the
                // caller's contract); unaligned loads and stores of two elements each.
                unsafe {
                    let a0 = _mm256_loadu_pd(src.add(r * ss + c).cast());
                    let a1 = _mm256_loadu_pd(src.add((r + 1) * ss + c).cast());
                    let d = dst.add(c * ds + r);
                    _mm256_storeu_pd(d.cast(), _mm256_permute2f128_pd::<0x20>(a0, a1));
                    _mm256_storeu_pd(d.add(ds).cast(), _mm256_permute2f128_pd::<0x31>(a0, a1));
                }
            }
            for c in c2..cols {
                for i in r..r + 2 {
                    // SAFETY: inside the matrices (the caller's contract).
                    unsafe { *dst.add(c * ds + i) = *src.add(i * ss + c) };
                }
            }
        }
        // SAFETY: the caller's contract.
        unsafe { super::scalar(src, ss, dst, ds, r2, rows, cols) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<E: Copy + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> E, zero: E) {
        for (rows, cols) in [(0, 3), (1, 1), (3, 5), (4, 4), (7, 9), (16, 32), (257, 26)] {
            let (ss, ds) = (cols + 3, rows + 5);
            let src: Vec<E> = (0..rows * ss).map(&make).collect();
            let mut dst = vec![zero; cols * ds];
            // SAFETY: both matrices lie inside the vectors (strides and sizes above).
            unsafe { transpose_copy(src.as_ptr(), ss, dst.as_mut_ptr(), ds, rows, cols) };
            for c in 0..cols {
                for r in 0..ds {
                    let want = if r < rows { src[r * ss + c] } else { zero };
                    assert_eq!(dst[c * ds + r], want, "{rows}x{cols} at ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn transposes_match_the_definition_for_each_element_size() {
        use num_complex::Complex;
        check(
            |i| Complex::new(i as f32, -(i as f32) - 0.5),
            Complex::new(0.0, 0.0),
        );
        check(
            |i| Complex::new(i as f64, 1e300 / (i + 1) as f64),
            Complex::new(0.0, 0.0),
        );
        check(|i| i as f32, 0.0);
        // bit patterns that are not valid f64 numbers move unchanged (NaN payloads)
        check(|i| u64::MAX - i as u64, 0u64);
    }
}
