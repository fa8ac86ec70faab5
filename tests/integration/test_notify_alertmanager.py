"""A real Prometheus Alertmanager (Debian's prometheus-alertmanager) takes our alerts and their resolves.

The test starts Alertmanager on a free loopback port, clustering off, with a route whose receiver is a
webhook server of the test. An alert delivered by the alertmanager channel must show in Alertmanager's API
with its labels, reach the receiver grouped by them, and its resolve must end it there.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from _notify_helpers import Receiver, alert
from _support import wait_until
from aiohttp import web

from streameval.embedded import free_port
from streameval.features.notify import ChannelConfig, ChannelWorker, Links

pytestmark = pytest.mark.integration

BINARY = "/usr/bin/prometheus-alertmanager"


def start_alertmanager(config: Path, storage: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                BINARY,
                f"--config.file={config}",
                f"--storage.path={storage}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


@pytest.mark.skipif(
    shutil.which(BINARY) is None,
    reason="prometheus-alertmanager is not installed: apt-get install -y prometheus-alertmanager (the README)",
)
async def test_alertmanager_groups_the_alert_with_its_labels_and_the_resolve_ends_it(tmp_path: Path) -> None:
    notifications: list[dict[str, Any]] = []

    async def hook(request: web.Request, body: bytes) -> web.StreamResponse:
        notifications.append(await request.json())
        return web.Response(status=200)

    receiver = await Receiver(hook).start()
    config, storage = tmp_path / "alertmanager.yml", tmp_path / "data"
    config.write_text(
        f"""
route:
  receiver: hook
  group_by: [alertname, model, suite]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {receiver.url}/alertmanager
        send_resolved: true
"""
    )
    port = free_port()
    proc = start_alertmanager(config, storage, port, tmp_path / "alertmanager.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as http:

            async def ready() -> bool:
                assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()
                return (await http.get(f"{base}/-/ready", timeout=1)).status_code == 200

            await wait_until(ready, timeout=30, what="Alertmanager to be ready", ignore=(httpx.HTTPError,))
            channel = ChannelConfig.model_validate({"name": "am", "kind": "alertmanager", "url": base})
            worker = ChannelWorker(channel, http, Links("https://evals.example.com"))
            firing = alert()
            outcome = await worker.deliver(firing)
            assert outcome.delivered and outcome.status == 200, outcome

            async def active() -> list[dict[str, Any]]:
                found = (
                    await http.get(f"{base}/api/v2/alerts", params={"filter": 'source="streameval"'})
                ).json()
                return [a for a in found if a["status"]["state"] == "active"]

            async def poll(check: Any, what: str) -> Any:
                return await wait_until(check, timeout=30, what=what)

            [shown] = await poll(active, "the alert in Alertmanager's API")
            assert shown["labels"] == {
                "alertname": "low-mean",
                "severity": "critical",
                "model": "gpt-4o",
                "suite": "qa",
                "rule": "low-mean",
                "source": "streameval",
            }
            assert shown["annotations"]["alert_id"] == firing.id
            assert shown["generatorURL"].startswith("https://evals.example.com/dashboard?model=gpt-4o")

            async def notified(status: str) -> list[dict[str, Any]]:
                return [n for n in notifications if n["status"] == status]

            [group] = await poll(lambda: notified("firing"), "the grouped notification")
            assert group["groupLabels"] == {"alertname": "low-mean", "model": "gpt-4o", "suite": "qa"}
            assert group["alerts"][0]["labels"]["severity"] == "critical"

            resolve = await worker.deliver(alert(status="resolved"))
            assert resolve.delivered
            await poll(lambda: _none(active), "the alert to end")
            [ended] = await poll(lambda: notified("resolved"), "the resolved notification")
            assert ended["alerts"][0]["labels"]["alertname"] == "low-mean"
            assert ended["alerts"][0]["status"] == "resolved"
    except BaseException:
        print((tmp_path / "alertmanager.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        await receiver.stop()


async def _none(active: Any) -> bool:
    return not await active()


@pytest.mark.skipif(shutil.which(BINARY) is None, reason="prometheus-alertmanager is not installed")
async def test_two_detector_alerts_of_one_pair_are_two_alerts_and_each_resolve_ends_its_own(
    tmp_path: Path,
) -> None:
    config, storage = tmp_path / "alertmanager.yml", tmp_path / "data"
    config.write_text("route:\n  receiver: none\nreceivers:\n  - name: none\n")
    port = free_port()
    proc = start_alertmanager(config, storage, port, tmp_path / "alertmanager.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as http:

            async def ready() -> bool:
                assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()
                return (await http.get(f"{base}/-/ready", timeout=1)).status_code == 200

            await wait_until(ready, timeout=30, what="Alertmanager to be ready", ignore=(httpx.HTTPError,))
            channel = ChannelConfig.model_validate({"name": "am", "kind": "alertmanager", "url": base})
            worker = ChannelWorker(channel, http, Links(None))
            shifts = [
                alert(id=f"score_shift:{series}:60:w:gpt-4o:qa", rule="score_shift", metric="score_shift")
                for series in ("overall", "evaluator:exact_match")
            ]
            for shift in shifts:
                assert (await worker.deliver(shift)).delivered

            async def active() -> list[str]:
                found = (
                    await http.get(f"{base}/api/v2/alerts", params={"filter": 'source="streameval"'})
                ).json()
                return sorted(a["annotations"]["alert_id"] for a in found if a["status"]["state"] == "active")

            async def both() -> bool:
                return await active() == sorted(s.id for s in shifts)

            await wait_until(both, timeout=30, what="both shift alerts in Alertmanager")
            done = shifts[0].model_copy(update={"status": "resolved", "resolution": "in_control"})
            assert (await worker.deliver(done)).delivered

            async def one_left() -> bool:
                return await active() == [shifts[1].id]

            await wait_until(one_left, timeout=30, what="the resolve to end only its own alert")
    except BaseException:
        print((tmp_path / "alertmanager.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
