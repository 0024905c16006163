use super::*;
use engine::trace::{Event, EventKind, Trace};
use engine::{Actor, Failure, FailureKind, NodeId};
use simtime::VirtualTime;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

pub(super) const HOSTILE: &str =
    "<script>alert(\"pwn\")</script> & <img src=x onerror=alert(1)> \u{1b}[31mred\u{1b}[0m \u{202e}evil";

/// Node number `k`.
fn node(k: u16) -> NodeId {
    NodeId::new(k).unwrap()
}

/// Node number `k`, or the engine for 0.
fn actor(k: u16) -> Actor {
    Actor::from_number(k).unwrap()
}

struct B {
    t: Trace,
    next_id: u64,
}

impl B {
    fn new() -> B {
        B { t: Trace::new(), next_id: 1 }
    }
    /// An event of node number `node`, or of the engine for 0.
    fn ev(&mut self, time: u64, node: u16, kind: EventKind) {
        let time = VirtualTime::from_ns(time);
        match actor(node) {
            Actor::Node(n) => self.t.push(time, n, kind),
            Actor::Engine => self.t.push_engine(time, kind),
        }
    }
    fn console(&mut self, time: u64, node: u16, text: &str) {
        self.ev(time, node, EventKind::Console { text: text.into() });
    }
    fn send(&mut self, time: u64, from: u16, to: u16, summary: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.ev(
            time,
            from,
            EventKind::Send { id, to: node(to), len: 60 + summary.len() as u32, summary: summary.into() },
        );
        id
    }
    fn deliver(&mut self, time: u64, id: u64, from: u16, to: u16, summary: &str) {
        self.ev(
            time,
            to,
            EventKind::Deliver { id, from: node(from), len: 60 + summary.len() as u32, summary: summary.into() },
        );
    }
    fn msg(&mut self, t0: u64, t1: u64, from: u16, to: u16, summary: &str) -> u64 {
        let id = self.send(t0, from, to, summary);
        self.deliver(t1, id, from, to, summary);
        id
    }
    fn drop_(&mut self, time: u64, id: u64, from: u16, to: u16, cause: &str) {
        self.ev(time, from, EventKind::Drop { id, to: node(to), cause: named(cause) });
    }
}

/// A trace enum (`DropCause`, `DiskOp`, `DiskFaultKind`) by its trace string.
fn named<T: serde::de::DeserializeOwned>(s: &str) -> T {
    serde_json::from_value(serde_json::Value::String(s.into())).unwrap()
}

/// An invariant failure of `node` at `time`.
fn invariant(node: Option<&str>, time: u64, message: &str) -> Failure {
    Failure::new(FailureKind::Invariant, node.map(str::to_string), VirtualTime::from_ns(time), message.into())
}

fn meta(failure: Option<Failure>) -> ReportMeta {
    ReportMeta {
        cluster: "db-cluster".into(),
        seed: 42,
        strategy: "pct(depth=3)".into(),
        execution: 7,
        trace_hash: String::new(),
        failure,
        node_names: vec!["db1".into(), "db2".into(), "db3".into()],
        history: None,
    }
}

/// Three nodes, a partition, drops, a duplicate, a crash and restart, a
/// hostile console line, a failed invariant, events after the failure.
pub(super) fn sample() -> (ReportMeta, Vec<Event>) {
    let mut b = B::new();
    b.ev(0, 0, EventKind::Note { text: "execution 7: strategy pct(depth=3), seed 42".into() });
    for n in 1..=3 {
        b.ev(0, n, EventKind::Boot);
    }
    for n in 1..=3u16 {
        b.ev(10 * MS * n as u64, n, EventKind::run());
    }
    for n in 1..=3u16 {
        b.console(300 * MS + n as u64 * MS, n, "Linux version 6.1.0-um (simcluster) #1");
    }
    for n in 1..=3u16 {
        b.console(900 * MS + n as u64 * MS, n, "Run /init as init process");
    }
    for n in 1..=3 {
        b.ev(1200 * MS, n, EventKind::Ready);
    }
    b.ev(1300 * MS, 1, EventKind::Command { name: "start-db --bootstrap".into() });
    b.console(1350 * MS, 1, "db: starting, cluster of 3, I am db1");
    let a2 = b.send(1400 * MS, 1, 2, "AppendEntries term=1 idx=0");
    let a3 = b.send(1400 * MS + 1, 1, 3, "AppendEntries term=1 idx=0");
    b.deliver(1402 * MS, a2, 1, 2, "AppendEntries term=1 idx=0");
    b.deliver(1403 * MS, a3, 1, 3, "AppendEntries term=1 idx=0");
    let r2 = b.send(1404 * MS, 2, 1, "AppendOk term=1");
    let r3 = b.send(1405 * MS, 3, 1, "AppendOk term=1");
    b.deliver(1406 * MS, r2, 2, 1, "AppendOk term=1");
    b.deliver(1408 * MS, r3, 3, 1, "AppendOk term=1");
    b.ev(1500 * MS, 1, EventKind::CommandDone { name: "start-db --bootstrap".into(), status: 0 });
    b.console(1500 * MS, 1, "db: leader elected: db1 (term 1)");
    b.console(1510 * MS, 2, HOSTILE);
    b.ev(1600 * MS, 1, EventKind::Invariant { name: "single-leader".into(), ok: true });

    b.ev(2 * S, 0, EventKind::Partition { description: "{db1} | {db2, db3}".into() });
    let id = b.send(2100 * MS, 1, 2, "AppendEntries term=1 idx=1 put x=2");
    b.drop_(2100 * MS, id, 1, 2, "partition");
    let id = b.send(2100 * MS + 1, 1, 3, "AppendEntries term=1 idx=1 put x=2");
    b.drop_(2100 * MS + 1, id, 1, 3, "partition");
    b.console(2600 * MS, 2, "db: election timeout, becoming candidate (term 2)");
    let v3 = b.send(2601 * MS, 2, 3, "RequestVote term=2");
    let v1 = b.send(2601 * MS + 1, 2, 1, "RequestVote term=2");
    b.drop_(2601 * MS + 1, v1, 2, 1, "partition");
    b.deliver(2603 * MS, v3, 2, 3, "RequestVote term=2");
    b.msg(2604 * MS, 2606 * MS, 3, 2, "VoteGranted term=2");
    b.console(2607 * MS, 2, "db: leader elected: db2 (term 2)");
    b.ev(2700 * MS, 2, EventKind::Command { name: "client put x=1".into() });
    let id = b.msg(2710 * MS, 2712 * MS, 2, 3, "AppendEntries term=2 idx=1 put x=1");
    b.msg(2713 * MS, 2715 * MS, 3, 2, "AppendOk term=2 idx=1");
    b.ev(2720 * MS, 2, EventKind::CommandDone { name: "client put x=1".into(), status: 0 });
    b.deliver(2790 * MS, id, 2, 3, "AppendEntries term=2 idx=1 put x=1"); // duplicate
    b.ev(3500 * MS, 0, EventKind::Heal);

    b.ev(4 * S, 3, EventKind::Crash { detail: "power loss; 3 of 5 unflushed writes survive".into() });
    b.ev(4100 * MS, 1, EventKind::Command { name: "client get x".into() });
    let id = b.send(4110 * MS, 1, 3, "AppendEntries term=1 idx=1");
    b.drop_(4110 * MS, id, 1, 3, "node down");
    b.msg(4120 * MS, 4123 * MS, 1, 2, "AppendEntries term=1 idx=1");
    b.msg(4125 * MS, 4127 * MS, 2, 1, "Reject term=2");
    b.console(4128 * MS, 1, "db: stepping down, term 2 > 1");
    b.ev(4130 * MS, 1, EventKind::CommandDone { name: "client get x".into(), status: 0 });
    b.console(4131 * MS, 1, "client: get x -> 2 (stale read!)");
    b.ev(4500 * MS, 3, EventKind::Restart);
    b.console(4800 * MS, 3, "Linux version 6.1.0-um (simcluster) #1");
    b.console(5200 * MS, 3, "db: recovering from WAL: 1 entry, 1 torn");
    let id = b.send(5300 * MS, 2, 3, "AppendEntries term=2 idx=2");
    b.drop_(5301 * MS, id, 2, 3, "loss");
    b.ev(6 * S, 1, EventKind::Invariant { name: "linearizable".into(), ok: false });
    b.ev(6 * S, 0, EventKind::Note { text: "history: 3 ops, no linearization".into() });
    b.console(6100 * MS, 2, "db: heartbeat");
    b.send(6200 * MS, 2, 1, "AppendEntries term=2 idx=2"); // still in flight at the end
    b.ev(6300 * MS, 3, EventKind::Exit { status: Some(0), signal: None, panic: false });
    assert!(b.t.events().windows(2).all(|w| w[0].time <= w[1].time), "sample time runs forward");
    let mut m = meta(Some(invariant(
        Some("db1"),
        6 * S,
        "invariant `linearizable` failed: get x returned 2 after put x=1 completed on db2",
    )));
    m.trace_hash = b.t.hash();
    (m, b.t.events().to_vec())
}

/// About `n` events over 5 nodes: chatter, consoles, Runs, partitions,
/// drops; a failed invariant at about 80 %.
fn big(n: usize) -> (ReportMeta, Vec<Event>) {
    let mut b = B::new();
    let mut t = 0u64;
    let nodes = 5u16;
    for k in 1..=nodes {
        b.ev(0, k, EventKind::Boot);
    }
    let mut step = 0u64;
    let mut failed = false;
    while b.t.len() < n {
        step += 1;
        t += 2_000 + (step * 7919 % 13) * 100_000;
        let from = (step % nodes as u64) as u16 + 1;
        let to = ((step * 3) % nodes as u64) as u16 + 1;
        let to = if to == from { to % nodes + 1 } else { to };
        b.ev(t, from, EventKind::run());
        b.console(t, from, &format!("step {step}: node {from} log line"));
        match step % 1000 {
            200 => b.ev(t, 0, EventKind::Partition { description: format!("cut {step}") }),
            700 => b.ev(t, 0, EventKind::Heal),
            _ => {}
        }
        if !failed && b.t.len() >= n * 8 / 10 {
            failed = true;
            b.console(t, from, "FAILING-REGION-MARKER");
            b.ev(t, from, EventKind::Invariant { name: "linearizable".into(), ok: false });
        }
        let id = b.send(t, from, to, &format!("m{step}"));
        match step % 17 {
            0 => b.drop_(t + 1, id, from, to, "loss"),
            _ => b.deliver(t + 1000, id, from, to, &format!("m{step}")),
        }
    }
    let mut m = meta(Some(invariant(None, u64::MAX, "invariant linearizable failed")));
    m.node_names = (1..=nodes).map(|k| format!("node-{k}")).collect();
    (m, b.t.events().to_vec())
}

/// A tiny well-formedness check: tags balance (void elements and `/>`
/// aside), `<style>` has no markup, every `<` starts a tag and every `&`
/// an entity. Returns the number of elements.
pub(super) fn check_html(html: &str) -> Result<usize, String> {
    const VOID: [&str; 6] = ["meta", "br", "hr", "img", "input", "link"];
    let mut stack: Vec<String> = Vec::new();
    let mut count = 0;
    let mut i = 0;
    while let Some(off) = html[i..].find(['<', '&']) {
        let s = i + off;
        let rest = &html[s..];
        if rest.starts_with('&') {
            let semi = rest.find(';').ok_or_else(|| format!("bare & at {s}"))?;
            let ent = &rest[1..semi];
            let ok = (!ent.is_empty() && ent.chars().all(|c| c.is_ascii_alphanumeric()))
                || (ent.starts_with("#x") && ent.len() > 2 && ent[2..].chars().all(|c| c.is_ascii_hexdigit()))
                || (ent.starts_with('#') && ent.len() > 1 && ent[1..].chars().all(|c| c.is_ascii_digit()));
            if !ok {
                return Err(format!("bad entity {:?} at {s}", &rest[..semi.min(20)]));
            }
            i = s + 1;
            continue;
        }
        if rest.starts_with("<!--") {
            i = s + rest.find("-->").ok_or("unclosed comment")? + 3;
            continue;
        }
        if rest.starts_with("<!") {
            i = s + rest.find('>').ok_or("unclosed doctype")? + 1;
            continue;
        }
        let end = s + rest.find('>').ok_or_else(|| format!("unclosed tag at {s}"))?;
        let tag = &html[s + 1..end];
        if tag.contains('<') {
            return Err(format!("'<' inside tag at {s}: {tag:.60}"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            let name = name.trim();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> at {s} closes {other:?}")),
            }
        } else {
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if name.is_empty() {
                return Err(format!("stray '<' at {s}: {:.40}", rest));
            }
            count += 1;
            if !(tag.ends_with('/') || VOID.contains(&name.as_str())) {
                if name == "style" || name == "script" {
                    let close = format!("</{name}>");
                    let body_end = end + html[end..].find(&close).ok_or("unclosed raw text")?;
                    if html[end + 1..body_end].contains('<') {
                        return Err(format!("markup inside <{name}>"));
                    }
                    i = body_end + close.len();
                    continue;
                }
                stack.push(name);
            }
        }
        i = end + 1;
    }
    if stack.is_empty() {
        Ok(count)
    } else {
        Err(format!("unclosed: {stack:?}"))
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn kinds(events: &[Event], f: impl Fn(&EventKind) -> bool) -> usize {
    events.iter().filter(|e| f(&e.kind)).count()
}

#[test]
fn html_is_well_formed_and_self_contained() {
    let (m, ev) = sample();
    let html = render_html(&m, &ev);
    let n = check_html(&html).unwrap();
    assert!(n > 100, "{n} elements");
    assert!(html.starts_with("<!DOCTYPE html>"));
    for external in ["http://", "https://", " src=\"", "<link", "@import", "url(http"] {
        let hits: Vec<_> = html.match_indices(external).map(|(i, _)| &html[i..(i + 60).min(html.len())]).collect();
        // The SVG namespace is an identifier, not a resource.
        let real = hits.iter().filter(|h| !h.starts_with("http://www.w3.org/2000/svg")).count();
        assert_eq!(real, 0, "{external}: {hits:?}");
    }
    assert_eq!(count(&html, "<script"), 0, "no JavaScript at all");
}

#[test]
fn html_draws_messages_drops_partitions_and_failure() {
    let (m, ev) = sample();
    let html = render_html(&m, &ev);
    let delivers = kinds(&ev, |k| matches!(k, EventKind::Deliver { .. }));
    let drops = kinds(&ev, |k| matches!(k, EventKind::Drop { .. }));
    assert_eq!(count(&html, "data-kind=\"deliver\"") + count(&html, "data-kind=\"dup\""), delivers);
    assert_eq!(count(&html, "data-kind=\"dup\""), 1);
    assert_eq!(count(&html, "data-kind=\"drop\""), drops);
    assert_eq!(count(&html, "<path class=\"x\""), drops, "an X per drop");
    assert_eq!(count(&html, "data-kind=\"inflight\""), 1);
    assert_eq!(count(&html, "<g class=\"band\" data-kind=\"partition\""), 1);
    assert!(html.contains("{db1} | {db2, db3}"));
    // Failure: highlighted at the top with working links, marked in both views.
    assert!(html.contains("class=\"failure\""));
    assert!(html.contains("href=\"#failure\"") && html.contains("id=\"failure\""));
    assert!(html.contains("href=\"#console-failure\"") && html.contains("id=\"console-failure\""));
    assert_eq!(count(&html, "failev"), 1 + count(&html, ".failev"));
    assert!(html.contains("✗ linearizable"));
    assert!(html.contains("data-kind=\"crash\"") && html.contains("data-kind=\"restart\""));
    assert!(html.contains("▶ start-db --bootstrap"));
    // Console lines from every node.
    assert!(html.contains("db: recovering from WAL"));
    assert!(html.contains("client: get x -&gt; 2 (stale read!)"));
    // Idle stretches are marked, and Run events take no space.
    assert!(html.contains("idle +"));
}

#[test]
fn hostile_text_is_escaped() {
    let (mut m, mut ev) = sample();
    m.cluster = HOSTILE.into();
    m.strategy = HOSTILE.into();
    m.node_names[0] = HOSTILE.into();
    m.failure = Some(invariant(Some("db1"), 6 * S, HOSTILE));
    ev.push(Event {
        time: VirtualTime::from_ns(7 * S),
        node: Actor::Engine,
        kind: EventKind::Partition { description: HOSTILE.into() },
    });
    ev.push(Event {
        time: VirtualTime::from_ns(7 * S),
        node: actor(2),
        kind: EventKind::Command { name: HOSTILE.into() },
    });
    let id = 999_999;
    ev.push(Event {
        time: VirtualTime::from_ns(7 * S),
        node: actor(1),
        kind: EventKind::Send { id, to: node(2), len: 1, summary: HOSTILE.into() },
    });
    ev.push(Event {
        time: VirtualTime::from_ns(7 * S + 1),
        node: actor(2),
        kind: EventKind::Deliver { id, from: node(1), len: 1, summary: HOSTILE.into() },
    });
    ev.push(Event {
        time: VirtualTime::from_ns(7 * S + 2),
        node: actor(3),
        kind: EventKind::Crash { detail: HOSTILE.into() },
    });
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert!(!html.contains("<script"), "raw script tag");
    assert!(!html.contains("<img"), "raw img tag");
    assert!(html.contains("&lt;script&gt;alert(&quot;pwn&quot;)&lt;/script&gt;"));
    assert!(!html.contains('\u{1b}'), "terminal escape left in");
    assert!(!html.contains('\u{202e}'), "bidi override left in");
    // Colour codes are left out, the text they coloured kept.
    assert!(html.contains(" red \\u{202e}evil") && !html.contains("[31m"), "colour codes");

    let text = render_text(&m, &ev);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'));
    assert!(text.chars().all(|c| c == '\n' || !c.is_control()));
    let json = summary_json(&m, &ev).to_string();
    assert!(!json.contains('\u{1b}') && !json.contains("\\u001b"));
}

#[test]
fn rendering_is_deterministic() {
    let (m, ev) = sample();
    assert_eq!(render_html(&m, &ev), render_html(&m, &ev.clone()));
    assert_eq!(render_text(&m, &ev), render_text(&m, &ev));
    assert_eq!(summary_json(&m, &ev).to_string(), summary_json(&m, &ev).to_string());
    let (bm, bev) = big(20_000);
    assert_eq!(render_html(&bm, &bev), render_html(&bm, &bev));
}

#[test]
fn big_trace_stays_small_and_keeps_the_failing_region() {
    let (m, ev) = big(100_000);
    assert!(ev.len() >= 100_000);
    let html = render_html(&m, &ev);
    if let Some(p) = std::env::var_os("SIMCLUSTER_REPORT_SAMPLE_BIG") {
        std::fs::write(p, &html).unwrap();
    }
    check_html(&html).unwrap();
    eprintln!("100k events: {} bytes of HTML", html.len());
    assert!(html.len() < 4_000_000, "{} bytes", html.len());
    assert!(html.contains("FAILING-REGION-MARKER"));
    assert!(html.contains("id=\"failure\"") && html.contains("id=\"console-failure\""));
    assert!(html.contains("rows elided ("), "gap marked");
    assert!(html.contains("lines of n1 (node-1) not shown"));
    // The failure row is inside the diagram window.
    assert!(html.contains("<g class=\"failmark\">"));
    let text = render_text(&m, &ev);
    assert!(text.len() < 10_000, "{}", text.len());
    assert!(text.contains("FAILING-REGION-MARKER"));
    let json = summary_json(&m, &ev).to_string();
    assert!(json.len() < 100_000);
}

#[test]
fn text_summary() {
    let (m, ev) = sample();
    let text = render_text(&m, &ev);
    eprintln!("{text}");
    assert!(text.contains("FAILED: Invariant: invariant `linearizable` failed"));
    assert!(text.contains("on n1 (db1)"));
    assert!(text.contains("invariant linearizable FAILED"));
    assert!(text.contains(">> #"));
    assert!(text.contains("(duplicate)"));
    assert!(text.contains("6 dropped") || text.contains("5 dropped"), "{text}");
    assert!(text.contains("1 partitions") && text.contains("1 crashes"));
    // Nothing after the failure is listed among the last events.
    assert!(!text.contains("heartbeat"));
    for n in ["n1 (db1):", "n2 (db2):", "n3 (db3):", "engine:"] {
        assert!(text.contains(n), "{n}");
    }
}

#[test]
fn json_summary() {
    let (m, ev) = sample();
    let v = summary_json(&m, &ev);
    assert_eq!(v["seed"], 42);
    assert_eq!(v["events"], ev.len());
    assert_eq!(v["counts"]["drop"], kinds(&ev, |k| matches!(k, EventKind::Drop { .. })));
    assert_eq!(v["counts"]["partition"], 1);
    assert_eq!(v["counts"]["hung"], 0);
    assert_eq!(v["messages"]["duplicates"], 1);
    assert_eq!(v["messages"]["in_flight"], 1);
    let fi = ev.iter().position(|e| matches!(e.kind, EventKind::Invariant { ok: false, .. })).unwrap();
    assert_eq!(v["failure"]["event_index"], fi);
    assert_eq!(v["failure"]["node_name"], "db1");
    assert_eq!(v["failure"]["kind"], "invariant");
    assert_eq!(v["failed_invariants"][0]["name"], "linearizable");
    let n3 = &v["nodes"][2];
    assert_eq!(n3["name"], "db3");
    assert_eq!(n3["crashes"], 1);
    assert_eq!(n3["last_console"][3], "db: recovering from WAL: 1 entry, 1 torn");
    assert_eq!(n3["exit"]["status"], 0);
}

#[test]
fn passing_and_empty_traces() {
    let (mut m, mut ev) = sample();
    m.failure = None;
    ev.retain(|e| !matches!(e.kind, EventKind::Invariant { ok: false, .. }));
    assert_eq!(failure_spot(&m, &ev), None);
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert!(html.contains("No failure recorded"));
    assert!(!html.contains("id=\"failure\""));
    assert!(render_text(&m, &ev).contains("passed"));
    assert!(summary_json(&m, &ev)["failure"].is_null());

    let empty = ReportMeta::default();
    let html = render_html(&empty, &[]);
    check_html(&html).unwrap();
    assert!(render_text(&empty, &[]).contains("0 events"));
    assert_eq!(summary_json(&empty, &[])["events"], 0);
    // A failure with no trace still says what failed.
    let m = ReportMeta {
        failure: Some(Failure::new(FailureKind::TimeLimit, None, VirtualTime::ZERO, "boot failed".into())),
        ..ReportMeta::default()
    };
    let html = render_html(&m, &[]);
    check_html(&html).unwrap();
    assert!(html.contains("boot failed"));
}

#[test]
fn failure_is_located() {
    let e = |k, kind| Event { time: VirtualTime::from_ns(1), node: actor(k), kind };
    let ev = vec![
        e(1, EventKind::Exit { status: Some(3), signal: None, panic: false }),
        e(2, EventKind::Hung),
        e(1, EventKind::Exit { status: None, signal: None, panic: true }),
        e(3, EventKind::Invariant { name: "x".into(), ok: false }),
        e(3, EventKind::run()),
    ];
    let m = meta(None);
    let at = |kind, node: Option<&str>, time| {
        failure_index(&Failure::new(kind, node.map(str::to_string), VirtualTime::from_ns(time), String::new()), &m, &ev)
    };
    // The event of the engine's failure, on its node, by its kind.
    assert_eq!(at(FailureKind::Invariant, Some("db3"), 1), Some(3));
    assert_eq!(at(FailureKind::GuestPanic, Some("db1"), 1), Some(2));
    assert_eq!(at(FailureKind::GuestHang, Some("n2"), 1), Some(1));
    assert_eq!(at(FailureKind::GuestExit, Some("db1"), 1), Some(2), "the last exit of db1");
    assert_eq!(at(FailureKind::GuestExit, None, 1), Some(2));
    // Nothing of its kind: the node's last visible event, else anyone's.
    assert_eq!(at(FailureKind::Workload, Some("db2"), 1), Some(1));
    assert_eq!(at(FailureKind::TimeLimit, None, 9), Some(3), "the last event that is not a run");
    // Never after the failure's time.
    assert_eq!(at(FailureKind::Invariant, Some("db3"), 0), None);
    let ok = vec![e(1, EventKind::Boot), e(1, EventKind::Console { text: "x".into() }), e(1, EventKind::run())];
    let f = Failure::new(
        FailureKind::Liveness,
        Some("db1".into()),
        VirtualTime::from_ns(1),
        "liveness x never held\nconsole tail".into(),
    );
    assert_eq!(failure_index(&f, &m, &ok), Some(1));
    let spot = failure_spot(&ReportMeta { failure: Some(f), ..m.clone() }, &ok).unwrap();
    assert_eq!(spot, FailureSpot { index: Some(1), description: "Liveness: liveness x never held".into() });
    // No failure from the engine, none in the report, whatever the trace holds.
    assert_eq!(failure_spot(&m, &ev), None);
}

#[test]
fn sanitize_and_escape() {
    assert_eq!(sanitize("a\tb\u{1b}[0m\u{7f}\u{202e}", 100), "a b\\x7f\\u{202e}");
    // Colours, cursor moves, titles and two-character escapes are left
    // out; an escape cut short is spelled out.
    assert_eq!(sanitize("\u{1b}[1;31mERR\u{1b}[0m: x\u{1b}[2K", 100), "ERR: x");
    assert_eq!(strip_ansi("\u{1b}]0;title\u{7}ok \u{1b}]8;;http://x\u{1b}\\link\u{1b}7"), "ok link");
    assert_eq!(sanitize("x\u{1b}[3", 100), "x\\x1b[3");
    assert_eq!(sanitize("é\u{1b}[32mü", 100), "éü");
    assert_eq!(sanitize("abcdef", 3), "abc… (+3 chars)");
    assert_eq!(esc("<a href='x'>&</a>", 100), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
    assert_eq!(fmt_time(1_234_567_890), "1.234567s");
    assert_eq!(fmt_time_ns(5), "0.000000005s");
    assert_eq!(fmt_dur(1_500_000_000), "1.50s");
    assert_eq!(fmt_dur(2_000_000), "2ms");
}

fn find_chromium() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Writes the sample report into a temp dir (and to the path in
/// `SIMCLUSTER_REPORT_SAMPLE`, if set) and screenshots it in headless
/// chromium next to the HTML file: what a person sees. Full tier only:
/// chromium is a large install (scripts/test-deps.sh --full installs it),
/// and the report's content is checked by the other tests here.
#[test]
#[ignore = "full tier: headless chromium (scripts/test.sh --full installs it)"]
fn example_report_screenshot() {
    let (m, ev) = sample();
    let html = render_html(&m, &ev);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    std::fs::write(&file, &html).unwrap();
    std::fs::write(dir.path().join("report.txt"), render_text(&m, &ev)).unwrap();
    let mut targets = vec![file.clone()];
    if let Some(p) = std::env::var_os("SIMCLUSTER_REPORT_SAMPLE") {
        let p = std::path::PathBuf::from(p);
        std::fs::write(&p, &html).unwrap();
        targets.push(p);
    }
    let Some(chromium) = find_chromium() else {
        testkit::skip(
            testkit::Cause::Missing,
            "the screenshot: no chromium on PATH (Debian package chromium: apt-get install chromium); \
             the report was rendered",
        );
        return;
    };
    for html_file in targets {
        let png = html_file.with_extension("png");
        let profile = dir.path().join("profile");
        let mut child = std::process::Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1000"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--screenshot={}", png.display()))
            .arg(format!("file://{}", html_file.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if start.elapsed() > std::time::Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                testkit::skip(
                    testkit::Cause::Host,
                    "the screenshot: chromium did not finish in 120 s (a loaded host); the report was rendered",
                );
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let meta = std::fs::metadata(&png).expect("chromium wrote no screenshot");
        assert!(meta.len() > 10_000, "screenshot is {} bytes", meta.len());
        eprintln!("screenshot: {}", png.display());
    }
}

#[test]
fn folded_quiet_runs_are_counted_and_described() {
    // Two nodes spin quietly (a million grants each, interleaved), then n1
    // prints: the trace holds two folded runs and the console line.
    let mut t = Trace::new();
    for k in 0..1_000_000u64 {
        t.push(VirtualTime::from_ns(k * 1_000), engine::NodeId::new(1).unwrap(), EventKind::run());
        t.push(VirtualTime::from_ns(k * 1_000), engine::NodeId::new(2).unwrap(), EventKind::run());
    }
    t.push(VirtualTime::from_ns(2 * S), engine::NodeId::new(1).unwrap(), EventKind::Console { text: "spun".into() });
    let ev = t.events().to_vec();
    assert_eq!(ev.len(), 3);
    let m = meta(None);
    let v = summary_json(&m, &ev);
    assert_eq!(v["counts"]["run"], 2);
    assert_eq!(v["grants"], 2_000_000);
    assert_eq!(v["virtual_end_ns"], 2 * S);
    let d = describe(&m, &ev[0]);
    assert!(d.contains("x1000000") && d.contains("0.999999s"), "{d}");
    assert_eq!(describe(&m, &Event { time: VirtualTime::from_ns(5), node: actor(1), kind: EventKind::run() }), "run");
    check_html(&render_html(&m, &ev)).unwrap();
    let text = render_text(&m, &ev);
    assert!(text.contains("3 events (2000000 node runs)") && text.contains("spun"), "{text}");
}

#[test]
fn disk_faults_are_marked_on_their_lane_indexed_and_counted() {
    let mut b = B::new();
    b.ev(0, 1, EventKind::Boot);
    b.ev(0, 2, EventKind::Boot);
    let disk = |id: u64, op: &str| EventKind::Disk { id, op: named(op), sector: 8, sectors: 8 };
    let fault =
        |id: u64, fault: &str, detail: &str| EventKind::DiskFault { id, fault: named(fault), detail: detail.into() };
    b.ev(S, 2, disk(1, "read"));
    b.ev(S, 2, fault(1, "corrupt_read", "read of sectors 8..16 returned 2 flipped bit(s)"));
    b.ev(2 * S, 2, disk(2, "write"));
    b.ev(2 * S, 2, fault(2, "misdirect", "write of sectors 8..16 landed at sectors 40..48 instead"));
    b.ev(3 * S, 1, disk(3, "flush"));
    b.ev(3 * S, 1, fault(3, "lost_flush", "flush acknowledged but nothing made durable"));
    b.ev(4 * S, 2, disk(4, "write"));
    b.ev(4 * S, 2, fault(4, "write_error", &format!("{HOSTILE} did not land")));
    let ev = b.t.events().to_vec();
    let m = meta(None);
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert_eq!(count(&html, "<g class=\"dfault\" data-kind=\"disk_fault\""), 4);
    // A diamond beside the lane of the node it hit (lanes are 200 px wide:
    // n1's at 240, n2's at 440), labelled with the fault.
    assert!(html.contains("<path d=\"M450,") && html.contains("<path d=\"M250,"), "lanes");
    for f in ["corrupt_read", "misdirect", "lost_flush", "write_error"] {
        assert!(html.contains(&format!(">{f}</text></g>")), "{f}");
    }
    assert!(html.contains("<b>4</b> disk faults"));
    assert!(html.contains("Faults and failed checks (4)"));
    assert!(html.contains("disk fault misdirect on #2: write of sectors 8..16 landed at sectors 40..48 instead"));
    assert!(!html.contains("<script"), "guest-free text, still escaped");
    let text = render_text(&m, &ev);
    assert!(text.contains("4 disk faults (1 corrupt_read, 1 lost_flush, 1 misdirect, 1 write_error)"), "{text}");
    assert!(text.contains("disk fault lost_flush on #3"), "{text}");
    // No faults, no breakdown.
    assert!(render_text(&m, &ev[..2]).contains("0 disk faults, "));
}

#[test]
fn pauses_and_clock_faults_are_drawn_counted_and_described() {
    let mut b = B::new();
    for n in 1..=3 {
        b.ev(0, n, EventKind::Boot);
    }
    b.ev(0, 2, EventKind::ClockOffset { offset_ns: -3 * S as i64 });
    b.ev(0, 3, EventKind::ClockDrift { ppm: 50_000 });
    b.msg(100 * MS, 101 * MS, 1, 2, "UDP ping");
    b.ev(200 * MS, 2, EventKind::Pause { resume_at: VirtualTime::from_ns(1_700 * MS) });
    b.msg(300 * MS, 301 * MS, 1, 2, "UDP ping");
    b.ev(400 * MS, 1, EventKind::ClockBump { delta_ns: -1_500 * MS as i64 });
    b.ev(500 * MS, 3, EventKind::Pause { resume_at: VirtualTime::from_ns(9 * S) });
    b.ev(600 * MS, 1, EventKind::ClockStrobe { delta_ns: 200 * MS as i64, period_ns: 10 * MS, length_ns: S });
    b.ev(1_700 * MS, 2, EventKind::Resume);
    b.ev(2 * S, 3, EventKind::Crash { detail: "power loss".into() });
    b.console(3 * S, 1, "done");
    let ev = b.t.events().to_vec();
    let m = meta(None);

    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    // One bar from n2's pause to its resume, one from n3's to its crash.
    assert_eq!(count(&html, "class=\"pausebar\""), 2, "{html}");
    assert!(html.contains("resumed at 1.700000s") && html.contains("ended by crash"), "{html}");
    for label in ["clock -3.00s", "drift +50000ppm", "clock -1.50s", "strobe ±200ms", "⏸ pause", "▶ resume"] {
        assert!(html.contains(label), "{label}");
    }
    assert!(html.contains("<b>2</b> pauses") && html.contains("<b>4</b> clock faults"), "{html}");

    let text = render_text(&m, &ev);
    assert!(
        text.contains("node faults: 2 pauses, 1 resumes; clock: 1 offsets, 1 drifts, 1 bumps, 1 strobes"),
        "{text}"
    );
    assert!(text.contains("pause: start command stopped (SIGSTOP) until 1.700000s"), "{text}");
    assert!(text.contains("clock strobe +200ms and back every 10ms for 1.00s"), "{text}");

    let v = summary_json(&m, &ev);
    assert_eq!((v["counts"]["pause"].as_u64(), v["counts"]["clock_bump"].as_u64()), (Some(2), Some(1)));
    assert_eq!(v["nodes"][1]["pauses"], 1);
    assert_eq!(v["nodes"][0]["clock_faults"], 2);

    // Without the resume and the crash both pauses last to the end, dashed.
    let open = &ev[..ev.len() - 3];
    assert_eq!(count(&render_html(&m, open), "class=\"pausebar open\""), 2);
}

/// A transactional history that fails its check gets the anomalies panel:
/// the cycle drawn (one lane per process, arrows labelled by edge kind)
/// and each edge's reason; a register history gets none.
#[test]
fn an_anomaly_cycle_is_drawn() {
    use checker::history_check::HistoryModel;
    let history = include_str!("../../../tests/histories/g-single.jsonl");
    let lines: Vec<&str> =
        std::iter::once("@history begin").chain(history.lines()).chain(std::iter::once("@history end")).collect();
    let events: Vec<Event> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| Event {
            time: VirtualTime::from_ns(i as u64 + 1),
            node: actor(1),
            kind: EventKind::Console { text: l.to_string() },
        })
        .collect();
    let model =
        HistoryModel::Txn { model: txncheck::Model::ListAppend, consistency: txncheck::Consistency::Serializable };
    let m = ReportMeta { history: Some((node(1), model)), ..meta(None) };
    let html = render_html(&m, &events);
    check_html(&html).unwrap();
    assert!(html.contains("Anomalies: the history is not serializable (list-append)"), "{html}");
    assert!(html.contains("<svg class=\"cycle\""));
    assert!(html.contains("process 0") && html.contains("process 1"));
    assert!(html.contains(">rw x<") && html.contains(">wr y<"), "both edges labelled");
    assert!(html.contains("T1 appended 1 to y, T0 read y = [1]: wr on y"));
    let plain = render_html(&ReportMeta { history: Some((node(1), HistoryModel::Register)), ..meta(None) }, &events);
    assert!(!plain.contains("Anomalies"));
}

#[test]
fn a_power_failure_is_counted_and_described() {
    let mut b = B::new();
    b.ev(S, 0, EventKind::PowerFailure { nodes: vec!["db2".into(), "db3".into()] });
    b.ev(S, 2, EventKind::Crash { detail: "power loss".into() });
    b.ev(S, 3, EventKind::Crash { detail: "power loss".into() });
    let (m, ev) = (meta(None), b.t.events().to_vec());
    assert_eq!(describe(&m, &ev[0]), "power failure: db2, db3 lose power together");
    let text = render_text(&m, &ev);
    assert!(text.contains("2 crashes (1 power failures of several nodes)"), "{text}");
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert!(html.contains("power failures"), "the chip");
    assert_eq!(summary_json(&m, &ev)["counts"]["power_failure"], 1);
}

#[test]
fn a_kill_and_its_respawn_are_counted_and_described() {
    let mut b = B::new();
    b.ev(S, 2, EventKind::Kill { restart_at: VirtualTime::from_ns(2 * S) });
    b.ev(S, 2, EventKind::CommandDone { name: "start".into(), status: 137 });
    b.ev(2 * S, 2, EventKind::Respawn);
    let (m, ev) = (meta(None), b.t.events().to_vec());
    assert_eq!(describe(&m, &ev[0]), "kill: start command killed (SIGKILL), runs again at 2.000000s");
    assert_eq!(describe(&m, &ev[2]), "respawn: start command runs again after its kill");
    let text = render_text(&m, &ev);
    assert!(text.contains("node faults: 0 pauses, 0 resumes, 1 kills, 1 respawns;"), "{text}");
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert!(html.contains("kills"), "the chip");
    let j = summary_json(&m, &ev);
    assert_eq!((j["counts"]["kill"].as_u64(), j["counts"]["respawn"].as_u64()), (Some(1), Some(1)));
    let n2 = j["nodes"].as_array().unwrap().iter().find(|n| n["node"] == 2).expect("n2's entry");
    assert_eq!(n2["kills"], 1, "{n2}");
}

/// n1 primary, n2 replica, n3 a client: write k1 acknowledged at 1.2 s,
/// n1 loses power at 1.5 s, the read of k1 at 3 s finds nothing; the
/// history check fails on k1. The history's times are n3's wall clock.
fn lost_write() -> (ReportMeta, Vec<Event>) {
    let mut b = B::new();
    for n in 1..=3 {
        b.ev(0, n, EventKind::Boot);
    }
    b.ev(10 * MS, 3, EventKind::Command { name: "workload".into() });
    for k in 0..40u64 {
        let t = S + k * 10 * MS;
        b.msg(t, t + MS, 3, 1, &format!("SET k{k}"));
        b.msg(t + 2 * MS, t + 3 * MS, 1, 3, "+OK");
    }
    b.ev(1500 * MS, 1, EventKind::Crash { detail: "power loss".into() });
    b.ev(2 * S, 0, EventKind::Partition { description: "{n2} | {n3}".into() });
    b.ev(2500 * MS, 0, EventKind::Heal);
    b.ev(3 * S + 5 * MS, 3, EventKind::CommandDone { name: "workload".into(), status: 0 });
    let e = GUEST_EPOCH_NS;
    let wall = |t: u64| e + t;
    let mut lines = vec!["@history begin".to_string()];
    for (p, ty, t, f, key, v) in [
        (1, "invoke", wall(1200 * MS), "write", "k1", "1"),
        (1, "ok", wall(1203 * MS), "write", "k1", "1"),
        (1, "invoke", wall(1300 * MS), "write", "k2", "2"),
        (1, "info", wall(1800 * MS), "write", "k2", "2"),
        (2, "invoke", wall(3 * S), "read", "k1", "null"),
        (2, "ok", wall(3 * S + MS), "read", "k1", "null"),
    ] {
        lines.push(format!(
            "{{\"process\":{p},\"type\":\"{ty}\",\"time\":{t},\"f\":\"{f}\",\"key\":\"{key}\",\"value\":{v}}}"
        ));
    }
    lines.push("@history end".into());
    for l in &lines {
        b.console(3 * S + 4 * MS, 3, l);
    }
    b.ev(3 * S + 6 * MS, 3, EventKind::Invariant { name: "history-linearizable".into(), ok: false });
    let mut m = meta(Some(Failure::new(
        FailureKind::Linearizability,
        Some("n3".into()),
        VirtualTime::from_ns(3 * S + 6 * MS),
        "[check] history on n3: history is not linearizable: key \"k1\" is not linearizable (2 ops on it).".into(),
    )));
    m.node_names = vec!["n1".into(), "n2".into(), "n3".into()];
    m.history = Some((node(3), checker::history_check::HistoryModel::Register));
    (m, b.t.events().to_vec())
}

use engine::GUEST_EPOCH_NS;

#[test]
fn a_history_gets_a_timeline_with_the_faults_and_the_failing_keys_operations() {
    let (m, ev) = lost_write();
    let html = render_html(&m, &ev);
    check_html(&html).unwrap();
    assert!(html.contains("Client operations over time"), "no timeline");
    // Three operations, one of each kind; times made virtual.
    assert!(html.contains("3 operations of the history"), "counts");
    assert_eq!(count(&html, "<rect class=\"op ok"), 2);
    assert_eq!(count(&html, "<rect class=\"op info"), 1);
    assert_eq!(count(&html, " failing\" x="), 2, "the two ops on k1 outlined");
    assert!(html.contains("write k1 := 1, ok: 1.200000s .. 1.203000s"), "virtual times");
    // Fault periods: n1 down from its crash to the end, the partition
    // until its heal.
    assert!(html.contains("<g class=\"tf down\">") && html.contains("n1 down (crash)"));
    assert!(html.contains("<g class=\"tf part\">") && html.contains("1.500000s .. 3.006000s"));
    // The table: the write, the crash 297 ms after it, the read.
    assert!(html.contains("Operations on the failing key k1"));
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("<code>write k1 := 1</code>") < at("n1 down (crash) (297ms after the completion above)"));
    assert!(at("n1 down (crash) (297ms after") < at("<code>read k1 -&gt; nil</code>"));

    let text = render_text(&m, &ev);
    assert!(text.contains("history: 3 operations (2 ok, 0 fail, 1 info)"), "{text}");
    assert!(text.contains("operations on the failing key k1 (2)"), "{text}");
    let w = text.find("ok write k1 := 1").unwrap();
    let c = text.find("!! t=1.500000s n1: crash: power loss (297ms after the completion above)").unwrap();
    let r = text.find("ok read k1 -> nil").unwrap();
    assert!(w < c && c < r, "{text}");
    // Every fault is listed, before the failure.
    let faults = text.find("faults in order (3):").expect("faults listed");
    let fail = text.find(">> #").unwrap();
    assert!(faults < text.find("crash: power loss").unwrap() && text.find("heal").unwrap() < fail, "{text}");

    // Without a history: no timeline.
    let mut plain = m.clone();
    plain.history = None;
    assert!(!render_html(&plain, &ev).contains("Client operations over time"));
}

#[test]
fn the_failing_commands_console_is_in_the_failure_message() {
    let mut b = B::new();
    b.ev(0, 1, EventKind::Boot);
    b.console(MS, 1, "service: started");
    b.ev(2 * MS, 1, EventKind::Command { name: "check-balance".into() });
    b.console(3 * MS, 1, "check-balance: balance is -5, expected >= 0");
    b.ev(4 * MS, 1, EventKind::CommandDone { name: "check-balance".into(), status: 1 });
    b.ev(4 * MS, 1, EventKind::Invariant { name: "check-balance".into(), ok: false });
    let mut m = meta(Some(invariant(Some("db1"), 4 * MS, "invariant `check-balance` failed")));
    m.node_names = vec!["db1".into()];
    let (_, ev) = ((), b.t.events().to_vec());
    let text = render_text(&m, &ev);
    assert!(text.contains("console of n1 (db1) while check-balance ran"), "{text}");
    assert!(text.contains("  | check-balance: balance is -5"), "{text}");
    // Only what came after the command's start.
    assert!(!text.contains("  | service: started"), "{text}");
    let html = render_html(&m, &ev);
    assert!(html.contains("<pre class=\"cmdout\">check-balance: balance is -5, expected &gt;= 0\n</pre>"), "html");
}

#[test]
fn a_long_trace_shows_every_fault_and_the_whole_run_is_in_linked_parts() {
    let (m, ev) = big(100_000);
    let began = std::time::Instant::now();
    let pages = super::html::render_html_all(&m, &ev);
    eprintln!(
        "{} events: {} pages, {} bytes, in {:?}",
        ev.len(),
        pages.len(),
        pages.iter().map(|(_, h)| h.len()).sum::<usize>(),
        began.elapsed()
    );
    let (name, html) = &pages[0];
    assert_eq!(name, "report.html");
    // Every fault of the run is in the report's own diagram.
    let faults: Vec<usize> = ev.iter().enumerate().filter(|(_, e)| is_fault(&e.kind)).map(|(i, _)| i).collect();
    assert!(faults.len() >= 40, "{} faults", faults.len());
    for i in &faults {
        assert!(html.contains(&format!("id=\"ev{i}\"")), "fault #{i} not in the diagram");
    }
    assert!(!html.contains("not in the diagram window"));
    // The left-out stretches link into the parts, and the parts hold every
    // row once, each linked to its neighbours.
    let parts = &pages[1..];
    assert!(parts.len() >= 2, "{} parts", parts.len());
    assert!(html.contains("rows elided (") && html.contains("href=\"report-parts/part-"), "gap links");
    for (k, (name, part)) in parts.iter().enumerate() {
        assert_eq!(name, &format!("report-parts/part-{:03}.html", k + 1));
        check_html(part).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(part.len() < 2_000_000, "{name}: {} bytes", part.len());
        assert!(part.contains("href=\"../report.html\""));
        if k + 1 < parts.len() {
            assert!(part.contains(&format!("href=\"part-{:03}.html\">next", k + 2)), "{name}: no next");
        }
    }
    let rows: usize = parts.iter().map(|(_, p)| count(p, "<div id=\"row")).sum();
    assert!(html.contains(&format!("{rows} rows; showing 1500")), "the parts hold every row once");
    assert!(html.contains(&format!("is in {} parts", parts.len())));
}

#[test]
fn node_number_reads_a_name_or_n_and_a_node_number_only() {
    let m = ReportMeta { node_names: vec!["db".into(), "n7".into()], ..Default::default() };
    assert_eq!(node_number(&m, "db"), Some(node(1)));
    // A configured name wins over the n<number> form.
    assert_eq!(node_number(&m, "n7"), Some(node(2)));
    assert_eq!(node_number(&m, "n3"), Some(node(3)));
    assert_eq!(node_number(&m, "n254"), Some(node(254)));
    for bad in ["n03", "n+3", "n-3", "n0", "n", "n3x", "n 3", "3", "N3", "n255", "n65536", "host", ""] {
        assert_eq!(node_number(&m, bad), None, "{bad:?}");
    }
}
