//! The reader on trees of cgroup files held in memory (cgroup v1, v2, hybrid, nested limits,
//! no limit, containers, malformed files).

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};

use super::{affinity, cpu_list_len, limit, quota, unescape, Files};

/// A tree of files: path -> contents.
#[derive(Default)]
struct Tree(BTreeMap<String, String>);

impl Tree {
    fn with(mut self, path: &str, contents: &str) -> Self {
        self.0.insert(path.to_string(), contents.to_string());
        self
    }
}

impl Files for Tree {
    fn read(&self, path: &str) -> Option<String> {
        self.0.get(path).cloned()
    }
}

const V2_MOUNT: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
const V1_MOUNTS: &str = "\
25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory
";

fn v2(path: &str) -> Tree {
    Tree::default()
        .with("/proc/self/mountinfo", &alloc::format!("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n{V2_MOUNT}"))
        .with("/proc/self/cgroup", &alloc::format!("0::{path}\n"))
}

#[test]
fn cpu_lists() {
    assert_eq!(cpu_list_len("0"), Some(1));
    assert_eq!(cpu_list_len("0-3"), Some(4));
    assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
    assert_eq!(cpu_list_len("5-5"), Some(1));
    for bad in ["", "3-1", "a", "0-", "-2", "0,,1", "0-3 4"] {
        assert_eq!(cpu_list_len(bad), None, "{bad:?}");
    }
    assert_eq!(cpu_list_len("0-18446744073709551615"), Some(usize::MAX));
}

#[test]
fn affinity_from_status() {
    let status = "Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-1,4\nMems_allowed:\t1\n";
    assert_eq!(affinity(&Tree::default().with("/proc/thread-self/status", status)), Some(3));
    // Older kernels: the process's status.
    assert_eq!(affinity(&Tree::default().with("/proc/self/status", status)), Some(3));
    assert_eq!(affinity(&Tree::default()), None);
    assert_eq!(affinity(&Tree::default().with("/proc/thread-self/status", "Name:\tx\n")), None);
    assert_eq!(affinity(&Tree::default().with("/proc/thread-self/status", "Cpus_allowed_list:\tjunk\n")), None);
}

#[test]
fn v2_quota_as_whole_cpus_floor_at_least_one() {
    let tree = |max: &str| v2("/app").with("/sys/fs/cgroup/app/cpu.max", max);
    assert_eq!(quota(&tree("200000 100000\n")), Some(2));
    assert_eq!(quota(&tree("250000 100000\n")), Some(2));
    assert_eq!(quota(&tree("50000 100000\n")), Some(1));
    assert_eq!(quota(&tree("max 100000\n")), None);
    for bad in ["", "100000", "0 100000", "100000 0", "x y", "-1 100000"] {
        assert_eq!(quota(&tree(bad)), None, "{bad:?}");
    }
}

#[test]
fn v2_nested_limits_the_tightest_ancestor_binds() {
    let tree = v2("/a/b/c")
        .with("/sys/fs/cgroup/a/cpu.max", "300000 100000\n")
        .with("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n")
        .with("/sys/fs/cgroup/a/b/c/cpu.max", "800000 100000\n");
    assert_eq!(quota(&tree), Some(3));
    // The child tighter than its parent.
    let tree = tree.with("/sys/fs/cgroup/a/b/c/cpu.max", "150000 100000\n");
    assert_eq!(quota(&tree), Some(1));
    // A limit above the mount is not the process's.
    let tree = v2("/a").with("/sys/fs/cpu.max", "100000 100000\n");
    assert_eq!(quota(&tree), None);
}

#[test]
fn no_limit_anywhere() {
    assert_eq!(quota(&v2("/user.slice/session-1.scope").with("/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n")), None);
    assert_eq!(quota(&v2("/")), None);
    assert_eq!(quota(&Tree::default()), None);
    // No cgroup mount at all.
    let tree = Tree::default()
        .with("/proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
        .with("/proc/self/cgroup", "0::/\n");
    assert_eq!(quota(&tree), None);
}

#[test]
fn container_at_its_namespace_root() {
    // A cgroup namespace: the process sees itself at "/", the mount is its own cgroup.
    let tree = v2("/").with("/sys/fs/cgroup/cpu.max", "400000 100000\n");
    assert_eq!(quota(&tree), Some(4));
}

#[test]
fn v1_cfs_quota_and_its_ancestors() {
    let tree = Tree::default()
        .with("/proc/self/mountinfo", V1_MOUNTS)
        .with("/proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us", "350000\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
    assert_eq!(quota(&tree), Some(3));
    // The limit on the cgroup itself, tighter.
    let tree = tree.with("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "100000\n");
    assert_eq!(quota(&tree), Some(1));
    // A quota without its period is no quota.
    let tree = Tree::default()
        .with("/proc/self/mountinfo", V1_MOUNTS)
        .with("/proc/self/cgroup", "4:cpu,cpuacct:/x\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/x/cpu.cfs_quota_us", "100000\n");
    assert_eq!(quota(&tree), None);
}

#[test]
fn v1_mount_rooted_inside_the_hierarchy() {
    // Docker without a cgroup namespace: the mount's root is the container's cgroup, and the
    // process's path names it in full.
    let tree = Tree::default()
        .with("/proc/self/mountinfo", "40 35 0:30 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
        .with("/proc/self/cgroup", "3:cpu:/docker/abc/inner\n")
        .with("/sys/fs/cgroup/cpu/inner/cpu.cfs_quota_us", "200000\n")
        .with("/sys/fs/cgroup/cpu/inner/cpu.cfs_period_us", "100000\n");
    assert_eq!(quota(&tree), Some(2));
    // A path outside the mount's root (another namespace's): the mount itself is read.
    let tree = Tree::default()
        .with("/proc/self/mountinfo", "40 35 0:30 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
        .with("/proc/self/cgroup", "3:cpu:/elsewhere\n")
        .with("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "500000\n")
        .with("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    assert_eq!(quota(&tree), Some(5));
}

#[test]
fn hybrid_v1_and_v2_the_tighter_binds() {
    let mounts = alloc::format!("{V1_MOUNTS}33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    let tree = Tree::default()
        .with("/proc/self/mountinfo", &mounts)
        .with("/proc/self/cgroup", "4:cpu,cpuacct:/s\n0::/s\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/s/cpu.cfs_quota_us", "600000\n")
        .with("/sys/fs/cgroup/cpu,cpuacct/s/cpu.cfs_period_us", "100000\n")
        .with("/sys/fs/cgroup/unified/s/cpu.max", "200000 100000\n");
    assert_eq!(quota(&tree), Some(2));
}

#[test]
fn escaped_mount_points() {
    assert_eq!(unescape("/a\\040b"), "/a b");
    assert_eq!(unescape("/a\\\\b\\0"), "/a\\\\b\\0");
    let tree = Tree::default()
        .with("/proc/self/mountinfo", "30 23 0:26 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n")
        .with("/proc/self/cgroup", "0::/j\n")
        .with("/mnt/cg two/j/cpu.max", "300000 100000\n");
    assert_eq!(quota(&tree), Some(3));
}

#[test]
fn malformed_files_count_as_absent() {
    for (mountinfo, cgroup) in [
        ("", "0::/x\n"),
        ("garbage\n", "0::/x\n"),
        ("1 2 3 - cgroup2\n", "0::/x\n"),
        (V2_MOUNT, ""),
        (V2_MOUNT, "no colons\n"),
        (V2_MOUNT, "0:x\n"),
    ] {
        let tree = Tree::default()
            .with("/proc/self/mountinfo", mountinfo)
            .with("/proc/self/cgroup", cgroup)
            .with("/sys/fs/cgroup/x/cpu.max", "100000 100000\n");
        assert_eq!(quota(&tree), None, "{mountinfo:?} {cgroup:?}");
    }
}

#[test]
fn the_count_is_the_mask_capped_by_the_quota_at_least_one() {
    assert_eq!(limit(8, None), 8);
    assert_eq!(limit(8, Some(2)), 2);
    assert_eq!(limit(2, Some(8)), 2);
    assert_eq!(limit(0, None), 1);
}

#[test]
fn this_build_machines_layout_hybrid_without_a_quota() {
    // /proc/self/mountinfo and /proc/self/cgroup of the machine this was written on: cgroup v1
    // controllers each on their own mount, v2 at `unified`, every path at its root.
    let mounts = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    let cgroups = "9:name=systemd:/\n4:memory:/process_api/998c\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    let tree = Tree::default()
        .with("/proc/self/mountinfo", mounts)
        .with("/proc/self/cgroup", cgroups)
        .with("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
        .with("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    assert_eq!(quota(&tree), None);
    // The same with a quota on the v1 cpu hierarchy's root.
    let tree = tree.with("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000\n");
    assert_eq!(quota(&tree), Some(1));
}
