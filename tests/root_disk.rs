//! `[image] root`: a node's root filesystem in its initramfs (the whole
//! image in guest RAM) or on a read-only root disk (a squashfs image on a
//! virtio-blk device under a tmpfs overlay). Both run the same programs;
//! the disk keeps the guest's memory to the pages it reads.

mod common;
use common::*;

/// Two nodes whose workload reads, writes, replaces and deletes files of
/// the root filesystem, renames a directory the image holds, and says what
/// `/` is mounted as; `[image] root = mode`.
fn with_root(mode: &str) -> tempfile::TempDir {
    let d = simple(
        2,
        None,
        "grep -q ' / overlay ' /proc/mounts && echo ROOT=overlay || echo ROOT=other; \
         test -x /bin/busybox && echo new > /etc/added && grep -qx new /etc/added \
         && echo changed > /etc/hostname && grep -qx changed /etc/hostname \
         && rm /etc/hostname && ! test -e /etc/hostname \
         && mv /sim/cmd /sim/cmd2 && test -f /sim/cmd2/workload && ! test -e /sim/cmd",
        "",
    );
    let toml = d.path().join("cluster.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("packages = [\"busybox-static\"]", &format!("packages = [\"busybox-static\"]\nroot = \"{mode}\"")),
    )
    .unwrap();
    d
}

#[test]
fn a_root_disk_boots_and_takes_writes_in_its_overlay() {
    let d = with_root("disk");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
    assert!(console.contains("ROOT=overlay"), "{console}");
    // The same seed, the same execution.
    same_trace_every_time(d.path(), 3, &["--seed", "4"], |r, j| assert_eq!(j["failures"], 0, "{r:?}"));
}

#[test]
fn a_small_root_stays_in_the_initramfs_by_default() {
    for (mode, expect) in [("auto", "ROOT=other"), ("initramfs", "ROOT=other")] {
        let d = with_root(mode);
        let b = run(&["image", "build", d.path().to_str().unwrap()]);
        assert_eq!(b.code, 0, "{b:?}");
        assert!(b.json()["root"].is_null(), "{mode}: {b:?}");
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 0, "{mode}: {r:?}");
        let console = std::fs::read_to_string(out.path().join("last/console-n1.log")).unwrap();
        assert!(console.contains(expect), "{mode}: {console}");
    }
}

#[test]
#[ignore = "full tier: a large root image (over a minute)"]
fn a_root_disk_keeps_a_large_image_out_of_guest_memory() {
    // etcd with the Essential set: about 100 MB of files.
    let toml = |mode: &str| {
        format!(
            "[cluster]\nnodes = 1\nmemory_mb = 384\n[image]\npackages = [\"etcd-server\"]\nroot = \"{mode}\"\n\
             [node]\nstart = \"exec /usr/bin/etcd --name n1 --data-dir /tmp/etcd\"\n[workload]\nnode = \"n1\"\n\
             command = \"for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O - http://127.0.0.1:2379/version | grep etcdserver && exit 0; sleep 1; done; exit 1\"\n"
        )
    };
    let mut memory = Vec::new();
    for mode in ["initramfs", "disk"] {
        let d = cluster(&toml(mode), &[]);
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 0, "{mode}: {r:?}");
        let j = r.json();
        assert_eq!(j["failures"], 0, "{mode}: {r:?}");
        memory.push(j["memory_per_node_mib"].as_f64().unwrap());
    }
    // Measured: 185 MiB against 56 MiB per node.
    println!("memory per node MiB (initramfs, disk): {memory:?}");
    assert!(memory[1] + 60.0 < memory[0], "memory per node MiB (initramfs, disk): {memory:?}");
}

#[test]
fn an_unknown_root_mode_exits_2() {
    let d = with_root("ram");
    let r = run(&["image", "build", d.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cluster.toml") && r.stderr.contains("ram"), "{r:?}");
}
