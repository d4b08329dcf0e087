#!/usr/bin/env python3
"""Lists every skipped test of a CTest run and fails on a skip that this machine has no excuse for.

Usage: python3 scripts/ctest_skips.py JUNIT_XML   (written by `ctest --output-junit`)

A skip is a whole CTest test (status "notrun": a script exited 77, and its output holds "SKIP: REASON"), one
check of a script that went on ("SKIP-PART: REASON", lib.sh's skip_part), or one Criterion test inside a unit
suite that passed (its --verbose output holds "[SKIP] suite::test: REASON"; Criterion counts a skip as a pass). Each is printed with its reason. CI installs every tool and data set the
suite uses (scripts/install-deps.sh test), so a skip is allowed only when the reason names an environment in
ALLOWED below; any other skip (a tool or data set missing, a test's own "known bug" guard) exits 1.
"""
import re
import sys
import xml.etree.ElementTree as ET

# Environments a test may skip in, as the skip reasons word them. Nothing else excuses a skip.
ALLOWED = [
    # An unprivileged container or user: no CAP_NET_ADMIN (network namespaces), no private dockerd.
    ("not root", r"\bnot root\b|a private dockerd needs root"),
    # A chroot without the control-group file system: dockerd cannot run.
    ("chroot without cgroups", r"no cgroup file system"),
    # An unprivileged container: the docker engine runs but cannot make the namespaces a container, or the import
    # of an image's layer, needs ("Error creating mount namespace before pivot: operation not permitted").
    ("unprivileged container", r"docker engine cannot (start a container|import an image)"),
    # A kernel or container without network namespaces, bridges or veth pairs.
    ("no network namespaces", r"cannot create a network namespace|no bridge support|no veth support"),
    # A container whose hard open-file limit is itself low: a process cannot raise its soft limit past it, so a
    # connection flood beyond it cannot show the raise (test_conn_flood).
    ("low hard open-file limit", r"the hard open-file limit \(\d+\) is below"),
    # A kernel built without transparent huge pages, or with them set to "never": nothing to put back on them.
    ("no transparent huge pages", r"no transparent huge pages for this process"),
]

CRITERION_SKIP = re.compile(r"\[SKIP\] (\S+): (.*?)(?=\[====\]|\[RUN \]|\[PASS\]|\[FAIL\]|\[SKIP\]|$)", re.M)
SCRIPT_SKIP = re.compile(r"^SKIP: (.*)$", re.M)
PART_SKIP = re.compile(r"^SKIP-PART: (.*)$", re.M)  # one check of a test that went on (lib.sh's skip_part)


def skips(junit):
    """Yields (test, reason) for every skip in the run."""
    for case in ET.parse(junit).getroot().iter("testcase"):
        name, out = case.get("name"), case.findtext("system-out") or ""
        if case.get("status") == "notrun":
            found = SCRIPT_SKIP.findall(out)
            message = case.find("skipped").get("message", "") if case.find("skipped") is not None else ""
            yield name, found[-1] if found else "no SKIP line in its output (%s)" % message
        for reason in PART_SKIP.findall(out):
            yield "%s (one check)" % name, reason
        for test, reason in CRITERION_SKIP.findall(out):
            yield "%s %s" % (name, test), reason.strip()


def main():
    bad = 0
    listed = list(skips(sys.argv[1]))
    for test, reason in listed:
        env = next((env for env, pattern in ALLOWED if re.search(pattern, reason)), None)
        verdict = "allowed: %s" % env if env else "NOT ALLOWED: CI has no reason to skip it"
        print("SKIPPED %s: %s (%s)" % (test, reason, verdict))
        bad += env is None
    print("%d skipped, %d of them not allowed" % (len(listed), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
