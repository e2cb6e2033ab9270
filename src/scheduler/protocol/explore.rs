//! The search of the waking protocol's model (`model.rs`): every reachable state of every
//! scenario, depth first, with the checks of each state and of each bottom strongly connected
//! component.

use std::collections::HashMap;
use std::vec::Vec;

use super::model::{Config, Event, Kind, Model, MAX_WORKERS};

/// Explores every state reachable in scenario `c` with `producers`' tasks, depth first,
/// keeping visited states as 64-bit fingerprints of their canonical form, and checks each:
/// its invariants (`check`); when nothing but running tasks' ends can happen, no lost wake-up
/// (`check_quiet`); when nothing at all can happen, every task ran (and, after shutdown,
/// every worker left). The search is Tarjan's, so it also finds every bottom strongly
/// connected component: a set of states the pool can cycle through for ever without a way
/// out (a livelock, or a wait that never ends) fails unless it is a single finished state.
/// On a failure it panics with the events that lead there (the DFS stack). Returns the
/// number of states.
fn explore(c: Config, producers: &[&[Kind]]) -> usize {
    use core::hash::{Hash, Hasher};
    struct Frame {
        model: Model,
        next: Vec<(Event, Model)>,
        taken: usize,
        index: u32,
        low: u32,
        /// An edge of this state leaves its component (to one already complete).
        exit: bool,
    }
    let fingerprint = |m: &Model| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.canonical().hash(&mut h);
        h.finish()
    };
    let total = Model::tasks_total(producers);
    // Per state: its DFS index, and whether it is still on the component stack.
    let mut seen: HashMap<u64, (u32, bool)> = HashMap::new();
    let mut components: Vec<(u64, bool)> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let fail = |stack: &Vec<Frame>, m: &Model, what: &str| -> ! {
        let events: Vec<_> = stack.iter().filter(|f| f.taken > 0).map(|f| std::format!("{:?}", f.next[f.taken - 1].0)).collect();
        panic!("{c:?} {producers:?}: {what} after:\n  {}\n{m:#?}", events.join("\n  "))
    };
    let visit = |stack: &mut Vec<Frame>, seen: &mut HashMap<u64, (u32, bool)>, components: &mut Vec<(u64, bool)>, m: Model| {
        if let Err(e) = m.check() {
            fail(stack, &m, &e);
        }
        let mut next = m.successors(&c);
        if next.is_empty() {
            if let Err(e) = m.check_quiet() {
                fail(stack, &m, &e);
            }
        }
        next.extend(m.task_ends(&c));
        if next.is_empty() {
            if let Err(e) = m.check_finished(&c, total) {
                fail(stack, &m, &e);
            }
        }
        let index = seen.len() as u32;
        seen.insert(fingerprint(&m), (index, true));
        components.push((fingerprint(&m), false));
        stack.push(Frame { model: m, next, taken: 0, index, low: index, exit: false });
    };
    visit(&mut stack, &mut seen, &mut components, Model::new(producers, &c));
    while let Some(top) = stack.last_mut() {
        if top.taken < top.next.len() {
            let w = top.next[top.taken].1;
            top.taken += 1;
            match seen.get(&fingerprint(&w)) {
                None => visit(&mut stack, &mut seen, &mut components, w),
                Some(&(index, true)) => top.low = top.low.min(index),
                Some(&(_, false)) => top.exit = true,
            }
            continue;
        }
        let done = stack.pop().expect("a frame");
        let fp = fingerprint(&done.model);
        let pos = components.iter().rposition(|&(f, _)| f == fp).expect("on the component stack");
        components[pos].1 = done.exit;
        if done.low == done.index {
            // The root of a component: pop it, and look for a way out.
            let members = components.split_off(pos);
            let exit = members.iter().any(|&(_, e)| e);
            for (f, _) in &members {
                seen.get_mut(f).expect("seen").1 = false;
            }
            let finished = members.len() == 1 && done.next.is_empty();
            if !exit && !finished {
                fail(&stack, &done.model, &std::format!("the pool can cycle through {} states for ever", members.len()));
            }
            if let Some(parent) = stack.last_mut() {
                parent.exit = true;
            }
        } else if let Some(parent) = stack.last_mut() {
            parent.low = parent.low.min(done.low);
        }
    }
    seen.len()
}

#[test]
fn every_reachable_state_of_up_to_three_workers_and_two_tasks() {
    use Kind::*;
    let scenarios: [&[&[Kind]]; 8] = [
        &[&[Plain]],
        &[&[Plain, Plain]],
        &[&[Plain, Plain, Plain]],
        &[&[Plain], &[Plain]],
        &[&[Wait]],
        &[&[Wait], &[Plain]],
        &[&[Waker]],
        &[&[Plain, Waker]],
    ];
    let mut states = 0;
    for max_threads in 1..=MAX_WORKERS as u32 {
        for spins in [false, true] {
            for shutdown in [false, true] {
                for producers in scenarios {
                    states += explore(Config { max_threads, spins, shutdown, resize: &[] }, producers);
                }
            }
        }
    }
    std::println!("{states} states explored");
}

/// A pool resized while it runs (`surplus.rs`): lowered, and lowered then raised again. `make
/// test` explores a pool of two (without the spin when raised again) and a pool of three
/// lowered and raised with two tasks (about 35 s); `make verify` (`POOL_PROTOCOL_FULL=1`) every
/// scenario below (313 M states, about 30 min).
#[test]
fn every_reachable_state_of_a_pool_resized_while_it_runs() {
    use Kind::*;
    let full = std::env::var_os("POOL_PROTOCOL_FULL").is_some();
    let scenarios: [&[&[Kind]]; 5] = [&[&[Plain]], &[&[Plain, Plain]], &[&[Plain], &[Plain]], &[&[Wait]], &[&[Plain, Waker]]];
    let resizes: [(u32, &[u32]); 4] = [(2, &[1]), (2, &[1, 2]), (3, &[2, 3]), (3, &[1])];
    let mut states = 0;
    for (max_threads, resize) in resizes {
        for spins in [false, true] {
            for shutdown in [false, true] {
                for producers in scenarios {
                    let quick = match max_threads {
                        2 => resize.len() == 1 || !spins,
                        _ => !spins && !shutdown && resize.len() == 2 && producers == [&[Plain, Plain]],
                    };
                    if full || quick {
                        states += explore(Config { max_threads, spins, shutdown, resize }, producers);
                    }
                }
            }
        }
    }
    std::println!("{states} states explored");
}
