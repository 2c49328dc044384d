"""A fake Kubernetes API on 127.0.0.1 that Helm can install into: it answers discovery for a
chosen Kubernetes version and accepts every object, so an install returns the rendered
manifest exactly as Helm would send it to a cluster of that version (Helm's `.Capabilities`
come from this discovery). Nothing leaves the machine."""
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CORE = [("secrets", "Secret"), ("services", "Service"), ("serviceaccounts", "ServiceAccount"),
        ("persistentvolumeclaims", "PersistentVolumeClaim"), ("configmaps", "ConfigMap"),
        ("pods", "Pod"), ("namespaces", "Namespace")]
# The API groups of a current cluster (Kubernetes 1.25 and later) that the chart may use,
# plus the CRDs of prometheus-operator and Gateway API.
GROUPS = {
    "apps/v1": [("deployments", "Deployment")],
    "autoscaling/v2": [("horizontalpodautoscalers", "HorizontalPodAutoscaler")],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget")],
    "batch/v1": [("jobs", "Job")],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy"), ("ingresses", "Ingress")],
    "gateway.networking.k8s.io/v1": [("grpcroutes", "GRPCRoute")],
    "monitoring.coreos.com/v1": [("servicemonitors", "ServiceMonitor"),
                                 ("prometheusrules", "PrometheusRule")],
}
RESOURCES = {name for name, _ in CORE} | {name for rs in GROUPS.values() for name, _ in rs}


def _resource_list(group_version, resources):
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": n, "singularName": "", "namespaced": n != "namespaces",
                           "kind": k,
                           "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                          for n, k in resources]}


def _handler(minor):
    class FakeApi(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, code, body, content_type="application/json"):
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?")[0].rstrip("/")
            if path == "/version":
                return self.reply(200, {"major": "1", "minor": str(minor),
                                        "gitVersion": f"v1.{minor}.0", "platform": "linux/amd64"})
            if path == "/api":
                return self.reply(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": []})
            if path == "/apis":
                groups = []
                for gv in GROUPS:
                    group, version = gv.split("/")
                    ref = {"groupVersion": gv, "version": version}
                    groups.append({"name": group, "versions": [ref], "preferredVersion": ref})
                return self.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
            if path == "/api/v1":
                return self.reply(200, _resource_list("v1", CORE))
            for gv, resources in GROUPS.items():
                if path == "/apis/" + gv:
                    return self.reply(200, _resource_list(gv, resources))
            if path.split("/")[-1] in RESOURCES:  # a list: always empty
                return self.reply(200, {"kind": "List", "apiVersion": "v1", "items": [],
                                        "metadata": {"resourceVersion": "1"}})
            return self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": "NotFound", "code": 404, "message": "not found"})

        def echo(self, code):
            # Accept anything and hand it back (Helm's release Secret comes as protobuf).
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.reply(code, body, self.headers.get("Content-Type", "application/json"))

        def do_POST(self):
            self.echo(201)

        def do_PUT(self):
            self.echo(200)

        def do_PATCH(self):
            self.echo(200)

        def do_DELETE(self):
            self.reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    return FakeApi


@contextlib.contextmanager
def serve(minor):
    """Serves a fake API of Kubernetes 1.<minor>; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(minor))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
