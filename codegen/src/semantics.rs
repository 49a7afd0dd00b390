//! NumPy's scalar semantics on the host: casts, integer division, rounding and the
//! counter-based random generator. The CUDA renderer emits the same rules as C.

/// NumPy's float -> int64 cast: NaN, infinities and out-of-range values give `i64::MIN`
/// (what x86 NumPy does), others truncate toward zero.
pub fn f64_to_i64(x: f64) -> i64 {
    if x.is_nan() || x >= 9.223_372_036_854_775_807e18 || x < -9.223_372_036_854_775_808e18 {
        i64::MIN
    } else {
        x as i64
    }
}

/// NumPy's float -> int32 cast: NaN, infinities and out-of-range values give `i32::MIN`.
pub fn f64_to_i32(x: f64) -> i32 {
    if x.is_nan() || x >= 2_147_483_648.0 || x < -2_147_483_648.0 {
        i32::MIN
    } else {
        x as i32
    }
}

/// Philox4x32-10 of counter `(ctr_lo, ctr_hi, 0, 0)` under key `(seed_lo, seed_hi)`.
///
/// The mapping to random values, identical on every device:
/// * uniform F32: `(x[0] >> 8) * 2^-24`
/// * uniform F64: `(((x[0] as u64) << 32 | x[1]) >> 11) * 2^-53`
/// * normal (both precisions, computed in f64 then rounded): Box-Muller with
///   `u1 = ((((x[0] as u64) << 32 | x[1]) >> 11) + 1) * 2^-53` (in `(0, 1]`),
///   `u2 = (((x[2] as u64) << 32 | x[3]) >> 11) * 2^-53`,
///   `sqrt(-2 ln u1) * cos(2 pi u2)`.
pub fn philox(counter: u64, seed: u64) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut c = [counter as u32, (counter >> 32) as u32, 0u32, 0u32];
    let mut k = [seed as u32, (seed >> 32) as u32];
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = M0 * c[0] as u64;
        let p1 = M1 * c[2] as u64;
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Uniform `[0, 1)` in f32 for `counter` under `seed`.
pub fn uniform_f32(counter: u64, seed: u64) -> f32 {
    (philox(counter, seed)[0] >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Uniform `[0, 1)` in f64 for `counter` under `seed`.
pub fn uniform_f64(counter: u64, seed: u64) -> f64 {
    let x = philox(counter, seed);
    ((((x[0] as u64) << 32) | x[1] as u64) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Standard normal in f64 for `counter` under `seed` (Box-Muller, see [`philox`]).
pub fn normal_f64(counter: u64, seed: u64) -> f64 {
    let x = philox(counter, seed);
    let a = (((x[0] as u64) << 32) | x[1] as u64) >> 11;
    let b = (((x[2] as u64) << 32) | x[3] as u64) >> 11;
    let u1 = (a + 1) as f64 * (1.0 / 9_007_199_254_740_992.0);
    let u2 = b as f64 * (1.0 / 9_007_199_254_740_992.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
