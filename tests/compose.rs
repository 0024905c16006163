//! docker-compose files as clusters: two services of two images (an OCI
//! layout and a `docker save` archive, built here with umoci and skopeo),
//! each its own node, reach each other by service name and alias, with the
//! compose file's command, user, working directory, environment, volume,
//! healthcheck and depends_on; bad compose input exits 2 naming the file
//! and the key.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn sh(cmd: &str, dir: &Path) {
    let out = Command::new("sh").arg("-c").arg(cmd).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
}

/// umoci, skopeo and a static busybox (the images' only program); false,
/// with the skip recorded, where they are missing.
fn tools() -> bool {
    let have = |p: &str| {
        Command::new("sh").arg("-c").arg(format!("command -v {p}")).output().is_ok_and(|o| o.status.success())
    };
    // busybox-static's: no program interpreter named in the binary.
    let static_busybox = std::fs::read("/bin/busybox")
        .is_ok_and(|b| !b.windows(b"/lib64/ld-linux".len()).any(|w| w == b"/lib64/ld-linux"));
    if have("umoci") && have("skopeo") && static_busybox {
        return true;
    }
    testkit::skip(
        testkit::Cause::Missing,
        "umoci, skopeo or busybox-static is not installed (as root: apt-get install umoci skopeo busybox-static)",
    );
    false
}

/// An OCI layout `dir/NAME` tagged v1: busybox as /bin/busybox and /bin/sh,
/// with the host's glibc and its files NSS module (static glibc resolves
/// names through them, as in a Debian-based image), `setup` run in its
/// root (`r`), then `config` (umoci config flags).
fn image(dir: &Path, name: &str, setup: &str, config: &str) {
    sh(
        &format!(
            "umoci init --layout {name} && umoci new --image {name}:v1 && umoci unpack --image {name}:v1 b \
             && r=b/rootfs && mkdir -p $r/bin $r/etc && cp /bin/busybox $r/bin/busybox && ln -s busybox $r/bin/sh \
             && echo 'root:x:0:0:root:/root:/bin/sh' > $r/etc/passwd && echo 'root:x:0:' > $r/etc/group \
             && mkdir -p $r/lib64 $r/lib/x86_64-linux-gnu && cp -L /lib64/ld-linux-x86-64.so.2 $r/lib64/ \
             && cp /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libnss_files.so.2 $r/lib/x86_64-linux-gnu/ \
             && echo 'hosts: files' > $r/etc/nsswitch.conf \
             && {setup} && umoci repack --image {name}:v1 b && rm -rf b \
             && umoci config --image {name}:v1 {config}"
        ),
        dir,
    );
}

/// `web` (an OCI layout serving one page over HTTP) and `client` (a docker
/// archive whose Cmd would only print; the compose file's command runs).
fn images(dir: &Path) -> bool {
    if !tools() {
        return false;
    }
    image(
        dir,
        "web",
        "mkdir -p $r/www && echo hello-from-web > $r/www/index.html",
        "--config.cmd=/bin/busybox --config.cmd=httpd --config.cmd=-f --config.cmd=-p --config.cmd=8080 \
         --config.cmd=-h --config.cmd=/www",
    );
    std::fs::write(dir.join("tc-get"), TC_GET).unwrap();
    std::fs::write(dir.join("tc-assert"), TC_ASSERT).unwrap();
    image(
        dir,
        "client",
        "echo 'app:x:1000:1000:app:/home/app:/bin/sh' >> $r/etc/passwd && echo 'app:x:1000:' >> $r/etc/group \
         && mkdir -p $r/data && echo seeded > $r/data/seed && t=$r/opt/antithesis/test/v1/basic && mkdir -p $t \
         && cp tc-get $t/parallel_driver_get && cp tc-assert $t/eventually_assert && chmod 755 $t/*",
        "--config.cmd=/bin/busybox --config.cmd=echo --config.cmd=image-cmd --config.env=FROM_IMAGE=yes",
    );
    sh("skopeo --insecure-policy copy --quiet oci:client:v1 docker-archive:client.tar:simcluster/client:v1", dir);
    true
}

/// The client image's Test Composer template `basic`: a driver that reads
/// the web page by service name, and a check that says whether it may
/// (`ASSERT_OK`, from the compose file) through the Antithesis SDK's output.
const TC_GET: &str = "#!/bin/sh\nwget -q -O- http://web:8080/ | grep -qx hello-from-web\n";
const TC_ASSERT: &str = r#"#!/bin/sh
echo "{\"antithesis_assert\": {\"hit\": true, \"must_hit\": true, \"assert_type\": \"always\", \"display_type\": \"Always\", \"message\": \"web-serves\", \"condition\": $ASSERT_OK, \"id\": \"web-serves\", \"location\": {\"file\": \"/opt/check\", \"begin_line\": 1}, \"details\": {\"uid\": $(id -u)}}}" > "$ANTITHESIS_SDK_LOCAL_OUTPUT"
"#;

const COMPOSE: &str = r#"
name: two-images
services:
  web:
    image: oci:web:v1
    hostname: www
    healthcheck:
      test: ["CMD", "/bin/busybox", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"]
      interval: 500ms
      timeout: 2s
      retries: 5
    restart: always
  client:
    image: docker-archive:client.tar
    user: app
    working_dir: /work
    environment:
      - TARGET=web
    command: sh -c 'wget -q -O /tmp/got http://$$TARGET:8080/ && echo "$$(id -u) $$(pwd) $$FROM_IMAGE $$(cat /data/seed) $$(cat /tmp/got)" > /tmp/client.out; exec sleep 1000'
    depends_on:
      web:
        condition: service_healthy
    volumes:
      - data:/data
    ports:
      - "8080:8080"
volumes:
  data:
x-simcluster:
  cluster:
    memory_mb: 128
  workload:
    node: client
    command: "sleep 1; cat /tmp/client.out; grep -x '1000 /work yes seeded hello-from-web' /tmp/client.out && wget -q -O- http://www:8080/ | grep -x hello-from-web"
"#;

#[test]
fn two_services_of_two_images_talk_by_service_name_and_replay() {
    let d = tempfile::tempdir().unwrap();
    if !images(d.path()) {
        return;
    }
    std::fs::write(d.path().join("compose.yaml"), COMPOSE).unwrap();
    same_trace_every_time(d.path(), 2, &[], |r, j| {
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(j["failures"], 0, "{r:?}");
        assert_eq!(j["nodes"], 2, "{r:?}");
        // The ignored keys are named, once each.
        assert_eq!(r.stderr.matches("services.web.restart is ignored").count(), 1, "{r:?}");
        assert!(r.stderr.contains("services.client.ports is ignored"), "{r:?}");
    });
    // A failing workload names the service's node, and its failure file
    // replays to the same failure (the cluster is loaded from the compose
    // file again).
    std::fs::write(d.path().join("compose.yaml"), COMPOSE.replace("| grep -x hello-from-web", "| grep -x nothing"))
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["failure"]["node"], "client", "{r:?}");
    let file = out.path().join("failures/execution-0/failure.json");
    let replay = run(&["replay", "--quiet", file.to_str().unwrap()]);
    assert_eq!(replay.json()["reproduced"], true, "{replay:?}");
    assert_eq!(replay.json()["failure"]["node"], "client", "{replay:?}");
}

/// The same two services under Test Composer, with the SDK: the template
/// lives in the client's image and runs in its container, as its user.
const COMPOSER: &str = r#"
services:
  web:
    image: oci:web:v1
    healthcheck:
      test: ["CMD", "/bin/busybox", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"]
      interval: 500ms
  client:
    image: docker-archive:client.tar
    user: app
    environment: {ASSERT_OK: "true"}
    command: ["sh", "-c", "echo '{\"antithesis_setup\": {\"status\": \"complete\", \"details\": null}}' > $$ANTITHESIS_SDK_LOCAL_OUTPUT; exec sleep 1000"]
    depends_on:
      web:
        condition: service_healthy
x-simcluster:
  cluster: {memory_mb: 128}
  antithesis: {test_composer: true, template: basic, drive_for: 1s}
  workload: {node: client}
"#;

#[test]
fn test_composer_and_the_sdk_run_in_a_services_container() {
    let d = tempfile::tempdir().unwrap();
    if !images(d.path()) {
        return;
    }
    std::fs::write(d.path().join("compose.yaml"), COMPOSER).unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["antithesis"]["web-serves"]["passes"], 1, "{r:?}");
    std::fs::write(d.path().join("compose.yaml"), COMPOSER.replace("ASSERT_OK: \"true\"", "ASSERT_OK: \"false\""))
        .unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["antithesis"]["web-serves"]["verdict"], "failed", "{r:?}");
    assert!(j["failure"]["message"].as_str().unwrap().contains("web-serves"), "{r:?}");
    assert!(j["antithesis"]["web-serves"]["first_failure"].as_str().unwrap().contains("\"uid\":1000"), "{r:?}");
}

/// web records each boot in its named volume, synced; it loses power at
/// 1 s and comes back: its healthcheck passes again, the client reaches it
/// by name, and the volume (the node's disk) holds both boots.
const CRASH: &str = r#"
services:
  web:
    image: oci:web:v1
    entrypoint: ["/bin/sh", "-c", "echo boot >> /data/boots; /bin/busybox sync; exec /bin/busybox httpd -f -p 8080 -h /www"]
    volumes: ["state:/data"]
    healthcheck:
      test: ["CMD-SHELL", "wget -q -O /dev/null http://127.0.0.1:8080/"]
      interval: 200ms
  client:
    image: docker-archive:client.tar
    command: ["sleep", "1000"]
volumes:
  state:
x-simcluster:
  cluster: {memory_mb: 128}
  workload:
    node: client
    command: "sleep 2; for i in 1 2 3 4 5; do wget -q -O- http://web:8080/ && exit 0; sleep 1; done; exit 1"
  faults:
    crash:
      schedule:
        - {at: 1s, nodes: [web]}
      restart_after: 500ms
  invariant:
    - {name: booted-twice, node: web, command: "test $(wc -l < /data/boots) = 2"}
"#;

#[test]
fn a_services_volume_survives_its_nodes_power_loss() {
    let d = tempfile::tempdir().unwrap();
    if !images(d.path()) {
        return;
    }
    std::fs::write(d.path().join("compose.yaml"), CRASH).unwrap();
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["crashes"], 1, "{r:?}");
}

#[test]
fn bad_compose_input_exits_2_naming_the_file_and_every_key() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "services:\n  web:\n    image: oci:nowhere\n    build: .\n    privileged: true\n    network_mode: host\n",
            &["compose.yaml", "3 problems", "services.web.build", "services.web.network_mode", "nowhere"],
        ),
        (
            "services:\n  web:\n    image: postgres:16\n",
            &["compose.yaml", "services.web.image", "postgres:16", "registry"],
        ),
        ("services:\n  web:\n    image: [oci:x\n", &["compose.yaml", "line 3"]),
        (
            "services:\n  web:\n    image: oci:.\nx-simcluster:\n  faults:\n    crashh: 1\n",
            &["compose.yaml", "x-simcluster", "crashh"],
        ),
        (
            "services:\n  web:\n    image: oci:.\n    networks:\n      default:\n        ipv4_address: 10.0.0.7\n",
            &["compose.yaml", "ipv4_address", "10.0.0.1"],
        ),
    ];
    for (yaml, needles) in cases {
        std::fs::write(d.path().join("compose.yaml"), yaml).unwrap();
        let out = tempfile::tempdir().unwrap();
        let r = run_cluster(d.path(), out.path(), &[]);
        assert_eq!(r.code, 2, "{yaml}: {r:?}");
        for n in *needles {
            assert!(r.stderr.contains(n), "{yaml}: stderr lacks {n:?}: {r:?}");
        }
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "{yaml}: wrote into --out");
    }
    // A cluster.toml beside the compose file holds settings only, each
    // table in one place.
    std::fs::write(d.path().join("compose.yaml"), "services:\n  web:\n    image: oci:.\nx-simcluster:\n  run: {}\n")
        .unwrap();
    for (toml, needles) in [
        ("[node]\nstart = \"x\"\n", &["cluster.toml", "[node]", "remove it"][..]),
        ("[run]\n", &["cluster.toml", "[run]", "also given in", "x-simcluster"][..]),
    ] {
        std::fs::write(d.path().join("cluster.toml"), toml).unwrap();
        let r = run(&["image", "build", "--quiet", d.path().to_str().unwrap()]);
        assert_eq!(r.code, 2, "{toml}: {r:?}");
        for n in needles {
            assert!(r.stderr.contains(n), "{toml}: stderr lacks {n:?}: {r:?}");
        }
    }
}
