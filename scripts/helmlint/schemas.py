"""Offline validation of rendered objects with kubernetes-validate's bundled schemas (strict:
unknown fields are errors). Kinds it has no schema for (CRDs) are left to the real API
server, which validates them against the CRDs installed before the chart."""
import kubernetes_validate
from kubernetes_validate import utils


def oldest_and_newest():
    versions = utils.all_versions()
    return versions[0], versions[-1]


# API groups of custom resources: kubernetes-validate has no schemas for them.
CRD_GROUPS = ("monitoring.coreos.com/", "gateway.networking.k8s.io/")


def validate(docs, version):
    """Problems of every object against Kubernetes `version`; each names the object and field.
    A built-in kind without a schema is an API version that Kubernetes `version` does not
    serve (removed or not yet there)."""
    problems, skipped = [], set()
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except utils.ValidationError as err:
            path = ".".join(str(p) for p in err.path) or "(top level)"
            problems.append(("ERROR", f"{name} ({doc['apiVersion']}) against Kubernetes "
                                      f"{err.version}: {path}: {err.message}"))
        except utils.SchemaNotFoundError:
            if doc["apiVersion"].startswith(CRD_GROUPS):
                skipped.add(f"{doc['apiVersion']}/{doc['kind']}")
            else:
                problems.append(("ERROR", f"{name}: Kubernetes {version} has no "
                                          f"{doc['apiVersion']} {doc['kind']}"))
    if skipped:
        problems.append(("INFO", f"no {version} schema for {', '.join(sorted(skipped))} "
                                 "(checked by the API server against its CRD)"))
    return problems
