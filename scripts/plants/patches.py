"""Each patch in scripts/plants/shuttle/ and scripts/plants/tests/ re-creates a bug of VERIFY.md's
table in today's code. For each: apply it (`git apply`), run the check its header names, expect
a failure, and revert it (`git apply -R`). The header's check is either
  `Scenario: NAME`: a shuttle scenario (`mod shuttle` beside the code), which must report
  "FAILED at iteration N" (a shuttle deadlock or a failed assertion); or
  `Test: BINARY NAME`: an ordinary test (`cargo test --release --test BINARY NAME`), which must
  fail; or
  `Command: COMMAND`: a shell command (for example a script that builds a program nobody here
  wrote on the library), which must fail with a line "FAILED" in its output.
Fails loudly when a patch no longer applies, when the planted code does not build, or when a
plant is not caught.

Usage: python3 scripts/plants/patches.py [NAME-SUBSTRING | --apply-check]   (POOL_SHUTTLE_SCALE: default 1)
  --apply-check: only check that every patch still applies (`make test`: a change that moves a
  planted line fails there, not at the next `make verify`).
"""
import glob, os, re, subprocess, sys, time

PATCHES = sorted(glob.glob("scripts/plants/shuttle/*.patch") + glob.glob("scripts/plants/tests/*.patch"))

def applies(patch):
    return subprocess.run(["git", "apply", "--check", patch], capture_output=True).returncode == 0

if sys.argv[1:] == ["--apply-check"]:
    stale = [p for p in PATCHES if not applies(p)]
    for p in stale:
        print(f"STALE   {p}: the patch no longer applies (rewrite it against today's code)")
    if stale:
        sys.exit(1)
    print(f"plants: all {len(PATCHES)} patches still apply")
    sys.exit(0)
only = sys.argv[1] if len(sys.argv) > 1 else None
shuttle_env = dict(os.environ, RUSTFLAGS="--cfg shuttle", POOL_SHUTTLE_SCALE=os.environ.get("POOL_SHUTTLE_SCALE", "1"))

def shuttle(scenario):
    """The command that runs a shuttle scenario, and what its failure looks like."""
    cmd = ["cargo", "test", "--release", "--lib", "--target-dir", "target/shuttle", scenario, "--", "--test-threads=1", "--nocapture"]
    def caught(out):
        m = re.search(r"^shuttle (\S+): ([^:\n]+): FAILED at iteration (\d+) of (\d+)", out, re.M)
        return m and f"CAUGHT by {m.group(1)} ({m.group(2)}) at iteration {m.group(3)} of {m.group(4)}"
    return cmd, shuttle_env, caught

def test(binary, name):
    """The command that runs one test of tests/BINARY.rs, and what its failure looks like."""
    cmd = ["cargo", "test", "--release", "--test", binary, name, "--", "--exact", name]
    def caught(out):
        if not re.search(rf"^test {re.escape(name)} \.\.\. FAILED", out, re.M):
            return None
        panic = re.search(r"panicked at [^\n]*\n([^\n]*)", out)
        return f"CAUGHT by {binary}::{name}" + (f" ({panic.group(1).strip()})" if panic else "")
    return cmd, os.environ, caught

def command(line):
    """A shell command, and what its failure looks like."""
    def caught(out):
        m = re.search(r"^.*FAILED.*$", out, re.M)
        return m and f"CAUGHT by `{line}` ({m.group(0).strip()})"
    return ["sh", "-c", line], os.environ, caught

results = []
for patch in PATCHES:
    name = os.path.basename(patch)[: -len(".patch")]
    if only and only not in name:
        continue
    header = open(patch).read().split("\ndiff --git", 1)[0]
    scenario = re.search(r"^Scenario: (\S+)", header, re.M)
    shell = re.search(r"^Command: (.+)$", header, re.M)
    if scenario:
        check = scenario.group(1)
        cmd, env, caught = shuttle(check)
    elif shell:
        check = shell.group(1)
        cmd, env, caught = command(check)
    else:
        check = " ".join(re.search(r"^Test: (\S+) (\S+)", header, re.M).groups())
        cmd, env, caught = test(*check.split())
    if not applies(patch):
        results.append((name, check, "STALE: the patch no longer applies"))
        print(f"STALE   {name}: the patch no longer applies", flush=True)
        continue
    subprocess.run(["git", "apply", patch], check=True)
    start = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    finally:
        subprocess.run(["git", "apply", "-R", patch], check=True)
    out = r.stdout + r.stderr
    if r.returncode != 0 and caught(out):
        verdict = caught(out)
    elif "error[" in out or "could not compile" in out:
        verdict = "BROKEN: the planted code does not build"
    else:
        verdict = "MISSED: the check passed with the bug planted"
    results.append((name, check, verdict))
    print(f"{verdict.split(':')[0].split(' ')[0]:7} {name}: {verdict} [{time.time() - start:.0f} s]", flush=True)
print()
for name, check, verdict in results:
    print(f"| `{name}` | `{check}` | {verdict} |")
bad = [n for n, _, v in results if not v.startswith("CAUGHT")]
if bad:
    print(f"\nverify-plants: {len(bad)} plant(s) not caught: {', '.join(bad)}")
    sys.exit(1)
print(f"\nverify-plants: all {len(results)} plants caught")
