"""The adapter between httpx and httpcore, without sockets: errors keep their most
specific name, in both families."""

from __future__ import annotations

from types import ModuleType

import httpcore
import httpcore2
import httpx
import httpx2
import pytest

from trio_relay.http._family import Family

FAMILIES = [(httpx2, httpcore2), (httpx, httpcore)]


@pytest.mark.parametrize(("client", "core"), FAMILIES, ids=["httpx2", "httpx"])
@pytest.mark.parametrize(
    "name",
    ["ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "ConnectError",
     "ReadError", "WriteError", "ProxyError", "RemoteProtocolError", "LocalProtocolError"],
)  # fmt: skip
def test_each_error_maps_to_its_namesake(client: ModuleType, core: ModuleType, name: str) -> None:
    family = Family(client, core)
    with pytest.raises(getattr(client, name)) as caught, family.mapped_errors():
        raise getattr(core, name)("boom")
    assert type(caught.value) is getattr(client, name)  # not a base class of it
    assert str(caught.value) == "boom"
    assert isinstance(caught.value.__cause__, getattr(core, name))


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), Family(httpx2, httpcore2).mapped_errors():
        raise KeyError("not an httpcore error")
