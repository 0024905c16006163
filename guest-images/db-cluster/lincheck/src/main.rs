//! lincheck FILE: parse a JSON-lines history (or a console log holding one
//! between "@history begin" / "@history end") and check linearizability.
use checker::history::{History, Outcome};
use checker::linearizability::{check, CheckOptions, CheckResult};

fn main() {
    let path = std::env::args().nth(1).expect("usage: lincheck FILE");
    let text = std::fs::read_to_string(&path).expect("read");
    // Console logs prefix lines with "[  time] "; take what is between the markers.
    let mut body = String::new();
    let mut inside = !text.contains("@history begin");
    for line in text.lines() {
        let l = match line.find("] ") { Some(i) if line.starts_with('[') => &line[i + 2..], _ => line };
        if l.starts_with("@history begin") { inside = true; continue; }
        if l.starts_with("@history end") { inside = false; continue; }
        if inside && l.starts_with('{') { body.push_str(l); body.push('\n'); }
    }
    let h = History::from_json_lines(&body).unwrap_or_else(|e| { eprintln!("parse: {e}"); std::process::exit(2) });
    let ops = h.operations().unwrap_or_else(|e| { eprintln!("pairing: {e}"); std::process::exit(2) });
    let count = |o: Outcome| ops.iter().filter(|x| x.outcome == o).count();
    println!("events={} ops={} ok={} fail={} info={} pending={}", h.events.len(), ops.len(),
             count(Outcome::Ok), count(Outcome::Fail), count(Outcome::Info), count(Outcome::Pending));
    match check(&h, &CheckOptions::default()).expect("check") {
        CheckResult::Ok { keys, ops } => println!("linearizable: keys={keys} ops={ops}"),
        CheckResult::Violation(v) => { println!("NOT linearizable:\n{v}"); std::process::exit(1) }
        CheckResult::Unknown { key, steps } => { println!("unknown: key {key} after {steps} steps"); std::process::exit(3) }
    }
}
