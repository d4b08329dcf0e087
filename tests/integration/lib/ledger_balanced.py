#!/usr/bin/env python3
"""ledger_balanced.py RUN [PUSHES]: the last ledger record of RUN/metrics.jsonl balances: every ps instance took as
many pushes as the workers saw it answer, and (with PUSHES, the pushes the workers made) each took between 0.9x and
1x of them. Prints the record; exits 1 naming the instance that does not balance."""
import json
import sys

run = sys.argv[1]
made = int(sys.argv[2]) if len(sys.argv) > 2 else None
led = []
for line in open(f"{run}/metrics.jsonl"):
    if line.strip():
        r = json.loads(line)
        if r.get("kind") == "ledger":
            led.append(r)
if not led:
    sys.exit("no ledger record in metrics.jsonl")
inst = led[-1].get("instances", [])
print(json.dumps(inst))
if not inst:
    sys.exit("the ledger names no instance")
for i in inst:
    applied, acked = i.get("applied"), i.get("acked")
    if applied != acked:
        sys.exit(f"instance {i.get('instance')}: {applied} pushes taken, {acked} answered")
    if made is not None and not 0.9 * made <= applied <= made:
        sys.exit(f"instance {i.get('instance')}: {applied} pushes taken of the {made} the workers made")
