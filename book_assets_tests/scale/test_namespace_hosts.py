"""The namespace hosts leave nothing behind and reach nothing outside their subnet."""

from __future__ import annotations

import subprocess

import pytest

from book_assets_tests.scale.hosts import NamespaceHosts, remove_leftovers, unavailable_reason


@pytest.fixture(autouse=True)
def _needs_namespaces() -> None:
    if reason := unavailable_reason():
        pytest.skip(f"namespace hosts unavailable: {reason}")


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def test_hosts_have_only_their_subnet_and_are_removed_with_their_processes_when_the_run_fails() -> None:
    with pytest.raises(RuntimeError, match="the run failed"), NamespaceHosts(2) as net:
        names, bridge = [h.name for h in net.hosts], net.bridge
        routes = subprocess.run(net.hosts[0].command(["ip", "route"]), capture_output=True, text=True).stdout
        sleeper = subprocess.Popen(net.hosts[1].command(["sleep", "300"]))
        assert names[0] in _namespaces() and bridge in _links()
        raise RuntimeError("the run failed")
    assert "default" not in routes and routes.split()[0] == f"{net.gateway.rsplit('.', 1)[0]}.0/24"
    assert sleeper.wait(10) != 0  # ended by the clean-up, not by itself
    assert not set(names) & _namespaces()
    assert bridge not in _links()


def test_leftovers_of_a_run_whose_process_is_gone_are_removed() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    leftover = f"bp{gone.pid}h1"
    subprocess.run(["ip", "netns", "add", leftover], check=True)
    try:
        assert leftover in remove_leftovers()
        assert leftover not in _namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", leftover], capture_output=True)
