"""Helm's own Go library, as shipped by PyPI's helm-sdkpy: lint, install and uninstall, with
the library's quirks handled. Its lint JSON drops every message's text (Go errors marshal as
{}), so a message shows as severity + file only; and in lint mode Helm's `fail` and
`required` only log to stderr, so those log lines are captured and counted as errors."""
import asyncio
import contextlib
import copy
import json
import os
import re
import shutil
import sys
import tempfile

import helm_sdkpy
import yaml

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}
# Templates whose apiVersion the chart chooses by the cluster's capabilities.
CAPABILITY_CHOSEN = {"pdb.yaml", "hpa.yaml"}


@contextlib.contextmanager
def captured_stderr():
    """Captures what the Go library logs to file descriptor 2; yields a list to read after."""
    lines = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(l for l in tmp.read().decode("utf-8", "replace").splitlines() if l.strip())


def log_problems(lines):
    """Go log lines that count as problems: `fail`/`required` in lint mode, WARN and ERROR."""
    problems = []
    for line in lines:
        line = re.sub(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d ", "", line)  # Go's timestamp
        if "funcMap fail" in line or "missing required value" in line or " ERROR " in line:
            problems.append(("ERROR", line))
        elif " WARN " in line:
            problems.append(("WARNING", line))
        else:
            problems.append(("INFO", line))
    return problems


def coalesce(base, override):
    """Helm's merge of user values over chart defaults: maps merge, null deletes, else replace."""
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = coalesce(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def lint(chart, values):
    """`helm lint` of a copy of the chart whose values.yaml is the defaults merged with values."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="helm-lint-") as tmp:
        copy_dir = os.path.join(tmp, os.path.basename(chart))
        shutil.copytree(chart, copy_dir)
        with open(os.path.join(chart, "values.yaml")) as f:
            merged = coalesce(yaml.safe_load(f) or {}, values)
        with open(os.path.join(copy_dir, "values.yaml"), "w") as f:
            json.dump(merged, f, indent=1)  # JSON is YAML
        with captured_stderr() as logged:
            try:
                result = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(copy_dir))
            except Exception as err:  # the library itself failed
                result = None
                problems.append(("ERROR", f"lint failed: {err}"))
    if result is not None:
        for m in result.get("Messages") or []:
            sev = SEVERITY.get(m.get("Severity"), "UNKNOWN")
            text = m.get("Err")
            text = text if isinstance(text, str) and text else "(helm-sdkpy drops the message text)"
            if sev == "WARNING" and os.path.basename(m.get("Path") or "") in CAPABILITY_CHOSEN:
                # Lint renders with Helm's default capabilities, which lack policy/v1 and
                # autoscaling/v2, so these files show the API versions kept for old clusters
                # and Helm warns they are deprecated; the renders for current versions
                # (and their strict validation) check what current clusters get.
                sev, text = "INFO", f"{text}; an API version kept for old clusters, by .Capabilities"
            problems.append((sev, f"{m.get('Path')}: {text}"))
        if result.get("TotalChartsLinted") != 1:
            problems.append(("ERROR", f"linted {result.get('TotalChartsLinted')} charts, expected 1"))
    problems += [(sev, f"template log: {line}") for sev, line in log_problems(logged)]
    return problems


def write_kubeconfig(path, server, token, namespace):
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "lint",
                   "clusters": [{"name": "lint", "cluster": {
                       "server": server, "insecure-skip-tls-verify": server.startswith("https")}}],
                   "users": [{"name": "lint", "user": {"token": token}}],
                   "contexts": [{"name": "lint", "context": {
                       "cluster": "lint", "user": "lint", "namespace": namespace}}]}, f)


def install(chart, release, namespace, kubeconfig, values, validate, create_namespace=True):
    """Installs the chart; returns (problems, manifest, hooks manifest). `validate` turns on
    Helm's check of every object against the server's OpenAPI schema (unknown fields, types),
    before the API server's own validation on create."""
    problems, manifest, hooks = [], None, ""
    with captured_stderr() as logged:
        try:
            config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=kubeconfig)
            release_info = asyncio.run(helm_sdkpy.Install(config).run(
                release, chart, values=values, wait=False, timeout=120, create_namespace=create_namespace,
                disable_openapi_validation=not validate))
            manifest = release_info.get("manifest") or ""
            hooks = "\n---\n".join(h.get("manifest") or "" for h in release_info.get("hooks") or [])
        except Exception as err:
            problems.append(("ERROR", f"install failed: {err}"))
    problems += [(sev, f"install log: {line}") for sev, line in log_problems(logged)
                 if sev != "INFO"]
    return problems, manifest, hooks


def uninstall(release, namespace, kubeconfig):
    problems = []
    with captured_stderr() as logged:
        try:
            config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=kubeconfig)
            asyncio.run(helm_sdkpy.Uninstall(config).run(release, wait=False, timeout=60))
        except Exception as err:
            problems.append(("ERROR", f"uninstall failed: {err}"))
    problems += [(sev, f"uninstall log: {line}") for sev, line in log_problems(logged)
                 if sev != "INFO"]
    return problems
