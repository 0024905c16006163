//! The microVM end to end with small assembly guests: long-mode boot, serial console,
//! virtual clock, timer interrupts (direct and through the interrupt window), power-off.

mod kvm_common;

use kvm_common::{guest, kvm_available};
use vmm::kvm::{MicroVmBuilder, RunLimits, RunOutcome};

#[test]
fn kvm_hello_prints_and_halts() {
    if !kvm_available() {
        return;
    }
    let mut vm = MicroVmBuilder::new().memory_mib(4).exit_cost_ns(1000).image(&guest("hello")).build().unwrap();
    for n in vm.notes() {
        eprintln!("note: {n}");
    }
    let out = vm.run_to_end(10_000).unwrap();
    let console = String::from_utf8_lossy(vm.console()).to_string();
    eprintln!("{console}stats {:?} t={}ns", vm.stats(), vm.now().as_ns());
    assert_eq!(out, RunOutcome::Halted);
    let prefix = "hello from a 64-bit guest at t=";
    assert!(console.starts_with(prefix), "{console:?}");
    // Each character costs two exits (LSR poll, THR write); the clock read is the
    // latch exit right after them: t = (2 * len + 1) * 1000 ns.
    let t = u64::from_str_radix(console[prefix.len()..].trim(), 16).unwrap();
    assert_eq!(t, (2 * prefix.len() as u64 + 1) * 1000);
    assert_eq!(vm.stats().hlt, 1);
}

#[test]
fn kvm_timer_interrupts_and_window() {
    if !kvm_available() {
        return;
    }
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    let out = vm.run_to_end(1_000_000).unwrap();
    let console = String::from_utf8_lossy(vm.console()).to_string();
    eprintln!("{console}stats {:?} t={}ns", vm.stats(), vm.now().as_ns());
    assert_eq!(out, RunOutcome::PoweredOff(0), "{console}");
    assert!(console.starts_with("timer guest\n"));
    assert!(console.contains("masked\ntick 0000000000000006"), "{console}");
    assert!(console.ends_with("done\n"));
    // The five timer ticks: halted guests jump straight to each 1 ms deadline, so the
    // tick handler reads a time just past k ms.
    let ticks: Vec<u64> = console
        .lines()
        .filter(|l| l.starts_with("tick "))
        .map(|l| u64::from_str_radix(l.split("t=").nth(1).unwrap(), 16).unwrap())
        .collect();
    assert_eq!(ticks.len(), 6);
    for w in ticks[..5].windows(2) {
        assert!(w[1] > w[0] + 900_000 && w[1] < w[0] + 1_100_000, "{ticks:?}");
    }
    let s = vm.stats();
    assert_eq!(s.injected, 6);
    // With VMX/SVM the masked tick is delivered through an interrupt-window exit right
    // after `sti`; under PVM the runtime requests no window (PVM reports it at
    // host-timed exits) and the tick lands at the guest's next exit (both deterministic).
    eprintln!("interrupt-window exits: {}", s.irq_window);
    if vm.host().hardware_virt {
        assert!(s.irq_window >= 1, "the masked tick must go through an interrupt window");
    }
}

#[test]
fn kvm_time_limit_stops_a_halted_guest_exactly() {
    if !kvm_available() {
        return;
    }
    let mut vm = MicroVmBuilder::new().memory_mib(8).image(&guest("timer")).build().unwrap();
    let out = vm.run(RunLimits { max_exits: None, until: Some(simtime::VirtualTime::from_ns(2_500_000)) }).unwrap();
    assert_eq!(out, RunOutcome::TimeLimit);
    assert_eq!(vm.now().as_ns(), 2_500_000);
    let ticks = String::from_utf8_lossy(vm.console()).matches("tick ").count();
    assert_eq!(ticks, 2);
    assert_eq!(vm.run_to_end(1_000_000).unwrap(), RunOutcome::PoweredOff(0));
}

/// The legacy tick (8259A + 8254, what Linux uses with `noapic nolapic`): a halted
/// guest's clock jumps to each PIT deadline and the PIC delivers vector 0x30 until
/// the guest's EOI; five ticks about 1 ms apart, at the same virtual times every run.
#[test]
fn kvm_pic_and_pit_deliver_the_legacy_tick() {
    if !kvm_available() {
        return;
    }
    let image = guest("pit");
    let run = || {
        let mut vm = MicroVmBuilder::new().memory_mib(8).image(&image).build().unwrap();
        let out = vm.run_to_end(1_000_000).unwrap();
        (out, String::from_utf8_lossy(vm.console()).to_string(), vm.trace_hash_hex())
    };
    let (out, console, hash) = run();
    eprintln!("{console}");
    assert_eq!(out, RunOutcome::PoweredOff(0), "{console}");
    let times: Vec<u64> = console
        .lines()
        .filter_map(|l| l.strip_prefix("tick t="))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .collect();
    assert_eq!(times.len(), 5, "{console}");
    for w in times.windows(2) {
        let gap = w[1] - w[0];
        // 1193 PIT ticks = 999.8 us; the handler's own exits shift the clock read,
        // never the deadlines.
        assert!((999_000..1_001_000).contains(&gap), "gap {gap} ns: {console}");
    }
    assert!(console.ends_with("pit ok\n"));
    assert_eq!(run().2, hash, "same guest, same exit trace");
}
