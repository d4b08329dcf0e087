#!/usr/bin/env python3
"""The room rules of src/ (docs/design.md), checked on every #include.

Each folder of src/ is a room. A file includes tfx headers as "room/name.h"; the table below says which rooms
each room may use. A violation is printed as FILE:LINE: what and which rule, and the exit code is 1.

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
# A function shared beyond its file: public (tfx_) or room-private (the uv__ tier: ps__, ...).
SHARED = r"(?:tfx_|[a-z]+__)\w+"
DEFINE = re.compile(r"^[a-z][\w \*]*?\b(" + SHARED + r")\(", re.M)


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
            for fn in set(re.findall(r"\b(" + SHARED + r")\(", t)):
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
        ("nn/a.c", "int nn__a(void) { return tfx_b(); }\n", 1),  # the room-private tier counts too
    ]
    for path, text, want in cases:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            for room in ALLOWED:
                os.makedirs(os.path.join(src, room))
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
            with open(os.path.join(src, "nn", "b.c"), "w") as f:
                callee = "nn__a" if "nn__a" in text else "tfx_a"
                f.write(f"int tfx_b(void) {{ return {callee}(); }}\n" if "tfx_b" in text else "\n")
            got = len(list(violations(src))) + len(list(file_cycles(src)))
            if got != want:
                print(f"self-test: {path} with {text!r}: {got} violations, want {want}")
                return 1
    print(f"self-test: {len(cases)} cases as expected")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "src")
    bad = list(violations(os.path.normpath(src))) + list(file_cycles(os.path.normpath(src)))
    for line in bad:
        print(line)
    print(f"rooms: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
