//! Host memory a user-mode Linux node uses, from /proc.

/// Proportional set size of the processes in process group `pgid` (a
/// node's kernel process and the host processes backing guest address
/// spaces), in KiB; guest memory shared between them is counted once.
/// Processes that end while we look are skipped.
pub(super) fn group_pss_kib(pgid: i64) -> u64 {
    pss_kib_of(|pid| process_group(pid) == Some(pgid))
}

/// Proportional set size of a jailed node's processes, in KiB: those in
/// the pid namespace of `outer`'s child (the namespace's init, which is
/// not counted: a forked copy of simcluster, whose pages it shares).
pub(super) fn namespace_pss_kib(outer: i64) -> u64 {
    let children = std::fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).unwrap_or_default();
    let Some(init) = children.split_whitespace().next().and_then(|p| p.parse::<i64>().ok()) else { return 0 };
    let Ok(ns) = std::fs::read_link(format!("/proc/{init}/ns/pid")) else { return 0 };
    pss_kib_of(|pid| pid != init && std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|n| n == ns))
}

/// The summed `Pss:` of every process `counted` accepts, in KiB.
fn pss_kib_of(counted: impl Fn(i64) -> bool) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i64>().ok()))
        .filter(|&pid| counted(pid))
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .map(|roll| pss_kib(&roll))
        .sum()
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
