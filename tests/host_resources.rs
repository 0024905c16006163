//! When the host runs out: a full output file system ends the run with exit
//! 3 and a message naming the file and the cause, leaves nothing
//! half-written, and keeps the failure files written before it intact.

mod common;
use common::*;

/// A tmpfs of `size` mounted for the test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(st.success(), "mount -t tmpfs failed (as root)");
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_output_disk_is_exit_3_naming_the_file_and_leaves_nothing_half_written() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(testkit::Cause::Missing, "mounting a small tmpfs needs root (the tests run as root)");
        return;
    }
    // Every execution fails: the first writes its failure files, and each
    // writes `last/` (about 80 KB in all).
    let c = simple(1, None, "exit 1", "");
    let mut kept_a_failure_file = false;
    for size in ["16k", "32k", "48k", "64k", "80k"] {
        let disk = SmallDisk::mount(size);
        let out = disk.dir.path().join("out");
        let r = run_cluster(c.path(), &out, &["--executions", "3"]);
        let all = files(&out);
        let temporaries: Vec<_> = all.keys().filter(|p| p.contains(".tmp-")).collect();
        assert!(temporaries.is_empty(), "{size}: half-written files left: {temporaries:?}");
        if r.code == 3 {
            assert!(r.stderr.contains("No space left on device"), "{size}: the cause is not named: {r:?}");
            assert!(r.stderr.contains(&format!("cannot write {}", out.display())), "{size}: no file named: {r:?}");
        } else {
            assert_eq!(r.code, 1, "{size}: {r:?}");
        }
        for f in all.keys().filter(|p| p.ends_with("failure.json")) {
            explore::failure_file::load::<engine::strategy::Decision>(&out.join(f))
                .unwrap_or_else(|e| panic!("{size}: a failure file written before the disk filled is damaged: {e}"));
            kept_a_failure_file |= r.code == 3;
        }
    }
    assert!(kept_a_failure_file, "no size filled the disk after a failure file was written: the test checks less");
}
