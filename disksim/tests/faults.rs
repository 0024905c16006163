//! Disk faults in the write log: failed writes never land nor persist,
//! misdirected writes move and stay coherent with reads, flushes and crash
//! states (see `disksim::faults`).

mod common;
use std::collections::BTreeSet;

use common::*;
use disksim::{
    CrashModel, CrashState, DiskError, DiskFault, RequestId, RequestKind, StateCount, StoreError, SECTOR_SIZE,
};
use rand_core::RngCore;

fn all_images(d: &disksim::Disk, m: CrashModel, sectors: usize) -> BTreeSet<Vec<u8>> {
    d.crash_states(m).map(|s| image(d, &s, sectors)).collect()
}

#[test]
fn write_errors_never_land_nor_persist() {
    let mut d = disk(64);
    let old = pattern(1, 2);
    write_done(&mut d, 8, &old, false);
    flush_done(&mut d);
    let bad = d.write(8, &pattern(2, 2), false).unwrap();
    // A later write over half of it, still in flight when `bad` fails.
    let later = d.write(9, &pattern(3, 1), false).unwrap();
    assert!(d.inject(bad, DiskFault::WriteError));
    // In flight, the failing write is visible like any other.
    assert_eq!(peek(&d, 8, 1), pattern(2, 1));
    let c = d.complete(bad).unwrap();
    assert_eq!((c.kind, c.fault, c.failed()), (RequestKind::Write { fua: false }, Some(DiskFault::WriteError), true));
    // The cache view reverts where it was the latest, keeps later writes.
    assert_eq!(peek(&d, 8, 1), old[..SECTOR_SIZE].to_vec());
    assert_eq!(peek(&d, 9, 1), pattern(3, 1));
    assert!(d.volatile_writes().all(|w| w.0 != bad));
    assert!(matches!(d.complete(bad), Err(DiskError::UnknownRequest(_))));
    // No crash state holds it: sector 8 is always the old data.
    for m in [CrashModel::ATOMIC, CrashModel::TORN] {
        for img in all_images(&d, m, 10) {
            assert_eq!(&img[8 * SECTOR_SIZE..9 * SECTOR_SIZE], &old[..SECTOR_SIZE]);
        }
    }
    // Nor does the durable image after everything is flushed.
    d.complete(later).unwrap();
    flush_done(&mut d);
    assert_eq!(d.volatile_writes().count(), 0);
    let img = image(&d, &CrashState::none(), 10);
    assert_eq!(&img[8 * SECTOR_SIZE..9 * SECTOR_SIZE], &old[..SECTOR_SIZE]);
    assert_eq!(&img[9 * SECTOR_SIZE..], &pattern(3, 1)[..]);
    // A failed write alone in its block leaves no cache behind.
    let mut d = disk(64);
    let w = d.write(40, &pattern(4, 1), false).unwrap();
    assert!(d.storage().cache_overlay > 0);
    d.inject(w, DiskFault::WriteError);
    d.complete(w).unwrap();
    assert_eq!(d.storage().cache_overlay, 0);
    assert_eq!(d.storage().log, 0);
    assert_eq!(peek(&d, 40, 1), vec![0u8; SECTOR_SIZE]);
}

#[test]
fn a_failing_write_is_in_flight_until_it_completes() {
    // The failure is decided at completion: a power loss before it may still
    // persist the write, as for any write in flight.
    let mut d = disk(64);
    let w = d.write(0, &pattern(5, 1), false).unwrap();
    d.inject(w, DiskFault::WriteError);
    assert_eq!(d.crash_state_count(CrashModel::ATOMIC), StateCount::Exact(2));
    assert!(all_images(&d, CrashModel::ATOMIC, 1).contains(&pattern(5, 1)));
}

#[test]
fn a_misdirected_write_lands_elsewhere_and_crash_states_follow_it() {
    let mut d = disk(64);
    let a = pattern(1, 1);
    write_done(&mut d, 20, &a, false); // volatile, issued first
    let m = d.write(4, &pattern(2, 2), false).unwrap();
    let b = d.write(21, &pattern(3, 1), false).unwrap(); // issued after m
    assert!(d.inject(m, DiskFault::Misdirected { to: 20 }));
    assert_eq!(peek(&d, 4, 2), pattern(2, 2), "before completion it is where it was asked");
    let c = d.complete(m).unwrap();
    assert_eq!((c.fault, c.failed()), (Some(DiskFault::Misdirected { to: 20 }), false));
    // Issue order decides per sector: m beats a at 20, b beats m at 21.
    assert_eq!(peek(&d, 4, 2), vec![0u8; 2 * SECTOR_SIZE]);
    assert_eq!(peek(&d, 20, 1), pattern(2, 1));
    assert_eq!(peek(&d, 21, 1), pattern(3, 1));
    let m_at: Vec<_> = d.volatile_writes().filter(|w| w.0 == m).map(|w| (w.1, w.2, w.3)).collect();
    assert_eq!(m_at, vec![(20, 2, true)]);
    // Every crash state: sectors 4..6 untouched; 20 and 21 hold the
    // persisted writes applied in issue order at m's new place.
    let m_sectors: Vec<Vec<u8>> = pattern(2, 2).chunks(SECTOR_SIZE).map(|c| c.to_vec()).collect();
    let mut expected = BTreeSet::new();
    for mask in 0..8u32 {
        let mut s20 = vec![0u8; SECTOR_SIZE];
        let mut s21 = vec![0u8; SECTOR_SIZE];
        if mask & 1 != 0 {
            s20 = a.clone();
        }
        if mask & 2 != 0 {
            s20 = m_sectors[0].clone();
            s21 = m_sectors[1].clone();
        }
        if mask & 4 != 0 {
            s21 = pattern(3, 1);
        }
        expected.insert([s20, s21].concat());
    }
    let imgs = all_images(&d, CrashModel::ATOMIC, 22);
    assert_eq!(imgs.len() as u128, d.crash_state_count(CrashModel::ATOMIC).lower_bound());
    for img in &imgs {
        assert!(img[4 * SECTOR_SIZE..6 * SECTOR_SIZE].iter().all(|&x| x == 0));
    }
    let seen: BTreeSet<Vec<u8>> = imgs.iter().map(|i| i[20 * SECTOR_SIZE..22 * SECTOR_SIZE].to_vec()).collect();
    assert_eq!(seen, expected);
    // Flushed, it is durable at its new place only.
    d.complete(b).unwrap();
    flush_done(&mut d);
    let img = image(&d, &CrashState::none(), 22);
    assert!(img[4 * SECTOR_SIZE..6 * SECTOR_SIZE].iter().all(|&x| x == 0));
    assert_eq!(&img[20 * SECTOR_SIZE..21 * SECTOR_SIZE], &pattern(2, 1)[..]);
    assert_eq!(&img[21 * SECTOR_SIZE..], &pattern(3, 1)[..]);
}

#[test]
fn faults_that_do_not_fit_the_request_are_refused() {
    let mut d = disk(64);
    let w = d.write(8, &pattern(1, 2), false).unwrap();
    let f = d.flush();
    let (r, _) = d.read(0, SECTOR_SIZE).unwrap();
    assert!(!d.inject(w, DiskFault::LostFlush));
    assert!(!d.inject(f, DiskFault::WriteError));
    assert!(!d.inject(r, DiskFault::WriteError));
    assert!(!d.inject(w, DiskFault::CorruptRead { bits: 1 }));
    assert!(!d.inject(w, DiskFault::Misdirected { to: 8 }), "its own place");
    assert!(!d.inject(w, DiskFault::Misdirected { to: 63 }), "past the end");
    assert!(!d.inject(w, DiskFault::Misdirected { to: u64::MAX }));
    assert!(!d.inject(RequestId(99), DiskFault::WriteError));
    assert!(d.inject(f, DiskFault::LostFlush));
    // Nothing refused was applied.
    let c = d.complete(w).unwrap();
    assert_eq!(c.fault, None);
    assert_eq!(d.complete(f).unwrap().fault, Some(DiskFault::LostFlush));
    assert_eq!(d.complete(r).unwrap().fault, None);
    assert_eq!(d.volatile_writes().count(), 1, "the lost flush made nothing durable");
}

#[test]
fn a_store_error_while_moving_leaves_the_request_outstanding() {
    let mut d = disk(64);
    let w = d.write(0, &pattern(1, 1), false).unwrap();
    // Block 2 (sectors 16..24) is corrupt in the durable store.
    write_done(&mut d, 16, &pattern(2, 1), true);
    d.durable_store_mut().inject_corruption(2, 5, 0xff).unwrap();
    assert!(d.inject(w, DiskFault::Misdirected { to: 16 }));
    assert!(matches!(d.complete(w), Err(DiskError::Store(StoreError::CorruptBlock { block: 2, .. }))));
    assert!(d.outstanding().any(|(id, _)| id == w));
    assert_eq!(peek(&d, 0, 1), pattern(1, 1));
    assert_eq!(d.volatile_writes().map(|v| (v.0, v.1)).collect::<Vec<_>>(), vec![(w, 0)]);
}

/// One write of the oracle: where it is now, its data, whether it failed.
struct Issued {
    id: RequestId,
    sector: u64,
    data: Vec<u8>,
    failed: bool,
}

/// Random logs with faults injected at completion, against a brute-force
/// oracle that applies failures and moves itself: the cache view and the
/// set of crash images (both models) must match it.
#[test]
fn random_logs_with_faults_match_brute_force() {
    const SECTORS: usize = 12;
    let mut checked = 0;
    let mut faults = [0usize; 2];
    for seed in 0..300u64 {
        let mut rng = simrng::seeded(seed ^ 0xfa17);
        let mut d = disk(64);
        let mut issued: Vec<Issued> = Vec::new();
        let mut tag = 1u8;
        for _ in 0..(4 + rng.next_u64() % 12) {
            match rng.next_u64() % 6 {
                0..=2 => {
                    let s = rng.next_u64() % 8;
                    let n = 1 + (rng.next_u64() % 3) as usize;
                    let data = pattern(tag, n);
                    tag += 1;
                    let id = d.write(s, &data, false).unwrap();
                    issued.push(Issued { id, sector: s, data, failed: false });
                }
                3 => {
                    d.flush();
                }
                _ => {
                    let out: Vec<_> = d.outstanding().collect();
                    if out.is_empty() {
                        continue;
                    }
                    let (id, kind) = out[(rng.next_u64() % out.len() as u64) as usize];
                    let w = issued.iter_mut().find(|w| w.id == id);
                    let fault = match (kind, w, rng.next_u64() % 4) {
                        (RequestKind::Write { .. }, Some(w), 0) => {
                            w.failed = true;
                            Some(DiskFault::WriteError)
                        }
                        (RequestKind::Write { .. }, Some(w), 1) => {
                            let n = (w.data.len() / SECTOR_SIZE) as u64;
                            let to = rng.next_u64() % (SECTORS as u64 - n + 1);
                            (to != w.sector).then(|| {
                                w.sector = to;
                                DiskFault::Misdirected { to }
                            })
                        }
                        (RequestKind::Flush, _, 0) => Some(DiskFault::LostFlush),
                        _ => None,
                    };
                    if let Some(f) = fault {
                        assert!(d.inject(id, f), "seed {seed}: {f:?}");
                        faults[usize::from(f != DiskFault::WriteError)] += 1;
                    }
                    assert_eq!(d.complete(id).unwrap().fault, fault, "seed {seed}");
                }
            }
        }
        issued.retain(|w| !w.failed);
        let mut cache = vec![0u8; SECTORS * SECTOR_SIZE];
        for w in &issued {
            let o = w.sector as usize * SECTOR_SIZE;
            cache[o..o + w.data.len()].copy_from_slice(&w.data);
        }
        assert_eq!(peek(&d, 0, SECTORS), cache, "seed {seed}: cache view");
        let volatile: Vec<RequestId> = d.volatile_writes().map(|w| w.0).collect();
        if volatile.len() > 8 {
            continue;
        }
        checked += 1;
        let mut oracle = BTreeSet::new();
        for mask in 0u32..(1 << volatile.len()) {
            let mut img = vec![0u8; SECTORS * SECTOR_SIZE];
            for w in &issued {
                let vi = volatile.iter().position(|&v| v == w.id);
                if vi.is_none_or(|k| mask & (1 << k) != 0) {
                    let o = w.sector as usize * SECTOR_SIZE;
                    img[o..o + w.data.len()].copy_from_slice(&w.data);
                }
            }
            oracle.insert(img);
        }
        let imgs = all_images(&d, CrashModel::ATOMIC, SECTORS);
        assert_eq!(imgs, oracle, "seed {seed}: crash images");
        assert_eq!(d.crash_state_count(CrashModel::ATOMIC), StateCount::Exact(imgs.len() as u128));
        // Torn: every image of the atomic model is one of the torn model's.
        assert!(imgs.is_subset(&all_images(&d, CrashModel::TORN, SECTORS)), "seed {seed}");
    }
    eprintln!("checked {checked} logs; write errors {}, other faults {}", faults[0], faults[1]);
    assert!(checked > 200 && faults[0] > 100 && faults[1] > 100, "{checked} {faults:?}");
}
