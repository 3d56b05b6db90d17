"""deploy/: the Kubernetes manifests, the Helm values and the executors' run config, checked offline.

Kubernetes' own kinds are validated strictly (unknown fields fail) against the schemas kubernetes-validate
ships. It has none for KEDA's custom resources or for the values of Dagster's Helm chart, so those are checked
here field by field (the fields KEDA and the chart read, with the types they need), and every Kubernetes
object inside them (volumes, mounts, resources) is validated by wrapping it in a Pod. KEDA's query is the
queue's named query, run against a database with tasks in every state.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.queue import NewTask, TaskQueue
from book_assets.settings import PROJECT_ROOT, Settings
from book_assets_tests.queue.helpers import complete

K8S = PROJECT_ROOT / "deploy" / "k8s"
K8S_VERSION = kubernetes_validate.latest_version()
NOT_MANIFESTS = {"dagster-values.yaml", "run-config.yaml"}
KEDA_API = "keda.sh/v1alpha1"
#: The Prometheus Operator's custom resources (podmonitors.yaml): no schema in kubernetes-validate either.
MONITORING_API = "monitoring.coreos.com/v1"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of deploy/k8s by (kind, name)."""
    found = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name not in NOT_MANIFESTS:
            for doc in documents(path):
                found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def only(kind: str) -> dict[str, Any]:
    (doc,) = [d for (k, _), d in manifests().items() if k == kind]
    return doc


def worker_deployment() -> dict[str, Any]:
    return manifests()[("Deployment", "book-pipeline-worker")]


def validate_in_pod(*, volumes: Sequence[Any] = (), mounts: Sequence[Any] = (), resources: Any = None) -> None:
    """Validate Kubernetes objects taken from a file kubernetes-validate has no schema for, in a Pod."""
    container: dict[str, Any] = {"name": "probe", "image": "probe", "volumeMounts": list(mounts)}
    if resources is not None:
        container["resources"] = resources
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"containers": [container], "volumes": list(volumes)},
    }
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_every_kubernetes_manifest_validates_strictly_and_only_keda_and_monitors_lack_a_schema() -> None:
    objects = manifests()
    assert {kind for kind, _ in objects} >= {"Namespace", "Secret", "Deployment", "ScaledObject", "Job", "PodMonitor"}
    for (kind, name), doc in objects.items():
        if doc["apiVersion"] in (KEDA_API, MONITORING_API):
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert doc["metadata"].get("namespace", "book-pipeline") == "book-pipeline" or kind == "Namespace", name


def test_strict_validation_refuses_a_misspelt_field() -> None:
    worker = worker_deployment()
    worker["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"]["nmae"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError, match="nmae"):
        kubernetes_validate.validate(worker, K8S_VERSION, strict=True)


def test_the_worker_deployment_runs_the_images_worker_with_the_secret() -> None:
    worker = worker_deployment()
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["book-pipeline", "work"]
    assert '["book-pipeline", "work"]' in (PROJECT_ROOT / "Dockerfile").read_text()  # the image's default
    secret = only("Secret")
    assert [e["secretRef"]["name"] for e in container["envFrom"]] == [secret["metadata"]["name"]]
    assert "DATABASE_URL" in secret["stringData"]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert worker["spec"]["selector"]["matchLabels"].items() <= labels.items()


SCALED_OBJECT_SPEC = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "idleReplicaCount",
    "initialCooldownPeriod",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
POSTGRESQL_METADATA = {
    "query",
    "targetQueryValue",
    "activationTargetQueryValue",
    "connectionFromEnv",
    "host",
    "port",
    "userName",
    "dbName",
    "sslmode",
    "passwordFromEnv",
    "metricName",
}


def test_keda_scaled_object_scales_the_worker_deployment_with_postgresql_and_the_secret() -> None:
    scaled, auth = only("ScaledObject"), only("TriggerAuthentication")
    worker, secret = worker_deployment(), only("Secret")
    for doc in (scaled, auth):
        assert doc["apiVersion"] == KEDA_API
        assert set(doc["metadata"]) <= {"name", "namespace", "labels", "annotations"}
    spec = scaled["spec"]
    assert set(spec) <= SCALED_OBJECT_SPEC
    target = spec["scaleTargetRef"]
    assert (target.get("apiVersion", "apps/v1"), target.get("kind", "Deployment"), target["name"]) == (
        worker["apiVersion"],
        worker["kind"],
        worker["metadata"]["name"],
    )
    for field in ("minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod"):
        assert isinstance(spec[field], int) and spec[field] >= 0, field
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]  # one worker for the listings
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "postgresql" and set(trigger) <= {"type", "metadata", "authenticationRef", "name"}
    metadata = trigger["metadata"]
    assert set(metadata) <= POSTGRESQL_METADATA and {"query", "targetQueryValue"} <= set(metadata)
    # The CRD types trigger metadata as map[string]string: a bare number is refused by the API server.
    assert all(isinstance(v, str) for v in metadata.values()), metadata
    assert float(metadata["targetQueryValue"]) > 0
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    (ref,) = auth["spec"]["secretTargetRef"]
    assert (ref["parameter"], ref["name"]) == ("connection", secret["metadata"]["name"])
    assert ref["key"] in secret["stringData"] and secret["stringData"][ref["key"]].startswith("postgresql://")


def scaler_query_in_yaml() -> str:
    (trigger,) = only("ScaledObject")["spec"]["triggers"]
    return trigger["metadata"]["query"]


def test_keda_query_is_the_queues_named_query_and_counts_the_detail_work_left(db: Database) -> None:
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    assert scaler_query_in_yaml() == queue.scaler_query(DETAIL)

    queue.enqueue_many([_task(LISTING, i) for i in range(3)])  # listing pages are not counted
    queue.enqueue_many([_task(DETAIL, i) for i in range(7)])
    claimed = queue.claim("scaler-test", 3, task_types=[DETAIL]).tasks
    assert len(claimed) == 3
    complete(queue, claimed[0])
    queue.fail(claimed[1], "http_404: gone", retryable=False)
    # 7 details: 4 pending, 1 still in progress, 1 completed, 1 failed for good -> 5 left to work on.
    rows = db.query(scaler_query_in_yaml())
    assert rows == [{"n": 5}]


def _task(task_type: str, i: int) -> NewTask:
    return NewTask(task_type, {"url": f"http://scaler.test/{task_type}/{i}"})


def helm_values() -> dict[str, Any]:
    return yaml.safe_load((K8S / "dagster-values.yaml").read_text())


def test_helm_values_use_the_external_postgresql_through_the_secret_with_psycopg2() -> None:
    values, secret = helm_values(), only("Secret")
    assert values["postgresql"]["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"] == secret["metadata"]["name"]
    assert "postgresql-password" in secret["stringData"]  # the key the chart reads as DAGSTER_PG_PASSWORD
    pg = values["postgresql"]
    assert pg["postgresqlScheme"] == "postgresql+psycopg2"  # SQLAlchemy 2.1's plain postgresql:// is psycopg 3
    assert all(isinstance(pg[k], str) and pg[k] for k in ("postgresqlHost", "postgresqlUsername", "postgresqlDatabase"))
    assert isinstance(pg["service"]["port"], int) and isinstance(pg["postgresqlParams"], dict)


def test_helm_values_run_this_projects_code_location_and_launch_runs_as_kubernetes_jobs() -> None:
    values, worker = helm_values(), worker_deployment()
    user = values["dagster-user-deployments"]
    assert user["enabled"] is True and user["enableSubchart"] is True
    (deployment,) = user["deployments"]
    assert {"name", "image", "port"} <= set(deployment) and isinstance(deployment["port"], int)
    image = deployment["image"]
    worker_image = worker["spec"]["template"]["spec"]["containers"][0]["image"]
    assert f"{image['repository']}:{image['tag']}" == worker_image  # one image for code, runs, steps, workers
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("--module-name") + 1] == project["code_location_target_module"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert env["BOOK_PIPELINE_STEP_EXECUTOR"] == "k8s"
    assert [s["name"] for s in deployment["envSecrets"]] == [only("Secret")["metadata"]["name"]]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    validate_in_pod(resources=deployment["resources"])

    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher" and set(launcher["config"]) == {"k8sRunLauncher"}
    k8s = launcher["config"]["k8sRunLauncher"]
    assert [s["name"] for s in k8s["envSecrets"]] == [only("Secret")["metadata"]["name"]]
    validate_in_pod(
        volumes=k8s["volumes"],
        mounts=k8s["volumeMounts"],
        resources=k8s["runK8sConfig"]["containerConfig"]["resources"],
    )
    claims = {v["persistentVolumeClaim"]["claimName"] for v in k8s["volumes"] if "persistentVolumeClaim" in v}
    assert claims == set(volume_claims())
    assert all(c["spec"]["accessModes"] == ["ReadWriteMany"] for c in volume_claims().values())  # any node


def volume_claims() -> dict[str, dict[str, Any]]:
    return {name: doc for (kind, name), doc in manifests().items() if kind == "PersistentVolumeClaim"}


def claims_mounted_at(volumes: Sequence[Any], mounts: Sequence[Any]) -> dict[str, str]:
    """Each mount path of a pod's persistent volume claims: path -> claim name."""
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v}
    return {m["mountPath"]: claims[m["name"]] for m in mounts if m["name"] in claims}


def test_run_pods_and_workers_keep_data_dir_on_a_persistent_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    # The snapshot's files (and the change feed, the WARC archive) go under data_dir: a run pod's own disk
    # is gone with its Job, so data_dir must be where run pods mount a persistent volume claim.
    k8s = helm_values()["runLauncher"]["config"]["k8sRunLauncher"]
    env = dict(v.split("=", 1) for v in k8s["envVars"])
    monkeypatch.setenv("BOOK_PIPELINE_DATA_DIR", env["BOOK_PIPELINE_DATA_DIR"])
    data_dir = Settings(_env_file=None).data_dir  # type: ignore[call-arg]
    assert data_dir.is_absolute()
    claim = claims_mounted_at(k8s["volumes"], k8s["volumeMounts"]).get(str(data_dir))
    assert claim in volume_claims(), f"run pods mount no volume claim at data_dir {data_dir}"
    # The workers write the WARC archive there too: the same claim at the same path, the same setting.
    pod = worker_deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {e["name"]: e["value"] for e in container["env"]}["BOOK_PIPELINE_DATA_DIR"] == str(data_dir)
    assert claims_mounted_at(pod["volumes"], container["volumeMounts"]).get(str(data_dir)) == claim


def test_helm_values_keep_the_instance_rules_of_dagster_yaml() -> None:
    values = helm_values()
    instance = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    pools = values["concurrency"]["pools"]
    assert values["concurrency"]["enabled"] is True
    assert (pools["defaultLimit"], pools["granularity"]) == (
        instance["concurrency"]["pools"]["default_limit"],
        instance["concurrency"]["pools"]["granularity"],
    )
    retries = values["dagsterDaemon"]["runRetries"]
    assert (retries["enabled"], retries["maxRetries"], retries["retryOnAssetOrOpFailure"]) == (
        instance["run_retries"]["enabled"],
        instance["run_retries"]["max_retries"],
        instance["run_retries"]["retry_on_asset_or_op_failure"],
    )
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"


def test_k8s_run_config_objects_are_valid_kubernetes() -> None:
    config = yaml.safe_load((K8S / "run-config.yaml").read_text())["execution"]["config"]
    validate_in_pod(
        volumes=config["volumes"],
        mounts=config["volume_mounts"],
        resources=config["step_k8s_config"]["container_config"]["resources"],
    )
    assert config["job_namespace"] == only("Namespace")["metadata"]["name"]
    assert config["env_secrets"] == [only("Secret")["metadata"]["name"]]


def test_compose_docker_run_config_names_the_stacks_image_network_and_data_volume() -> None:
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
    docker = yaml.safe_load((PROJECT_ROOT / "deploy" / "docker" / "run-config.yaml").read_text())["execution"]
    config = docker["config"]
    app = compose["x-app"]
    # Each run is a container (DockerRunLauncher); its drain steps are processes there unless docker is chosen.
    executor = app["environment"]["BOOK_PIPELINE_STEP_EXECUTOR"]
    assert (
        executor.endswith(":-multiprocess}") and "docker" in Settings.model_fields["step_executor"].annotation.__args__
    )
    assert config["image"] == app["image"]
    assert config["network"] == compose["networks"]["default"]["name"]
    (volume,) = config["container_kwargs"]["volumes"]
    name, path = volume.split(":")
    assert name == compose["volumes"]["pipeline-data"]["name"]
    daemon = compose["services"]["dagster-daemon"]
    assert (
        f"pipeline-data:{path}" in daemon["volumes"]
        and "/var/run/docker.sock:/var/run/docker.sock" in daemon["volumes"]
    )
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert f"DAGSTER_ARTIFACT_DIR={path}/dagster/storage" in dockerfile  # the IO manager's files are on the volume
    assert set(config["env_vars"]) >= {"DATABASE_URL", "DAGSTER_HOME", "DAGSTER_PG_PASSWORD", "DAGSTER_ARTIFACT_DIR"}


def test_pod_monitors_scrape_a_named_metrics_port_of_the_worker_and_exporter_pods() -> None:
    monitors = {name: doc for (kind, name), doc in manifests().items() if kind == "PodMonitor"}
    scraped = set()
    for name, monitor in monitors.items():
        assert monitor["apiVersion"] == MONITORING_API, name
        assert set(monitor["spec"]) <= {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel"}
        selector = monitor["spec"]["selector"]["matchLabels"]
        (pods,) = [d for (k, _), d in manifests().items() if k == "Deployment" and selector.items() <= _labels(d)]
        (container,) = pods["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
            assert endpoint["path"] == "/metrics" and endpoint["port"] in ports
            # The process binds the pod's address on the port the monitor scrapes (settings, not defaults).
            port_setting = (
                "BOOK_PIPELINE_METRICS_PORT"
                if container["command"][-1] == "work"
                else ("BOOK_PIPELINE_QUEUE_METRICS_PORT")
            )
            assert env[port_setting] == str(ports[endpoint["port"]])
            assert env["BOOK_PIPELINE_METRICS_HOST"] == "0.0.0.0"
            assert port_setting.removeprefix("BOOK_PIPELINE_").lower() in Settings.model_fields
        scraped.add(container["command"][-1])
    assert scraped == {"work", "metrics"}


def _labels(deployment: dict[str, Any]) -> Any:
    return deployment["spec"]["template"]["metadata"]["labels"].items()
