//! Check time and peak memory on generated list-append histories.
//!
//! `cargo bench -p txncheck` (sizes from `TXNCHECK_BENCH_SIZES`, default
//! `1000,10000,100000`). Each size and variant runs in a child process (this
//! binary re-run with `--child`), so that each has its own peak RSS: the child
//! generates the history, resets its high-water mark (`/proc/self/clear_refs`),
//! runs the check, and reports the peak RSS above its RSS before the check.
//! Times are the median of a few runs (more for small histories).

use std::process::Command;
use std::time::Instant;
use txncheck::gen::{list_append_history, GenOptions, Inject};
use txncheck::{check, Consistency, Model};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        let size = args.get(at + 1).and_then(|s| s.parse().ok()).unwrap_or(1000);
        child(size, args.get(at + 2).map(String::as_str).unwrap_or("none"));
        return;
    }
    let sizes = std::env::var("TXNCHECK_BENCH_SIZES").unwrap_or_else(|_| "1000,10000,100000".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("txncheck bench: list-append, checked for strict-serializable; CPU: {cpu} ({cores} threads)");
    println!("generated: concurrency 8, 8 active keys, <= 32 appends per key, 1-4 ops per txn, 2% fail, 1% info");
    println!(
        "{:>8} {:>11} {:>8} {:>6} {:>10} {:>16} {:>8}  verdict",
        "txns", "anomaly", "ops", "runs", "check ms", "peak RSS +MiB", "edges"
    );
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return eprintln!("cannot find this binary: {e}"),
    };
    for size in sizes.split(',').filter_map(|s| s.trim().parse::<usize>().ok()) {
        for inject in ["none", "write-skew", "lost-update", "unobserved"] {
            match Command::new(&exe).args(["--child", &size.to_string(), inject]).output() {
                Ok(out) if out.status.success() => print!("{}", String::from_utf8_lossy(&out.stdout)),
                Ok(out) => println!("{size:>8} {inject:>11} failed: {}", String::from_utf8_lossy(&out.stderr)),
                Err(e) => println!("{size:>8} {inject:>11} could not start: {e}"),
            }
        }
    }
}

/// Two transactions after the generated ones: T_b appends to p and to q, and
/// no read ever shows q's element; T_a reads p = [1] and q empty. The
/// G-single T_b -wr p-> T_a -rw q-> T_b exists only through the unobserved append.
fn unobserved_g_single() -> txncheck::History {
    let lines = [
        r#"{"type":"invoke","f":"txn","time":1000000000000001,"process":900000,"value":[["append","p",1],["append","q",1]]}"#,
        r#"{"type":"ok","f":"txn","time":1000000000000002,"process":900000,"value":[["append","p",1],["append","q",1]]}"#,
        r#"{"type":"invoke","f":"txn","time":1000000000000003,"process":900001,"value":[["r","p",null],["r","q",null]]}"#,
        r#"{"type":"ok","f":"txn","time":1000000000000004,"process":900001,"value":[["r","p",[1]],["r","q",[]]]}"#,
    ];
    match txncheck::parse_json_lines(&lines.join("\n")) {
        Ok(h) => h,
        Err(e) => panic!("the bench's own history: {e}"),
    }
}

fn child(size: usize, name: &str) {
    let inject = match name {
        "write-skew" => Some(Inject::WriteSkew),
        "lost-update" => Some(Inject::LostUpdate),
        _ => None,
    };
    let mut h = list_append_history(42, &GenOptions { txns: size, inject, ..GenOptions::default() });
    if name == "unobserved" {
        h.txns.extend(unobserved_g_single().txns);
    }
    let runs = (100_000 / size.max(1)).clamp(1, 9);
    let rss_before = status_kib("VmRSS");
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let mut times = Vec::new();
    let mut report = None;
    for _ in 0..runs {
        let start = Instant::now();
        report = Some(check(&h, Model::ListAppend, Consistency::StrictSerializable));
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let peak = status_kib("VmHWM");
    times.sort_by(f64::total_cmp);
    let Some(report) = report else { return };
    let growth = match (rss_before, peak) {
        (Some(b), Some(p)) if reset => format!("{:.1}", p.saturating_sub(b) as f64 / 1024.0),
        (Some(b), Some(p)) => format!("<= {:.1} (no reset)", p.saturating_sub(b) as f64 / 1024.0),
        _ => "n/a".into(),
    };
    let edges: usize = report.edges.values().sum();
    let verdict =
        if report.valid { "valid".to_string() } else { format!("invalid: {}", report.anomaly_types.join(", ")) };
    println!(
        "{:>8} {:>11} {:>8} {:>6} {:>10.1} {:>16} {:>8}  {}",
        size,
        name,
        h.mop_count(),
        runs,
        times[times.len() / 2],
        growth,
        edges,
        verdict
    );
}

/// A `Vm*` line of /proc/self/status, in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
