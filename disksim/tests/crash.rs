mod common;
use std::collections::BTreeSet;

use common::*;
use disksim::{CrashModel, CrashState, Disk, Persist, RequestId, SectorSet, StateCount, SECTOR_SIZE};
use rand_core::RngCore;

fn states(d: &Disk, m: CrashModel) -> Vec<CrashState> {
    d.crash_states(m).collect()
}

/// Asserts the enumeration has `n` states, all distinct as descriptions and as
/// disk images, and that the count agrees.
fn check_enumeration(d: &Disk, m: CrashModel, n: usize, sectors: usize) {
    let st = states(d, m);
    assert_eq!(st.len(), n, "{m:?}: {st:?}");
    assert_eq!(d.crash_state_count(m), StateCount::Exact(n as u128));
    assert_eq!(st[0], CrashState::none());
    let descs: BTreeSet<_> = st.iter().cloned().collect();
    assert_eq!(descs.len(), n);
    let imgs: BTreeSet<_> = st.iter().map(|s| image(d, s, sectors)).collect();
    assert_eq!(imgs.len(), n, "two states give the same disk");
}

#[test]
fn three_volatile_writes_after_flush_give_8_states() {
    let mut d = disk(64);
    write_done(&mut d, 0, &pattern(1, 1), false);
    flush_done(&mut d);
    for (i, s) in [3u64, 9, 20].iter().enumerate() {
        write_done(&mut d, *s, &pattern(i as u8 + 2, 1), false);
    }
    check_enumeration(&d, CrashModel::ATOMIC, 8, 64);
    // Single-sector writes cannot tear.
    check_enumeration(&d, CrashModel::TORN, 8, 64);
    // The durable write is in every state.
    for s in states(&d, CrashModel::ATOMIC) {
        assert_eq!(&image(&d, &s, 1)[..], &pattern(1, 1)[..]);
    }
}

#[test]
fn hand_counts_for_overlapping_writes() {
    // Same sector twice: old, first, second.
    let mut d = disk(16);
    write_done(&mut d, 0, &pattern(1, 1), false);
    write_done(&mut d, 0, &pattern(2, 1), false);
    check_enumeration(&d, CrashModel::ATOMIC, 3, 1);
    // The later write may survive while the earlier is lost, and vice versa.
    let imgs: BTreeSet<_> = states(&d, CrashModel::ATOMIC).iter().map(|s| image(&d, s, 1)).collect();
    assert!(imgs.contains(&pattern(1, 1)) && imgs.contains(&pattern(2, 1)) && imgs.contains(&vec![0u8; SECTOR_SIZE]));

    // A = [0,2), B = [1,3): {}, A, B, AB (A shows on sector 0).
    let mut d = disk(16);
    write_done(&mut d, 0, &pattern(1, 2), false);
    write_done(&mut d, 1, &pattern(2, 2), false);
    check_enumeration(&d, CrashModel::ATOMIC, 4, 3);
    // Torn: sector 0 in {old, A}, 1 in {old, A, B}, 2 in {old, B}: 2*3*2.
    check_enumeration(&d, CrashModel::TORN, 12, 3);

    // A = [0], B = [1], C = [0,2) later: {}, A, B, C, AB.
    let mut d = disk(16);
    write_done(&mut d, 0, &pattern(1, 1), false);
    write_done(&mut d, 1, &pattern(2, 1), false);
    write_done(&mut d, 0, &pattern(3, 2), false);
    check_enumeration(&d, CrashModel::ATOMIC, 5, 2);
    check_enumeration(&d, CrashModel::TORN, 9, 2);
}

#[test]
fn torn_write_states() {
    let mut d = disk(64);
    let w = write_done(&mut d, 8, &pattern(1, 4), false);
    check_enumeration(&d, CrashModel::ATOMIC, 2, 16);
    check_enumeration(&d, CrashModel::TORN, 16, 16);
    let st = states(&d, CrashModel::TORN);
    let torn = CrashState { persisted: vec![Persist { write: w, sectors: SectorSet::Ranges(vec![(0, 1), (3, 4)]) }] };
    assert!(st.contains(&torn));
    let img = image(&d, &torn, 12);
    let p = pattern(1, 4);
    assert_eq!(&img[8 * SECTOR_SIZE..9 * SECTOR_SIZE], &p[..SECTOR_SIZE]);
    assert_eq!(&img[9 * SECTOR_SIZE..11 * SECTOR_SIZE], &vec![0u8; 2 * SECTOR_SIZE][..]);
    assert_eq!(&img[11 * SECTOR_SIZE..], &p[3 * SECTOR_SIZE..]);
    // Applying it.
    d.apply_crash(&torn).unwrap();
    assert_eq!(peek(&d, 0, 12), img);
}

#[test]
fn state_count_saturates_and_bounds() {
    let mut d = disk(1 << 16);
    // 200 writes of 8 sectors each to distinct places: 2^200 atomic states.
    for i in 0..200u64 {
        write_done(&mut d, i * 8, &pattern(1, 8), false);
    }
    assert_eq!(d.crash_state_count(CrashModel::ATOMIC), StateCount::AtLeast(u128::MAX));
    assert_eq!(d.crash_state_count(CrashModel::TORN), StateCount::AtLeast(u128::MAX));
    // Enumeration is lazy: the first few come out at once.
    assert_eq!(d.crash_states(CrashModel::ATOMIC).take(5).count(), 5);
    // A big clique of overlapping writes exceeds the counting budget or not,
    // but the answer is never above the truth: k writes to one sector = k+1.
    let mut d = disk(16);
    for i in 0..100u8 {
        write_done(&mut d, 0, &pattern(i, 1), false);
    }
    assert_eq!(d.crash_state_count(CrashModel::ATOMIC), StateCount::Exact(101));
}

#[test]
fn sampling_is_deterministic_per_seed_and_valid() {
    let mut d = disk(256);
    for i in 0..12u64 {
        write_done(&mut d, (i * 5) % 40, &pattern(i as u8 + 1, 1 + (i % 3) as usize), false);
    }
    for m in [CrashModel::ATOMIC, CrashModel::TORN] {
        let draw = |seed: u64| {
            let mut rng = simrng::seeded(seed);
            (0..50).map(|_| d.sample_crash_state(m, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        if m == CrashModel::ATOMIC {
            let all: BTreeSet<_> = d.crash_states(m).collect();
            for s in draw(3) {
                assert!(all.contains(&s), "sampled state {s:?} is not a valid state");
            }
        }
        for s in draw(4) {
            d.crash_view(&s).unwrap();
        }
    }
}

#[test]
fn sampling_covers_small_state_space() {
    let mut d = disk(64);
    for s in [1u64, 2, 3] {
        write_done(&mut d, s, &pattern(s as u8, 2), false);
    }
    for m in [CrashModel::ATOMIC, CrashModel::TORN] {
        let all: BTreeSet<_> = d.crash_states(m).collect();
        let mut rng = simrng::seeded(1);
        let seen: BTreeSet<_> = (0..4000).map(|_| d.sample_crash_state(m, &mut rng)).collect();
        assert_eq!(seen, all, "{m:?}");
    }
}

#[test]
fn crash_state_serialises_and_replays() {
    let mut d = disk(64);
    write_done(&mut d, 0, &pattern(1, 4), false);
    write_done(&mut d, 2, &pattern(2, 4), false);
    let mut rng = simrng::seeded(99);
    let s = d.sample_crash_state(CrashModel::TORN, &mut rng);
    let json = serde_json::to_string(&s).unwrap();
    let back: CrashState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
    let mut d2 = d.clone();
    d.apply_crash(&s).unwrap();
    d2.apply_crash(&back).unwrap();
    assert_eq!(peek(&d, 0, 8), peek(&d2, 0, 8));
    let j = serde_json::to_string(&CrashState {
        persisted: vec![Persist { write: RequestId(3), sectors: SectorSet::Ranges(vec![(0, 2)]) }],
    })
    .unwrap();
    assert_eq!(j, r#"{"persisted":[{"write":3,"sectors":{"ranges":[[0,2]]}}]}"#);
}

/// Random small logs against a brute-force oracle: every subset of volatile
/// writes (and, torn, every subset of each write's sectors) applied in issue
/// order by the test itself; the distinct images must be exactly the images of
/// the enumerated states, with the same count.
#[test]
fn random_logs_match_brute_force() {
    const SECTORS: usize = 10;
    let mut checked = [0usize; 2];
    for seed in 0..300u64 {
        let mut rng = simrng::seeded(seed);
        let mut d = disk(64);
        let mut issued: Vec<(RequestId, u64, Vec<u8>)> = Vec::new();
        let mut tag = 1u8;
        for _ in 0..(4 + rng.next_u64() % 10) {
            match rng.next_u64() % 6 {
                0..=2 => {
                    let s = rng.next_u64() % 8;
                    let n = 1 + (rng.next_u64() % 3).min(SECTORS as u64 - s - 1) as usize;
                    let data = pattern(tag, n);
                    tag += 1;
                    let id = d.write(s, &data, rng.next_u64().is_multiple_of(4)).unwrap();
                    issued.push((id, s, data));
                }
                3 => {
                    d.flush();
                }
                _ => {
                    let out: Vec<_> = d.outstanding().map(|o| o.0).collect();
                    if !out.is_empty() {
                        let id = out[(rng.next_u64() % out.len() as u64) as usize];
                        d.complete(id).unwrap();
                    }
                }
            }
        }
        let volatile: Vec<RequestId> = d.volatile_writes().map(|w| w.0).collect();
        if volatile.len() > 6 {
            continue;
        }
        // Reads see the latest issued data.
        let mut cache = vec![0u8; SECTORS * SECTOR_SIZE];
        for (_, s, data) in &issued {
            let o = *s as usize * SECTOR_SIZE;
            cache[o..o + data.len()].copy_from_slice(data);
        }
        assert_eq!(peek(&d, 0, SECTORS), cache, "seed {seed}");

        for m in [CrashModel::ATOMIC, CrashModel::TORN] {
            let mut oracle = BTreeSet::new();
            // Units: (write index in `volatile`, sector offset) for torn,
            // whole writes for atomic.
            let units: Vec<(usize, Option<usize>)> = if m.torn_writes {
                issued
                    .iter()
                    .filter(|w| volatile.contains(&w.0))
                    .enumerate()
                    .flat_map(|(i, w)| (0..w.2.len() / SECTOR_SIZE).map(move |o| (i, Some(o))))
                    .collect()
            } else {
                (0..volatile.len()).map(|i| (i, None)).collect()
            };
            if units.len() > 14 {
                continue;
            }
            checked[m.torn_writes as usize] += 1;
            for mask in 0u32..(1 << units.len()) {
                let mut img = vec![0u8; SECTORS * SECTOR_SIZE];
                let mut vi = 0;
                for (id, s, data) in &issued {
                    let is_vol = volatile.contains(id);
                    for o in 0..data.len() / SECTOR_SIZE {
                        let keep = !is_vol
                            || units.iter().enumerate().any(|(u, &(w, so))| {
                                mask & (1 << u) != 0
                                    && w == vi
                                    && match so {
                                        Some(x) => x == o,
                                        None => true,
                                    }
                            });
                        if keep {
                            let at = (*s as usize + o) * SECTOR_SIZE;
                            img[at..at + SECTOR_SIZE].copy_from_slice(&data[o * SECTOR_SIZE..(o + 1) * SECTOR_SIZE]);
                        }
                    }
                    if is_vol {
                        vi += 1;
                    }
                }
                oracle.insert(img);
            }
            let st = states(&d, m);
            let imgs: BTreeSet<_> = st.iter().map(|s| image(&d, s, SECTORS)).collect();
            assert_eq!(imgs.len(), st.len(), "seed {seed} {m:?}: duplicate states");
            assert_eq!(imgs, oracle, "seed {seed} {m:?}");
            assert_eq!(d.crash_state_count(m), StateCount::Exact(st.len() as u128), "seed {seed} {m:?}");
        }
    }
    eprintln!("brute-force checked logs: atomic {}, torn {}", checked[0], checked[1]);
    assert!(checked[0] > 200 && checked[1] > 100, "{checked:?}");
}
