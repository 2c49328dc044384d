"""Invariants of the chart's rendered manifest that no schema states: unique names, selectors
that match their pods, probes on the gRPC health service, the environment every process needs."""
import re

import yaml


def parse(manifest):
    """(problems, docs) of a rendered multi-document manifest."""
    try:
        docs = [d for d in yaml.safe_load_all(manifest) if d]
    except yaml.YAMLError as err:
        return [("ERROR", f"rendered manifest is not YAML: {err}")], []
    problems = []
    for doc in docs:
        if not (doc.get("apiVersion") and doc.get("kind") and (doc.get("metadata") or {}).get("name")):
            problems.append(("ERROR", f"object without apiVersion/kind/metadata.name: {doc}"))
    return problems, [d for d in docs if (d.get("metadata") or {}).get("name") and d.get("kind")]


def probe_problems(name, container, grpc_probes):
    problems = []
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = container.get(probe) or {}
        if grpc_probes and "grpc" not in spec:
            problems.append(("ERROR", f"{name}: {container['name']} has no gRPC {probe}"))
        if not grpc_probes:
            command = (spec.get("exec") or {}).get("command") or []
            if "health" not in command:
                problems.append(("ERROR", f"{name}: {container['name']} has no `oxigram health` "
                                          f"exec {probe} (the cluster has no gRPC probes)"))
    return problems


def check(docs, grpc_probes):
    """Problems of the chart's own invariants; `grpc_probes` when the cluster has them (1.24+)."""
    problems, seen = [], set()
    headless = {d["metadata"]["name"] for d in docs
                if d["kind"] == "Service" and (d.get("spec") or {}).get("clusterIP") == "None"}
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if (kind, name) in seen:
            problems.append(("ERROR", f"{kind}/{name} rendered twice"))
        seen.add((kind, name))
        if len(name) > 63:
            problems.append(("ERROR", f"{kind}/{name}: name longer than 63 characters"))
        if kind != "Deployment":
            continue
        spec = doc["spec"]
        selector = spec["selector"]["matchLabels"]
        pod_labels = spec["template"]["metadata"]["labels"]
        if any(pod_labels.get(k) != v for k, v in selector.items()):
            problems.append(("ERROR", f"Deployment/{name}: selector does not match the pod labels"))
        for c in spec["template"]["spec"]["containers"]:
            if not c["name"].startswith("oxigram") and c["name"] not in (
                    "gateway", "messages", "updates", "dialogs", "dispatch", "media"):
                continue  # an operator's sidecar
            problems += probe_problems(f"Deployment/{name}", c, grpc_probes)
            sc = c.get("securityContext") or {}
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(("WARNING", f"Deployment/{name}: root filesystem is writable"))
            env = {e["name"] for e in c.get("env") or []}
            for e in c.get("env") or []:
                # A callee named by host must be a headless Service, or calls stick to one pod.
                m = re.match(r"OXIGRAM_SERVICES__\w+__ENDPOINT$", e["name"])
                host = re.sub(r"^\w+://([^:/]+).*$", r"\1", e.get("value") or "")
                if m and not re.match(r"^[\d.]+$", host) and host not in headless:
                    problems.append(("ERROR", f"Deployment/{name}: {e['name']} dials {host}, "
                                              "which is not a headless Service of the chart"))
            for var in ("OXIGRAM_REDIS_URL", "OXIGRAM_SERVICES__GATEWAY__ENDPOINT"):
                if var not in env:
                    problems.append(("ERROR", f"Deployment/{name}: {var} is not set"))
    return problems


def kinds(docs):
    out = {}
    for doc in docs:
        out[doc["kind"]] = out.get(doc["kind"], 0) + 1
    return out
