"""deploy/: the Kubernetes manifests, the Helm values and the executors' run config, checked offline.

Kubernetes' own kinds are validated strictly (unknown fields fail) against the schemas kubernetes-validate
ships. It has none for KEDA's custom resources or for the values of Dagster's Helm chart, so those are checked
here field by field (the fields KEDA and the chart read, with the types they need), and every Kubernetes
object inside them (volumes, mounts, resources) is validated by wrapping it in a Pod. KEDA's query reads a
series the alert rules record. Every pod is hardened (an unprivileged user, no privilege escalation, no
capabilities, the runtime's seccomp profile) and only the containers that need a database URL get one.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from book_assets import __version__
from book_assets.crawl.drain import STOP_GRACE_S
from book_assets.settings import PROJECT_ROOT, Settings
from book_assets_tests.observe.test_dashboard_and_rules import metric_names, recorded_names

K8S = PROJECT_ROOT / "deploy" / "k8s"
#: The secrets by what they hold: the app role's DATABASE_URL, the migrator's, Dagster's storage password.
APP_SECRET, MIGRATE_SECRET, DAGSTER_SECRET = "book-pipeline-db", "book-pipeline-migrate", "book-pipeline-dagster-db"
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


def secret(name: str) -> dict[str, Any]:
    return manifests()[("Secret", name)]


def validate_in_pod(
    *,
    volumes: Sequence[Any] = (),
    mounts: Sequence[Any] = (),
    resources: Any = None,
    container: dict[str, Any] | None = None,
    pod: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Validate Kubernetes objects taken from a file kubernetes-validate has no schema for, in a Pod:
    ``container`` and ``pod`` are fields of its container and its spec, ``metadata`` of its metadata."""
    fields: dict[str, Any] = {"name": "probe", "image": "probe", "volumeMounts": list(mounts), **(container or {})}
    if resources is not None:
        fields["resources"] = resources
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", **(metadata or {})},
        "spec": {"containers": [fields], "volumes": list(volumes), **(pod or {})},
    }
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


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
    worker["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["nmae"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError, match="nmae"):
        kubernetes_validate.validate(worker, K8S_VERSION, strict=True)


def test_the_worker_deployment_runs_the_images_worker_with_the_app_roles_database_url() -> None:
    worker = worker_deployment()
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["book-pipeline", "work"]
    assert '["book-pipeline", "work"]' in (PROJECT_ROOT / "Dockerfile").read_text()  # the image's default
    assert secret_refs(container) == {"DATABASE_URL": (APP_SECRET, "DATABASE_URL")}
    assert secret(APP_SECRET)["stringData"]["DATABASE_URL"].startswith("postgresql://")
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
#: KEDA's Prometheus scaler's metadata fields.
PROMETHEUS_METADATA = {
    "serverAddress",
    "query",
    "threshold",
    "activationThreshold",
    "namespace",
    "ignoreNullValues",
    "unsafeSsl",
    "authModes",
    "queryParameters",
    "customHeaders",
}


def test_keda_scales_the_workers_on_the_domains_with_due_work_within_a_cost_cap() -> None:
    scaled, worker = only("ScaledObject"), worker_deployment()
    assert scaled["apiVersion"] == KEDA_API
    assert set(scaled["metadata"]) <= {"name", "namespace", "labels", "annotations"}
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
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= 4  # one worker for the listings; a cost cap
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and set(trigger) <= {"type", "metadata", "name"}
    metadata = trigger["metadata"]
    assert set(metadata) <= PROMETHEUS_METADATA and {"serverAddress", "query", "threshold"} <= set(metadata)
    # The CRD types trigger metadata as map[string]string: a bare number is refused by the API server.
    assert all(isinstance(v, str) for v in metadata.values()), metadata
    assert float(metadata["threshold"]) == 1  # one replica per domain: politeness gives a domain no more
    assert metadata["ignoreNullValues"] == "true"  # no figures (exporter down): keep minReplicaCount
    # It reads what the alert rules record from the exporter's due work, not tasks that are not due yet.
    assert metric_names(metadata["query"]) == {"book_pipeline:queue_domains_with_due_work:count"} <= recorded_names()
    assert not [d for (k, _), d in manifests().items() if k == "TriggerAuthentication"]  # no database credential


def helm_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((K8S / "dagster-values.yaml").read_text())
    return values


def test_helm_values_use_the_external_postgresql_through_the_secret_with_psycopg2() -> None:
    values, dagster_secret = helm_values(), secret(DAGSTER_SECRET)
    assert values["postgresql"]["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"] == dagster_secret["metadata"]["name"]
    assert set(dagster_secret["stringData"]) == {
        "postgresql-password"
    }  # the key the chart reads as DAGSTER_PG_PASSWORD
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
    assert [s["name"] for s in deployment["envSecrets"]] == [APP_SECRET]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    validate_in_pod(resources=deployment["resources"])

    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher" and set(launcher["config"]) == {"k8sRunLauncher"}
    k8s = launcher["config"]["k8sRunLauncher"]
    assert set(k8s) <= K8S_RUN_LAUNCHER_FIELDS and set(k8s["runK8sConfig"]) <= RUN_K8S_CONFIG_FIELDS
    assert [s["name"] for s in k8s["envSecrets"]] == [APP_SECRET]
    run = k8s["runK8sConfig"]
    validate_in_pod(
        volumes=k8s["volumes"],
        mounts=k8s["volumeMounts"],
        container={**run["containerConfig"], "securityContext": k8s["securityContext"]},
        pod=run["podSpecConfig"],
        metadata=run["podTemplateSpecMetadata"],
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
    assert {e["name"]: e.get("value") for e in container["env"]}["BOOK_PIPELINE_DATA_DIR"] == str(data_dir)
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
    step = config["step_k8s_config"]
    validate_in_pod(
        volumes=config["volumes"],
        mounts=config["volume_mounts"],
        container=step["container_config"],
        pod=step["pod_spec_config"],
        metadata=step["pod_template_spec_metadata"],
    )
    assert config["job_namespace"] == only("Namespace")["metadata"]["name"]
    assert config["env_secrets"] == [APP_SECRET]


def test_a_terminated_run_container_is_given_the_time_its_drain_takes_to_stop() -> None:
    instance = yaml.safe_load((PROJECT_ROOT / "deploy" / "docker" / "dagster.yaml").read_text())
    launcher = instance["run_launcher"]
    assert launcher["class"] == "DockerRunLauncher"
    # SIGKILL comes this long after SIGTERM: after the drain's workers stopped, with time left to record CANCELED.
    assert launcher["config"]["container_kwargs"]["stop_timeout"] > STOP_GRACE_S + 10


def test_compose_docker_run_config_names_the_stacks_image_network_and_data_volume() -> None:
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
    docker = yaml.safe_load((PROJECT_ROOT / "deploy" / "docker" / "run-config.yaml").read_text())["execution"]
    config = docker["config"]
    app = compose["x-app"]
    # Each run is a container (DockerRunLauncher); its drain steps are processes there unless docker is chosen.
    executor = app["environment"]["BOOK_PIPELINE_STEP_EXECUTOR"]
    assert executor.endswith(":-multiprocess}") and "docker" in get_args(
        Settings.model_fields["step_executor"].annotation
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


def test_pod_monitors_scrape_a_named_metrics_port_of_the_worker_exporter_run_and_step_pods() -> None:
    monitors = {name: doc for (kind, name), doc in manifests().items() if kind == "PodMonitor"}
    scraped = set()
    for name, monitor in monitors.items():
        assert monitor["apiVersion"] == MONITORING_API, name
        assert set(monitor["spec"]) <= {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel"}
        selector = monitor["spec"]["selector"]["matchLabels"]
        pods = [d for (k, _), d in manifests().items() if k == "Deployment" and selector.items() <= _labels(d)]
        if not pods:  # Dagster's run and step pods: labelled by the Helm values and the run config
            assert name == "book-pipeline-runs", name
            scraped.add("runs")
            continue
        (deployment,) = pods
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
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
    assert scraped == {"work", "metrics", "runs"}


def test_run_and_step_pods_serve_metrics_and_traces_and_log_their_run_id() -> None:
    (runs,) = [d for (k, n), d in manifests().items() if k == "PodMonitor" and n == "book-pipeline-runs"]
    selector = runs["spec"]["selector"]["matchLabels"]
    (endpoint,) = runs["spec"]["podMetricsEndpoints"]
    k8s = helm_values()["runLauncher"]["config"]["k8sRunLauncher"]
    env = dict(v.split("=", 1) for v in k8s["envVars"])  # run pods, and step pods through includeConfigInLaunchedRuns
    assert env["BOOK_PIPELINE_METRICS_HOST"] == "0.0.0.0" and env["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http")
    step = yaml.safe_load((K8S / "run-config.yaml").read_text())["execution"]["config"]["step_k8s_config"]
    run = k8s["runK8sConfig"]
    for container, labels in (
        (run["containerConfig"], run["podTemplateSpecMetadata"]["labels"]),
        (step["container_config"], step["pod_template_spec_metadata"]["labels"]),
    ):
        assert selector.items() <= labels.items()
        assert {p["name"]: p["containerPort"] for p in container["ports"]}[endpoint["port"]] == int(
            env["BOOK_PIPELINE_METRICS_PORT"]
        )
        (run_id,) = [e for e in container["env"] if e["name"] == "DAGSTER_RUN_ID"]
        assert run_id["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['dagster/run-id']"  # set by dagster-k8s
    assert selector.items() <= k8s["labels"].items()


#: The fields of the chart's dagsterDaemon.runMonitoring (its instance template, Dagster 1.13).
RUN_MONITORING_FIELDS = {
    "enabled",
    "startTimeoutSeconds",
    "cancelTimeoutSeconds",
    "maxResumeRunAttempts",
    "pollIntervalSeconds",
    "freeSlotsAfterRunEndSeconds",
}
#: The fields the chart's schema allows under runLauncher.config.k8sRunLauncher and its runK8sConfig.
K8S_RUN_LAUNCHER_FIELDS = {
    "image",
    "imagePullPolicy",
    "jobNamespace",
    "loadInclusterConfig",
    "kubeconfigFile",
    "envConfigMaps",
    "envSecrets",
    "envVars",
    "volumeMounts",
    "volumes",
    "labels",
    "failPodOnRunFailure",
    "resources",
    "schedulerName",
    "securityContext",
    "runK8sConfig",
}
RUN_K8S_CONFIG_FIELDS = {"containerConfig", "podSpecConfig", "podTemplateSpecMetadata", "jobSpecConfig", "jobMetadata"}


def test_run_monitoring_fails_lost_runs_and_frees_the_slots_they_held() -> None:
    monitoring = helm_values()["dagsterDaemon"]["runMonitoring"]
    assert set(monitoring) <= RUN_MONITORING_FIELDS and monitoring["enabled"] is True
    for field in ("startTimeoutSeconds", "cancelTimeoutSeconds", "pollIntervalSeconds", "freeSlotsAfterRunEndSeconds"):
        assert isinstance(monitoring[field], int) and monitoring[field] > 0, field
    # A run that is not resumed is retried once by runRetries, never twice over.
    assert monitoring["maxResumeRunAttempts"] == 0


def _pod_specs() -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every pod of deploy/k8s by name: (its pod securityContext, its containers)."""
    found = {}
    for (kind, name), doc in manifests().items():
        if kind in ("Deployment", "Job"):
            spec = doc["spec"]["template"]["spec"]
            found[name] = (spec.get("securityContext", {}), spec["containers"])
    values = helm_values()
    (user,) = values["dagster-user-deployments"]["deployments"]
    found["dagster-user-code"] = (user["podSecurityContext"], [{"name": "user", **user}])
    for component in ("dagsterDaemon", "dagsterWebserver"):
        found[component] = (values[component]["podSecurityContext"], [{"name": component, **values[component]}])
    k8s = values["runLauncher"]["config"]["k8sRunLauncher"]
    run = {"name": "run", **k8s["runK8sConfig"]["containerConfig"], "securityContext": k8s["securityContext"]}
    found["dagster-run"] = (k8s["runK8sConfig"]["podSpecConfig"]["securityContext"], [run])
    step = yaml.safe_load((K8S / "run-config.yaml").read_text())["execution"]["config"]["step_k8s_config"]
    found["dagster-step"] = (step["pod_spec_config"]["securityContext"], [{"name": "step", **step["container_config"]}])
    return found


def test_every_container_runs_unprivileged_with_no_escalation_no_capabilities_and_the_default_seccomp() -> None:
    pods = _pod_specs()
    assert len(pods) == 8
    for name, (pod, containers) in pods.items():
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in containers:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            assert "privileged" not in context and "add" not in context["capabilities"]


def test_the_projects_own_pods_have_a_read_only_root_and_write_only_to_their_volumes() -> None:
    for name in ("book-pipeline-worker", "book-pipeline-metrics", "book-pipeline-migrate"):
        _pod, containers = _pod_specs()[name]
        (container,) = containers
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounts, name  # Playwright's Chromium profile, the fork server's socket, metrics files
        assert {e["name"]: e.get("value") for e in container["env"]}["HOME"] == "/tmp", name


def test_the_worker_starts_on_its_metrics_port_and_is_ready_and_alive_while_its_health_file_is_fresh() -> None:
    (container,) = worker_deployment()["spec"]["template"]["spec"]["containers"]
    assert container["startupProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BOOK_PIPELINE_HEALTH_FILE"].startswith("/tmp/")  # the writable emptyDir
    for probe in ("readinessProbe", "livenessProbe"):
        assert "$BOOK_PIPELINE_HEALTH_FILE" in container[probe]["exec"]["command"][-1], probe
    assert container["livenessProbe"]["failureThreshold"] * container["livenessProbe"]["periodSeconds"] >= 60


def secret_refs(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The container's variables that come from a secret: name -> (secret, key); a whole secret is refused."""
    assert not [e for e in container.get("envFrom", []) if "secretRef" in e], container["name"]
    return {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def test_a_database_url_reaches_only_the_containers_that_need_it_and_only_the_migration_may_change_the_schema() -> None:
    app, migrator = (urlsplit(secret(n)["stringData"]["DATABASE_URL"]) for n in (APP_SECRET, MIGRATE_SECRET))
    assert app.username != migrator.username and (app.hostname, app.path) == (migrator.hostname, migrator.path)
    assert set(secret(APP_SECRET)["stringData"]) == set(secret(MIGRATE_SECRET)["stringData"]) == {"DATABASE_URL"}
    roles = (PROJECT_ROOT / "deploy" / "postgres" / "roles.sql").read_text()
    assert 'GRANT USAGE, CREATE ON SCHEMA public TO :"migrator"' in roles
    wanted = {
        "book-pipeline-worker": {"DATABASE_URL": (APP_SECRET, "DATABASE_URL")},
        "book-pipeline-metrics": {"DATABASE_URL": (APP_SECRET, "DATABASE_URL")},
        "book-pipeline-migrate": {"DATABASE_URL": (MIGRATE_SECRET, "DATABASE_URL")},
    }
    for name, (_pod, containers) in _pod_specs().items():
        if name in wanted:
            (container,) = containers
            assert secret_refs(container) == wanted[name], name
    values = helm_values()
    for component in ("dagsterDaemon", "dagsterWebserver"):  # Dagster's own: its storage password only (the chart)
        assert not values[component].get("envSecrets"), component


def _labels(deployment: dict[str, Any]) -> Any:
    return deployment["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.unit
def test_the_manifests_deploy_the_image_of_the_package_version() -> None:
    """The release is declared once (pyproject.toml); the manifests name its image and cannot drift from it."""
    images = [m.group(1) for path in K8S.glob("*.yaml") for m in re.finditer(r"/book-pipeline:(\S+)", path.read_text())]
    assert images and set(images) == {__version__}
    chart_image = helm_values()["dagster-user-deployments"]["deployments"][0]["image"]
    assert chart_image["tag"] == __version__
