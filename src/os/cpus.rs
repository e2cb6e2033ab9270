//! How many CPUs this process may use: the default thread count of the pools on the `std`
//! platform (`Config::max_threads` = 0, for Rust and C pools alike: `Spawner::available_parallelism`).
//!
//! On Linux it is read from the kernel's own files, by this module's parsers:
//! * the calling thread's affinity mask: `Cpus_allowed_list` in `/proc/thread-self/status`
//!   (`/proc/self/status` on kernels before 3.17);
//! * the CPU quota of the process's cgroup and of each of its ancestors up to the hierarchy's
//!   mount (a parent's limit binds its children): cgroup v2 `cpu.max` ("QUOTA PERIOD" or
//!   "max PERIOD"), cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: no limit), both
//!   where a hybrid system mounts both; the mounts found in `/proc/self/mountinfo`, the
//!   process's place in each hierarchy in `/proc/self/cgroup`.
//!
//! The count is the smaller of the mask's CPUs and the tightest quota as whole CPUs
//! (`floor(quota / period)`), and at least 1. Where the mask cannot be read (not Linux, no
//! `/proc`) `std::thread::available_parallelism` stands in for it; where no quota can be read,
//! none applies.
//!
//! Invariants: the result is never 0; no file content, however malformed, panics (a line or a
//! file that does not parse counts as absent); the files read are bounded by the depth of the
//! cgroup paths. The walk and the parsers read through [`Files`], so the tests run them on
//! trees of cgroup files held in memory.

use alloc::string::String;

/// Reads a whole file; `None` if it cannot be read.
pub(crate) trait Files {
    fn read(&self, path: &str) -> Option<String>;
}

/// The real filesystem.
struct Fs;

impl Files for Fs {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// The default thread count (module docs): read afresh at each call.
pub(crate) fn available_parallelism() -> usize {
    let mask = affinity(&Fs).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    limit(mask, quota(&Fs))
}

/// `cpus`, capped by a quota of whole CPUs, at least 1.
fn limit(cpus: usize, quota: Option<usize>) -> usize {
    quota.map_or(cpus, |q| cpus.min(q)).max(1)
}

/// The number of CPUs in the calling thread's affinity mask.
pub(crate) fn affinity(files: &impl Files) -> Option<usize> {
    let status = files.read("/proc/thread-self/status").or_else(|| files.read("/proc/self/status"))?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    cpu_list_len(list.trim())
}

/// The number of CPUs in a kernel CPU list ("0-3,8,10-11"); `None` if it does not parse or
/// names none.
pub(crate) fn cpu_list_len(list: &str) -> Option<usize> {
    let mut count = 0usize;
    for part in list.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let cpu = part.parse::<usize>().ok()?;
                (cpu, cpu)
            }
        };
        count = count.saturating_add(last.checked_sub(first)?.saturating_add(1));
    }
    (count > 0).then_some(count)
}

/// The tightest CPU quota, as whole CPUs (at least 1), over the cgroup v2 and v1 hierarchies
/// the process is in; `None` where none is set or none can be read.
pub(crate) fn quota(files: &impl Files) -> Option<usize> {
    let cgroups = files.read("/proc/self/cgroup")?;
    let mounts = files.read("/proc/self/mountinfo")?;
    let mut tightest: Option<usize> = None;
    for mount in mounts.lines().filter_map(Mount::parse) {
        let Some(version) = mount.version() else { continue };
        let Some(path) = cgroups.lines().find_map(|l| version.path_in(l)) else { continue };
        // The cgroup's directory under this mount; a path outside the mount's root (another
        // namespace's) is read at the mount itself.
        let rel = path.strip_prefix(mount.root.trim_end_matches('/')).filter(|r| r.is_empty() || r.starts_with('/'));
        let point = mount.point.trim_end_matches('/');
        let mut dir = String::from(point);
        dir.push_str(rel.map_or("", |r| r.trim_end_matches('/')));
        loop {
            if let Some(cpus) = version.read_quota(files, &dir) {
                tightest = Some(tightest.map_or(cpus, |t| t.min(cpus)));
            }
            if dir.len() <= point.len() {
                break;
            }
            match dir.rfind('/') {
                Some(i) if i >= point.len() => dir.truncate(i),
                _ => break,
            }
        }
    }
    tightest
}

/// A quota and its period, as whole CPUs: `floor(quota / period)`, at least 1.
fn whole_cpus(quota: u64, period: u64) -> Option<usize> {
    if quota == 0 || period == 0 {
        return None;
    }
    Some(usize::try_from(quota / period).unwrap_or(usize::MAX).max(1))
}

/// The two cgroup hierarchies.
#[derive(Clone, Copy)]
enum Version {
    V1,
    V2,
}

impl Version {
    /// The process's path in this hierarchy, from one line of `/proc/self/cgroup`
    /// ("ID:CONTROLLERS:PATH"; v2's line is "0::PATH", v1's names `cpu` among its controllers).
    fn path_in(self, line: &str) -> Option<&str> {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let mine = match self {
            Self::V2 => id == "0" && controllers.is_empty(),
            Self::V1 => controllers.split(',').any(|c| c == "cpu"),
        };
        mine.then_some(path)
    }

    /// The quota set on the cgroup directory `dir`, as whole CPUs; `None` for no limit.
    fn read_quota(self, files: &impl Files, dir: &str) -> Option<usize> {
        let file = |name: &str| files.read(&alloc::format!("{dir}/{name}"));
        match self {
            Self::V2 => {
                let max = file("cpu.max")?;
                let mut words = max.split_whitespace();
                let (quota, period) = (words.next()?, words.next()?);
                whole_cpus(quota.parse().ok()?, period.parse().ok()?)
            }
            Self::V1 => {
                // -1 (no limit) does not parse as u64.
                let quota = file("cpu.cfs_quota_us")?.trim().parse().ok()?;
                let period = file("cpu.cfs_period_us")?.trim().parse().ok()?;
                whole_cpus(quota, period)
            }
        }
    }
}

/// One line of `/proc/self/mountinfo`: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS..] - TYPE
/// SOURCE SUPER_OPTIONS".
struct Mount<'a> {
    root: String,
    point: String,
    fs_type: &'a str,
    super_options: &'a str,
}

impl<'a> Mount<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let (left, right) = line.split_once(" - ")?;
        let mut left = left.split(' ');
        let (root, point) = (left.nth(3)?, left.next()?);
        let mut right = right.split(' ');
        let (fs_type, _source, super_options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        Some(Mount { root: unescape(root), point: unescape(point), fs_type, super_options })
    }

    /// The hierarchy this mount holds, if it is one that carries a CPU quota.
    fn version(&self) -> Option<Version> {
        match self.fs_type {
            "cgroup2" => Some(Version::V2),
            "cgroup" if self.super_options.split(',').any(|o| o == "cpu") => Some(Version::V1),
            _ => None,
        }
    }
}

/// A mountinfo path with its octal escapes ("\040" for a space) decoded.
fn unescape(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = alloc::vec::Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let digits = bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match digits {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, b| v.wrapping_mul(8).wrapping_add(b - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
