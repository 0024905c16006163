//! Crash-state throughput and storage cost. `cargo bench -p disksim`.
//!
//! Prints figures; no external harness (wall-clock via std::time::Instant is
//! fine here: benchmarks are not part of any simulated execution).

use std::time::Instant;

use disksim::{BlockStore, CrashModel, Disk, BLOCK_SIZE};
use rand_core::RngCore;
use simrng::Rng;

const DISK_SECTORS: u64 = 64 * 1024 * 1024 / 512;
const BLOCKS: u64 = DISK_SECTORS / 8;

fn block_data(rng: &mut Rng) -> Vec<u8> {
    let mut v = vec![0u8; BLOCK_SIZE];
    rng.fill_bytes(&mut v);
    v
}

/// A 64 MiB disk with 16 completed, unflushed 4 KiB writes at distinct blocks.
fn disk_with_volatile_writes(n: usize) -> Disk {
    let mut rng = simrng::seeded(1);
    let mut d = Disk::new(BlockStore::zeros(DISK_SECTORS));
    let f = d.flush();
    d.complete(f).unwrap();
    let mut used = std::collections::BTreeSet::new();
    while used.len() < n {
        let b = rng.next_u64() % BLOCKS;
        if used.insert(b) {
            let id = d.write(b * 8, &block_data(&mut rng), false).unwrap();
            d.complete(id).unwrap();
        }
    }
    d
}

fn rate(n: u64, secs: f64) -> String {
    format!("{:>12.0}/s  ({n} in {secs:.3} s)", n as f64 / secs)
}

fn main() {
    let d = disk_with_volatile_writes(16);
    println!("log: 16 volatile 4 KiB writes on a 64 MiB disk");
    println!("  atomic states: {:?}", d.crash_state_count(CrashModel::ATOMIC));
    println!("  torn states:   {:?}", d.crash_state_count(CrashModel::TORN));
    let acc = enumerate(&d) ^ sample(&d);
    storage();
    std::hint::black_box(acc);
}

/// Enumerating crash states: alone, with the post-crash image, with a
/// crashed clone, and the first torn states.
fn enumerate(d: &Disk) -> u32 {
    // Enumeration alone.
    let t = Instant::now();
    let n = d.crash_states(CrashModel::ATOMIC).count() as u64;
    println!("atomic: enumerate                    {}", rate(n, t.elapsed().as_secs_f64()));

    // Enumerate + build the post-crash image (crash_view) + fingerprint it.
    let t = Instant::now();
    let mut acc = 0u32;
    let mut n = 0u64;
    for s in d.crash_states(CrashModel::ATOMIC) {
        acc ^= d.crash_view(&s).unwrap().fingerprint();
        n += 1;
    }
    println!("atomic: enumerate + crash_view       {}  [{acc:08x}]", rate(n, t.elapsed().as_secs_f64()));

    // Enumerate + apply_crash on a clone (what forking a crashed node costs).
    let t = Instant::now();
    let mut n = 0u64;
    for s in d.crash_states(CrashModel::ATOMIC).take(16384) {
        let mut c = d.clone();
        c.apply_crash(&s).unwrap();
        n += 1;
    }
    println!("atomic: enumerate + clone+apply_crash{}", rate(n, t.elapsed().as_secs_f64()));

    // Torn: 2^128 states; time the first 65536.
    let t = Instant::now();
    let mut n = 0u64;
    for s in d.crash_states(CrashModel::TORN).take(65536) {
        acc ^= d.crash_view(&s).unwrap().fingerprint();
        n += 1;
    }
    println!("torn:   enumerate + crash_view       {}", rate(n, t.elapsed().as_secs_f64()));
    acc
}

/// Sampling one crash state and building its image, per crash model.
fn sample(d: &Disk) -> u32 {
    let mut acc = 0u32;
    for m in [CrashModel::ATOMIC, CrashModel::TORN] {
        let mut rng = simrng::seeded(2);
        let t = Instant::now();
        let n = 65536u64;
        for _ in 0..n {
            let s = d.sample_crash_state(m, &mut rng);
            acc ^= d.crash_view(&s).unwrap().fingerprint();
        }
        let name = if m.torn_writes { "torn:  " } else { "atomic:" };
        println!("{name} sample + crash_view          {}", rate(n, t.elapsed().as_secs_f64()));
    }
    acc
}

/// Storage: 1000 random 4 KiB blocks on a 64 MiB disk.
fn storage() {
    let mut rng = simrng::seeded(3);
    let mut d = Disk::new(BlockStore::zeros(DISK_SECTORS));
    let t = Instant::now();
    for _ in 0..1000 {
        let b = rng.next_u64() % BLOCKS;
        let id = d.write(b * 8, &block_data(&mut rng), false).unwrap();
        d.complete(id).unwrap();
    }
    let wsecs = t.elapsed().as_secs_f64();
    let before = d.storage();
    let f = d.flush();
    d.complete(f).unwrap();
    let after = d.storage();
    println!(
        "storage after 1000 random 4 KiB writes on a 64 MiB disk ({} distinct blocks), writes {}:",
        d.durable_store().overlay_blocks(),
        rate(1000, wsecs)
    );
    println!("  unflushed: {:?} total {} B", before, before.total());
    println!(
        "  flushed:   {:?} total {} B ({:.2} KiB/written block)",
        after,
        after.total(),
        after.total() as f64 / 1024.0 / d.durable_store().overlay_blocks() as f64
    );
}
