"""The committed Grafana JSON is exactly what dashboards/build.py generates, and is well formed.

The PromQL of every panel is parsed by ``promtool`` (as recording rules) when it is installed;
tests/integration/test_dashboards.py runs each query against a real Prometheus.
"""

from __future__ import annotations

import doctest
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "dashboards" / "grafana"


def load_build() -> ModuleType:
    """``dashboards.build`` (the checkout root is not an installed package path)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("dashboards.build")


build = load_build()


def test_committed_files_are_generated() -> None:
    files = build.generated()
    assert {p.parent for p in files} == {Path("dashboards/grafana"),
                                         Path("helm/moltscope/files/dashboards"),
                                         Path("helm/moltscope/files")}
    for rel, text in files.items():
        assert (ROOT / rel).read_text() == text, f"{rel} is stale: run python -m dashboards.build"
    committed = {p.name for p in GRAFANA.glob("*.json")}
    assert committed == {d.filename for d in build.DASHBOARDS}
    assert build.main(["--check"]) == 0


def test_check_flags_stale_and_extra_files(tmp_path: Path) -> None:
    assert build.main(["--root", str(tmp_path)]) == 0
    assert build.main(["--root", str(tmp_path), "--check"]) == 0
    victim = tmp_path / "dashboards" / "grafana" / build.DASHBOARDS[0].filename
    text = victim.read_text()
    victim.write_text(text.replace("moltscope_posts_total", "moltscope_x_total"))
    assert build.main(["--root", str(tmp_path), "--check"]) == 1
    victim.write_text(text)
    (tmp_path / "helm/moltscope/files/dashboards/old.json").write_text("{}")
    assert build.main(["--root", str(tmp_path), "--check"]) == 1


def test_doctests() -> None:
    assert doctest.testmod(build).failed == 0


def test_dashboards_are_well_formed() -> None:
    uids = [d.uid for d in build.DASHBOARDS]
    assert len(set(uids)) == len(uids) == 5
    for d in build.DASHBOARDS:
        model = json.loads((GRAFANA / d.filename).read_text())
        ids = [p["id"] for p in model["panels"]]
        assert len(set(ids)) == len(ids)
        cells: set[tuple[int, int]] = set()
        for p in model["panels"]:
            g = p["gridPos"]
            assert g["x"] + g["w"] <= build.GRID_WIDTH
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                    for y in range(g["y"], g["y"] + g["h"])}
            assert not cells & mine, f"{d.uid}: {p['title']} overlaps another panel"
            cells |= mine
            if p["type"] == "row":
                continue
            assert p["targets"], f"{d.uid}: {p['title']} has no query"
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            for t in p["targets"]:
                assert t["expr"].strip() and ("moltscope_" in t["expr"] or "Moltscope" in t["expr"])
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])


def test_panel_queries_parse_with_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (scripts/install-system-deps.sh installs it)")
    rules = [{"record": f"moltscope:panel_{i}",
              "expr": t.expr.replace(build.RATE, "1m")}
             for i, (_, t) in enumerate(
                 pt for d in build.DASHBOARDS for pt in d.targets())]
    f = tmp_path / "panels.rules.yml"
    # JSON is YAML: no YAML writer needed.
    f.write_text(json.dumps({"groups": [{"name": "panels", "rules": rules}]}))
    out = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (scripts/install-system-deps.sh installs it)")
    return path


def run_ok(*argv: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_prometheus_config_and_rules_check() -> None:
    promtool = tool("promtool")
    prom = ROOT / "dashboards" / "prometheus"
    assert "SUCCESS" in run_ok(promtool, "check", "config", str(prom / "prometheus.yml"))
    assert "SUCCESS" in run_ok(promtool, "check", "rules", str(prom / "moltscope.rules.yml"))


def test_prometheus_rule_unit_tests() -> None:
    promtool = tool("promtool")
    tests = sorted((ROOT / "dashboards" / "prometheus" / "tests").glob("*.yml"))
    assert tests
    assert "SUCCESS" in run_ok(promtool, "test", "rules", *map(str, tests))


def test_alertmanager_config_checks_and_routes() -> None:
    amtool = tool("amtool")
    config = str(ROOT / "dashboards" / "alertmanager" / "alertmanager.yml")
    assert "SUCCESS" in run_ok(amtool, "check-config", config)
    routed = run_ok(amtool, "config", "routes", "test", f"--config.file={config}",
                    "severity=critical", "alertname=MoltscopeApiDown")
    assert routed.splitlines()[0] == "moltscope-webhook"


# ------------------------------------------------------------------------ deployment files
# No Docker engine nor helm binary in the test environment: these hold the files' structure
# (and run `docker-compose config` when a compose client is installed).

def load_yaml(path: Path) -> Any:
    import yaml  # PyYAML (a dependency of huggingface_hub)

    return yaml.safe_load(path.read_text())


def test_compose_file() -> None:
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]
    assert {"kafka", "redis", "topics", "worker", "api", "source", "crawler", "prometheus",
            "alertmanager", "grafana"} <= services.keys()
    assert services["worker"]["deploy"]["replicas"] == 2
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for name, svc in services.items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    provider = load_yaml(ROOT / "dashboards/provisioning/dashboards/moltscope.yml")
    mounted = {v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert provider["providers"][0]["options"]["path"] in mounted
    scrape = load_yaml(ROOT / "dashboards/prometheus/prometheus.yml")["scrape_configs"]
    api_port = services["api"]["environment"]["MOLTSCOPE_API_PORT"]
    assert f"api:{api_port}" in scrape[0]["static_configs"][0]["targets"]


def test_compose_config_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("docker-compose"):
        argv = ["docker-compose"]
    elif shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                   capture_output=True).returncode == 0:
        argv = ["docker", "compose"]
    else:
        pytest.skip("no docker compose client installed")
    monkeypatch.setenv("MOLTSCOPE_API_TOKEN", "test-token")
    run_ok(*argv, "-f", str(ROOT / "docker-compose.yml"), "--profile", "crawl", "config", "-q")
    monkeypatch.delenv("MOLTSCOPE_API_TOKEN")
    refused = subprocess.run([*argv, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                             capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode != 0 and "MOLTSCOPE_API_TOKEN" in refused.stderr


def test_dockerfile_copies_what_dockerignore_keeps() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    copied = [p for ln in lines if ln.startswith("COPY ") for p in ln.split()[1:-1]]
    assert copied
    for path in copied:
        assert (ROOT / path).exists() and path not in ignored, path
    assert "FROM python:3.11-slim" in lines
    assert any("torch==2.13.0+cpu" in ln for ln in lines)


def test_helm_chart_references_only_defined_values() -> None:
    import re

    chart = ROOT / "helm" / "moltscope"
    meta = load_yaml(chart / "Chart.yaml")
    assert meta["apiVersion"] == "v2" and meta["name"] == "moltscope"
    values = load_yaml(chart / "values.yaml")
    refs: set[str] = set()
    for template in (chart / "templates").iterdir():
        refs |= set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", template.read_text()))
    assert refs
    for ref in sorted(refs):
        node: Any = values
        for key in ref.split("."):
            assert isinstance(node, dict) and key in node, f".Values.{ref} is not in values.yaml"
            node = node[key]
    assert values["worker"]["replicas"] == 2
