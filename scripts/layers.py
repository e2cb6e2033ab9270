#!/usr/bin/env python3
"""The layer check: every dependency between the files of src/ goes down the layers of
ARCHITECTURE.md's module map (or stays in one layer without a cycle).

How it works:
  1. The module -> layer map is the markdown table under `## Module map` in ARCHITECTURE.md at
     the repository root: rows whose first cell is a backticked module path relative to the crate
     root (`scheduler`, `time::wheel`) and whose second cell is the layer (L1..L6). A file's layer
     is the layer of the longest entry that is a prefix (by `::` segments) of the file's module
     path; that entry is also the file's unit (for the cycle rules). The line
     `Extensible types: `A`, `B`` in that section names the types that a higher layer may add
     inherent methods to.
  2. Every .rs file reachable from src/lib.rs through `mod` items (`#[path]` honoured) is
     tokenized: comments (doc comments too), string and char literals go; items that exist only
     under cfg(test) (cfg evaluated with `test` false), `#[test]` fns, and cfg(loom)/cfg(shuttle)
     model modules named loom*/shuttle*/tests* are dropped.
  3. Every path into another module (use trees, inline `crate::`/`$crate::`/`super::`/`self::`
     paths, paths whose first segment is a name in scope in the module, names brought in by a glob,
     `name!` invocations of the crate's own macro_rules) is resolved to the file that defines the
     item, following re-exports (any `use` of the module named on the path, renames and globs).
     A re-export chain that ends outside the crate (the `sync` shim re-exporting loom or
     portable_atomic) resolves to the last crate file on the chain.
  4. Rules: [a] no import into a higher layer; [b] no cycle among units; [c] no cycle among the
     files of one unit; [d] lib.rs holds only mod, pub use, extern crate and attributes; [e] no
     file in src/ over 600 lines; [f] no inherent impl of a type defined in another top-level
     module (except an extensible type, from a higher layer); [g] no atomic, UnsafeCell or spin
     hint taken from core/std/portable_atomic/loom/shuttle outside the `sync` shim (so the loom
     and shuttle builds see every access); [map] every file is covered by an entry of the map.
Edges out of lib.rs and `mod` declarations are not dependencies.

Usage: python3 scripts/layers.py [--root DIR] [--edges] [--units] [--self-test]
Exit status: 0 clean, 1 a rule is broken, 2 the map or the tree cannot be read.
"""

import argparse
import bisect
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict

MAX_LINES = 600
# lib.rs items allowed besides mod / pub use / extern crate / attributes, by (kind, name).
LIB_EXCEPTIONS = {
    ("struct", "ReadmeDoctests"),  # cfg(doctest): includes README.md so its examples run as doc tests
}
MODEL_PREFIXES = ("loom", "shuttle", "tests")

KEYWORDS = frozenset(
    "as async await break const continue crate dyn else enum extern false fn for if impl in let loop "
    "match mod move mut pub ref return self Self static struct super trait true type unsafe use where "
    "while abstract become box do final macro override priv typeof unsized virtual yield try".split()
)
ITEM_KINDS = ("fn", "struct", "enum", "trait", "type", "const", "static")  # `union` is contextual
QUALIFIERS = frozenset(["unsafe", "async", "default", "auto", "safe"])
MODULE_LEVEL = ("root", "mod", "extern", "mmod")
STATEMENT_FRAMES = ("root", "mod", "extern", "mmod", "block", "assoc")


class MapError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Tokens. A token is a string: identifiers and punctuation as written; `"content` for a string
# literal; CHR for a char literal; `'name` for a lifetime or label; NUM for a number;
# `$name` / `$crate` for macro metavariables.

CHR = "'"
NUM = "0"
TOKEN_RE = re.compile(
    r"""(?P<ws>\s+)
      |(?P<lc>//[^\n]*)
      |(?P<bc>/\*)
      |(?P<raw>(?:br|cr|r)(?P<hashes>\#*)")
      |(?P<str>[bc]?")
      |(?P<chr>b?')
      |(?P<rawid>r\#[A-Za-z_][A-Za-z0-9_]*)
      |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<dollar>\$[A-Za-z_][A-Za-z0-9_]*)
      |(?P<num>[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?)
      |(?P<p3>\.\.\.|\.\.=)
      |(?P<p2>::|->|=>|!=|==|<=|>=|&&|\|\||\.\.)
      |(?P<p1>.)""",
    re.X | re.S,
)
STR_BODY_RE = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
CHAR_ESC_RE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)'", re.S)
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COMMENT_RE = re.compile(r"/\*|\*/")


class LexError(Exception):
    pass


def tokenize(text):
    """Returns (tokens, lines): comments dropped, literals replaced (see above)."""
    toks, lines = [], []
    nl = [i for i, c in enumerate(text) if c == "\n"]

    def line_of(pos):
        return bisect.bisect_right(nl, pos - 1) + 1 if nl else 1

    pos, n = 0, len(text)
    while pos < n:
        m = TOKEN_RE.match(text, pos)
        kind = m.lastgroup
        start = pos
        end = m.end()
        if kind in ("ws", "lc"):
            pos = end
            continue
        if kind == "bc":
            depth, p = 1, end
            while depth:
                c = COMMENT_RE.search(text, p)
                if not c:
                    raise LexError("unterminated block comment at line %d" % line_of(start))
                depth += 1 if c.group() == "/*" else -1
                p = c.end()
            pos = p
            continue
        if kind == "raw":
            close = '"' + m.group("hashes")
            e = text.find(close, end)
            if e < 0:
                raise LexError("unterminated raw string at line %d" % line_of(start))
            toks.append('"' + text[end:e])
            pos = e + len(close)
        elif kind == "str":
            s = STR_BODY_RE.match(text, end)
            if not s:
                raise LexError("unterminated string at line %d" % line_of(start))
            toks.append('"' + text[end:s.end() - 1])
            pos = s.end()
        elif kind == "chr":
            p = end
            if p < n and text[p] == "\\":
                s = CHAR_ESC_RE.match(text, p)
                if not s:
                    raise LexError("bad char literal at line %d" % line_of(start))
                toks.append(CHR)
                pos = s.end()
            elif p + 1 < n and text[p + 1] == "'":
                toks.append(CHR)
                pos = p + 2
            elif m.group() == "'" and p < n and (text[p].isalpha() or text[p] == "_"):
                s = IDENT_RE.match(text, p)
                if s:
                    toks.append("'" + s.group())  # lifetime or label
                    pos = s.end()
                else:  # a non-ASCII letter: a one-code-point char literal was handled above
                    toks.append("'")
                    pos = p
            else:
                e = text.find("'", p, p + 12)
                if e < 0:
                    toks.append("'")
                    pos = p
                else:
                    toks.append(CHR)
                    pos = e + 1
        elif kind == "rawid":
            name = m.group()[2:]
            toks.append(m.group() if name in KEYWORDS else name)
            pos = end
        elif kind == "num":
            toks.append(NUM)
            pos = end
        else:
            toks.append(m.group())
            pos = end
        lines.append(line_of(start))
    return toks, lines


def is_ident(t):
    return bool(t) and (t[0].isalpha() or t[0] == "_" or t.startswith("r#")) and t not in KEYWORDS


def is_name(t):
    """An identifier or a path keyword that can start or continue a path."""
    return is_ident(t) or t in ("crate", "super", "self", "Self", "$crate")


def match_close(toks, i):
    """Index of the bracket closing toks[i] (one of ( [ {), counting all three kinds."""
    depth = 0
    for k in range(i, len(toks)):
        t = toks[k]
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return k
    return len(toks) - 1


def skip_angle(toks, i):
    """Index after the `>` that closes the `<` at toks[i] (stops at ; { } on the way)."""
    depth = 0
    k = i
    while k < len(toks):
        t = toks[k]
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
            if depth == 0:
                return k + 1
        elif t in ("(", "["):
            k = match_close(toks, k)
        elif t in (";", "{", "}"):
            return k
        k += 1
    return k


# ----------------------------------------------------------------------------------------------
# cfg predicates, evaluated three-valued: atoms named in `false_atoms` are false, every other
# atom and key = "value" is unknown (None).

def parse_pred(toks, k):
    name = toks[k]
    k += 1
    if k < len(toks) and toks[k] == "(":
        args = []
        k += 1
        while k < len(toks) and toks[k] != ")":
            a, k = parse_pred(toks, k)
            args.append(a)
            if k < len(toks) and toks[k] == ",":
                k += 1
        return (name, args), k + 1
    if k < len(toks) and toks[k] == "=":
        return ("=", name), k + 2
    return ("atom", name), k


def eval_pred(p, false_atoms):
    """false_atoms: a set of atom names, or ALL (every atom and key = "value" false)."""
    kind, arg = p
    if kind == "atom":
        return False if false_atoms is ALL or arg in false_atoms else None
    if kind == "=":
        return False if false_atoms is ALL else None
    vals = [eval_pred(a, false_atoms) for a in arg]
    if kind == "all":
        return False if False in vals else (True if all(v is True for v in vals) else None)
    if kind == "any":
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if kind == "not":
        return None if not vals or vals[0] is None else not vals[0]
    return None


ALL = object()


def cfg_false(attrs, false_atoms, mentioning=None):
    """True when some cfg attribute is false once `false_atoms` are false (and, with
    `mentioning`, names one of those atoms)."""
    for a in attrs:
        if len(a) > 2 and a[0] == "cfg" and a[1] == "(":
            if mentioning is not None and not mentioning.intersection(a):
                continue
            try:
                p, _ = parse_pred(a, 2)
            except IndexError:
                continue
            if eval_pred(p, false_atoms) is False:
                return True
    return False


def is_test_attr(a):
    # #[test], #[bench], #[some::test]
    return bool(a) and (a[-1] in ("test", "bench") and (len(a) == 1 or a[-2] == "::"))


# ----------------------------------------------------------------------------------------------
# Pass 1: drop test-only items.

def item_head(toks, j):
    """Skips visibility and qualifiers from j; returns the index of the item keyword."""
    n = len(toks)
    if j < n and toks[j] == "pub":
        j += 1
        if j < n and toks[j] == "(":
            j = match_close(toks, j) + 1
    while j < n:
        t = toks[j]
        if t in QUALIFIERS and j + 1 < n and toks[j + 1] in (
            "fn", "impl", "trait", "unsafe", "async", "extern", "mod", "const", "auto", "safe", "static"
        ):
            j += 1
        elif t == "const" and j + 1 < n and toks[j + 1] in ("fn", "unsafe", "async", "extern"):
            j += 1
        elif t == "extern" and j + 1 < n and toks[j + 1].startswith('"') and j + 2 < n and toks[j + 2] in (
            "fn", "unsafe"
        ):
            j += 2
        elif t == "extern" and j + 1 < n and toks[j + 1] == "fn":
            j += 1
        else:
            break
    return j


def item_end(toks, j):
    """End (exclusive) of the item or statement starting at j."""
    n = len(toks)
    h = item_head(toks, j)
    kw = toks[h] if h < n else ""
    braced = kw in ("fn", "mod", "impl", "trait", "struct", "enum", "union", "macro_rules") or (
        kw == "extern" and h + 1 < n and (toks[h + 1] == "{" or toks[h + 1].startswith('"'))
    )
    if not braced and j < n and toks[j] == "{":
        return match_close(toks, j) + 1
    k = j
    while k < n:
        t = toks[k]
        if t in ("(", "[", "{"):
            close = match_close(toks, k)
            if t == "{" and braced:
                return close + 1
            k = close + 1
            continue
        if t == ";":
            return k + 1
        if t in (")", "]", "}"):
            return k
        if t == "," and not braced:
            return k
        k += 1
    return n


def strip_tests(toks, lines):
    """Returns (tokens, lines, skipped_mods, whole_file_is_test)."""
    out_t, out_l, skipped = [], [], []
    n = len(toks)
    i = 0
    seen_code = False
    while i < n:
        t = toks[i]
        if t == "#" and i + 2 < n and toks[i + 1] == "!" and toks[i + 2] == "[":
            e = match_close(toks, i + 2)
            a = toks[i + 3:e]
            if not seen_code and cfg_false([a], {"test"}):
                return [], [], [], True
            out_t.extend(toks[i:e + 1])
            out_l.extend(lines[i:e + 1])
            i = e + 1
            continue
        if t == "#" and i + 1 < n and toks[i + 1] == "[":
            j = i
            attrs = []
            while j + 1 < n and toks[j] == "#" and toks[j + 1] == "[":
                e = match_close(toks, j + 1)
                attrs.append(toks[j + 2:e])
                j = e + 1
            h = item_head(toks, j)
            is_mod = h + 1 < n and toks[h] == "mod" and is_ident(toks[h + 1])
            name = toks[h + 1] if is_mod else None
            skip = cfg_false(attrs, {"test"}) or any(is_test_attr(a) for a in attrs)
            if not skip and is_mod and name.startswith(MODEL_PREFIXES):
                # A test or model module: present only when test, loom or shuttle (or some other
                # cfg beside them, as in cfg(any(test, feature = "x"))) is on.
                skip = cfg_false(attrs, ALL, mentioning={"test", "loom", "shuttle"})
            if skip:
                end = item_end(toks, j)
                if is_mod:
                    skipped.append((name, lines[h], toks[h + 2] == ";" if h + 2 < n else True, attrs))
                i = end
                continue
            out_t.extend(toks[i:j])
            out_l.extend(lines[i:j])
            i = j
            continue
        seen_code = True
        out_t.append(t)
        out_l.append(lines[i])
        i += 1
    return out_t, out_l, skipped, False


# ----------------------------------------------------------------------------------------------
# The crate model.

class Module:
    def __init__(self, path, file, parent, child_dir, path_base):
        self.path = path              # tuple of names from the crate root
        self.file = file              # the FileInfo holding it
        self.parent = parent
        self.child_dir = child_dir    # where `mod x;` looks for x.rs / x/mod.rs
        self.path_base = path_base    # what a `#[path]` on a `mod x;` here is relative to
        self.children = {}            # name -> Module
        self.items = {}               # name -> (kind, line, FileInfo)
        self.imports = defaultdict(list)   # name -> [Import] (module-level `use`)
        self.globs = []               # [Import]
        self.local_imports = defaultdict(list)  # `use` inside fn bodies: name -> [Import]
        self.local_globs = []
        self.skipped = set()          # test / model modules dropped by pass 1
        self.enums = {}               # enum name -> set of variant names

    def name(self):
        return "::".join(self.path) or "crate"


class Import:
    __slots__ = ("module", "segs", "name", "glob", "line", "vis", "local")

    def __init__(self, module, segs, name, glob, line, vis, local):
        self.module, self.segs, self.name, self.glob = module, segs, name, glob
        self.line, self.vis, self.local = line, vis, local


class FileInfo:
    def __init__(self, rel, nlines):
        self.rel = rel
        self.nlines = nlines
        self.module = None
        self.model = False            # a test/model file: counted for size only
        self.paths = []               # (Module, segs, line, is_macro)
        self.macros = []              # (Module, name, line): bare `name!` invocations
        self.idents = []              # (Module, name, line): candidates for glob resolution
        self.impls = []               # (Module, segs, line)
        self.uses = []                # [Import] (leaves of use trees)
        self.macro_defs = set()       # macro_rules names defined in this file
        self.lib_items = []           # lib.rs only: (kind, name, vis, line)
        self.reached = False

    @property
    def is_lib(self):
        return self.module is not None and self.module.path == ()


class Crate:
    def __init__(self, root):
        self.root = root
        self.src = os.path.join(root, "src")
        self.files = {}               # rel -> FileInfo
        self.root_module = None
        self.warnings = []            # (rel, line, message)
        self.macro_files = defaultdict(list)  # macro name -> [FileInfo]

    def warn(self, rel, line, msg):
        self.warnings.append((rel, line, msg))


def rel_of(crate, path):
    return os.path.relpath(path, crate.root).replace(os.sep, "/")


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.decode("utf-8", "replace")


def count_lines(path):
    try:
        return len(read_text(path).splitlines())
    except OSError:
        return 0


def path_attr(attrs):
    for a in attrs:
        if len(a) == 3 and a[0] == "path" and a[1] == "=" and a[2].startswith('"'):
            return a[2][1:]
    return None


def load_module_file(crate, path, module_path, parent, declared_line=None):
    rel = rel_of(crate, path)
    fi = crate.files.get(rel)
    if fi is None:
        fi = FileInfo(rel, count_lines(path))
        crate.files[rel] = fi
    fi.reached = True
    base = os.path.basename(path)
    if base in ("mod.rs", "lib.rs") or parent is None:
        child_dir = os.path.dirname(path)
    else:
        child_dir = os.path.join(os.path.dirname(path), base[:-3])
    m = Module(module_path, fi, parent, child_dir, os.path.dirname(path))
    fi.module = m
    text = read_text(path)
    try:
        toks, lines = tokenize(text)
    except LexError as e:
        crate.warn(rel, 1, "cannot tokenize: %s" % e)
        return m
    parse_file(crate, fi, m, toks, lines)
    return m


def declare_file_module(crate, fi, module, name, line, attrs, model):
    p = path_attr(attrs)
    if p is not None:
        base = module.path_base if module.file.module is module else module.child_dir
        cands = [os.path.normpath(os.path.join(base, p))]
    else:
        cands = [os.path.join(module.child_dir, name + ".rs"), os.path.join(module.child_dir, name, "mod.rs")]
    for c in cands:
        if os.path.isfile(c):
            if model:
                rel = rel_of(crate, c)
                mf = crate.files.get(rel) or FileInfo(rel, count_lines(c))
                mf.model = True
                mf.reached = True
                mf.model_path = module.path + (name,)
                crate.files[rel] = mf
                return None
            child = load_module_file(crate, c, module.path + (name,), module, line)
            return child
    if not model:
        crate.warn(fi.rel, line, "no file for `mod %s;` (looked for %s)" % (
            name, ", ".join(rel_of(crate, c) for c in cands)))
    return None


class Frame:
    __slots__ = ("kind", "module", "depth", "expect_variant", "enum")

    def __init__(self, kind, module, enum=None):
        self.kind, self.module, self.depth, self.enum = kind, module, 0, enum
        self.expect_variant = kind == "enum"


def parse_use_tree(toks, lines, k, prefix, out):
    """Parses a use tree at k; appends (segs, name, glob, line) to out; returns the next index."""
    segs = list(prefix)
    if toks[k] == "::":
        segs.append("::")
        k += 1
    while True:
        t = toks[k]
        if t == "{":
            k += 1
            while toks[k] != "}":
                k = parse_use_tree(toks, lines, k, segs, out)
                if toks[k] == ",":
                    k += 1
                elif toks[k] != "}":
                    raise IndexError("bad use tree")
            return k + 1
        if t == "*":
            out.append((segs, None, True, lines[k]))
            return k + 1
        if is_name(t):
            segs.append(t)
            line = lines[k]
            k += 1
            if toks[k] == "::":
                k += 1
                continue
            path = segs
            name = segs[-1]
            if name == "self":
                path = segs[:-1]
                name = path[-1] if path else None
            if toks[k] == "as":
                alias = toks[k + 1]
                k += 2
                name = None if alias == "_" else alias
            out.append((path, name, False, line))
            return k
        raise IndexError("bad use tree")


def parse_file(crate, fi, root_mod, toks, lines):
    toks, lines, skipped, whole = strip_tests(toks, lines)
    if whole:
        fi.model = True
        return
    n = len(toks)
    stack = [Frame("root", root_mod)]
    i = 0
    stmt = True
    pending = None
    attrs = []
    is_lib = root_mod.path == () and root_mod.parent is None
    # Skipped (test / model) modules: known names, and files that are not analysed.
    skipped_by_line = {}
    for name, line, outline, sattrs in skipped:
        skipped_by_line.setdefault(line, []).append((name, outline, sattrs))

    # Attach skipped modules to the module whose frame holds them: done as we meet their line.
    skipped_lines = sorted(skipped_by_line)
    si = 0

    def flush_skipped(upto_line, module):
        nonlocal si
        while si < len(skipped_lines) and skipped_lines[si] <= upto_line:
            for name, outline, sattrs in skipped_by_line[skipped_lines[si]]:
                module.skipped.add(name)
                if outline:
                    declare_file_module(crate, fi, module, name, skipped_lines[si], sattrs, model=True)
            si += 1

    while i < n:
        t = toks[i]
        top = stack[-1]
        mod = top.module
        if si < len(skipped_lines):
            flush_skipped(lines[i], mod)
        # Attributes: collected, never scanned for paths.
        if t == "#" and i + 1 < n and (toks[i + 1] == "[" or (toks[i + 1] == "!" and i + 2 < n and toks[i + 2] == "[")):
            s = i + 1 if toks[i + 1] == "[" else i + 2
            e = match_close(toks, s)
            attrs.append(toks[s + 1:e])
            i = e + 1
            continue
        if top.kind == "enum" and top.depth == 0:
            if t == ",":
                top.expect_variant = True
            elif top.expect_variant and is_ident(t):
                top.enum.add(t)
                top.expect_variant = False
        if stmt and top.kind in STATEMENT_FRAMES and top.depth == 0 and t not in ("{", "}", ";"):
            module_level = top.kind in MODULE_LEVEL
            j = i
            vis = None
            if toks[j] == "pub":
                vis = "pub"
                if j + 1 < n and toks[j + 1] == "(":
                    e = match_close(toks, j + 1)
                    vis = "pub(" + " ".join(toks[j + 2:e]) + ")"
                    j = e
                j += 1
            h = item_head(toks, j)
            kw = toks[h] if h < n else ""
            line = lines[h] if h < n else lines[-1]
            if kw == "use":
                leaves = []
                try:
                    k = parse_use_tree(toks, lines, h + 1, [], leaves)
                    while toks[k] != ";":
                        k += 1
                except IndexError:
                    crate.warn(fi.rel, line, "cannot parse this use tree")
                    k = h + 1
                    while k < n and toks[k] != ";":
                        k += 1
                local = not module_level
                for segs, name, glob, lline in leaves:
                    imp = Import(mod, segs, name, glob, lline, vis, local)
                    fi.uses.append(imp)
                    if glob:
                        (mod.local_globs if local else mod.globs).append(imp)
                    elif name is not None:
                        (mod.local_imports if local else mod.imports)[name].append(imp)
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("use", None, vis, line))
                i = k + 1
                stmt, attrs, pending = True, [], None
                continue
            if kw == "extern" and h + 1 < n and toks[h + 1] == "crate":
                name = toks[h + 2] if h + 2 < n else ""
                k = h + 3
                if k < n and toks[k] == "as":
                    name = toks[k + 1]
                if module_level:
                    mod.items.setdefault(name, ("extern", line, fi))
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("extern crate", name, vis, line))
                while k < n and toks[k] != ";":
                    k += 1
                i = k + 1
                stmt, attrs, pending = True, [], None
                continue
            abi = h + 1 < n and toks[h + 1].startswith('"')
            if kw == "extern" and h + 2 < n and (toks[h + 1] == "{" or (abi and toks[h + 2] == "{")):
                pending = ("extern" if module_level else "block", None)
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("extern block", None, vis, line))
                i = h + 1 if toks[h + 1] == "{" else h + 2
                stmt = False
                continue
            if kw == "mod" and h + 2 < n and is_ident(toks[h + 1]):
                name = toks[h + 1]
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("mod", name, vis, line))
                if toks[h + 2] == ";":
                    if module_level:
                        child = declare_file_module(crate, fi, mod, name, line, attrs, model=False)
                        if child is not None:
                            mod.children[name] = child
                    i = h + 3
                    stmt, attrs, pending = True, [], None
                    continue
                if toks[h + 2] == "{":
                    if module_level:
                        p = path_attr(attrs)
                        base = mod.path_base if mod.file.module is mod else mod.child_dir
                        child_dir = os.path.join(mod.child_dir, name) if p is None else os.path.join(base, p)
                        child = Module(mod.path + (name,), fi, mod, child_dir, child_dir)
                        mod.children[name] = child
                        pending = ("mod", child)
                    else:
                        pending = ("block", None)
                    i = h + 2
                    stmt = False
                    continue
            if kw == "macro_rules" and h + 2 < n and toks[h + 1] == "!":
                name = toks[h + 2]
                fi.macro_defs.add(name)
                crate.macro_files[name].append(fi)
                if module_level:
                    mod.items.setdefault(name, ("macro", line, fi))
                if any(a and a[0] == "macro_export" for a in attrs):
                    crate.root_module.items.setdefault(name, ("macro", line, fi))
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("macro_rules", name, vis, line))
                pending = ("macro", None)
                i = h + 3
                stmt = False
                continue
            if kw == "impl":
                parse_impl(fi, mod, toks, lines, h)
                if is_lib and top.kind == "root":
                    fi.lib_items.append(("impl", None, vis, line))
                pending = ("assoc", None)
                i = h + 1
                stmt = False
                continue
            if kw in ITEM_KINDS or (kw == "union" and h + 2 < n and is_ident(toks[h + 1]) and toks[h + 2] in ("{", "<", "where")):
                name = toks[h + 1] if h + 1 < n else ""
                if module_level and is_ident(name):
                    mod.items.setdefault(name, (kw, line, fi))
                if is_lib and top.kind == "root":
                    fi.lib_items.append((kw, name, vis, line))
                if kw == "enum":
                    variants = mod.enums.setdefault(name, set()) if module_level else set()
                    pending = ("enum", variants)
                else:
                    pending = ({"fn": "block", "struct": "fields", "union": "fields", "trait": "assoc"}.get(kw), None)
                    if pending[0] is None:
                        pending = None
                i = h + 1 if is_ident(name) else h
                stmt = False
                # fall through to scan the tokens after the name normally
                t = toks[i]
                top = stack[-1]
            elif is_lib and top.kind == "root":
                fi.lib_items.append(("other", toks[h] if h < n else "", vis, line))
            if pending is None and module_level and is_name(t):
                # A macro invocation at item level: its braced body holds items of this module.
                k = i
                while k + 1 < n and is_name(toks[k]) and toks[k + 1] == "::":
                    k += 2
                if k + 1 < n and is_ident(toks[k]) and toks[k + 1] == "!":
                    pending = ("mmod", None)
        # Brackets and statement boundaries.
        if t == "{":
            if pending is not None and top.depth == 0 or pending is not None and pending[0] == "mmod":
                kind, extra = pending
            elif top.kind == "macro":
                kind, extra = "macro", None  # inside a macro_rules body: no items, paths only
            else:
                kind, extra = ("fields" if top.kind in ("enum", "fields") and top.depth == 0 else "block"), None
            if kind == "mod":
                frame = Frame("mod", extra)
            elif kind == "enum":
                frame = Frame("enum", mod, enum=extra)
            else:
                frame = Frame(kind, mod)
            stack.append(frame)
            pending = None
            stmt = True
            attrs = []
            i += 1
            continue
        if t == "}":
            if len(stack) > 1:
                stack.pop()
            top = stack[-1]
            if top.kind == "enum":
                top.expect_variant = False
            stmt, attrs = True, []
            if top.depth == 0:
                pending = None
            i += 1
            continue
        if t in ("(", "["):
            top.depth += 1
            stmt = False
            i += 1
            continue
        if t in (")", "]"):
            if top.depth > 0:
                top.depth -= 1
            i += 1
            continue
        if t == ";":
            if top.depth == 0:
                stmt, attrs, pending = True, [], None
            i += 1
            continue
        stmt = False
        # Paths.
        prev = toks[i - 1] if i > 0 else ""
        nxt = toks[i + 1] if i + 1 < n else ""
        if nxt == "::" and prev not in ("::", ".") and (t in ("crate", "$crate", "super", "self") or is_ident(t)):
            segs = [t]
            k = i + 1
            while k + 1 < n and toks[k] == "::" and is_name(toks[k + 1]):
                segs.append(toks[k + 1])
                k += 2
            is_macro = k < n and toks[k] == "!"
            fi.paths.append((mod, segs, lines[i], is_macro))
            i = k
            continue
        if is_ident(t) and prev not in ("::", "."):
            if nxt == "!" and t != "macro_rules":
                fi.macros.append((mod, t, lines[i]))
            elif nxt != ":":
                fi.idents.append((mod, t, lines[i]))
        i += 1
    if si < len(skipped_lines):
        flush_skipped(10 ** 9, stack[0].module)
    if len(stack) != 1 or stack[0].depth != 0:
        crate.warn(fi.rel, lines[-1] if lines else 1, "unbalanced brackets after the parse (%d open): its edges may be off"
                   % (len(stack) - 1 + stack[0].depth))


def parse_impl(fi, mod, toks, lines, h):
    """Records the self type of an inherent impl starting at toks[h] == 'impl'."""
    n = len(toks)
    k = h + 1
    if k < n and toks[k] == "<":
        k = skip_angle(toks, k)
    if k < n and toks[k] == "!":
        return
    start = k
    depth = 0
    end = None
    while k < n:
        t = toks[k]
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif t in ("(", "["):
            k = match_close(toks, k) + 1
            continue
        elif depth <= 0 and t in ("{", ";", "where"):
            end = k
            break
        elif depth <= 0 and t == "for" and not (k + 1 < n and toks[k + 1] == "<"):
            return  # a trait impl
        k += 1
    if end is None:
        return
    ty = toks[start:end]
    j = 0
    while j < len(ty) and (ty[j] in ("&", "mut", "dyn", "const", "*") or ty[j].startswith("'")):
        j += 1
    segs = []
    while j < len(ty) and is_name(ty[j]):
        segs.append(ty[j])
        if j + 2 < len(ty) and ty[j + 1] == "::" and is_name(ty[j + 2]):
            j += 2
        else:
            break
    if segs and segs != ["Self"]:
        fi.impls.append((mod, segs, lines[h]))


# ----------------------------------------------------------------------------------------------
# Resolution. A target is ("mod", Module) or ("item", Module, name, kind, FileInfo);
# EXT: outside the crate; SKIP: into a dropped test/model module; None: not found.

EXT = ("ext",)
SKIP = ("skip",)


class Resolver:
    def __init__(self, crate):
        self.crate = crate
        self.cache = {}
        self.active = set()

    def target_file(self, t):
        if t[0] == "mod":
            return t[1].file
        return t[4]

    def lookup(self, mod, name, local=False):
        key = (id(mod), name, local)
        if key in self.cache:
            return self.cache[key]
        if key in self.active:
            return None
        self.active.add(key)
        try:
            r = self._lookup(mod, name, local)
        finally:
            self.active.discard(key)
        self.cache[key] = r
        return r

    def _lookup(self, mod, name, local):
        if local and name in mod.local_imports:
            for imp in mod.local_imports[name]:
                r = self.resolve_import(imp)
                if r is not None:
                    return r
        if name in mod.children:
            return ("mod", mod.children[name])
        if name in mod.items:
            kind, _line, fi = mod.items[name]
            if kind == "extern":
                return EXT
            return ("item", mod, name, kind, fi)
        if name in mod.imports:
            for imp in mod.imports[name]:
                r = self.resolve_import(imp)
                if r is not None:
                    return r
        if name in mod.skipped:
            return SKIP
        globs = mod.globs + (mod.local_globs if local else [])
        for g in globs:
            src = self.resolve_segs(g.module, g.segs, local=g.local)
            if src is None or src in (EXT, SKIP):
                continue
            if src[0] == "mod":
                r = self.lookup(src[1], name)
                if r is not None and r not in (EXT,):
                    return r
            elif src[3] == "enum":
                variants = src[1].enums.get(src[2], ())
                if name in variants:
                    return src
        return None

    def resolve_import(self, imp):
        r = self.resolve_segs(imp.module, imp.segs, local=imp.local)
        if r is EXT and imp.segs and imp.segs[0] not in ("::",):
            # A re-export of something outside the crate: the dependency is on this file.
            return ("item", imp.module, imp.name, "re-export", imp.module.file)
        return r

    def resolve_segs(self, mod, segs, local=False):
        """Resolves a path as written in `mod`; see the target kinds above."""
        if not segs:
            return ("mod", mod)
        first = segs[0]
        i = 1
        if first == "::":
            return EXT
        if first in ("crate", "$crate"):
            cur = self.crate.root_module
        elif first == "self":
            cur = mod
        elif first == "super":
            cur = mod.parent
            while cur is not None and i < len(segs) and segs[i] == "super":
                cur = cur.parent
                i += 1
            if cur is None:
                return None
        elif first == "Self":
            return EXT
        else:
            r = self.lookup(mod, first, local)
            if r is None or r in (EXT, SKIP):
                return EXT if r is None else r
            if r[0] != "mod":
                return r
            cur = r[1]
        for j in range(i, len(segs)):
            r = self.lookup(cur, segs[j])
            if r is None or r in (EXT, SKIP):
                return r
            if r[0] != "mod":
                return r
            cur = r[1]
        return ("mod", cur)


# ----------------------------------------------------------------------------------------------
# Analysis.

class Edge:
    __slots__ = ("src", "line", "dst", "label", "how")

    def __init__(self, src, line, dst, label, how):
        self.src, self.line, self.dst, self.label, self.how = src, line, dst, label, how


def read_map(root):
    path = os.path.join(root, "ARCHITECTURE.md")
    try:
        text = read_text(path)
    except OSError as e:
        raise MapError("cannot read %s: %s" % (path, e))
    lines = text.splitlines()
    start = None
    for k, l in enumerate(lines):
        if re.match(r"^##\s+Module map\s*$", l):
            start = k
            break
    if start is None:
        raise MapError("ARCHITECTURE.md has no `## Module map` section")
    table = {}
    extensible = set()
    for k in range(start + 1, len(lines)):
        l = lines[k]
        if l.startswith("## ") or l.startswith("# "):
            break
        m = re.match(r"^\s*Extensible types:\s*(.*)$", l)
        if m:
            extensible.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", m.group(1)))
            continue
        if not l.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        m = re.match(r"^`(?:crate::)?([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)`$", cells[0])
        if not m:
            continue
        lm = re.match(r"^L([1-9])$", cells[1])
        if not lm:
            raise MapError("ARCHITECTURE.md:%d: layer of `%s` is %r, not L1..L9" % (k + 1, m.group(1), cells[1]))
        key = tuple(m.group(1).split("::"))
        if key in table:
            raise MapError("ARCHITECTURE.md:%d: `%s` is in the module map twice" % (k + 1, m.group(1)))
        table[key] = int(lm.group(1))
    if not table:
        raise MapError("ARCHITECTURE.md's `## Module map` has no rows")
    return table, extensible


def unit_of(table, path):
    best = None
    for k in range(len(path), 0, -1):
        if path[:k] in table:
            best = path[:k]
            break
    return best


def tarjan(nodes, succ):
    index, low, on, stack, sccs = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                sccs.append(sorted(comp))
    return sccs


def shortest_cycle(start, members, succ):
    """Nodes of a shortest cycle through start inside members (BFS)."""
    prev = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(succ.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path))
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


# [g] What only `src/sync/` may name: the atomics (so loom and shuttle see every access), the
# standard UnsafeCell and spin hint, and the crates behind the shim.
SYNC_ONLY = (("core", "sync", "atomic"), ("std", "sync", "atomic"), ("alloc", "sync", "atomic"),
             ("core", "cell", "UnsafeCell"), ("std", "cell", "UnsafeCell"), ("core", "hint", "spin_loop"),
             ("std", "hint", "spin_loop"), ("portable_atomic",), ("loom", "sync"), ("loom", "cell"),
             ("loom", "hint"), ("shuttle", "sync"), ("shuttle", "hint"))


def bypasses_sync(segs):
    segs = [s for s in segs if s != "::"]
    return any(tuple(segs[:len(p)]) == p for p in SYNC_ONLY)


class Result:
    def __init__(self):
        self.violations = []          # (rule, file, line, message)
        self.warnings = []
        self.edges = []
        self.files = {}
        self.unit_edges = {}
        self.layer = {}
        self.unit = {}
        self.info = []                # extra lines printed after a violation: (rule, file, line) -> [str]

    def rules(self):
        return sorted(set(v[0] for v in self.violations))


def analyze(root):
    table, extensible = read_map(root)
    crate = Crate(root)
    lib = os.path.join(crate.src, "lib.rs")
    if not os.path.isfile(lib):
        raise MapError("no src/lib.rs under %s" % root)
    # The root module exists before lib.rs is parsed (macro_export registers there).
    crate.root_module = None
    rel = rel_of(crate, lib)
    fi = FileInfo(rel, count_lines(lib))
    fi.reached = True
    crate.files[rel] = fi
    rootm = Module((), fi, None, os.path.dirname(lib), os.path.dirname(lib))
    fi.module = rootm
    crate.root_module = rootm
    try:
        toks, lines = tokenize(read_text(lib))
    except LexError as e:
        raise MapError("src/lib.rs: %s" % e)
    parse_file(crate, fi, rootm, toks, lines)

    res = Result()
    res.warnings = crate.warnings
    # Every file under src/: size, and .rs files nobody declared.
    for dirpath, dirnames, filenames in os.walk(crate.src):
        dirnames.sort()
        for f in sorted(filenames):
            p = os.path.join(dirpath, f)
            r = rel_of(crate, p)
            nl = crate.files[r].nlines if r in crate.files else count_lines(p)
            if nl > MAX_LINES:
                res.violations.append(("e", r, MAX_LINES + 1, "%d lines: over the limit of %d (one concern per file)"
                                       % (nl, MAX_LINES)))
            if f.endswith(".rs") and r not in crate.files:
                parts = os.path.relpath(p, crate.src).replace(os.sep, "/")[:-3].split("/")
                if parts[-1] == "mod":
                    parts = parts[:-1]
                ufi = FileInfo(r, nl)
                ufi.model = True
                ufi.model_path = tuple(parts)
                crate.files[r] = ufi
                # A file of a model module's folder (`scheduler/shuttle/sleep.rs`) is dropped with it.
                if not any(part.startswith(MODEL_PREFIXES) for part in parts[:-1]):
                    res.warnings.append((r, 1, "not reached from src/lib.rs by any `mod` item: not analysed"))

    def path_of(f):
        if f.module is not None:
            return f.module.path
        return getattr(f, "model_path", ())

    for r, f in sorted(crate.files.items()):
        p = path_of(f)
        if p == ():
            continue
        u = unit_of(table, p)
        if u is None:
            res.violations.append(("map", r, 1, "no entry of ARCHITECTURE.md's module map covers module `%s`" % "::".join(p)))
            continue
        res.unit[r] = u
        res.layer[r] = table[u]
    used_keys = set(res.unit.values())
    for key in sorted(table):
        if key not in used_keys:
            res.warnings.append(("ARCHITECTURE.md", 1, "module map entry `%s` covers no file" % "::".join(key)))

    # Edges.
    rv = Resolver(crate)
    seen = set()

    def add(src, line, t, label, how):
        if t is None or t in (EXT, SKIP):
            return
        dst = rv.target_file(t)
        if dst is src or dst.model:
            return
        key = (src.rel, line, dst.rel)
        if key in seen:
            return
        seen.add(key)
        res.edges.append(Edge(src.rel, line, dst.rel, label, how))

    def warn_unresolved(f, line, segs, what):
        res.warnings.append((f.rel, line, "cannot resolve %s `%s`" % (what, "::".join(segs))))

    for r, f in sorted(crate.files.items()):
        if f.model or f.module is None or f.is_lib:
            continue
        for imp in f.uses:
            if imp.glob:
                t = rv.resolve_segs(imp.module, imp.segs, local=imp.local)
                if t is None:
                    if imp.segs and imp.segs[0] in ("crate", "$crate", "super", "self"):
                        warn_unresolved(f, imp.line, imp.segs + ["*"], "use")
                    continue
                if t in (EXT, SKIP):
                    continue
                if t[0] == "item" or (imp.vis is not None and imp.vis != "pub(self)"):
                    add(f, imp.line, t, "::".join(imp.segs) + "::*", "use")
                continue
            t = rv.resolve_segs(imp.module, imp.segs, local=imp.local)
            if t is None:
                if imp.segs and (imp.segs[0] in ("crate", "$crate", "super", "self") or
                                 rv.lookup(imp.module, imp.segs[0], imp.local) not in (None, EXT)):
                    warn_unresolved(f, imp.line, imp.segs, "use")
                continue
            add(f, imp.line, t, "::".join(imp.segs), "use")
        for mod, segs, line, is_macro in f.paths:
            t = rv.resolve_segs(mod, segs, local=True)
            if t is None:
                if segs[0] in ("crate", "$crate", "super", "self") or rv.lookup(mod, segs[0], True) not in (None, EXT):
                    warn_unresolved(f, line, segs, "path")
                continue
            add(f, line, t, "::".join(segs) + ("!" if is_macro else ""), "path")
        for mod, name, line in f.macros:
            if name in f.macro_defs:
                continue
            defs = [d for d in crate.macro_files.get(name, ()) if d is not f]
            if not defs:
                continue

            def closeness(d):
                a, b = d.module.path, f.module.path
                k = 0
                while k < min(len(a), len(b)) and a[k] == b[k]:
                    k += 1
                return (-k, d.rel)

            d = sorted(defs, key=closeness)[0]
            add(f, line, ("item", d.module, name, "macro", d), name + "!", "macro")
        globbed = set()
        for mod, name, line in f.idents:
            if not (mod.globs or mod.local_globs):
                continue
            if name in mod.items or name in mod.children or name in mod.imports or name in mod.local_imports:
                continue
            k = (id(mod), name)
            t = rv.lookup(mod, name, True)
            if t is None or t in (EXT, SKIP):
                continue
            if (k, rv.target_file(t).rel) in globbed:
                continue
            globbed.add((k, rv.target_file(t).rel))
            add(f, line, t, name + " (by glob)", "glob")

    res.files = crate.files

    # [a] upward imports.
    for e in res.edges:
        ls, ld = res.layer.get(e.src), res.layer.get(e.dst)
        if ls is None or ld is None:
            continue
        if ld > ls:
            res.violations.append(("a", e.src, e.line, "upward import: %s (L%d) -> %s (L%d): %s (%s)" % (
                "::".join(res.unit[e.src]), ls, "::".join(res.unit[e.dst]), ld, e.dst, e.label)))

    # [b] cycles among units.
    unit_edges = defaultdict(list)
    for e in res.edges:
        us, ud = res.unit.get(e.src), res.unit.get(e.dst)
        if us is None or ud is None or us == ud:
            continue
        unit_edges[(us, ud)].append(e)
    res.unit_edges = unit_edges
    usucc = defaultdict(set)
    for (a, b) in unit_edges:
        usucc[a].add(b)
    units = sorted(set(res.unit.values()))
    uname = lambda u: "::".join(u)
    for comp in tarjan(units, usucc):
        if len(comp) < 2:
            continue
        members = set(comp)
        cyc = shortest_cycle(comp[0], members, usucc)
        steps = []
        for k in range(len(cyc)):
            a, b = cyc[k], cyc[(k + 1) % len(cyc)]
            e = min(unit_edges[(a, b)], key=lambda e: (e.src, e.line))
            steps.append("%s -> %s (%s:%d -> %s)" % (uname(a), uname(b), e.src, e.line, e.dst))
        first = min(unit_edges[(cyc[0], cyc[1 % len(cyc)])], key=lambda e: (e.src, e.line))
        msg = "cycle among modules {%s}: %s" % (", ".join(uname(u) for u in comp), "; ".join(steps))
        extra = []
        for (a, b), es in sorted(unit_edges.items()):
            if a in members and b in members:
                es = sorted(es, key=lambda e: (e.src, e.line))
                sites = ", ".join("%s:%d -> %s (%s)" % (e.src, e.line, e.dst, e.label) for e in es[:3])
                more = " and %d more" % (len(es) - 3) if len(es) > 3 else ""
                extra.append("    %s -> %s: %s%s" % (uname(a), uname(b), sites, more))
        res.violations.append(("b", first.src, first.line, msg))
        res.info.append((("b", first.src, first.line), extra))

    # [c] cycles among the files of one unit.
    fsucc = defaultdict(set)
    fedge = {}
    for e in res.edges:
        us, ud = res.unit.get(e.src), res.unit.get(e.dst)
        if us is None or us != ud:
            continue
        fsucc[e.src].add(e.dst)
        key = (e.src, e.dst)
        if key not in fedge or e.line < fedge[key].line:
            fedge[key] = e
    by_unit = defaultdict(list)
    for r, u in res.unit.items():
        by_unit[u].append(r)
    for u, fl in sorted(by_unit.items()):
        for comp in tarjan(sorted(fl), fsucc):
            if len(comp) < 2:
                continue
            cyc = shortest_cycle(comp[0], set(comp), fsucc)
            steps = []
            for k in range(len(cyc)):
                a, b = cyc[k], cyc[(k + 1) % len(cyc)]
                e = fedge[(a, b)]
                steps.append("%s:%d -> %s (%s)" % (a, e.line, b, e.label))
            first = fedge[(cyc[0], cyc[1 % len(cyc)])]
            res.violations.append(("c", first.src, first.line, "cycle among the files of `%s` {%s}: %s" % (
                uname(u), ", ".join(comp), "; ".join(steps))))

    # [d] lib.rs holds only mod and pub use.
    for kind, name, vis, line in crate.root_module.file.lib_items:
        if kind in ("mod", "extern crate"):
            continue
        if kind == "use" and vis is not None and vis in ("pub", "pub(crate)"):
            continue
        if (kind, name) in LIB_EXCEPTIONS:
            continue
        what = "%s %s" % (kind, name) if name else kind
        if kind == "use":
            what = "a private use"
        res.violations.append(("d", crate.root_module.file.rel, line, "lib.rs holds only mod and pub use; here: %s" % what))

    # [f] inherent impls stay in their type's top-level module.
    for r, f in sorted(crate.files.items()):
        if f.model or f.module is None or f.is_lib:
            continue
        for mod, segs, line in f.impls:
            t = rv.resolve_segs(mod, segs, local=True) if len(segs) > 1 or segs[0] in ("crate", "super", "self") \
                else rv.lookup(mod, segs[0], True)
            if t is None or t in (EXT, SKIP) or t[0] != "item":
                continue
            tf = t[4]
            if tf is f or tf.model or tf.module is None or tf.is_lib:
                continue
            if tf.module.path[:1] == f.module.path[:1]:
                continue
            tname = t[2]
            if tname in extensible and res.layer.get(r, 0) > res.layer.get(tf.rel, 99):
                continue
            why = ""
            if tname in extensible:
                why = " (%s is extensible, but only from a higher layer: L%s here, L%s there)" % (
                    tname, res.layer.get(r, "?"), res.layer.get(tf.rel, "?"))
            res.violations.append(("f", r, line, "inherent impl of `%s` (defined in %s, module `%s`) outside its module%s" % (
                tname, tf.rel, tf.module.path[0], why)))

    # [g] atomics, cells and spin hints come from the `sync` shim only.
    for r, f in sorted(crate.files.items()):
        if f.model or f.module is None or res.unit.get(r, ("sync",))[:1] == ("sync",):
            continue
        found = [(imp.segs + ([imp.name] if imp.name and (not imp.segs or imp.segs[-1] != imp.name) else []), imp.line)
                 for imp in f.uses] + [(segs, line) for _, segs, line, _ in f.paths]
        for segs, line in sorted(found, key=lambda x: x[1]):
            if bypasses_sync(segs):
                res.violations.append(("g", r, line, "`%s` outside the `sync` shim: take it from `crate::sync`"
                                       % "::".join(segs)))

    res.violations.sort(key=lambda v: (["map", "a", "b", "c", "d", "e", "f", "g"].index(v[0]), v[1], v[2]))
    res.warnings.sort()
    return res


def report(res, args, out):
    info = dict(res.info)
    if args.edges:
        for e in sorted(res.edges, key=lambda e: (e.src, e.line, e.dst)):
            out.write("%s:%d -> %s (%s) [%s -> %s]\n" % (
                e.src, e.line, e.dst, e.label,
                "L%d" % res.layer[e.src] if e.src in res.layer else "-",
                "L%d" % res.layer[e.dst] if e.dst in res.layer else "-"))
    if args.units:
        units = sorted(set(res.unit.values()))
        for u in units:
            nfiles = sum(1 for r in res.unit if res.unit[r] == u)
            out.write("%s [L%d, %d file%s]\n" % ("::".join(u), res.layer[[r for r in res.unit if res.unit[r] == u][0]],
                                                 nfiles, "" if nfiles == 1 else "s"))
            for (a, b), es in sorted(res.unit_edges.items()):
                if a != u:
                    continue
                la, lb = res.layer[es[0].src], res.layer[es[0].dst]
                mark = "  UP" if lb > la else ""
                out.write("  -> %s [L%d] %d edge%s%s\n" % ("::".join(b), lb, len(es), "" if len(es) == 1 else "s", mark))
                for e in sorted(es, key=lambda e: (e.src, e.line)):
                    out.write("       %s:%d -> %s (%s)\n" % (e.src, e.line, e.dst, e.label))
    for rule, f, line, msg in res.violations:
        out.write("%s:%d: [%s] %s\n" % (f, line, rule, msg))
        for extra in info.get((rule, f, line), ()):
            out.write(extra + "\n")
    for f, line, msg in res.warnings:
        out.write("%s:%d: warning: %s\n" % (f, line, msg))
    counts = defaultdict(int)
    for v in res.violations:
        counts[v[0]] += 1
    nfiles = sum(1 for f in res.files.values() if not f.model)
    summary = "layers: %d files, %d edges, %d units" % (nfiles, len(res.edges), len(set(res.unit.values())))
    if res.violations:
        out.write("%s: FAIL (%s), %d warning%s\n" % (summary, ", ".join(
            "%s: %d" % (r, counts[r]) for r in ["map", "a", "b", "c", "d", "e", "f", "g"] if counts[r]),
            len(res.warnings), "" if len(res.warnings) == 1 else "s"))
    else:
        out.write("%s: OK, %d warning%s\n" % (summary, len(res.warnings), "" if len(res.warnings) == 1 else "s"))


# ----------------------------------------------------------------------------------------------
# Self-test: small crates, each with its own map.

BASE_MAP = """# test crate

## Module map

| module | layer |
|---|---|
| `error` | L1 |
| `sync` | L1 |
| `low` | L2 |
| `peer` | L2 |
| `side` | L2 |
| `sched` | L3 |
| `up` | L4 |

Extensible types: `Pool`
"""

BASE = {
    "ARCHITECTURE.md": BASE_MAP,
    "src/lib.rs": """//! A crate. `crate::up::Feature` in a doc comment is no dependency.
#![no_std]
extern crate alloc;
mod error;
pub(crate) mod sync;
mod low;
mod peer;
mod side;
mod sched;
pub mod up;

pub use error::Error;
pub use sched::Pool;
""",
    "src/error.rs": """/// An error.
#[derive(Debug)]
pub enum Error { Shutdown, Full }
""",
    "src/sync.rs": """#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicUsize;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::AtomicUsize;
#[macro_export]
macro_rules! pad { ($x:expr) => { $x }; }
""",
    "src/low/mod.rs": """mod ring;
mod slot;
pub(crate) use ring::Ring;
pub(crate) use slot::Slot;
""",
    "src/low/ring.rs": """use crate::Error;
use crate::sync::AtomicUsize;
/// Lifetimes and chars: 'a, '{', '\\'', b'"', r#"crate::up::Feature"#, "crate::sched::Inner".
pub(crate) struct Ring<'a> { head: AtomicUsize, buf: &'a [u8] }
impl<'a> Ring<'a> {
    pub(crate) fn push(&self) -> Result<(), Error> { let _c = '"'; let _s = "}"; Err(Error::Full) }
}
/* nested /* block */ crate::up::Feature */
#[cfg(test)]
mod tests {
    use crate::up::Feature;
    #[test]
    fn t() { let _ = crate::sched::Inner::new(); }
}
""",
    "src/low/slot.rs": """use super::Ring;
pub(crate) struct Slot<'a>(pub(crate) Option<Ring<'a>>);
""",
    "src/peer.rs": """use crate::low::Slot;
pub(crate) fn peek(_s: &Slot<'_>) -> usize { pad!(1) }
""",
    "src/side.rs": """use crate::low::Ring;
pub(crate) fn side(_r: &Ring<'_>) {}
""",
    "src/sched/mod.rs": """mod inner;
mod pool;
pub(crate) use inner::Inner;
pub use pool::Pool;
#[cfg(loom)]
mod loom_model;
""",
    "src/sched/inner.rs": """use crate::low::Ring;
use crate::peer;
pub(crate) struct Inner { n: usize }
impl Inner {
    pub(crate) fn new() -> Self { let _ = peer::peek; Inner { n: 0 } }
}
pub(crate) fn uses_ring(_r: &Ring<'_>) {}
""",
    "src/sched/pool.rs": """use super::Inner;
/// A pool.
pub struct Pool { inner: Inner }
impl Pool {
    /// New.
    pub fn new() -> Self { Pool { inner: Inner::new() } }
}
""",
    "src/sched/loom_model.rs": """use crate::up::Feature;
""",
    "src/up/mod.rs": """use crate::sched::{self, Pool};
use crate::Error;
/// A feature.
pub struct Feature;
impl Pool {
    /// A method a feature adds to an extensible type.
    pub fn feature(&self) -> Result<Feature, Error> { let _ = sched::Inner::new(); Ok(Feature) }
}
""",
}


def write_crate(base, files):
    for rel, text in files.items():
        p = os.path.join(base, rel)
        if text is None:
            if os.path.exists(p):
                os.remove(p)
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)


def self_test():
    failures = []
    tmp = tempfile.mkdtemp(prefix="layers-selftest-")

    def run(name, changes, expect_rules, check=None):
        d = os.path.join(tmp, name)
        files = dict(BASE)
        files.update(changes)
        write_crate(d, files)
        try:
            res = analyze(d)
        except Exception as e:  # noqa: BLE001 - a crash is a failed case
            failures.append("%s: analyze raised %r" % (name, e))
            return
        got = res.rules()
        ok = got == sorted(expect_rules)
        detail = ""
        if ok and check is not None:
            detail = check(res) or ""
            ok = not detail
        status = "ok  " if ok else "FAIL"
        print("self-test %s %-32s rules %s%s" % (status, name, ",".join(got) or "-", ("  " + detail) if detail else ""))
        if not ok:
            failures.append(name)
            for v in res.violations:
                print("    %s:%d: [%s] %s" % (v[1], v[2], v[0], v[3]))
            for w in res.warnings:
                print("    %s:%d: warning: %s" % w)

    def edges(res):
        return {(e.src, e.dst) for e in res.edges}

    def has_edge(src, dst):
        return lambda res: "" if (src, dst) in edges(res) else "no edge %s -> %s" % (src, dst)

    def no_edge_into(dst):
        return lambda res: "" if not [e for e in res.edges if e.dst == dst] else "edges into %s: %s" % (
            dst, ["%s:%d" % (e.src, e.line) for e in res.edges if e.dst == dst])

    def all_of(*checks):
        def check(res):
            for c in checks:
                d = c(res)
                if d:
                    return d
            return ""
        return check

    def no_warnings(res):
        return "" if not res.warnings else "warnings: %s" % res.warnings

    run("clean", {"src/low/slot.rs": BASE["src/low/slot.rs"] + "\n" * (600 - 2)}, [], all_of(
        no_warnings,
        has_edge("src/low/ring.rs", "src/error.rs"),
        has_edge("src/low/ring.rs", "src/sync.rs"),
        has_edge("src/peer.rs", "src/sync.rs"),           # pad! is #[macro_export]ed from sync.rs
        has_edge("src/sched/inner.rs", "src/low/ring.rs"),
        has_edge("src/sched/inner.rs", "src/peer.rs"),
        has_edge("src/up/mod.rs", "src/sched/inner.rs"),  # sched::Inner through an imported module
    ))
    run("upward import", {"src/side.rs": BASE["src/side.rs"] + "pub(crate) fn f() { crate::sched::Inner::new(); }\n"},
        ["a"], has_edge("src/side.rs", "src/sched/inner.rs"))
    run("cycle between modules", {"src/low/mod.rs": BASE["src/low/mod.rs"] + "use crate::peer::peek;\n"},
        ["b"], has_edge("src/low/mod.rs", "src/peer.rs"))
    run("cycle between files", {"src/low/ring.rs": BASE["src/low/ring.rs"].replace(
        "use crate::Error;", "use crate::Error;\nuse super::slot::Slot;")}, ["c"],
        has_edge("src/low/ring.rs", "src/low/slot.rs"))
    run("fn in lib.rs", {"src/lib.rs": BASE["src/lib.rs"] + "fn helper() {}\n"}, ["d"])
    run("601-line file", {"src/low/slot.rs": BASE["src/low/slot.rs"] + "\n" * (601 - 2)}, ["e"])
    run("impl Inner outside",
        {"src/up/mod.rs": BASE["src/up/mod.rs"] + "use crate::sched::Inner;\nimpl Inner { fn x(&self) {} }\n"},
        ["f"])
    run("extensible from below", {"src/side.rs": "use crate::sched::Pool;\nimpl Pool { pub(crate) fn y(&self) {} }\n"},
        ["a", "f"])
    run("re-export through lib.rs", {}, [], all_of(has_edge("src/low/ring.rs", "src/error.rs"),
                                                   has_edge("src/up/mod.rs", "src/error.rs")))
    run("super:: re-exported sibling", {}, [], has_edge("src/low/slot.rs", "src/low/ring.rs"))
    run("doc comment and string", {"src/error.rs": "/// See `crate::sched::Inner` and [`crate::up::Feature`].\n"
                                                   "pub enum Error { Shutdown, Full }\n"
                                                   "const _S: &str = \"crate::sched::Inner\";\n"
                                                   "// crate::up::Feature\n"},
        [], lambda res: "" if not [e for e in res.edges if e.src == "src/error.rs"] else "edges out of error.rs")
    run("cfg(test) module", {}, [], all_of(no_edge_into("src/up/mod.rs"), no_warnings))
    run("cfg(loom) model module", {}, [],
        lambda res: "" if not [e for e in res.edges if e.src == "src/sched/loom_model.rs"] else "model file has edges")
    run("unresolved crate path", {"src/peer.rs": BASE["src/peer.rs"] + "fn g() { crate::low::Missing::new(); }\n"}, [],
        lambda res: "" if any("crate::low::Missing" in w[2] for w in res.warnings) else "no warning")
    run("file outside the map", {"src/extra.rs": "pub(crate) fn e() {}\n",
                                 "src/lib.rs": BASE["src/lib.rs"] + "mod extra;\n"}, ["map"])
    run("glob re-export", {"src/low/mod.rs": "mod ring;\nmod slot;\npub(crate) use ring::*;\npub(crate) use slot::Slot;\n"},
        [], all_of(has_edge("src/low/mod.rs", "src/low/ring.rs"), has_edge("src/low/slot.rs", "src/low/ring.rs")))
    run("module file beside its dir", {"src/low/mod.rs": None, "src/low.rs": BASE["src/low/mod.rs"]}, [], all_of(
        no_warnings, has_edge("src/low/slot.rs", "src/low/ring.rs"), has_edge("src/low.rs", "src/low/ring.rs")))
    run("#[path] module", {"src/low/ring.rs": None, "src/low/ring_impl.rs": BASE["src/low/ring.rs"],
                           "src/low/mod.rs": '#[path = "ring_impl.rs"]\n' + BASE["src/low/mod.rs"]},
        [], all_of(no_warnings, has_edge("src/low/slot.rs", "src/low/ring_impl.rs")))
    run("use inside a fn body", {"src/side.rs": "pub(crate) fn f() { use crate::sched::Inner; let _ = Inner::new(); }\n"},
        ["a"], has_edge("src/side.rs", "src/sched/inner.rs"))
    run("path inside a macro call", {"src/side.rs": "pub(crate) fn f() -> usize { pad!(crate::sched::Inner::new().n) }\n"},
        ["a"], all_of(has_edge("src/side.rs", "src/sched/inner.rs"), has_edge("src/side.rs", "src/sync.rs")))
    run("cfg(any(test, ..)) tests module", {"src/side.rs": BASE["src/side.rs"] +
                                              '#[cfg(any(test, feature = "x"))]\nmod tests { use crate::up::Feature; }\n'
                                              "#[cfg(shuttle)]\nmod shuttle_model { use crate::up::Feature; }\n"
                                              "#[cfg(not(loom))]\nmod layout { use crate::Error; }\n"},
        [], all_of(no_edge_into("src/up/mod.rs"), has_edge("src/side.rs", "src/error.rs")))
    run("trait impl is not inherent", {"src/up/mod.rs": BASE["src/up/mod.rs"] +
                                       "use crate::sched::Inner;\nimpl core::fmt::Debug for Inner {\n"
                                       "    fn fmt(&self, _f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {\n"
                                       "        Ok(())\n    }\n}\n"},
        [])
    run("atomic outside sync", {"src/side.rs": BASE["src/side.rs"] +
                                "static N: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);\n"
                                "use std::sync::atomic::Ordering;\n"},
        ["g"], lambda res: "" if len([v for v in res.violations if v[0] == "g"]) == 3 else "not every path caught")
    run("super::super path", {"src/low/slot.rs": BASE["src/low/slot.rs"] +
                              "pub(crate) fn s() -> super::super::error::Error { super::super::error::Error::Full }\n"},
        [], has_edge("src/low/slot.rs", "src/error.rs"))
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("self-test: %d case%s failed: %s" % (len(failures), "" if len(failures) == 1 else "s", ", ".join(failures)))
        return 1
    print("self-test: every case behaves")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="repository root (default: the one holding this script)")
    ap.add_argument("--edges", action="store_true", help="print every resolved edge")
    ap.add_argument("--units", action="store_true", help="print the unit-level graph")
    ap.add_argument("--self-test", action="store_true", help="check the checker on small crates")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    try:
        res = analyze(args.root)
    except MapError as e:
        sys.stderr.write("layers: %s\n" % e)
        return 2
    report(res, args, sys.stdout)
    return 1 if res.violations else 0


if __name__ == "__main__":
    sys.exit(main())
