#!/usr/bin/env python3
"""Checks deploy/k8s/*.yaml the way the cluster would use them, without a cluster.

Usage: k8s_check.py SOURCE_DIR WORK_DIR

- pvc.yaml: the PersistentVolumeClaim every pod mounts as its run directory.
- plain.yaml: for every replica of every role, runs the ConfigMap's wrapper script (tfx-run.sh) with /bin/sh and
  the environment Kubernetes would give that pod (TFX_ROLE, POD_NAME, JOB_COMPLETION_INDEX, TFX_CLUSTER from the
  ConfigMap), with a stand-in tfx-node on PATH that records TF_CONFIG and argv. The TF_CONFIG must be valid JSON
  naming this replica's role and index, its cluster map the ConfigMap's, and every address in it must be the
  DNS name Kubernetes gives that replica (<pod hostname>.<headless Service>) on the Service's port, which is
  the container's port; replica counts must match the map, and all replicas of a Job run at once.
- tfjob.yaml: the TF_CONFIG that Kubeflow's training operator generates for every replica (its naming scheme:
  <job>-<type>-<index>.<namespace>.svc:<tfjob-port>) must be what tfx reads: the container is named
  "tensorflow", the port "tfjob-port", and the image's ENTRYPOINT is tfx-node.
Both: --run-dir is the mount of the claim in pvc.yaml, and --config names an example the image ships.
- serve.yaml: a Deployment running `tfx-node serve` with --run-dir the claim's mount and --port its container port,
  a Service that selects its pods and targets that port, and a readiness probe on /v1/models/NAME where NAME is
  the example experiment's name (what the server answers to).
Prints one line per replica checked; exits 1 with every problem found.
"""
import json
import os
import shlex
import subprocess
import sys

import yaml

SRC, WORK = sys.argv[1], sys.argv[2]
problems = []


def check(ok, msg):
    if not ok:
        problems.append(msg)
    return ok


def load(name):
    with open(os.path.join(SRC, "deploy", "k8s", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def container_of(pod_spec, want_name=None):
    cs = pod_spec.get("containers", [])
    check(len(cs) == 1, f"expected one container, found {len(cs)}")
    c = cs[0]
    if want_name:
        check(c.get("name") == want_name, f"container is named {c.get('name')!r}, TFJob needs {want_name!r}")
    return c


def flag(args, name):
    return args[args.index(name) + 1] if name in args[:-1] else None


def check_pod(where, pod_spec, claim):
    """The run directory is the claim's mount; --config is an example the image ships (examples/ -> /opt/tfx)."""
    c = pod_spec["containers"][0]
    args = c.get("args", [])
    run_dir, config = flag(args, "--run-dir"), flag(args, "--config")
    vols = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vol = vols.get(mounts.get(run_dir, ""), {})
    check(vol.get("persistentVolumeClaim", {}).get("claimName") == claim,
          f"{where}: --run-dir {run_dir} is not the mount of claim {claim}")
    check(config is not None and config.startswith("/opt/tfx/examples/")
          and os.path.isfile(os.path.join(SRC, "examples", config[len("/opt/tfx/examples/"):])),
          f"{where}: --config {config} is not an example shipped in the image")
    sc = c.get("securityContext", {})
    if sc.get("readOnlyRootFilesystem"):
        check("/tmp" in mounts, f"{where}: read-only root file system but no writable /tmp")
    return c


def port_of(c, name=None):
    ports = c.get("ports", [])
    p = [x for x in ports if name is None or x.get("name") == name]
    check(len(p) == 1, f"container {c.get('name')}: no single port named {name}")
    return p[0]["containerPort"] if p else None


def pvc_claim():
    docs = load("pvc.yaml")
    check(len(docs) == 1 and docs[0]["kind"] == "PersistentVolumeClaim", "pvc.yaml: want one PersistentVolumeClaim")
    return docs[0]["metadata"]["name"]


def fake_node():
    """A stand-in tfx-node that writes its TF_CONFIG and argv as JSON to $TFX_RECORD."""
    d = os.path.join(WORK, "bin")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tfx-node")
    with open(path, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os, sys\n"
                "json.dump({'tf_config': os.environ.get('TF_CONFIG'), 'argv': sys.argv[1:]},"
                " open(os.environ['TFX_RECORD'], 'w'))\n")
    os.chmod(path, 0o755)
    return d


def run_wrapper(script, env, args):
    rec = os.path.join(WORK, "record.json")
    if os.path.exists(rec):
        os.remove(rec)
    full = {"PATH": fake_node() + ":/usr/bin:/bin", "TFX_RECORD": rec, **env}
    r = subprocess.run(["/bin/sh", script, *args], env=full, capture_output=True, text=True, timeout=30)
    if not check(r.returncode == 0, f"tfx-run.sh with {env} exited {r.returncode}: {r.stderr.strip()}"):
        return None
    with open(rec) as f:
        return json.load(f)


def replicas_of(kind, w):
    if kind == "StatefulSet":
        n = w["spec"]["replicas"]
        return n, [f"{w['metadata']['name']}-{i}" for i in range(n)], w["spec"]["serviceName"]
    spec = w["spec"]
    n = spec["completions"]
    check(spec.get("completionMode") == "Indexed", f"Job {w['metadata']['name']}: not Indexed")
    check(spec.get("parallelism") == n, f"Job {w['metadata']['name']}: parallelism != completions "
          "(synchronous training needs every replica at once)")
    # An Indexed Job's pod gets the hostname <job>-<index> and, with spec.subdomain, <hostname>.<subdomain>.
    return n, [f"{w['metadata']['name']}-{i}" for i in range(n)], spec["template"]["spec"].get("subdomain")


def check_plain(claim):
    docs = load("plain.yaml")
    by = {}
    for d in docs:
        by.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    cm = by.get("ConfigMap", {}).get("tfx-cluster")
    if not check(cm is not None, "plain.yaml: no ConfigMap tfx-cluster"):
        return
    try:
        cluster = json.loads(cm["data"]["TFX_CLUSTER"])
    except (KeyError, ValueError) as e:
        check(False, f"plain.yaml: TFX_CLUSTER is not JSON: {e}")
        return
    script = os.path.join(WORK, "tfx-run.sh")
    with open(script, "w") as f:
        f.write(cm["data"]["tfx-run.sh"])
    workloads = [(k, w) for k in ("StatefulSet", "Job") for w in by.get(k, {}).values()]
    seen = set()
    for kind, w in workloads:
        tpl = w["spec"]["template"]
        role = tpl["metadata"]["labels"].get("tfx.role")
        c = check_pod(f"{kind} {w['metadata']['name']}", tpl["spec"], claim)
        env = {e["name"]: e for e in c.get("env", [])}
        check(env.get("TFX_ROLE", {}).get("value") == role, f"{w['metadata']['name']}: TFX_ROLE != label {role}")
        check(env.get("TFX_CLUSTER", {}).get("valueFrom", {}).get("configMapKeyRef")
              == {"name": "tfx-cluster", "key": "TFX_CLUSTER"}, f"{w['metadata']['name']}: TFX_CLUSTER not from the ConfigMap")
        check(c.get("command", [])[-1:] == ["/opt/tfx/bin/tfx-run.sh"], f"{w['metadata']['name']}: not started by the wrapper")
        n, hosts, svc_name = replicas_of(kind, w)
        svc = by.get("Service", {}).get(svc_name)
        if not check(svc is not None, f"{w['metadata']['name']}: no Service {svc_name}"):
            continue
        check(svc["spec"].get("clusterIP") == "None", f"Service {svc_name} is not headless")
        check(all(tpl["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()),
              f"Service {svc_name} does not select the {role} pods")
        cport = port_of(c)
        sports = {p["port"]: p.get("targetPort") for p in svc["spec"]["ports"]}
        addrs = cluster.get(role, [])
        check(len(addrs) == n, f"{role}: {n} replicas but {len(addrs)} addresses in TFX_CLUSTER")
        seen.add(role)
        for i, host in enumerate(hosts[:len(addrs)]):
            h, _, p = addrs[i].rpartition(":")
            check(h == f"{host}.{svc_name}", f"{role} {i}: TFX_CLUSTER says {h}, the pod is {host}.{svc_name}")
            check(int(p) in sports and sports[int(p)] == cport,
                  f"{role} {i}: port {p} is not Service {svc_name}'s port to containerPort {cport}")
            pod_env = {"TFX_ROLE": role, "TFX_CLUSTER": cm["data"]["TFX_CLUSTER"],
                       "POD_NAME": host if kind == "StatefulSet" else f"{host}-x7k2q"}
            if kind == "Job":
                pod_env["JOB_COMPLETION_INDEX"] = str(i)
            rec = run_wrapper(script, pod_env, c.get("args", []))
            if rec is None:
                continue
            try:
                tf = json.loads(rec["tf_config"])
            except (TypeError, ValueError) as e:
                check(False, f"{role} {i}: TF_CONFIG is not JSON ({e}): {rec['tf_config']!r}")
                continue
            check(tf.get("task") == {"type": role, "index": i}, f"{role} {i}: task is {tf.get('task')}")
            check(tf.get("cluster") == cluster, f"{role} {i}: cluster differs from TFX_CLUSTER")
            check(rec["argv"] == c.get("args", []), f"{role} {i}: tfx-node got {rec['argv']}")
            print(f"plain {role} {i}: pod {host}.{svc_name}:{p} TF_CONFIG {json.dumps(tf['task'])}")
    check(seen == set(cluster), f"plain.yaml: roles with workloads {sorted(seen)} != cluster map {sorted(cluster)}")


def check_tfjob(claim):
    docs = load("tfjob.yaml")
    check(len(docs) == 1, "tfjob.yaml: want one document")
    job = docs[0]
    check(job.get("apiVersion") == "kubeflow.org/v1" and job.get("kind") == "TFJob", "tfjob.yaml: not a kubeflow.org/v1 TFJob")
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    specs = job["spec"]["tfReplicaSpecs"]
    check(set(specs) <= {"Chief", "Master", "PS", "Worker", "Evaluator"}, f"tfjob.yaml: replica types {sorted(specs)}")
    check(specs.get("Chief", {}).get("replicas") == 1, "tfjob.yaml: want exactly one Chief")
    with open(os.path.join(SRC, "deploy", "docker", "Dockerfile")) as f:
        entry = [ln for ln in f if ln.startswith("ENTRYPOINT")]
    check(entry and json.loads(entry[-1].split(None, 1)[1]) == ["tfx-node"], "the image's ENTRYPOINT is not tfx-node")
    # The training operator's TF_CONFIG: lower-case type names, one host per replica, the tfjob-port.
    cluster, ports = {}, {}
    for rtype, spec in specs.items():
        c = check_pod(f"TFJob {rtype}", spec["template"]["spec"], claim)
        container_of(spec["template"]["spec"], "tensorflow")
        check("command" not in c, f"TFJob {rtype}: command overrides the ENTRYPOINT")
        ports[rtype] = port_of(c, "tfjob-port")
        t = rtype.lower()
        cluster[t] = [f"{name}-{t}-{i}.{ns}.svc:{ports[rtype]}" for i in range(spec["replicas"])]
    check(len(set(ports.values())) == 1, f"tfjob.yaml: replica types listen on different ports {ports}")
    for t, addrs in cluster.items():
        for i in range(len(addrs)):
            check(t in ("chief", "ps", "worker", "evaluator"), f"tfjob.yaml: tfx has no role {t}")
            print(f"tfjob {t} {i}: pod {addrs[i]} TF_CONFIG task {json.dumps({'type': t, 'index': i})}")
    with open(os.path.join(WORK, "tfjob-tf-config.json"), "w") as f:
        json.dump(cluster, f)


def check_serve(claim):
    docs = {d["kind"]: d for d in load("serve.yaml")}
    dep, svc = docs.get("Deployment"), docs.get("Service")
    if not check(dep is not None and svc is not None, "serve.yaml: want a Deployment and a Service"):
        return
    pod = dep["spec"]["template"]
    c = container_of(pod["spec"])
    args = c.get("args", [])
    check(args[:1] == ["serve"] and "command" not in c, f"serve.yaml: the container does not run tfx-node serve: {args}")
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    run_dir = flag(args, "--run-dir")
    check(vols.get(mounts.get(run_dir, ""), {}).get("persistentVolumeClaim", {}).get("claimName") == claim,
          f"serve.yaml: --run-dir {run_dir} is not the mount of claim {claim}")
    port = port_of(c, "http")
    check(str(port) == flag(args, "--port"), f"serve.yaml: --port {flag(args, '--port')} is not the container port {port}")
    labels = pod["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "serve.yaml: the Service selects no pod")
    targets = [p.get("targetPort") for p in svc["spec"]["ports"]]
    check(targets in (["http"], [port]), f"serve.yaml: the Service targets {targets}, not the container port")
    with open(os.path.join(SRC, "examples", "fashion_mnist_mlp.json")) as f:
        name = json.load(f)["name"]
    probe = c.get("readinessProbe", {}).get("httpGet", {}).get("path")
    check(probe == f"/v1/models/{name}", f"serve.yaml: readiness probes {probe}, the server answers /v1/models/{name}")
    print(f"serve: Deployment {dep['metadata']['name']} -> Service {svc['metadata']['name']}:{svc['spec']['ports'][0]['port']}"
          f" -> {run_dir} (claim {claim}), ready at {probe}")


claim = pvc_claim()
check_plain(claim)
check_tfjob(claim)
check_serve(claim)
for p in problems:
    print("PROBLEM:", p)
sys.exit(1 if problems else 0)
