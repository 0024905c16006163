//! Container images as nodes: an OCI image layout and a `docker save`
//! archive, built here with umoci and skopeo (no registry is reachable),
//! run as nodes with their Cmd, Env and WorkingDir (and User); bad images
//! are rejected with exit 2 and nothing written.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// The image's only program: a static binary that records its argument,
/// environment, directory and uid, then serves forever. No shell, no
/// busybox: the node's init and agent bring their own.
const SERVER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char cwd[256];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    FILE *f = fopen("/tmp/started", "w");
    if (!f) return 1;
    const char *g = getenv("GREETING");
    fprintf(f, "%s %s %s uid=%d\n", argc > 1 ? argv[1] : "-", g ? g : "-", cwd, (int)getuid());
    fclose(f);
    for (;;) pause();
}
"#;

fn sh(cmd: &str, dir: &Path) {
    let out = Command::new("sh").arg("-c").arg(cmd).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Installs umoci and skopeo if this host lacks them (as the image builder
/// would); false, with the skip recorded (`testkit`), where that is impossible.
fn tools() -> bool {
    let have = |p: &str| {
        Command::new("sh").arg("-c").arg(format!("command -v {p}")).output().is_ok_and(|o| o.status.success())
    };
    if !(have("umoci") && have("skopeo")) {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "umoci", "skopeo"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
    }
    if have("umoci") && have("skopeo") {
        true
    } else {
        testkit::skip(
            testkit::Cause::Missing,
            "umoci and skopeo are not installed and apt-get could not install them (as root: apt-get install umoci skopeo)",
        );
        false
    }
}

/// An OCI layout `dir/layout` tagged v1 holding the server, with
/// `config` (umoci config flags) applied.
fn make_layout(dir: &Path, config: &str) -> bool {
    if !tools() || !gcc_static(dir, "server", SERVER) {
        return false;
    }
    sh(
        &format!(
            "umoci init --layout layout && umoci new --image layout:v1 && umoci unpack --image layout:v1 b \
             && mkdir -p b/rootfs/app b/rootfs/etc && cp server b/rootfs/app/server \
             && echo 'root:x:0:0:root:/root:/bin/sh' > b/rootfs/etc/passwd \
             && echo 'app:x:1000:1000:app:/app:/bin/sh' >> b/rootfs/etc/passwd \
             && umoci repack --image layout:v1 b && rm -rf b \
             && umoci config --image layout:v1 --config.cmd=/app/server --config.cmd=from-cmd \
                --config.env=GREETING=oci-env --config.workingdir=/app {config}"
        ),
        dir,
    );
    true
}

fn cluster_with(dir: &Path, image_keys: &str, expect: &str) {
    std::fs::write(
        dir.join("cluster.toml"),
        format!(
            "[cluster]\nnodes = 2\nmemory_mb = 128\n[image]\n{image_keys}\n[workload]\nnode = \"n2\"\n\
             command = \"sleep 1; cat /tmp/started; grep -x '{expect}' /tmp/started\"\n"
        ),
    )
    .unwrap();
}

#[test]
fn an_oci_layout_runs_as_a_node_with_its_cmd_env_and_workdir() {
    let d = tempfile::tempdir().unwrap();
    if !make_layout(d.path(), "") {
        return;
    }
    cluster_with(d.path(), "oci = \"layout\"", "from-cmd oci-env /app uid=0");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["failures"], 0, "{r:?}");
    // [node] start overrides the image's Cmd (the image's Env stays).
    cluster_with(
        d.path(),
        "oci = \"layout\"\n[node]\nstart = \"exec /app/server from-start\"",
        "from-start oci-env / uid=0",
    );
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.json()["failures"], 0, "{r:?}");
}

#[test]
fn the_images_user_runs_the_start_command() {
    let d = tempfile::tempdir().unwrap();
    if !make_layout(d.path(), "--config.user=app") {
        return;
    }
    cluster_with(d.path(), "oci = \"layout\"", "from-cmd oci-env /app uid=1000");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.json()["failures"], 0, "{r:?}");
}

#[test]
fn a_docker_save_archive_runs_as_a_node_and_the_same_seed_gives_the_same_trace() {
    let d = tempfile::tempdir().unwrap();
    if !make_layout(d.path(), "") {
        return;
    }
    sh("skopeo --insecure-policy copy --quiet oci:layout:v1 docker-archive:image.tar:simcluster/test:v1", d.path());
    cluster_with(d.path(), "docker_archive = \"image.tar\"", "from-cmd oci-env /app uid=0");
    same_trace_every_time(d.path(), 3, &[], |r, j| assert_eq!(j["failures"], 0, "{r:?}"));
}

#[test]
fn truncated_foreign_and_missing_images_exit_2_writing_nothing() {
    let d = tempfile::tempdir().unwrap();
    if !make_layout(d.path(), "") {
        return;
    }
    sh("skopeo --insecure-policy copy --quiet oci:layout:v1 docker-archive:image.tar:simcluster/test:v1", d.path());
    sh("head -c 3000 image.tar > truncated.tar && cp -r layout arm && umoci config --image arm:v1 --architecture=arm64", d.path());
    let cases: &[(&str, &[&str])] = &[
        ("docker_archive = \"truncated.tar\"", &["truncated.tar", "docker-save archive"]),
        ("oci = \"arm\"", &["arm", "arm64"]),
        ("oci = \"nowhere\"", &["nowhere", "does not exist"]),
        ("oci = \"layout\"\ntag = \"v9\"", &["layout", "v9"]),
        ("oci = \"layout\"\npackages = [\"etcd-server\"]", &["oci", "Debian images only"]),
    ];
    for (keys, needles) in cases {
        cluster_with(d.path(), keys, "x");
        let cache = tempfile::tempdir().unwrap();
        for part in ["apt", "kernel", "sources", "debs"] {
            let shared = home_cache().join(part);
            if shared.is_dir() {
                std::os::unix::fs::symlink(&shared, cache.path().join(part)).unwrap();
            }
        }
        let out = bin()
            .args(["image", "build", d.path().to_str().unwrap()])
            .env("SIMCLUSTER_CACHE", cache.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{keys}: {stderr}");
        assert!(stderr.contains("cluster.toml"), "{keys}: {stderr}");
        for n in *needles {
            assert!(stderr.contains(n), "{keys}: stderr lacks {n:?}: {stderr}");
        }
        assert_no_image(cache.path(), keys);
    }
}

fn home_cache() -> std::path::PathBuf {
    std::env::var_os("SIMCLUSTER_CACHE")
        .map(Into::into)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/simcluster"))
}

/// Nothing but build locks under the cache's images: no image, no
/// half-built directory.
fn assert_no_image(cache: &Path, what: &str) {
    let Ok(entries) = std::fs::read_dir(cache.join("images")) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".lock"), "{what}: {name} was written under images/");
    }
}
