"""scripts/helm-lint's checks of helm/oxigram, once per values file (see scripts/helm-lint)."""
import glob
import os
import re
import sys
import tempfile

import yaml

from . import cases, cluster, fake_api, helm, manifest, schemas

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHART = os.path.join(ROOT, "helm", "oxigram")
CRDS = os.path.join(ROOT, "helm", "test-crds")
METRICS_DOC = os.path.join(ROOT, "docs", "operations.md")
RELEASE = "lint"
# gRPC container probes exist from Kubernetes 1.24 on; before, the chart uses exec probes.
GRPC_PROBES_SINCE = 24


def minor(version):
    return int(re.match(r"v?1\.(\d+)", version).group(1))


def render(values, version):
    """Installs into a fake API of `version`; returns (problems, docs incl. hooks, manifest)."""
    with fake_api.serve(minor(version)) as url, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        helm.write_kubeconfig(kubeconfig, url, "fake", "oxigram-lint")
        problems, text, hooks = helm.install(CHART, RELEASE, "oxigram-lint", kubeconfig, values,
                                             validate=False, create_namespace=False)
    if text is None:
        return [(s, f"render for {version}: {t}") for s, t in problems], [], None
    parse_problems, docs = manifest.parse(text + "\n---\n" + hooks)
    return problems + parse_problems, docs, text


def offline(values, version, out_dir=None, stem=None):
    """Render for `version`, the chart's invariants, kubernetes-validate strict. The fake API
    cannot run hook Jobs, which Helm waits for: migration Jobs are rendered (and validated
    for this version) by the real install instead, so here the migrations run at start-up."""
    if (values.get("migrations") or {}).get("mode") == "job":
        values = helm.coalesce(values, {"migrations": {"mode": "startup"}})
    problems, docs, text = render(values, version)
    if text is not None:
        problems += manifest.check(docs, minor(version) >= GRPC_PROBES_SINCE)
        problems += schemas.validate(docs, version)
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, f"{stem}-{version}.yaml"), "w") as f:
                f.write(text)
    return [(s, f"[{version} offline] {t}") for s, t in problems], docs


def on_cluster(kube, values, namespace):
    """Installs for real (OpenAPI and server-side validation), checks every object was stored,
    uninstalls and checks they went."""
    tag = f"[{kube.version()} API server]"
    kube.completed.clear()
    with kube.completing_jobs(namespace):
        problems, text, hooks = helm.install(CHART, RELEASE, namespace, kube.kubeconfig, values,
                                             validate=True)
    docs, hook_docs = [], []
    if text is not None:
        parse_problems, docs = manifest.parse(text)
        problems += parse_problems
        problems += manifest.check(docs, minor(kube.version()) >= GRPC_PROBES_SINCE)
        for doc in docs:
            if kube.get(doc, namespace) is None:
                problems.append(("ERROR", f"{doc['kind']}/{doc['metadata']['name']} was not stored"))
        # Hook Jobs that ran at install (the migrations): created, validated and admitted by
        # the server, then marked succeeded here.
        _, hook_docs = manifest.parse(hooks)
        install_hooks = [d["metadata"]["name"] for d in hook_docs if d["kind"] == "Job" and
                         "pre-install" in (d["metadata"].get("annotations") or {}).get("helm.sh/hook", "")]
        for name in install_hooks:
            if name not in kube.completed:
                problems.append(("ERROR", f"pre-install Job/{name} never reached the API server"))
        if install_hooks:
            problems.append(("INFO", f"pre-install Jobs created and completed: {', '.join(install_hooks)}"))
        # `helm test` Pods run only on `helm test`: the server checks them without storing.
        for doc in hook_docs:
            if "test" in (doc["metadata"].get("annotations") or {}).get("helm.sh/hook", ""):
                found = kube.dry_run_create(doc, namespace)
                problems += [("ERROR", f"helm test hook refused: {t}") for t in found]
                if not found:
                    problems.append(("INFO", f"helm test {doc['kind']}/{doc['metadata']['name']} "
                                             "accepted by the server (dry run)"))
        problems += helm.uninstall(RELEASE, namespace, kube.kubeconfig)
        for doc in docs:
            kept = (doc["metadata"].get("annotations") or {}).get("helm.sh/resource-policy") == "keep"
            if not kept and kube.get(doc, namespace) is not None:
                problems.append(("ERROR", f"{doc['kind']}/{doc['metadata']['name']} "
                                          "is still there after uninstall"))
    return [(s, f"{tag} {t}") for s, t in problems], docs, hook_docs if text is not None else []


def main():
    caller = os.environ.get("HELM_LINT_CALLER_DIR", os.getcwd())
    files = [os.path.join(caller, f) for f in sys.argv[1:]]
    files = files or sorted(glob.glob(os.path.join(CHART, "ci", "*.yaml")))
    if not files:
        print("helm-lint: no values files found in helm/oxigram/ci", file=sys.stderr)
        return 2
    out_dir = os.environ.get("HELM_LINT_OUTPUT_DIR")
    oldest, newest = schemas.oldest_and_newest()
    failed = False
    print("==> starting a Kubernetes API server (scripts/kube-apiserver)", flush=True)
    with cluster.running() as kube:
        kube.install_crds(CRDS)
        print(f"  ok: {kube.version()} on {kube.server}, test CRDs installed", flush=True)
        for path in files:
            shown = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path
            stem = os.path.splitext(os.path.basename(path))[0]
            print(f"==> {shown}", flush=True)
            with open(path) as f:
                values = yaml.safe_load(f) or {}
            problems = [(s, f"lint: {t}") for s, t in helm.lint(CHART, values)]
            summary = []
            for version in (newest, oldest):
                found, docs = offline(values, version, out_dir, stem)
                problems += found
                if version == newest:
                    problems += manifest.metrics_documented(docs, METRICS_DOC)
                summary.append(f"{version}: {len(docs)} objects")
            found, docs, hook_docs = on_cluster(kube, values, f"lint-{stem}"[:63])
            problems += found
            for version in (newest, oldest):  # the install's hook Jobs, strictly
                problems += [(s, f"[{version} offline, hooks] {t}")
                             for s, t in schemas.validate(hook_docs, version)]
            summary.append(f"{kube.version()} API server: {len(docs)} objects installed and removed")
            for sev, text in problems:
                print(f"  [{sev}] " + "\n      ".join(l for l in text.splitlines() if l.strip()))
            if docs:
                print("  rendered: " + ", ".join(f"{n} {k}" for k, n in sorted(manifest.kinds(docs).items())))
            print("  " + "; ".join(summary))
            bad = [p for p in problems if p[0] in ("ERROR", "WARNING", "UNKNOWN")]
            failed |= bool(bad)
            print(f"  {'FAILED' if bad else 'ok'}: {len(bad)} error(s)/warning(s)", flush=True)
    if not sys.argv[1:]:
        print("==> scripts/helmlint/cases.yaml: values the chart refuses and accepts", flush=True)
        problems = cases.check(render, newest)
        for sev, text in problems:
            print(f"  [{sev}] {text}")
        bad = [p for p in problems if p[0] != "INFO"]
        failed |= bool(bad)
        print(f"  {'FAILED' if bad else 'ok'}: {len(bad)} case(s) not as expected", flush=True)
    return 1 if failed else 0


sys.exit(main())
