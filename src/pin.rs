//! Where on the host simcluster and its nodes run (`--pin`).
//!
//! The engine lets exactly one node run at a time, and while it runs,
//! simcluster waits for it; so an execution never has two busy processes,
//! and every grant, guest system call and page fault is a hand-off between
//! processes (simcluster, the node's kernel, the host process behind a
//! guest program). On one CPU each hand-off is a direct switch; spread over
//! several, each is a wake-up of an idle CPU. Where CPUID faulting is on
//! for guest programs, the host also rewrites a model-specific register
//! whenever a CPU switches between a task with faulting and one without,
//! idle included, and where the host is itself a virtual machine that
//! write is an exit. Measured here (2 cores, a virtualised host, 1000
//! fork+exec in one guest): 8.3 s spread, 4.7 s pinned.
//!
//! Pinning is a host matter only: it changes how fast, never what a guest
//! sees (the trace is the same pinned or not).

use std::fmt;
use std::str::FromStr;

/// `--pin`: which host CPU simcluster and its nodes share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pin {
    /// The CPU simcluster is running on when the run starts (among those
    /// it may use).
    #[default]
    Auto,
    /// No pinning: the host scheduler spreads the processes.
    Off,
    /// This CPU.
    Cpu(usize),
}

/// A `--pin` value that is none of the three.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not auto, off or a CPU number")]
pub struct BadPin(String);

impl FromStr for Pin {
    type Err = BadPin;
    fn from_str(s: &str) -> Result<Pin, BadPin> {
        match s {
            "auto" => Ok(Pin::Auto),
            "off" => Ok(Pin::Off),
            n => n.parse().map(Pin::Cpu).map_err(|_| BadPin(s.to_string())),
        }
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pin::Auto => f.write_str("auto"),
            Pin::Off => f.write_str("off"),
            Pin::Cpu(n) => write!(f, "{n}"),
        }
    }
}

/// A CPU that `--pin` named but this process may not use.
#[derive(Debug, thiserror::Error)]
#[error("--pin {cpu}: this process may not run on CPU {cpu} (allowed: {allowed:?})")]
pub struct NoSuchCpu {
    /// The CPU `--pin` named.
    pub cpu: usize,
    /// The CPUs this process may run on (its affinity mask).
    pub allowed: Vec<usize>,
}

/// The CPUs this thread may run on (its affinity mask), in order; empty
/// where the host does not say.
pub fn allowed() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the zeroed set we pass.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Pins the calling thread (and so every process it starts from now on:
/// children inherit the mask) to the CPU `pin` names. Returns that CPU;
/// `None` for [`Pin::Off`] or where the host refuses (then nothing
/// changed, and nothing needs to: pinning only saves time).
pub fn apply(pin: Pin) -> Result<Option<usize>, NoSuchCpu> {
    Ok(plan(pin, 1)?[0].filter(|&c| pin_thread(c)))
}

/// The CPU each of `jobs` jobs (a job: one execution at a time, with its
/// nodes) should run on: for [`Pin::Auto`], distinct CPUs this process may
/// use, starting with the one it runs on now, round-robin when there are
/// more jobs than CPUs; for a named CPU, that CPU for every job; nothing
/// for [`Pin::Off`]. Pins nothing itself (see [`pin_thread`]).
pub fn plan(pin: Pin, jobs: usize) -> Result<Vec<Option<usize>>, NoSuchCpu> {
    let allowed = allowed();
    let jobs = jobs.max(1);
    match pin {
        Pin::Off => Ok(vec![None; jobs]),
        Pin::Cpu(c) if !allowed.contains(&c) => Err(NoSuchCpu { cpu: c, allowed }),
        Pin::Cpu(c) => Ok(vec![Some(c); jobs]),
        Pin::Auto if allowed.is_empty() => Ok(vec![None; jobs]),
        Pin::Auto => {
            // SAFETY: no preconditions.
            let here = unsafe { libc::sched_getcpu() };
            let start = usize::try_from(here).ok().and_then(|c| allowed.iter().position(|&a| a == c)).unwrap_or(0);
            Ok((0..jobs).map(|j| Some(allowed[(start + j) % allowed.len()])).collect())
        }
    }
}

/// Pins the calling thread, and the processes it starts from now on, to
/// `cpu`. False where the host refuses.
pub fn pin_thread(cpu: usize) -> bool {
    // SAFETY: a zeroed set with one CPU, passed with its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!("auto".parse::<Pin>(), Ok(Pin::Auto));
        assert_eq!("off".parse::<Pin>(), Ok(Pin::Off));
        assert_eq!("1".parse::<Pin>(), Ok(Pin::Cpu(1)));
        assert!("fast".parse::<Pin>().unwrap_err().to_string().contains("fast"));
    }

    #[test]
    fn pinning_takes_effect_for_this_thread_and_its_children() {
        // In a thread of its own, so the test harness's other threads keep
        // their mask.
        std::thread::spawn(|| {
            let cpu = apply(Pin::Auto).unwrap().expect("this host lets a thread pin itself");
            assert_eq!(allowed(), vec![cpu]);
            let out = std::process::Command::new("sh")
                .args(["-c", "grep Cpus_allowed_list /proc/self/status"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text.split_whitespace().last(), Some(cpu.to_string().as_str()), "{text}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn jobs_get_distinct_cpus_while_there_are_enough() {
        let allowed = allowed();
        let cpus = plan(Pin::Auto, allowed.len()).unwrap();
        let mut got: Vec<usize> = cpus.iter().map(|c| c.unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, allowed);
        let more = plan(Pin::Auto, allowed.len() + 1).unwrap();
        assert_eq!(more[allowed.len()], more[0], "round-robin past the last CPU");
        assert_eq!(plan(Pin::Off, 3).unwrap(), vec![None; 3]);
        assert_eq!(plan(Pin::Cpu(allowed[0]), 2).unwrap(), vec![Some(allowed[0]); 2]);
    }

    #[test]
    fn a_cpu_out_of_reach_is_refused() {
        let e = apply(Pin::Cpu(libc::CPU_SETSIZE as usize - 1)).unwrap_err();
        assert!(e.to_string().contains("--pin"), "{e}");
    }
}
