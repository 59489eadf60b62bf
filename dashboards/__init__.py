"""Grafana dashboards as code, Prometheus rules and Alertmanager examples."""
