//! KVM microVM figures: exits per second, snapshot/restore latency of a 256 MiB guest,
//! memory per node, exits per second and per grant through [`KvmNode`] (the node as
//! the engine drives it). `cargo bench -p vmm --bench kvm_exits` (harness = false;
//! prints). Skips with a printed reason where /dev/kvm cannot be opened. Frames
//! through the engine: `cargo bench -p explore --bench kvm_engine`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vm_memory::{Bytes, GuestAddress};
use vmm::kvm::node::{KvmNode, GRANT_SLICE};
use vmm::kvm::{asm, MicroVm, MicroVmBuilder, RunLimits, RunOutcome};
use vmm::node::{NodeRuntime, RunOutcome as NodeOutcome};

fn mem_kib(field: &str, file: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn rss_pss() -> (u64, u64) {
    (mem_kib("VmRSS:", "/proc/self/status"), mem_kib("Pss:", "/proc/self/smaps_rollup"))
}

fn main() {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        println!("SKIP kvm_exits: cannot open /dev/kvm: {e}");
        return;
    }
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kvm-bench");
    let _ = std::fs::remove_dir_all(&tmp);
    exits_per_second(&tmp);
    let full = snapshot_and_restore(&tmp);
    memory_per_node(&tmp, &full);
    exits_per_grant(&tmp);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Figure 1, exits per second: `out` to the serial scratch register in a loop.
fn exits_per_second(tmp: &Path) {
    let loop_img = asm::assemble("loop", tmp).unwrap();
    let mut vm = MicroVmBuilder::new().memory_mib(16).image(&loop_img).build().unwrap();
    for n in vm.notes() {
        println!("note: {n}");
    }
    vm.run(RunLimits { max_exits: Some(1000), until: None }).unwrap(); // warm up
    let n = 200_000u64;
    let t = Instant::now();
    let out = vm.run(RunLimits { max_exits: Some(1000 + n), until: None }).unwrap();
    let dt = t.elapsed().as_secs_f64();
    assert_eq!(out, RunOutcome::ExitLimit);
    println!("exits: {n} port writes in {dt:.3} s = {:.0} exits/s ({:.2} us/exit)", n as f64 / dt, dt * 1e6 / n as f64);
}

/// Figure 2, snapshot and restore of a 256 MiB guest (the timer guest, stopped
/// mid-run). Returns the fully dirty snapshot's directory.
fn snapshot_and_restore(tmp: &Path) -> PathBuf {
    let timer_img = asm::assemble("timer", tmp).unwrap();
    let mut vm = MicroVmBuilder::new().memory_mib(256).image(&timer_img).build().unwrap();
    vm.run(RunLimits { max_exits: Some(300), until: None }).unwrap();
    let sparse = tmp.join("snap-sparse");
    let t = Instant::now();
    let info = vm.snapshot(&sparse).unwrap();
    let dt_sparse = t.elapsed().as_secs_f64();
    println!(
        "snapshot 256 MiB, guest touched little: {:.1} ms ({} KiB of non-zero pages written)",
        dt_sparse * 1e3,
        info.memory_bytes_written / 1024
    );
    // Every page above 4 MiB dirty (as after a guest has used all its RAM; the timer
    // guest itself lives below 4 MiB).
    let page: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
    for p in (4u64 << 20..256 << 20).step_by(4096) {
        vm.memory().write_slice(&page, GuestAddress(p)).unwrap();
    }
    let full = tmp.join("snap-full");
    let t = Instant::now();
    let info = vm.snapshot(&full).unwrap();
    let dt_full = t.elapsed().as_secs_f64();
    println!(
        "snapshot 256 MiB, all pages dirty: {:.1} ms ({} MiB written, to the page cache)",
        dt_full * 1e3,
        info.memory_bytes_written >> 20
    );
    let t = Instant::now();
    let reference = vm.run_to_end(1_000_000).unwrap();
    let dt_cont = t.elapsed().as_secs_f64();
    let ref_exits = vm.stats().exits;
    drop(vm);
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let mut r = MicroVm::restore(&full).unwrap();
        let restored = t.elapsed().as_secs_f64();
        assert_eq!(r.run_to_end(1_000_000).unwrap(), reference);
        assert_eq!(r.stats().exits, ref_exits);
        times.push((restored, t.elapsed().as_secs_f64()));
    }
    times.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    let med = times[times.len() / 2];
    println!(
        "restore 256 MiB (MAP_PRIVATE of the image): median {:.2} ms to a runnable VM; {:.2} ms including the rest of the run ({} exits; {:.2} ms in the VM that was snapshotted)",
        med.0 * 1e3,
        med.1 * 1e3,
        ref_exits - 300,
        dt_cont * 1e3
    );
    full
}

/// Figure 3, memory per node, booted and restored.
fn memory_per_node(tmp: &Path, full: &Path) {
    let hello_img = asm::assemble("hello", tmp).unwrap();
    let boot = |img: &[u8]| {
        let mut vm = MicroVmBuilder::new().memory_mib(256).image(img).build().unwrap();
        assert_eq!(vm.run_to_end(10_000).unwrap(), RunOutcome::Halted);
        vm
    };
    let nodes = 16;
    let (rss0, pss0) = rss_pss();
    let mut fresh = Vec::new();
    for _ in 0..nodes {
        fresh.push(boot(&hello_img));
    }
    let (rss1, pss1) = rss_pss();
    println!(
        "memory per booted 256 MiB node (hello guest): RSS {} KiB, PSS {} KiB",
        (rss1 - rss0) / nodes,
        pss1.saturating_sub(pss0) / nodes
    );
    drop(fresh);
    let (rss0, pss0) = rss_pss();
    let mut restored = Vec::new();
    for _ in 0..nodes {
        let mut r = MicroVm::restore(full).unwrap();
        r.run_to_end(10).unwrap();
        restored.push(r);
    }
    let (rss1, pss1) = rss_pss();
    println!(
        "memory per node restored from a fully dirty 256 MiB snapshot: RSS {} KiB, PSS {} KiB (image pages stay in the shared page cache until touched)",
        rss1.saturating_sub(rss0) / nodes,
        pss1.saturating_sub(pss0) / nodes
    );
    drop(restored);
}

/// Figure 4, exits through the engine's node runtime: the loop guest of figure 1 as a
/// [`KvmNode`], granted again and again as the engine grants a node that never halts.
/// Each grant runs [`GRANT_SLICE`] of virtual time, one exit at a time (so every
/// output carries its exit's time), about 1,000 exits at the default exit cost; the
/// figure is what that costs per exit against figure 1's free run. Frames through the
/// engine between two nodes: `cargo bench -p explore --bench kvm_engine`.
fn exits_per_grant(tmp: &Path) {
    let loop_img = asm::assemble("loop", tmp).unwrap();
    let vm = MicroVmBuilder::new().memory_mib(16).image(&loop_img).build().unwrap();
    let mut node = KvmNode::new(simtime::NodeId::new(1).unwrap(), vm, false, None, 1).unwrap();
    node.wait_connected(simtime::VirtualTime::ZERO, Duration::from_secs(1)).unwrap();
    let grant = |node: &mut KvmNode| {
        let g = node.grant(node.requested(), 0, Duration::from_secs(60)).unwrap();
        assert!(matches!(g.outcome, NodeOutcome::Waiting { .. }), "{:?}", g.outcome);
    };
    for _ in 0..10 {
        grant(&mut node); // warm up
    }
    let grants = 200u64;
    let exits0 = node.vm().stats().exits;
    let t = Instant::now();
    for _ in 0..grants {
        grant(&mut node);
    }
    let dt = t.elapsed().as_secs_f64();
    let exits = node.vm().stats().exits - exits0;
    println!(
        "KvmNode grants ({} ms slices): {grants} grants in {dt:.3} s = {:.0} grants/s, {:.0} exits per grant, {:.0} exits/s ({:.2} us/exit)",
        GRANT_SLICE.as_millis(),
        grants as f64 / dt,
        exits as f64 / grants as f64,
        exits as f64 / dt,
        dt * 1e6 / exits as f64
    );
}
