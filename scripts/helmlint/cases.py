"""The chart's refusals and acceptances (cases.yaml): each case's values over the base,
rendered offline for one Kubernetes version. A refused case must fail with its phrase; an
accepted one must render, its component's container carrying the environment named (a literal
value, or a secretKeyRef) and neither the variables nor the volumes named absent."""
import os

import yaml

from . import helm

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.yaml")


def container(docs, release, component):
    name = f"{release}-oxigram-{component}"
    for doc in docs:
        if doc.get("kind") == "Deployment" and doc["metadata"]["name"] == name:
            return doc["spec"]["template"]["spec"]
    return None


def env_problems(pod, component, want, absent):
    problems = []
    env = {e["name"]: e for e in pod["containers"][0].get("env") or []}
    for name, value in (want or {}).items():
        got = env.get(name)
        if got is None:
            problems.append(f"{component}: no {name}")
        elif isinstance(value, dict):
            ref = (got.get("valueFrom") or {}).get("secretKeyRef") or {}
            if (ref.get("name"), ref.get("key")) != (value["secret"], value["key"]):
                problems.append(f"{component}: {name} is {got}, not from {value}")
        elif got.get("value") != str(value):
            problems.append(f"{component}: {name} is {got.get('value')!r}, not {value!r}")
    volumes = {v["name"] for v in pod.get("volumes") or []}
    for name in absent or []:
        if name in env or name in volumes:
            problems.append(f"{component}: {name} should not be there")
    return problems


def check(render, version):
    """Problems of every case; `render(values, version)` → (problems, docs, manifest)."""
    with open(CASES) as f:
        cases = yaml.safe_load(f)
    problems, passed = [], 0
    for case in cases["refused"]:
        found, _, text = render(helm.coalesce(cases["base"], case["values"]), version)
        messages = " ".join(t for s, t in found if s == "ERROR")
        if text is not None and not messages:
            problems.append(("ERROR", f"case {case['name']!r}: rendered, should be refused"))
        elif case["message"] not in messages:
            problems.append(("ERROR", f"case {case['name']!r}: refused without "
                                      f"{case['message']!r}: {messages[:400]}"))
        else:
            passed += 1
    for case in cases["accepted"]:
        found, docs, text = render(helm.coalesce(cases["base"], case["values"]), version)
        bad = [t for s, t in found if s in ("ERROR", "WARNING")]
        if text is None or bad:
            problems.append(("ERROR", f"case {case['name']!r}: refused: {' '.join(bad)[:400]}"))
            continue
        wrong = []
        for component in set(case.get("env") or {}) | set(case.get("absent") or {}):
            pod = container(docs, "lint", component)
            if pod is None:
                wrong.append(f"no Deployment for {component}")
                continue
            wrong += env_problems(pod, component, (case.get("env") or {}).get(component),
                                  (case.get("absent") or {}).get(component))
        problems += [("ERROR", f"case {case['name']!r}: {w}") for w in wrong]
        passed += not wrong
    total = len(cases["refused"]) + len(cases["accepted"])
    problems.append(("INFO", f"{passed} of {total} cases as expected"))
    return problems
