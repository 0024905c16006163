//! Linearizability checker throughput: histories checked per second.
//!
//! Histories come from a simulated correct register store: `procs` client
//! processes issue reads (50%), writes (30%, unique values) and CAS (20%) on
//! `keys` keys, each op taking effect at a random point between its invoke and
//! completion; 1% of ops end `info` (taking effect or not, at random). The
//! buggy variant makes one read return a stale value. Everything is seeded
//! (simrng), so figures compare across runs.
//!
//! Run: cargo bench -p checker --bench linearizability
//! (`-- --side-by-side`: only the register checker against txncheck's
//! list-append check on equal operation counts, 1k to 100k).

use checker::linearizability::{check, CheckOptions, CheckResult};
use checker::register_history::{EventType, History, Op, Value};
use rand_core::RngCore;
use simrng::Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[derive(Clone)]
struct SimOp {
    process: u64,
    key: usize,
    call: u64,
    lin: u64,
    ret: u64,
    kind: u8, // 0 read, 1 write, 2 cas
    info: bool,
    takes_effect: bool,
    write: i64,
    cas_from: i64,
    result: Option<i64>, // read value, or cas success as Some(1)/Some(0)
}

fn r(rng: &mut Rng, n: u64) -> u64 {
    rng.next_u64() % n
}

/// Ops with timings and results from a correct register (values start at 0).
fn simulate(seed: u64, n_ops: usize, procs: u64, keys: usize) -> Vec<SimOp> {
    let mut rng = simrng::seeded(seed);
    let mut free_at: Vec<u64> = (0..procs).map(|_| r(&mut rng, 100)).collect();
    let mut ops = Vec::with_capacity(n_ops);
    for next_value in (1i64..).take(n_ops) {
        let p = (0..procs as usize).min_by_key(|&p| (free_at[p], p)).unwrap();
        let call = free_at[p];
        let lin = call + 1 + r(&mut rng, 1000);
        let ret = lin + 1 + r(&mut rng, 1000);
        free_at[p] = ret + r(&mut rng, 200);
        let roll = r(&mut rng, 100);
        let kind = if roll < 50 {
            0
        } else if roll < 80 {
            1
        } else {
            2
        };
        let info = r(&mut rng, 100) == 0;
        ops.push(SimOp {
            process: p as u64,
            key: r(&mut rng, keys as u64) as usize,
            call,
            lin,
            ret,
            kind,
            info,
            takes_effect: !info || r(&mut rng, 2) == 0,
            write: next_value,
            cas_from: 0,
            result: None,
        });
    }
    // Apply at linearization points.
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].lin, i));
    let mut state = vec![0i64; keys];
    for i in order {
        let o = &mut ops[i];
        let s = &mut state[o.key];
        match o.kind {
            0 => o.result = Some(*s),
            1 => {
                if o.takes_effect {
                    *s = o.write;
                }
            }
            _ => {
                // Half the time CAS from the current value, so many succeed.
                // Value 0 stands for nil (never written), which a CAS cannot name.
                o.cas_from = if *s != 0 && rng.next_u64().is_multiple_of(2) { *s } else { *s - 1 };
                let ok = *s == o.cas_from;
                if ok && o.takes_effect {
                    *s = o.write;
                }
                o.result = Some(ok as i64);
            }
        }
    }
    ops
}

fn to_history(ops: &[SimOp]) -> History {
    let mut events: Vec<(u64, u8, usize, EventType, Op)> = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        let key = format!("k{}", o.key);
        let (invoked, done) = match o.kind {
            0 => (Op::read(&key, None), Op::read(&key, o.result.filter(|&v| v != 0).map(Value::Int))),
            1 => (Op::write(&key, o.write), Op::write(&key, o.write)),
            _ => (Op::cas(&key, o.cas_from, o.write), Op::cas(&key, o.cas_from, o.write)),
        };
        let outcome = if o.info {
            EventType::Info
        } else if o.kind == 2 && o.result == Some(0) {
            EventType::Fail
        } else {
            EventType::Ok
        };
        events.push((o.call, 1, i, EventType::Invoke, invoked.clone()));
        let done = if outcome == EventType::Ok { done } else { invoked };
        events.push((o.ret, 0, i, outcome, done));
    }
    // Completions before invokes at equal times keep each process sequential.
    events.sort_by_key(|e| (e.0, e.1, e.2));
    let mut h = History::new();
    for (t, _, i, kind, op) in events {
        h.push(ops[i].process, kind, t, op);
    }
    h
}

/// A history with one stale read that the checker flags.
fn buggy(seed: u64, n_ops: usize, procs: u64, keys: usize) -> History {
    let ops = simulate(seed, n_ops, procs, keys);
    let opts = CheckOptions::default();
    // Try reads from the middle outwards; make one return the value its key
    // had two successful writes earlier.
    for i in (n_ops / 2..n_ops).chain(0..n_ops / 2) {
        let o = &ops[i];
        if o.kind != 0 || o.info {
            continue;
        }
        let mut older: Vec<(u64, i64)> = ops
            .iter()
            .filter(|w| w.key == o.key && w.kind != 0 && w.takes_effect && !w.info && w.ret < o.call)
            .filter(|w| w.kind == 1 || w.result == Some(1))
            .map(|w| (w.lin, w.write))
            .collect();
        if older.len() < 3 {
            continue;
        }
        older.sort();
        let mut bad = ops.clone();
        bad[i].result = Some(older[older.len() - 3].1);
        let h = to_history(&bad);
        if matches!(check(&h, &opts), Ok(CheckResult::Violation(_))) {
            return h;
        }
    }
    panic!("no detectable stale read found");
}

fn measure(label: &str, h: &History, expect_ok: bool) {
    let opts = CheckOptions::default();
    let n_ops = h.events.iter().filter(|e| e.kind == EventType::Invoke).count();
    let first = check(h, &opts).unwrap();
    assert_eq!(first.is_ok(), expect_ok, "{label}: {first:?}");
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < Duration::from_millis(1500) || runs < 3 {
        black_box(check(black_box(h), &opts).unwrap());
        runs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{label:<44} {n_ops:>6} ops  {:>10.1} histories/s  {:>8.2} ms/history  {:>6.2} M ops/s",
        runs as f64 / secs,
        secs * 1e3 / runs as f64,
        (runs as f64 * n_ops as f64) / secs / 1e6
    );
}

/// Median wall time of `f` over `runs` runs.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// The register checker and the list-append checker (txncheck, under
/// strict serializability) side by side on histories of about the same
/// number of operations (a transaction's micro-ops count one each).
fn side_by_side() {
    println!("\nregister (linearizability, 8 procs, 4 keys) vs list-append (txncheck, strict-serializable), equal op counts:");
    println!("{:>8}  {:>14}  {:>18}  {:>8}", "ops", "register ms", "list-append ms", "txns");
    for &n in &[1_000usize, 10_000, 100_000] {
        let runs = if n >= 100_000 { 1 } else { 5 };
        let h = to_history(&simulate(7, n, 8, 4));
        let opts = CheckOptions::default();
        let reg = median_ms(runs, || {
            black_box(check(black_box(&h), &opts).unwrap());
        });
        // txncheck's generator averages about 2.45 micro-ops a transaction.
        let mut txns = n * 100 / 245;
        let mut th = txncheck::gen::list_append_history(7, &txncheck::gen::GenOptions { txns, ..Default::default() });
        while th.mop_count() < n {
            txns += txns / 20 + 1;
            th = txncheck::gen::list_append_history(7, &txncheck::gen::GenOptions { txns, ..Default::default() });
        }
        let txn = median_ms(runs, || {
            black_box(txncheck::check(
                black_box(&th),
                txncheck::Model::ListAppend,
                txncheck::Consistency::StrictSerializable,
            ));
        });
        println!("{:>8}  {reg:>14.1}  {txn:>18.1}  {:>8}", n, th.txns.len());
    }
}

fn main() {
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    println!("host: {host}, {} CPUs", std::thread::available_parallelism().map_or(1, |n| n.get()));
    if std::env::args().any(|a| a == "--side-by-side") {
        side_by_side();
        return;
    }
    println!("linearizability checker (seeded histories; procs = concurrent clients)");
    for &(procs, keys) in &[(8u64, 4usize), (5, 1)] {
        for &n in &[1_000usize, 10_000] {
            let h = to_history(&simulate(7, n, procs, keys));
            measure(&format!("valid  {procs} procs, {keys} key(s)"), &h, true);
            let h = buggy(7, n, procs, keys);
            measure(&format!("buggy  {procs} procs, {keys} key(s), stale read"), &h, false);
        }
    }
    side_by_side();
}
