//! Disk faults (`[faults.disk]` in cluster.toml): a disk that misbehaves in
//! ways a program has to tolerate. Every fault is a decision drawn from an
//! rng the caller passes in (the engine's seeded streams for writes and
//! flushes, the device's per-boot stream for reads), so it is a pure
//! function of the seed and of the order of requests.
//!
//! What each fault does to the model (see [`crate::disk`] for the rest):
//! - *corrupt read* ([`maybe_corrupt`]): the data a read returns has a few
//!   bits flipped. Transient: the cache view, the write log and the durable
//!   store are untouched, so the same read issued again may return the
//!   data intact. The device applies it to the bytes it hands the guest, at
//!   the read's acceptance (reads are answered then).
//! - *lost flush* ([`crate::Disk::lose_flush`]): the flush completes
//!   successfully but makes nothing durable.
//! - *write error* ([`DiskFault::WriteError`] through
//!   [`crate::Disk::inject`]): the write completes with an I/O error and
//!   never lands: at its completion it leaves the write log, and the cache
//!   view of its sectors reverts to the durable store plus the other logged
//!   writes in issue order. It is in no crash state after that. Before its
//!   completion it is an in-flight write like any other (a read may see its
//!   data, a power loss may persist it): the failure is decided when the
//!   device completes the request, not before.
//! - *misdirected write* ([`DiskFault::Misdirected`] through
//!   [`crate::Disk::inject`]): the write completes successfully, but its
//!   data lands at another sector (same length). At completion its log entry
//!   moves there, keeping its place in issue order; the cache view of both
//!   ranges is rebuilt from the durable store plus the log. From then on
//!   reads, flushes and crash states treat it as a write of the new sectors,
//!   and the sectors it was meant for keep what they held. Before its
//!   completion it sits at its own sectors (as for write errors, the fault
//!   is decided at completion).
//!
//! Every helper here draws only what it needs; callers skip it entirely when
//! the fault's probability is 0, so a fault that is off consumes nothing.

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

/// A fault that hit one request, as injected ([`crate::Disk::inject`]) and
/// as reported with its completion ([`crate::Completion::fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DiskFault {
    /// A read returned its data with `bits` bits flipped; the stored data is
    /// intact.
    CorruptRead {
        /// How many bits were flipped.
        bits: u32,
    },
    /// A flush was acknowledged without making anything durable.
    LostFlush,
    /// A write failed with an I/O error and did not land.
    WriteError,
    /// A write was acknowledged but landed at sector `to` instead of its own.
    Misdirected {
        /// The sector the write landed at.
        to: u64,
    },
}

impl DiskFault {
    /// The `[faults.disk]` key of the fault: `corrupt_read`, `lost_flush`,
    /// `write_error` or `misdirect`.
    pub fn name(&self) -> &'static str {
        match self {
            DiskFault::CorruptRead { .. } => "corrupt_read",
            DiskFault::LostFlush => "lost_flush",
            DiskFault::WriteError => "write_error",
            DiskFault::Misdirected { .. } => "misdirect",
        }
    }
}

/// A device's read faults: `[faults.disk] corrupt_read` and the seed of the
/// device's own stream (the engine derives one per node and boot). The
/// default corrupts nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadFaults {
    /// Probability that a read returns corrupted data, in [0, 1].
    pub corrupt_read: f64,
    /// Seed of the stream that draws which reads are corrupted, and how.
    pub seed: u64,
}

use simrng::below;
pub use simrng::bernoulli;

/// Most bits a corrupt read flips.
pub const MAX_FLIPPED_BITS: u32 = 4;

/// `[faults.disk] corrupt_read`: with probability `p` flips between 1 and
/// [`MAX_FLIPPED_BITS`] distinct bits of `data`, at drawn positions, and
/// returns the fault. Draws nothing when `p <= 0` or `data` is empty.
pub fn maybe_corrupt<R: RngCore + ?Sized>(rng: &mut R, p: f64, data: &mut [u8]) -> Option<DiskFault> {
    if p <= 0.0 || data.is_empty() || !bernoulli(rng, p) {
        return None;
    }
    let total = data.len() as u64 * 8;
    let want = (1 + below(rng, u64::from(MAX_FLIPPED_BITS))).min(total);
    // Distinct positions, so that two flips never cancel out.
    let mut flipped: Vec<u64> = Vec::with_capacity(want as usize);
    while (flipped.len() as u64) < want {
        let bit = below(rng, total);
        if !flipped.contains(&bit) {
            flipped.push(bit);
            data[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
    }
    Some(DiskFault::CorruptRead { bits: want as u32 })
}

/// `[faults.disk] misdirect`: where a write of `sectors` sectors meant for
/// `sector` lands instead, on a disk of `capacity` sectors: uniform over
/// every other start at which it fits (one draw). `None`, without drawing,
/// when there is no other start (the write spans the whole disk).
pub fn misdirect_target<R: RngCore + ?Sized>(rng: &mut R, capacity: u64, sector: u64, sectors: u64) -> Option<u64> {
    let starts = capacity.checked_sub(sectors)?.checked_add(1)?;
    if starts < 2 || sector >= starts {
        return None;
    }
    let k = below(rng, starts - 1);
    Some(if k >= sector { k + 1 } else { k })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_flips_a_few_distinct_bits_and_probability_zero_draws_nothing() {
        let mut rng = simrng::seeded(7);
        let before = rng.clone();
        let mut data = vec![0u8; 4096];
        assert_eq!(maybe_corrupt(&mut rng, 0.0, &mut data), None);
        assert_eq!(rng.next_u64(), before.clone().next_u64(), "p = 0 drew");
        let mut rng = simrng::seeded(7);
        let mut hits = 0;
        for _ in 0..200 {
            let mut data = vec![0x5au8; 4096];
            let Some(DiskFault::CorruptRead { bits }) = maybe_corrupt(&mut rng, 1.0, &mut data) else {
                panic!("p = 1 always corrupts")
            };
            let flipped: u32 = data.iter().map(|b| (b ^ 0x5a).count_ones()).sum();
            assert_eq!(flipped, bits);
            assert!((1..=MAX_FLIPPED_BITS).contains(&bits));
            hits += 1;
        }
        assert_eq!(hits, 200);
        // One byte: at most 8 bits exist.
        let mut one = [0u8];
        assert!(maybe_corrupt(&mut rng, 1.0, &mut one).is_some());
        assert_ne!(one[0], 0);
        // Same seed, same corruption.
        let (mut a, mut b) = (vec![0u8; 512], vec![0u8; 512]);
        maybe_corrupt(&mut simrng::seeded(3), 1.0, &mut a);
        maybe_corrupt(&mut simrng::seeded(3), 1.0, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn misdirect_targets_fit_and_differ() {
        let mut rng = simrng::seeded(1);
        for _ in 0..1000 {
            let to = misdirect_target(&mut rng, 64, 8, 8).unwrap();
            assert!(to != 8 && to + 8 <= 64, "{to}");
        }
        // Every other start is reachable on a tiny disk.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            seen.insert(misdirect_target(&mut rng, 4, 1, 2).unwrap());
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(misdirect_target(&mut rng, 8, 0, 8), None, "nowhere else to go");
        assert_eq!(misdirect_target(&mut rng, 8, 0, 9), None);
    }
}
