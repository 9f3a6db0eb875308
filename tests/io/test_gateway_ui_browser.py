"""The ``/ui`` page in a real browser (headless Chromium, Debian's package) against a gateway on
uvicorn, a real redis-server and the FakeCluster: the page lists the topics and groups, tails a
group live through the stream (messages produced before and while it is open), acks what it
shows, and its screenshot shows it."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_stream_support import (
    ADMIN,
    ADMIN_KEY,
    READER_KEY,
    serving,
    stream_config,
)
from tests.support.headless_chromium import Tab, chromium_tab
from tubemq_aio.testing import FakeCluster, RedisServer, wait_until

#: Starts headless Chromium: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

ROWS = "[...document.querySelectorAll('#messages tr.message')]"
WIDTH, HEIGHT = 1100, 900


async def _shown(tab: Tab) -> list[str]:
    values: list[str] = await tab.evaluate(f"{ROWS}.map(r => r.cells[2].textContent)")
    return values


async def test_the_page_tails_a_group_live_and_acks_what_it_shows(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    groups = [{"name": "gs", "topics": ["t"]}, {"name": "gb", "topics": ["t"], "mode": "broadcast"}]
    async with FakeCluster(topics={"t": 2}, max_batch=10) as cluster:
        config = stream_config(cluster.master_addr, redis_server.url, groups, ui=True)
        before = await produce_numbered(cluster.master_addr, "t", 5)
        async with (
            serving(config) as url,
            chromium_tab(f"{url}/ui#key={ADMIN_KEY}&tail=gs", width=WIDTH, height=HEIGHT) as tab,
        ):

            async def showing(count: int) -> bool:
                return len(await _shown(tab)) >= count

            await wait_until(lambda: showing(5), 60, "the page shows the first messages")
            live = await produce_numbered(cluster.master_addr, "t", 5, start=100)
            await wait_until(lambda: showing(10), 60, "the page shows the messages sent live")
            assert sorted(await _shown(tab)) == sorted(before + live)
            assert await tab.evaluate("document.getElementById('count').textContent") == (
                "10 messages"
            )
            assert await tab.evaluate("document.getElementById('status').textContent") == (
                "Tailing gs."
            )
            topics = await tab.evaluate(
                "[...document.querySelectorAll('#topics tbody tr')]"
                ".map(r => r.cells[0].textContent)"
            )
            assert topics == ["t"]
            listed = await tab.evaluate(
                "[...document.querySelectorAll('#groups tbody tr')]"
                ".map(r => r.cells[0].textContent + ':' + r.cells[1].textContent)"
            )
            assert listed == ["gb:broadcast", "gs:clustering"]
            # the key left the address bar
            assert "key=" not in await tab.evaluate("location.href")
            png = await tab.screenshot()
            (tmp_path / "ui.png").write_bytes(png)
            print(f"\nscreenshot: {tmp_path / 'ui.png'}")
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:

                async def acked() -> bool:
                    lag = (await client.get("/v1/groups/gs/lag", headers=ADMIN)).json()
                    return int(lag["total_lag_bytes"]) == 0

                await wait_until(acked, 30, "the page acked every batch it showed")
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    assert image.size == (WIDTH, HEIGHT)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20, "the screenshot is (nearly) blank"
    # text was drawn: dark pixels (the table's text) make up a real share of the page
    dark = sum(image.convert("L").histogram()[:100])
    assert dark > 2000, dark


async def test_a_key_without_an_admin_scope_gets_no_listing(
    redis_server: RedisServer,
) -> None:
    async with FakeCluster(topics={"t": 1}) as cluster:
        config = stream_config(
            cluster.master_addr, redis_server.url, [{"name": "gs", "topics": ["t"]}], ui=True
        )
        async with serving(config) as url, chromium_tab(f"{url}/ui#key={READER_KEY}") as tab:

            async def refused() -> bool:
                text: str = await tab.evaluate("document.getElementById('status').textContent")
                return "admin" in text

            await wait_until(refused, 60, "the page says the key lacks an admin scope")
            assert await tab.evaluate("document.querySelectorAll('#groups tbody tr').length") == 0
