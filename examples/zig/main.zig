//! A Zig host for `pool`: a parallel quicksort of 10 million integers through the C API.
//!
//! * `struct task` (from pool.h, which build.zig translates into the module "pool") is embedded
//!   in a Zig struct, `SortTask`; the callback recovers the `SortTask` with @fieldParentPtr.
//! * Each task partitions its slice and submits the two halves as new tasks from inside the
//!   pool (`pool_submit_to` from a worker goes to that worker's own queue); slices under
//!   `cutoff` are sorted in place, sequentially.
//! * `pool_shutdown` is the completion barrier: it returns once every queued task, including
//!   those submitted by tasks, has run.
//!
//! Build and run from the repository root: `zig build run -Doptimize=ReleaseFast` (build.zig
//! builds libpool.a with cargo, translates pool.h and links both); `make test-zig` does that.
const std = @import("std");
const c = @import("pool");

const cutoff = 8192;

/// A unit of work: the pool's task header, embedded (not first), plus the slice to sort.
const SortTask = struct {
    items: []i32,
    pool: *c.struct_pool,
    task: c.struct_task,

    /// Allocates a task for `items` and submits it; sorts inline if either fails.
    fn spawn(pool: *c.struct_pool, items: []i32) void {
        const self = std.heap.c_allocator.create(SortTask) catch return sortSeq(items);
        self.* = .{ .items = items, .pool = pool, .task = .{ .next = null, .callback = run } };
        const rc = c.pool_submit_to(pool, &self.task);
        if (rc != c.POOL_OK) {
            std.heap.c_allocator.destroy(self);
            _ = failures.fetchAdd(1, .monotonic);
            sortSeq(items);
        }
    }

    /// The callback the pool calls, once, on one of its threads.
    fn run(t: [*c]c.struct_task) callconv(.c) void {
        const self: *SortTask = @fieldParentPtr("task", @as(*c.struct_task, t));
        const items = self.items;
        const pool = self.pool;
        std.heap.c_allocator.destroy(self); // the pool no longer touches the task
        if (items.len <= cutoff) return sortSeq(items);
        const mid = partition(items);
        spawn(pool, items[0..mid]);
        spawn(pool, items[mid + 1 ..]);
    }
};

var failures = std.atomic.Value(usize).init(0);

/// Lomuto partition around the median of three; returns the pivot's final index.
fn partition(items: []i32) usize {
    const last = items.len - 1;
    const m = items.len / 2;
    if (items[m] < items[0]) std.mem.swap(i32, &items[m], &items[0]);
    if (items[last] < items[0]) std.mem.swap(i32, &items[last], &items[0]);
    if (items[m] < items[last]) std.mem.swap(i32, &items[m], &items[last]);
    const pivot = items[last];
    var store: usize = 0;
    for (items[0..last]) |*x| {
        if (x.* < pivot) {
            std.mem.swap(i32, x, &items[store]);
            store += 1;
        }
    }
    std.mem.swap(i32, &items[store], &items[last]);
    return store;
}

/// Sequential quicksort with insertion sort for short runs (recursion on the smaller half).
fn sortSeq(items_in: []i32) void {
    var items = items_in;
    while (items.len > 24) {
        const mid = partition(items);
        if (mid < items.len - mid) {
            sortSeq(items[0..mid]);
            items = items[mid + 1 ..];
        } else {
            sortSeq(items[mid + 1 ..]);
            items = items[0..mid];
        }
    }
    var i: usize = 1;
    while (i < items.len) : (i += 1) {
        const x = items[i];
        var j = i;
        while (j > 0 and items[j - 1] > x) : (j -= 1) items[j] = items[j - 1];
        items[j] = x;
    }
}

const Timespec = extern struct { sec: isize, nsec: isize };
extern "c" fn clock_gettime(clock: c_int, ts: *Timespec) c_int;

fn nowSeconds() f64 {
    var ts: Timespec = .{ .sec = 0, .nsec = 0 };
    _ = clock_gettime(1, &ts); // CLOCK_MONOTONIC
    return @as(f64, @floatFromInt(ts.sec)) + @as(f64, @floatFromInt(ts.nsec)) * 1e-9;
}

pub fn main() !void {
    const n: usize = 10_000_000;
    const items = try std.heap.c_allocator.alloc(i32, n);
    defer std.heap.c_allocator.free(items);
    var state: u64 = 0x9E3779B97F4A7C15;
    var sum: i64 = 0;
    for (items) |*x| { // xorshift64*: reproducible input
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        x.* = @truncate(@as(i64, @bitCast(state *% 0x2545F4914F6CDD1D)));
        sum +%= x.*;
    }

    var config: c.struct_pool_config = undefined;
    c.pool_config_init(&config);
    var pool: ?*c.struct_pool = null;
    if (c.pool_create(&config, &pool) != c.POOL_OK) return error.PoolCreate;
    defer c.pool_destroy(pool);

    const t0 = nowSeconds();
    SortTask.spawn(pool.?, items);
    if (c.pool_shutdown(pool) != c.POOL_OK) return error.PoolShutdown; // waits for every task
    const elapsed = nowSeconds() - t0;

    var check: i64 = items[0];
    for (items[1..], 0..) |x, i| {
        if (items[i] > x) {
            std.debug.print("FAIL: not sorted at index {d}\n", .{i});
            return error.NotSorted;
        }
        check +%= x;
    }
    if (check != sum) return error.ElementsChanged;
    std.debug.print("zig: sorted {d} integers on the pool in {d:.3} s ({d} submit failures)\n", .{ n, elapsed, failures.load(.monotonic) });
}
