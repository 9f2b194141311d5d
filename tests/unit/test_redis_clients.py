"""TOOLFLEET_REDIS_URL's forms: one server, or a master Sentinel manages."""

from __future__ import annotations

import pytest
from kombu import Connection

from toolfleet.shared.celery_wire.transport import SentinelTransport, broker_transport
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.redaction import mask_url
from toolfleet.shared.redis_clients import (
    SentinelTarget,
    broker_connection,
    is_sentinel,
    sentinel_target,
)


def test_a_sentinel_url_gives_the_sentinels_the_master_and_both_passwords() -> None:
    url = "redis+sentinel://app:p%40ss@s1:26379,s2,[::1]:26380/mymaster/3?sentinel_password=sp"
    assert sentinel_target(url) == SentinelTarget(
        sentinels=(("s1", 26379), ("s2", 26379), ("::1", 26380)),
        service="mymaster",
        db=3,
        username="app",
        password="p@ss",
        sentinel_password="sp",
    )
    assert sentinel_target("redis+sentinel://s1:1/m").db == 0


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://s1:26379",  # no master name
        "redis+sentinel:///m/0",  # no sentinel
        "redis+sentinel://s1:26379/m/x",  # a database that is not a number
        "redis+sentinel://s1:port/m",
        "redis+sentinel://s1:26379/m/0?ssl=true",  # an option it does not take
    ],
)
def test_a_wrong_sentinel_url_names_the_form_to_use(url: str) -> None:
    with pytest.raises(ConfigError, match=r"redis\+sentinel://\[\[USER\]:PASSWORD@\]HOST:PORT"):
        sentinel_target(url)


def test_the_broker_gets_kombus_sentinel_urls_and_the_master_name() -> None:
    url = "redis+sentinel://:pw@s1:26379,s2:26380/mymaster/2?sentinel_password=sp"
    broker_url, options = broker_connection(url)
    assert broker_url == "sentinel://:pw@s1:26379/2;sentinel://:pw@s2:26380/2"
    assert options["master_name"] == "mymaster"
    assert options["sentinel_kwargs"]["password"] == "sp"
    chosen = broker_transport(url)
    assert chosen is not None
    connection = Connection(broker_url, transport=chosen, transport_options=options)
    assert connection.get_transport_cls() is SentinelTransport
    assert broker_connection("redis://h:6379/0") == ("redis://h:6379/0", {})


def test_only_redis_sentinel_urls_are_sentinel_urls_and_their_passwords_are_masked() -> None:
    assert is_sentinel("redis+sentinel://s:1/m") and not is_sentinel("redis://h:6379/0")
    shown = mask_url("redis+sentinel://:pw@s1:1,s2:2/m/0?sentinel_password=sp")
    assert "pw" not in shown.replace("sentinel_password", "") and "sp" not in shown
    assert shown == "redis+sentinel://:***@s1:1,s2:2/m/0?sentinel_password=***"
