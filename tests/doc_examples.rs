//! The documentation's examples work as written: each is read out of the
//! documents themselves, so a doc and its test cannot drift apart.

mod common;
use common::*;

/// Every `ready = "..."` line of the TOML examples in `doc` (the readiness
/// probe), without its comment.
fn ready_lines(doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let mut in_toml = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_toml = line.trim() == "```toml";
            continue;
        }
        if in_toml && line.starts_with("ready = \"") {
            // The value ends at the last quote before any comment.
            let end = line.rfind('"').unwrap();
            out.push(line[..=end].to_string());
        }
    }
    out
}

/// The probe of the reference's `[node] ready` row (its example, with the
/// table's `\|` read as `|`).
fn reference_row_probe() -> String {
    let text = std::fs::read_to_string(repo().join("docs/reference.md")).unwrap();
    let row = text.lines().find(|l| l.starts_with("| `[node] ready` |")).expect("the reference has a [node] ready row");
    let start = row.find("(`\"").expect("the row has an example") + 3;
    let end = row[start..].find("\"`)").unwrap() + start;
    row[start..end].replace("\\|", "|")
}

/// The readiness probe of the README, the guide and the reference is one
/// command, and it works in an image as written: it keeps failing while the
/// server is not listening yet (each node's at another time) and passes
/// once it is.
#[test]
fn the_documented_readiness_probe_works_as_written() {
    let mut lines = Vec::new();
    for doc in ["README.md", "docs/your-service.md", "docs/reference.md"] {
        let found = ready_lines(doc);
        assert!(!found.is_empty(), "{doc} has no ready = \"...\" example");
        lines.extend(found.into_iter().map(|l| (doc, l)));
    }
    let (_, line) = lines[0].clone();
    for (doc, l) in &lines {
        assert_eq!(l, &line, "{doc}'s readiness example differs from the README's");
    }
    let probe: String = toml::from_str::<toml::Table>(&line).unwrap()["ready"].as_str().unwrap().to_string();
    assert_eq!(reference_row_probe(), probe, "the reference's [node] ready row");
    assert!(probe.contains(":7000"), "the examples' server listens on port 7000: {probe}");

    // Node N's server listens on port 7000 2*N virtual seconds after boot.
    let d = cluster(
        &format!(
            "[cluster]\nnodes = 2\nmemory_mb = 128\n[image]\npackages = [\"busybox-static\"]\n[node]\n\
             start = \"sleep $((2 * NODE_ID)); echo listening; exec nc -l -p 7000\"\n{line}\nready_every = \"500ms\"\n\
             [workload]\nnode = \"n1\"\ncommand = \"true\"\n"
        ),
        &[],
    );
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &["--seed", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let trace: Vec<serde_json::Value> = std::fs::read_to_string(out.path().join("last/trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for n in 1..=2u64 {
        let probes: Vec<(u64, i64)> = trace
            .iter()
            .filter(|e| e["event"] == "command_done" && e["node"] == n && e["name"] == "ready")
            .map(|e| (e["time"].as_u64().unwrap(), e["status"].as_i64().unwrap()))
            .collect();
        let listening = trace
            .iter()
            .find(|e| e["event"] == "console" && e["node"] == n && e["text"] == "listening")
            .and_then(|e| e["time"].as_u64())
            .unwrap_or_else(|| panic!("n{n}'s server never said it listens"));
        // The agent polls the probe every ready_every and reports the try
        // that passed: after the server listened, within a poll or two.
        let &(at, status) = probes.first().unwrap_or_else(|| panic!("n{n} never probed"));
        assert_eq!(status, 0, "n{n}: {probes:?}");
        assert!(at >= listening, "n{n} ready at {at} before its server listened at {listening}");
        assert!(at < listening + 1_000_000_000, "n{n} ready at {at}, long after its server listened at {listening}");
        assert!(listening >= 2_000_000_000 * n, "n{n}'s server at {listening}");
    }
}
