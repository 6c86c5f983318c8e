"""``actorrt.get_attr`` / ``actorrt.list_attrs`` on a real cluster: the remote object decides
what its names are, so an instance attribute that shadows a method reads as its value."""

from __future__ import annotations

import pytest

import actorrt
from tests.conftest import ProcCluster


def _explode() -> None:
    raise ValueError("this argument cannot be rebuilt here")


class Unpicklable:
    """Pickles fine; unpickling it (in the actor) raises."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return _explode, ()


@actorrt.remote_class
class Shadowed:
    limit = 3  # a class constant

    def __init__(self) -> None:
        # Shadows the method arg1: the instance's value is what the object has (the case under test).
        self.arg1 = 10  # type: ignore[method-assign,assignment]
        self.store = lambda x: x + 1  # a callable held as an attribute

    def arg1(self) -> str:
        return "the method"

    def grow(self) -> None:
        self.later = "added by a method"

    def echo(self, value: object) -> object:
        return value

    @property
    def doubled(self) -> int:
        return 2 * self.limit


@actorrt.remote_class
class NamesLikeAHandle:
    def actor_id(self, suffix: str = "") -> str:
        return "the user's" + suffix


async def test_call_method_reaches_a_method_the_handle_hides(cluster: ProcCluster) -> None:
    async with cluster.connect():
        h = await NamesLikeAHandle.remote()
        assert isinstance(h.actor_id, str)  # the handle's own: the actor's id
        assert await actorrt.call_method(h, "actor_id", "!") == "the user's!"
        assert await actorrt.call_method(h, "actor_id", suffix="?") == "the user's?"
        with pytest.raises(actorrt.RemoteError) as missing:
            await actorrt.call_method(h, "nothing_here")
        assert isinstance(missing.value, AttributeError)
        with pytest.raises(AttributeError, match="'__' are not called remotely"):
            actorrt.call_method(h, "__init__")
        with pytest.raises(TypeError, match="expected an actor handle"):
            actorrt.call_method(object(), "actor_id")  # type: ignore[arg-type]
        await actorrt.kill(h)


async def test_get_attr_reads_what_the_remote_object_has(cluster: ProcCluster) -> None:
    async with cluster.connect():
        h = await Shadowed.remote()
        names = await actorrt.list_attrs(h)
        assert names == ["arg1", "doubled", "limit", "store"]  # no methods, no dunders
        assert await actorrt.get_attr(h, "arg1") == 10
        assert await actorrt.get_attr(h, "doubled") == 6
        assert (await actorrt.get_attr(h, "store"))(1) == 2

        # The handle goes by the class: arg1 is a method there. The host says what it is, and
        # the hint names the way that works.
        with pytest.raises(actorrt.RemoteError, match=r"actorrt\.get_attr\(handle, 'arg1'\)") as info:
            await h.arg1()
        assert isinstance(info.value, TypeError)

        await h.grow()
        assert "later" in await actorrt.list_attrs(h)
        assert await actorrt.get_attr(h, "later") == "added by a method"

        with pytest.raises(actorrt.RemoteError) as missing:
            await actorrt.get_attr(h, "nothing_here")
        assert isinstance(missing.value, AttributeError)
        with pytest.raises(actorrt.RemoteError, match="is a method, not an attribute") as method:
            await actorrt.get_attr(h, "grow")
        assert isinstance(method.value, TypeError)
        with pytest.raises(AttributeError, match="'__' are not read remotely"):
            actorrt.get_attr(h, "__dict__")
        with pytest.raises(TypeError, match="expected an actor handle"):
            actorrt.list_attrs(object())  # type: ignore[arg-type]
        await actorrt.kill(h)


def test_get_attr_from_a_plain_script(cluster: ProcCluster) -> None:
    with cluster.connect():
        h = Shadowed.remote().result()
        h.arg1 = 11  # a set, ordered before the read
        assert actorrt.get_attr(h, "arg1").result() == 11
        assert actorrt.get(actorrt.list_attrs(h)) == ["arg1", "doubled", "limit", "store"]
        actorrt.kill(h).result()


async def test_arguments_that_cannot_be_unpickled_in_the_actor_say_so(cluster: ProcCluster) -> None:
    async with cluster.connect():
        h = await Shadowed.remote()
        with pytest.raises(actorrt.RemoteError, match=r"arguments of Shadowed.echo could not be unpickled") as info:
            await h.echo(Unpicklable())
        assert isinstance(info.value.cause, actorrt.SerializationError)
        assert "this argument cannot be rebuilt here" in info.value.remote_traceback
        assert await h.echo(5) == 5  # the actor lives on
        await actorrt.kill(h)
