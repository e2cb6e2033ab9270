"""Each patch in scripts/plants/tests/ re-creates a bug of VERIFY.md's table that an ordinary
test (not a shuttle scenario, not the protocol model) is there to catch. For each: apply it
(`git apply`), run the test its `Test: BINARY NAME` line names (`cargo test --release --test
BINARY NAME`), expect that test to fail, and revert it (`git apply -R`). Fails loudly when a
patch no longer applies, when the planted code does not build, or when a plant is not caught.

Usage: python3 scripts/plants/tests.py [NAME-SUBSTRING]
"""
import glob, os, re, subprocess, sys, time

only = sys.argv[1] if len(sys.argv) > 1 else None
results = []
for patch in sorted(glob.glob("scripts/plants/tests/*.patch")):
    name = os.path.basename(patch)[: -len(".patch")]
    if only and only not in name:
        continue
    header = open(patch).read().split("\ndiff --git", 1)[0]
    binary, test = re.search(r"^Test: (\S+) (\S+)", header, re.M).groups()
    if subprocess.run(["git", "apply", "--check", patch], capture_output=True).returncode != 0:
        results.append((name, test, "STALE: the patch no longer applies"))
        print(f"STALE   {name}: the patch no longer applies", flush=True)
        continue
    subprocess.run(["git", "apply", patch], check=True)
    start = time.time()
    try:
        r = subprocess.run(["cargo", "test", "--release", "--test", binary, test, "--", "--exact", test],
                           capture_output=True, text=True)
    finally:
        subprocess.run(["git", "apply", "-R", patch], check=True)
    out = r.stdout + r.stderr
    panic = re.search(r"panicked at [^\n]*\n([^\n]*)", out)
    if r.returncode != 0 and re.search(rf"^test {re.escape(test)} \.\.\. FAILED", out, re.M):
        verdict = f"CAUGHT by {binary}::{test}" + (f" ({panic.group(1).strip()})" if panic else "")
    elif "error[" in out or "could not compile" in out:
        verdict = "BROKEN: the planted code does not build"
    else:
        verdict = "MISSED: the test passed with the bug planted"
    results.append((name, test, verdict))
    print(f"{verdict.split(':')[0].split(' ')[0]:7} {name}: {verdict} [{time.time() - start:.0f} s]", flush=True)
print()
for name, test, verdict in results:
    print(f"| `{name}` | `{test}` | {verdict} |")
bad = [n for n, _, v in results if not v.startswith("CAUGHT")]
if bad:
    print(f"\nverify-plants (tests): {len(bad)} plant(s) not caught: {', '.join(bad)}")
    sys.exit(1)
print(f"\nverify-plants (tests): all {len(results)} plants caught")
