"""A real Kubernetes API server (kube-apiserver + etcd, no nodes) on 127.0.0.1, started by
scripts/kube-apiserver, and the few raw API calls the lint makes against it: installing the
CRDs the chart's objects need and reading back what an install created."""
import contextlib
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube-apiserver")

# Plural resource names of the kinds the chart renders, by apiVersion/kind.
PLURALS = {
    "Secret": "secrets", "Service": "services", "ServiceAccount": "serviceaccounts",
    "PersistentVolumeClaim": "persistentvolumeclaims", "ConfigMap": "configmaps", "Pod": "pods",
    "Deployment": "deployments", "HorizontalPodAutoscaler": "horizontalpodautoscalers",
    "PodDisruptionBudget": "poddisruptionbudgets", "Job": "jobs",
    "NetworkPolicy": "networkpolicies", "Ingress": "ingresses", "GRPCRoute": "grpcroutes",
    "ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules",
}


class Cluster:
    def __init__(self, kubeconfig):
        self.kubeconfig = kubeconfig
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        self.server = config["clusters"][0]["cluster"]["server"]
        self.token = config["users"][0]["user"]["token"]
        self._tls = ssl.create_default_context()
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE
        self.completed = []  # Jobs marked succeeded by completing_jobs

    def request(self, method, path, body=None):
        """(status, parsed JSON body) of one API call."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._tls, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def version(self):
        return self.request("GET", "/version")[1].get("gitVersion", "?")

    def install_crds(self, folder):
        """Creates every CRD in folder/*.yaml and waits until each is established."""
        paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".yaml"))
        for path in paths:
            with open(path) as f:
                for crd in yaml.safe_load_all(f):
                    if not crd:
                        continue
                    status, body = self.request(
                        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                    if status not in (201, 409):
                        raise RuntimeError(f"{path}: CRD {crd['metadata']['name']} refused: "
                                           f"{body.get('message', body)}")
                    self._wait_established(crd["metadata"]["name"])

    def _wait_established(self, name):
        for _ in range(100):
            _, body = self.request(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = (body.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return
            time.sleep(0.1)
        raise RuntimeError(f"CRD {name} never became established")

    @contextlib.contextmanager
    def completing_jobs(self, namespace):
        """While open, marks every Job of `namespace` succeeded, as a Job controller would
        once its pod exited 0: there are no nodes, and Helm waits for hook Jobs to complete."""
        stop = threading.Event()

        def complete():
            while not stop.wait(0.3):
                _, jobs = self.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
                for job in jobs.get("items") or []:
                    conditions = (job.get("status") or {}).get("conditions") or []
                    if any(c.get("type") == "Complete" for c in conditions):
                        continue
                    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    job["status"] = {"succeeded": 1, "startTime": now, "completionTime": now,
                                     "conditions": [{"type": "Complete", "status": "True",
                                                     "lastProbeTime": now,
                                                     "lastTransitionTime": now}]}
                    name = job["metadata"]["name"]
                    self.request("PUT", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status", job)
                    self.completed.append(name)

        thread = threading.Thread(target=complete, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def object_path(self, obj, namespace):
        api_version, kind = obj["apiVersion"], obj["kind"]
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        ns = (obj.get("metadata") or {}).get("namespace") or namespace
        return f"{prefix}/namespaces/{ns}/{PLURALS[kind]}/{obj['metadata']['name']}"

    def get(self, obj, namespace):
        """The object as stored by the server, or None."""
        status, body = self.request("GET", self.object_path(obj, namespace))
        return body if status == 200 else None


@contextlib.contextmanager
def running():
    """Builds (once, cached) and starts a kube-apiserver; yields a Cluster; stops it after."""
    with tempfile.TemporaryDirectory(prefix="kube-apiserver-") as state:
        result = subprocess.run(["bash", SCRIPT, "start", state], stdout=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise RuntimeError("scripts/kube-apiserver start failed (see its messages above)")
        try:
            yield Cluster(result.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run(["bash", SCRIPT, "stop", state], check=False)
