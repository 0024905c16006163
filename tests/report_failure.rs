//! The report of a real failure explains it without grep: the gallery's
//! redis-async (a Redis primary and an asynchronous replica, the primary
//! loses power, the client fails over and a write it was acknowledged is
//! gone) at seed 1 fails its history check in its first execution. Its
//! report.txt and report.html must show the crash and the lost write's
//! operations, the diagram must hold every fault, the whole run must be in
//! the linked parts, and `replay` must write the same reports.

mod common;
use common::*;

/// The events anchored in the report's own diagram (`id="evN"`: each
/// fault and failed check it shows).
fn anchors(html: &str) -> Vec<usize> {
    html.match_indices("<div id=\"ev")
        .map(|(k, _)| html[k + 11..].split('"').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
#[ignore = "full tier: the gallery's Redis (Debian packages), one failing execution and its replay of about 30 virtual s each, minutes of wall time"]
fn a_lost_write_after_a_crash_is_in_view_in_the_default_report_and_replay_writes_it_too() {
    let dir = repo().join("guest-images/gallery/redis-async");
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(&dir, out.path(), &["--seed", "1", "--executions", "4", "--until-failure"]);
    assert_eq!(r.code, 1, "redis-async seed 1 fails: {r:?}");
    let j: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(j["failure"]["kind"], "linearizability", "{j}");
    let failing = out.path().join(format!("failures/execution-{}", j["failing_execution"]));
    let trace: Vec<serde_json::Value> = std::fs::read_to_string(failing.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let faults: Vec<usize> = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            ["crash", "partition", "heal", "restart", "power_failure"].contains(&e["event"].as_str().unwrap())
        })
        .map(|(k, _)| k)
        .collect();
    let crash = trace.iter().position(|e| e["event"] == "crash").expect("n1 lost power");
    let message = j["failure"]["message"].as_str().unwrap();
    let key = message.split("key \"").nth(1).and_then(|s| s.split('"').next()).expect("the failing key");

    // report.txt: the crash among the faults, before the failure; the lost
    // write acknowledged before the crash, the read that missed it after.
    let text = std::fs::read_to_string(failing.join("report.txt")).unwrap();
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("report.txt lacks {s:?}:\n{text}"));
    assert!(at("faults in order") < at(&format!("#{crash:<6}")), "the crash listed:\n{text}");
    assert!(at(&format!("#{crash:<6}")) < at(">> #"), "before the failure:\n{text}");
    let ops = at(&format!("operations on the failing key {key}"));
    let write = at(&format!("ok write {key} := "));
    let lost = at("n1: crash: power loss (");
    let read = at(&format!("ok read {key} -> nil"));
    assert!(ops < write && write < lost && lost < read, "write, crash, read in order:\n{text}");

    // report.html: every fault in the diagram's window (an anchor each),
    // the timeline with the crash's period, the failing key's table.
    let html = std::fs::read_to_string(failing.join("report.html")).unwrap();
    let shown = anchors(&html);
    for f in &faults {
        assert!(shown.contains(f), "fault #{f} ({}) not in the diagram", trace[*f]);
    }
    assert!(!html.contains("not in the diagram window"));
    assert!(html.contains("Client operations over time") && html.contains("n1 down (crash)"));
    assert!(html.contains(&format!("Operations on the failing key {key}")));
    assert!(
        html.contains(&format!("<code>write {key} := "))
            && html.contains(&format!("<code>read {key} -&gt; nil</code>"))
    );
    assert!(!html.contains('\u{1b}'));
    // The whole run: parts linked from the report's elided stretches, each
    // linked to the next.
    let parts: Vec<_> = std::fs::read_dir(failing.join("report-parts")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!parts.is_empty() && html.contains("rows elided") && html.contains("href=\"report-parts/part-"));
    let first = std::fs::read_to_string(failing.join("report-parts/part-001.html")).unwrap();
    assert!(
        first.contains("href=\"../report.html\"")
            && (parts.len() == 1 || first.contains("href=\"part-002.html\">next"))
    );
    eprintln!(
        "report.html {} bytes, {} parts, {} bytes in all",
        html.len(),
        parts.len(),
        parts.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum::<u64>()
    );

    // replay writes the same reports under --out DIR/replay.
    let rout = tempfile::tempdir().unwrap();
    let file = failing.join("failure.json");
    let rr = run(&["replay", "--quiet", file.to_str().unwrap(), "--out", rout.path().to_str().unwrap()]);
    assert_eq!(rr.code, 0, "the failure reproduces: {rr:?}");
    let rtext = std::fs::read_to_string(rout.path().join("replay/report.txt")).unwrap();
    assert!(rtext.starts_with("replay of ") && rtext.contains("reproduced (same trace hash, same failure)"), "{rtext}");
    assert_eq!(rtext.split_once("\n\n").unwrap().1, text, "replay's report.txt is the run's");
    let rhtml = std::fs::read_to_string(rout.path().join("replay/report.html")).unwrap();
    assert_eq!(rhtml, html, "replay's report.html is the run's");
}
