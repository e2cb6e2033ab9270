"""Plants broken transitions of the waking protocol (`scheduler/sync_word.rs`,
`scheduler/seeking.rs`) one at a time and runs the exhaustive model (`every_reachable_state`,
`scheduler/protocol/`), which must fail for each, except the plants marked harmless (the model
finds no state where they strand a task; VERIFY.md says why). Fails loudly when a plant no longer
applies or a plant that must be caught is not.

Usage: python3 scripts/plants/protocol_table.py [INDEX | --apply-check]
  --apply-check: only check that every plant's line is still in its file (`make test`).
"""
import subprocess, sys
plants = [
 ("seeking: a leaving wait does not hand on the search it owes (the bug fixed in 410930e)", "src/scheduler/seeking.rs",
  "        } else if self.owes_search || own_tasks {", "        } else if own_tasks {"),
 ("seeking: the waking right is not handed on before running what was found", "src/scheduler/seeking.rs",
  "        let notify = (self.is_waking || self.owes_search || pushed).then_some(self.is_waking);", "        let notify = (self.owes_search || pushed).then_some(false);"),
 ("seeking: a search that found a task keeps the search it owes, for after the task (the bug fixed with the model's unreported leftovers)", "src/scheduler/seeking.rs",
  "        let notify = (self.is_waking || self.owes_search || pushed).then_some(self.is_waking);\n        self.is_waking = false;\n        self.owes_search = false;", "        let notify = (self.is_waking || pushed).then_some(self.is_waking);\n        self.is_waking = false;"),
 ("sync_word: a waking notify with nobody to wake keeps the right (no Pending)", "src/scheduler/sync_word.rs",
  "            Notify::Write(next.with_state(State::Pending), Wake::Nothing)", "            Notify::Write(next, Wake::Nothing)"),
 ("sync_word: an idle worker parks over a set `notified`", "src/scheduler/sync_word.rs",
  "        if !self.notified() && w.is_idle && !w.leaving && !w.local_work {", "        if w.is_idle && !w.leaving && !w.local_work {"),
 ("sync_word: a notify that could wake someone writes nothing when `notified` is set", "src/scheduler/sync_word.rs",
  "        let can_wake = is_waking || self.state() == State::Pending;", "        let can_wake = (is_waking || self.state() == State::Pending) && !self.notified();"),
 ("sync_word: consuming a notification does not uncount an idle worker", "src/scheduler/sync_word.rs",
  "            let next = if w.is_idle { next.dec_idle() } else { next };\n            return WaitStep::Write(next, WaitEnd::Notified", "            return WaitStep::Write(next, WaitEnd::Notified"),
 ("sync_word: a failed spawn keeps its Signaled", "src/scheduler/sync_word.rs",
  "        if self.state() == State::Signaled { next.with_state(State::Pending) } else { next }", "        next"),
 ("sync_word: a notify that unparks leaves the word Pending (no throttle)", "src/scheduler/sync_word.rs",
  "            Notify::Write(next.with_state(State::Signaled), Wake::Unpark)", "            Notify::Write(next, Wake::Unpark)"),
 ("sync_word: a waking worker going idle keeps the waking right", "src/scheduler/sync_word.rs",
  "        let next = if w.is_waking { next.with_state(State::Pending) } else { next };\n        if w.leaving {", "        if w.leaving {"),
 ("seeking: a worker parking outside the protocol (a surplus one) drops the search it owes", "src/scheduler/seeking.rs",
  "        (is_waking || owes_search || work_queued).then_some(is_waking)", "        (is_waking || work_queued).then_some(is_waking)"),
 ("seeking: a worker parking outside the protocol (a surplus one) keeps its waking right to itself", "src/scheduler/seeking.rs",
  "        (is_waking || owes_search || work_queued).then_some(is_waking)", "        (!is_waking && (owes_search || work_queued)).then_some(false)"),
 ("seeking: a worker parking outside the protocol (a surplus one) does not hand on the tasks it leaves in its queues", "src/scheduler/seeking.rs",
  "        (is_waking || owes_search || work_queued).then_some(is_waking)", "        (is_waking || owes_search).then_some(is_waking)"),
]
# Harmless: the next wait consumes the stale Signaled (no state strands a task).
HARMLESS = {"sync_word: a failed spawn keeps its Signaled"}
apply_check = sys.argv[1:] == ["--apply-check"]
only = int(sys.argv[1]) if len(sys.argv) > 1 and not apply_check else None
bad = []
for k, (name, path, a, b) in enumerate(plants):
    if only is not None and k != only: continue
    src = open(path).read()
    if a not in src:
        print(f"STALE: {name}: the planted line is gone from {path}", flush=True)
        bad.append(name)
        continue
    if apply_check:
        continue
    open(path, "w").write(src.replace(a, b, 1))
    try:
        r = subprocess.run(["cargo", "test", "--release", "--lib", "every_reachable_state"], capture_output=True, text=True)
        out = r.stdout + r.stderr
        caught = "FAILED" in out or "panicked" in out
        why = next((l for l in out.splitlines() if "Config {" in l), "")[:200]
        print(f"{'CAUGHT' if caught else 'MISSED'}: {name}\n    {why}", flush=True)
        if not caught and name not in HARMLESS:
            bad.append(name)
    finally:
        open(path, "w").write(src)
if bad:
    print(f"protocol plants: {len(bad)} stale or not caught: {bad}")
    sys.exit(1)
if apply_check:
    print(f"protocol plants: all {len(plants)} still apply")
else:
    print("protocol plants: every plant that must be caught was")
