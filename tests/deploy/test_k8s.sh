#!/bin/bash
# Kubernetes manifests, checked as the cluster would use them (no cluster here): tests/deploy/k8s_check.py parses
# deploy/k8s/*.yaml with python3-yaml, runs plain.yaml's TF_CONFIG wrapper for every replica with the
# environment Kubernetes would give that pod, and checks every TF_CONFIG (valid JSON, this replica's task, each
# address the replica's DNS name on its Service's port) and the TFJob's operator-generated one; and serve.yaml's
# model server (its run directory the claim's mount, its Service on its port, readiness on the model's URL).
. "$(dirname "$0")/common.sh"

python3 -c 'import yaml' 2>/dev/null || fail "python3-yaml is not installed (scripts/install-deps.sh test installs it)"
python3 "$SRC/tests/deploy/k8s_check.py" "$SRC" "$WORK" >"$WORK/k8s.txt" 2>&1; rc=$?
cat "$WORK/k8s.txt"
[ "$rc" = 0 ] || fail "deploy/k8s: the problems above"
n=$(grep -c 'TF_CONFIG' "$WORK/k8s.txt")
[ "$n" = 10 ] || fail "checked $n replicas, want 10 (5 in plain.yaml, 5 in tfjob.yaml)"
grep -q '^serve: Deployment tfx-serve -> Service tfx-serve:8501' "$WORK/k8s.txt" || fail "deploy/k8s/serve.yaml was not checked"
pass "deploy/k8s: the model server's Deployment and Service, and $n replicas' TF_CONFIG consistent with their Services, ports and the run-directory claim"
