"""Each patch in scripts/plants/shuttle/ re-creates a lost wake-up or hang of VERIFY.md's bug
table in today's code. For each: apply it (`git apply`), run the shuttle scenario its
`Scenario:` line names, expect a failure (a shuttle deadlock or a failed assertion, reported as
"FAILED at iteration N"), and revert it (`git apply -R`). Fails loudly when a patch no longer
applies, when the planted code does not build, or when a plant is not caught.

Usage: python3 scripts/plants/shuttle.py [NAME-SUBSTRING]   (POOL_SHUTTLE_SCALE: default 1)
"""
import glob, os, re, subprocess, sys, time

only = sys.argv[1] if len(sys.argv) > 1 else None
env = dict(os.environ, RUSTFLAGS="--cfg shuttle", POOL_SHUTTLE_SCALE=os.environ.get("POOL_SHUTTLE_SCALE", "1"))
results = []
for patch in sorted(glob.glob("scripts/plants/shuttle/*.patch")):
    name = os.path.basename(patch)[: -len(".patch")]
    if only and only not in name:
        continue
    header = open(patch).read().split("\ndiff --git", 1)[0]
    scenario = re.search(r"^Scenario: (\S+)", header, re.M).group(1)
    if subprocess.run(["git", "apply", "--check", patch], capture_output=True).returncode != 0:
        results.append((name, scenario, "STALE: the patch no longer applies"))
        print(f"STALE   {name}: the patch no longer applies", flush=True)
        continue
    subprocess.run(["git", "apply", patch], check=True)
    start = time.time()
    try:
        r = subprocess.run(
            ["cargo", "test", "--release", "--lib", "--target-dir", "target/shuttle", scenario, "--", "--test-threads=1", "--nocapture"],
            capture_output=True, text=True, env=env)
    finally:
        subprocess.run(["git", "apply", "-R", patch], check=True)
    out = r.stdout + r.stderr
    failed = re.search(r"^shuttle (\S+): ([^:\n]+): FAILED at iteration (\d+) of (\d+)", out, re.M)
    if r.returncode != 0 and failed:
        verdict = f"CAUGHT by {failed.group(1)} ({failed.group(2)}) at iteration {failed.group(3)} of {failed.group(4)}"
    elif "error[" in out or "could not compile" in out:
        verdict = "BROKEN: the planted code does not build"
    else:
        verdict = "MISSED: the scenario passed with the bug planted"
    results.append((name, scenario, verdict))
    print(f"{verdict.split(':')[0].split(' ')[0]:7} {name}: {verdict} [{time.time() - start:.0f} s]", flush=True)
print()
for name, scenario, verdict in results:
    print(f"| `{name}` | `{scenario}` | {verdict} |")
bad = [n for n, _, v in results if not v.startswith("CAUGHT")]
if bad:
    print(f"\nverify-plants: {len(bad)} plant(s) not caught: {', '.join(bad)}")
    sys.exit(1)
print(f"\nverify-plants: all {len(results)} plants caught")
