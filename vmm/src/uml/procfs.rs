//! Host memory a user-mode Linux node uses, from /proc.

/// Proportional set size of the processes in process group `pgid` (a
/// node's kernel process and the host processes backing guest address
/// spaces), in KiB; guest memory shared between them is counted once.
/// Processes that end while we look are skipped.
pub(super) fn group_pss_kib(pgid: i64) -> u64 {
    let mut total = 0;
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        if process_group(pid) != Some(pgid) {
            continue;
        }
        if let Ok(roll) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
            total += pss_kib(&roll);
        }
    }
    total
}

/// Proportional set size of a jailed node's processes, in KiB: those in
/// the pid namespace of `outer`'s child (the namespace's init, which is
/// not counted: a forked copy of simcluster, whose pages it shares).
pub(super) fn namespace_pss_kib(outer: i64) -> u64 {
    let children = std::fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).unwrap_or_default();
    let Some(init) = children.split_whitespace().next() else { return 0 };
    let Ok(ns) = std::fs::read_link(format!("/proc/{init}/ns/pid")) else { return 0 };
    let mut total = 0;
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|p| *p != init && p.bytes().all(|b| b.is_ascii_digit())) else { continue };
        if std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_ref() != Some(&ns) {
            continue;
        }
        if let Ok(roll) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
            total += pss_kib(&roll);
        }
    }
    total
}

/// The process group of `pid`, from /proc/PID/stat.
fn process_group(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state ppid pgrp.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    after.split_whitespace().nth(2).and_then(|s| s.parse::<i64>().ok())
}

/// The `Pss:` line of an smaps_rollup, in KiB (0 without one).
fn pss_kib(smaps_rollup: &str) -> u64 {
    smaps_rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pss_is_read_from_smaps_rollup() {
        let roll = "00400000-7fff0000 ---p 00000000 00:00 0 [rollup]\nRss:  2048 kB\nPss:  1234 kB\n";
        assert_eq!(pss_kib(roll), 1234);
        assert_eq!(pss_kib("Rss: 1 kB\n"), 0);
    }

    #[test]
    fn this_process_has_a_group() {
        let me = std::process::id() as i64;
        // SAFETY: getpgrp has no preconditions.
        let pgrp = unsafe { libc::getpgrp() } as i64;
        assert_eq!(process_group(me), Some(pgrp));
    }
}
