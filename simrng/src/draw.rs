//! Draws from a caller-supplied `RngCore` (moved here from netsim, which
//! was their first user).
//!
//! Only IEEE-754 `+ - * /` and integer arithmetic are used (no `libm`), so
//! the same seed gives the same draws on every host and toolchain: a failure
//! found on one machine replays on another. Each helper consumes exactly one
//! `next_u64` so the draw sequence is easy to reason about.

use rand_core::RngCore;

/// Uniform in `[0, 1)` with 53 bits of precision (exact conversion).
pub fn unit_f64<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `true` with probability `p`. `p <= 0` never, `p >= 1` always.
/// Callers skip the call entirely when `p == 0` so that a fault that is off
/// consumes no randomness.
pub fn bernoulli<R: RngCore + ?Sized>(rng: &mut R, p: f64) -> bool {
    unit_f64(rng) < p
}

/// Uniform in `[lo, hi]` (inclusive; `lo <= hi`). Multiply-shift without
/// rejection: the bias is below 2^-64 * range, irrelevant here, and it keeps
/// the draw count fixed at one.
pub fn uniform_inclusive<R: RngCore + ?Sized>(rng: &mut R, lo: u64, hi: u64) -> u64 {
    debug_assert!(lo <= hi);
    let span = (hi - lo) as u128 + 1;
    let r = rng.next_u64() as u128;
    lo + ((r * span) >> 64) as u64
}

/// Uniform in `0..n` (`n > 0`) with one draw (Lemire's multiply-shift
/// without rejection; the bias is below n / 2^64).
pub fn below<R: RngCore + ?Sized>(rng: &mut R, n: u64) -> u64 {
    debug_assert!(n > 0);
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// Uniform in `[lo, hi]` (`lo <= hi`) over signed values, by the same
/// multiply-shift over the width of the range (exact for any i64 range).
pub fn between<R: RngCore + ?Sized>(rng: &mut R, lo: i64, hi: i64) -> i64 {
    debug_assert!(lo <= hi);
    let width = (hi as i128 - lo as i128) as u128 + 1;
    if width > u64::MAX as u128 {
        return rng.next_u64() as i64;
    }
    let k = ((rng.next_u64() as u128 * width) >> 64) as i128;
    (lo as i128 + k) as i64
}

/// `lo + Exp(mean - lo)`, truncated at `hi`: a long-tailed latency whose
/// floor is the propagation delay.
pub fn shifted_exponential<R: RngCore + ?Sized>(rng: &mut R, lo: u64, mean: u64, hi: u64) -> u64 {
    let u = unit_f64(rng);
    let x = -portable_ln(1.0 - u) * (mean - lo) as f64; // 1-u in (0, 1]
    let extra = x as u64; // saturating, deterministic
    lo.saturating_add(extra).min(hi)
}

/// Natural logarithm of a positive finite normal `x` using only basic
/// arithmetic: `x = m * 2^e`, `ln m = 2 atanh((m-1)/(m+1))`.
pub fn portable_ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    const LN2: f64 = core::f64::consts::LN_2;
    const SQRT2: f64 = core::f64::consts::SQRT_2;
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > SQRT2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // |s| <= 0.1716, s^2 <= 0.0295: 12 odd terms reach below 1e-18.
    let mut term = s;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..12 {
        sum += term / k;
        term *= s2;
        k += 2.0;
    }
    e as f64 * LN2 + 2.0 * sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn ln_matches_std() {
        for &x in &[1e-16, 1e-9, 0.001, 0.3, 0.5, core::f64::consts::FRAC_1_SQRT_2, 1.4143, 0.999, 1.0, 2.0, 1e6] {
            let d = (portable_ln(x) - x.ln()).abs();
            assert!(d < 1e-12 * x.ln().abs().max(1.0), "ln({x}): {d}");
        }
    }

    #[test]
    fn uniform_bounds_and_mean() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut sum = 0u64;
        for _ in 0..10_000 {
            let v = uniform_inclusive(&mut r, 10, 20);
            assert!((10..=20).contains(&v));
            sum += v;
        }
        let mean = sum as f64 / 10_000.0;
        assert!((mean - 15.0).abs() < 0.2, "{mean}");
        assert_eq!(uniform_inclusive(&mut r, 5, 5), 5);
        let _ = uniform_inclusive(&mut r, 0, u64::MAX);
    }

    #[test]
    fn exponential_mean() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(2);
        let n = 20_000;
        let mut sum = 0u64;
        for _ in 0..n {
            let v = shifted_exponential(&mut r, 1_000, 3_000, u64::MAX);
            assert!(v >= 1_000);
            sum += v;
        }
        let mean = sum as f64 / n as f64;
        assert!((mean - 3_000.0).abs() < 100.0, "{mean}");
        assert!(shifted_exponential(&mut r, 1, 1_000_000, 10) <= 10);
    }
}
