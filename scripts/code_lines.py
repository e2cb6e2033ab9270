#!/usr/bin/env python3
"""Code lines of a Rust source tree (issue 26, "Done means": src/'s code lines, not tests, not
comments): lines that are not blank and not comments, outside test code. Test code is a module or
item under a cfg that is false whenever `test`, `loom`, `shuttle`, `miri` or `doc` is off (for
example `#[cfg(test)] mod tests { .. }`, `#[cfg(all(test, loom))] mod loom;` and its file), and
the files of such modules. Attribute lines count as code.

Usage: python3 scripts/code_lines.py [SRC_DIR] [-d PER_FILE.json] [-v]
  prints the total; -d writes the per-file counts; -v lists the excluded files.
Compare two commits: git worktree add /tmp/base COMMIT && python3 scripts/code_lines.py /tmp/base/src
"""
import json, os, re, sys

def tokenize(s):
    return re.findall(r'\w+|"[^"]*"|[(),=]', s)
def parse(toks, i=0):
    t = toks[i]
    if t in ('all', 'any', 'not') and i + 1 < len(toks) and toks[i+1] == '(':
        args = []; i += 2
        while toks[i] != ')':
            a, i = parse(toks, i)
            args.append(a)
            if toks[i] == ',': i += 1
        return (t, args), i + 1
    if i + 2 < len(toks) and toks[i+1] == '=':
        return ('kv', t, toks[i+2]), i + 3
    return ('atom', t), i + 1
def ev(node, false_atoms=('test', 'loom', 'shuttle', 'miri', 'doc', 'docsrs', 'doctest')):
    k = node[0]
    if k == 'atom': return False if node[1] in false_atoms else None
    if k == 'kv': return None
    vals = [ev(a, false_atoms) for a in node[1]]
    if k == 'all':
        if any(v is False for v in vals): return False
        return True if all(v is True for v in vals) else None
    if k == 'any':
        if any(v is True for v in vals): return True
        return False if all(v is False for v in vals) else None
    if k == 'not':
        v = vals[0]; return None if v is None else (not v)
def test_only(attr):
    m = re.match(r'#\[cfg\((.*)\)\]\s*$', attr.strip())
    if not m: return False
    node, _ = parse(tokenize(m.group(1)))
    return ev(node) is False

root = next((a for a in sys.argv[1:] if not a.startswith("-") and sys.argv[sys.argv.index(a) - 1] != "-d"), "src")
TESTCFG = re.compile(r'#\[cfg\((?:all|any)?\(?[^\]]*\b(test|loom|shuttle)\b')
def mod_file(decl_file, name):
    d = os.path.dirname(decl_file)
    base = os.path.basename(decl_file)
    if base not in ('mod.rs', 'lib.rs', 'main.rs'):
        d = os.path.join(d, base[:-3])
    for cand in (os.path.join(d, name + '.rs'), os.path.join(d, name, 'mod.rs')):
        if os.path.exists(cand): return cand
    return None
files = []
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'): files.append(os.path.join(d, f))
excluded = set()
changed = True
while changed:
    changed = False
    for p in files:
        if p in excluded: continue
        lines = open(p).read().split('\n')
        for i, l in enumerate(lines):
            m = re.match(r'\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;', l)
            if not m: continue
            # attributes above
            j = i - 1; attrs = []
            while j >= 0 and lines[j].strip().startswith('#['):
                attrs.append(lines[j].strip()); j -= 1
            path_attr = [a for a in attrs if a.startswith('#[path')]
            if any(test_only(a) for a in attrs if a.startswith('#[cfg(')):
                if path_attr:
                    f = os.path.join(os.path.dirname(p), re.search(r'"([^"]+)"', path_attr[0]).group(1))
                else:
                    f = mod_file(p, m.group(3))
                if f and f not in excluded:
                    excluded.add(os.path.normpath(f)); changed = True
        # children of excluded mod.rs dirs
    for p in files:
        np = os.path.normpath(p)
        for e in list(excluded):
            if e.endswith('mod.rs') and np.startswith(os.path.dirname(e) + '/') and np not in excluded:
                excluded.add(np); changed = True
total = 0
per = {}
for p in files:
    if os.path.normpath(p) in excluded: continue
    before = total
    lines = open(p).read().split('\n')
    i = 0; in_block = False
    while i < len(lines):
        l = lines[i]; s = l.strip()
        if s.startswith('#[cfg(') and test_only(s) and i + 1 < len(lines) and re.match(r'\s*(pub(\([^)]*\))?\s+)?mod \w+\s*\{', lines[i+1]):
            depth = 0; j = i + 1
            while j < len(lines):
                depth += lines[j].count('{') - lines[j].count('}')
                if depth == 0 and '{' in ''.join(lines[i+1:j+1]): break
                j += 1
            i = j + 1; continue
        if s.startswith('#[cfg(') and test_only(s) and i + 1 < len(lines) and re.match(r'\s*(pub(\([^)]*\))?\s+)?(unsafe\s+)?(fn|impl|struct|enum|const|static|type|use)\b', lines[i+1]):
            # a test-only item: skip it (to its closing brace or semicolon)
            depth = 0; j = i + 1; opened = False
            while j < len(lines):
                depth += lines[j].count('{') - lines[j].count('}')
                opened = opened or '{' in lines[j]
                if (opened and depth == 0) or (not opened and lines[j].rstrip().endswith(';')): break
                j += 1
            i = j + 1; continue
        if in_block:
            if '*/' in s: in_block = False
            i += 1; continue
        if s.startswith('/*'):
            in_block = '*/' not in s; i += 1; continue
        if not s or s.startswith('//'):
            i += 1; continue
        total += 1; i += 1
    per[p] = total - before
if '-d' in sys.argv:

    json.dump(per, open(sys.argv[sys.argv.index('-d') + 1], 'w'))
if '-v' in sys.argv:
    for e in sorted(excluded): print('excluded', e)
print(total)
