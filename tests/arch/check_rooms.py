#!/usr/bin/env python3
"""The room rules of src/ (docs/design.md), checked on every #include and every room's README.

Each folder of src/ is a room. A file includes tfx headers as "room/name.h"; the table below says which rooms
each room may use. Each room has a README.md that names every .c and .h file of the room, so a reader finds each
file's line there. A violation is printed as FILE[:LINE]: what and which rule, and the exit code is 1.

Usage: check_rooms.py [SRC_DIR]     (default: the src/ beside this script's tests/ folder)
       check_rooms.py --self-test   (builds small trees with and without violations and checks the verdicts)
"""
import os
import re
import sys
import tempfile

# room -> the rooms it may include (besides itself). Lower rooms never name higher ones.
ALLOWED = {
    "common": set(),
    "config": {"common"},
    "net": {"common", "config"},  # curve.c reads the experiment's security options
    "nn": {"common", "config"},  # a model is built from the experiment's layer list
    "data": {"common", "config"},
    "observe": {"common", "data"},  # TensorBoard event files are TFRecord-framed (data/tfrecord.h)
    "store": {"common", "config", "nn"},
    "train": {"common", "config", "nn", "data"},
    "psclient": {"common", "config", "net", "nn"},
    "ps": {"common", "config", "net", "nn", "observe", "store"},
    "worker": {"common", "config", "net", "nn", "data", "train", "observe", "psclient"},
    "master": {"common", "config", "net", "nn", "data", "train", "observe", "store", "psclient"},
    "cli": {"common", "config", "net", "nn", "data", "train", "observe", "store", "psclient", "master"},
}
ROLES = {"ps", "worker", "master"}
TOP = "."  # src/tfx-node.c: main() dispatches to every role
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Functions other files may call: public (tfx_*) and room-private (libuv's uv__ tier: master__*, ps__*).
SHARED = r"(tfx_\w+|[a-z]+__\w+)"
DEFINE = re.compile(r"^[a-z][\w \*]*?\b" + SHARED + r"\(", re.M)


def room_of(src, path):
    rel = os.path.relpath(path, src)
    return rel.split(os.sep)[0] if os.sep in rel else TOP


def check_include(room, target, rooms):
    """The rule an include breaks, or None."""
    if target.endswith(".pb-c.h"):
        return None  # generated protobuf-c code from the build tree
    if "/" not in target:
        return f'"{target}" is not room-qualified: write "room/{target}"'
    to = target.split("/")[0]
    if to not in rooms:
        return f'"{target}" names no room of src/'
    if room == TOP or to == room:
        return None
    if target.endswith("_impl.h"):
        return f'"{target}" is private to {to}/'
    if room in ROLES and to in ROLES:
        return f"roles never include each other ({room} -> {to})"
    if room not in ALLOWED:
        return f"room {room}/ has no rule in tests/arch/check_rooms.py"
    if to not in ALLOWED[room]:
        may = ", ".join(sorted(ALLOWED[room])) or "nothing of tfx"
        return f'{room}/ may not include "{target}" ({room} may use: {may})'
    return None


def violations(src):
    rooms = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            room = room_of(src, path)
            with open(path, encoding="utf-8") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    why = m and check_include(room, m.group(1), rooms)
                    if why:
                        yield f"{os.path.relpath(path, os.path.dirname(src))}:{no}: {why}"


def readme_gaps(src):
    """Each room's README.md names every .c and .h file of the room (as a word: `pid.c`, src/net/pid.c)."""
    for room in sorted(os.listdir(src)):
        folder = os.path.join(src, room)
        if not os.path.isdir(folder):
            continue
        readme = os.path.join(folder, "README.md")
        if not os.path.isfile(readme):
            yield f"src/{room}: no README.md (it says what the room owns and names each of its files)"
            continue
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        for name in sorted(os.listdir(folder)):
            if name.endswith((".c", ".h")) and not re.search(r"(?<![\w-])" + re.escape(name) + r"(?!\w)", text):
                yield f"src/{room}/README.md: does not name {name} (one line on what it holds)"


def file_cycles(src):
    """Within a room, files call each other one way: a cycle of calls between its .c files is a violation."""
    for room in sorted(os.listdir(src)):
        folder = os.path.join(src, room)
        if not os.path.isdir(folder):
            continue
        text = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".c"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    text[name] = f.read()
        defined = {fn: name for name, t in text.items() for fn in DEFINE.findall(t)}
        calls = {name: set() for name in text}
        for name, t in text.items():
            for fn in set(re.findall(r"\b" + SHARED + r"\(", t)):
                if defined.get(fn, name) != name:
                    calls[name].add(defined[fn])
        yield from cycles_of(room, calls)


def cycles_of(room, calls):
    reported = set()
    for start in sorted(calls):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(calls[node]):
                if nxt == start and frozenset(path) not in reported:
                    reported.add(frozenset(path))
                    yield f"src/{room}: files call each other in a cycle: {' -> '.join(path + [start])}"
                elif nxt not in path and nxt > start:
                    stack.append((nxt, path + [nxt]))


def self_test():
    cases = [
        ("data/a.c", '#include "data/b.h"\n#include "common/err.h"\n', 0),
        ("data/a.c", '#include "train/step.h"\n', 1),
        ("common/a.c", '#include "net/net.h"\n', 1),
        ("ps/a.c", '#include "worker/worker.h"\n', 1),
        ("master/a.c", '#include "data/data_impl.h"\n', 1),
        ("nn/a.c", '#include "err.h"\n', 1),
        ("x.c", '#include "master/master.h"\n#include "tfx.pb-c.h"\n', 0),
        ("nn/a.c", "int tfx_a(void) { return tfx_b(); }\n", 1),  # with nn/b.c below: a cycle
        ("nn/a.c", "int nn__a(void) { return tfx_b(); }\n", 1),  # room-private names count too
    ]
    for path, text, want in cases:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            for room in ALLOWED:
                os.makedirs(os.path.join(src, room))
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
            with open(os.path.join(src, "nn", "b.c"), "w") as f:
                caller = text.split()[1].split("(")[0]  # a.c's function, which b.c calls back
                f.write(f"int tfx_b(void) {{ return {caller}(); }}\n" if "tfx_b" in text else "\n")
            got = len(list(violations(src))) + len(list(file_cycles(src)))
            if got != want:
                print(f"self-test: {path} with {text!r}: {got} violations, want {want}")
                return 1
    readmes = [  # (files of src/nn, its README, gaps wanted)
        (["a.c", "a.h"], "- `a.c`, `a.h`: the a.\n", 0),
        (["a.c", "pa.c"], "- `pa.c`: the pa.\n", 1),  # a.c is not named: pa.c does not count for it
        (["a.c", "a.h"], "- `a.c`: the a.\n", 1),
        (["a.c"], None, 1),
    ]
    for files, readme, want in readmes:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            os.makedirs(os.path.join(src, "nn"))
            for name in files:
                open(os.path.join(src, "nn", name), "w").close()
            if readme is not None:
                with open(os.path.join(src, "nn", "README.md"), "w") as f:
                    f.write(readme)
            got = len(list(readme_gaps(src)))
            if got != want:
                print(f"self-test: src/nn with {files} and README {readme!r}: {got} gaps, want {want}")
                return 1
    print(f"self-test: {len(cases) + len(readmes)} cases as expected")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "src")
    src = os.path.normpath(src)
    bad = list(violations(src)) + list(file_cycles(src)) + list(readme_gaps(src))
    for line in bad:
        print(line)
    print(f"rooms: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
