//! Probe of /dev/kvm: prints what works on this host, step by step.
//! Skips (recorded by `testkit`, `Cause::Host`) where /dev/kvm is absent.

use vmm::kvm::probe::probe;

#[test]
fn kvm_probe_reports_each_step() {
    if !std::path::Path::new("/dev/kvm").exists() {
        testkit::skip(testkit::Cause::Host, "/dev/kvm is absent");
        return;
    }
    let report = probe();
    eprintln!("{report}");
    assert!(report.ok("open /dev/kvm"), "{report}");
    assert!(report.ok("long-mode guest (microVM): out 0x3f8 + hlt"), "{report}");
}
