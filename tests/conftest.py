"""Session set-up: the runtime is initialised once, device 0 is set (SoC Ascend910B).

The suite's default contract is "documented" (the pages, SPEC §5-§8), which most tests
check; tests of the library contract select it with the `use_contract` fixture."""

import os

import pytest
from hypothesis import settings

from aclnn import acl
from aclnn.capi import sdk
from support import TensorMaker

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _run_order(item) -> int:
    """0 for a slow test, 1 for a slow one that compiles this process's kernels too, 2
    for the rest."""
    slow = item.get_closest_marker("slow")
    if slow is None:
        return 2
    return 1 if slow.kwargs.get("compiles_here") else 0


def pytest_collection_modifyitems(items):
    """Tests marked `slow` run first. Each pytest-xdist worker takes a contiguous part of
    the collection and an idle one takes tests from the end of another's: slow tests at
    the front run while the other worker goes through the quick ones, instead of one of
    them being the last to finish with the other worker idle. Those that compile this
    process's kernels come last of them: by then the other worker has compiled them into
    the cache, and they load them instead of compiling them at the same time."""
    items.sort(key=_run_order)


@pytest.fixture(scope="session", autouse=True)
def runtime():
    """Initialise the runtime and set device 0 for the whole session."""
    os.environ.pop("ACLNN_SOC", None)
    os.environ["ACLNN_CONTRACT"] = "documented"
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    yield
    acl.rt.reset_device(0)
    acl.finalize()


@pytest.fixture
def use_soc(monkeypatch):
    """Select a SoC profile for one test: `use_soc("Ascend910")`; restored afterwards."""

    def select(name: str) -> None:
        monkeypatch.setenv("ACLNN_SOC", name)
        assert acl.rt.set_device(0) == 0
        assert acl.get_soc_name() == name

    yield select
    monkeypatch.delenv("ACLNN_SOC", raising=False)
    acl.rt.set_device(0)


@pytest.fixture
def use_contract(monkeypatch):
    """Select a contract for one test: `use_contract("library")`; restored afterwards."""

    def select(name: str) -> None:
        monkeypatch.setenv("ACLNN_CONTRACT", name)
        assert acl.rt.set_device(0) == 0
        assert acl.get_contract() == name

    yield select
    monkeypatch.setenv("ACLNN_CONTRACT", "documented")
    acl.rt.set_device(0)


@pytest.fixture
def mk():
    """A `support.TensorMaker` for one test; what it made is released afterwards."""
    maker = TensorMaker()
    yield maker
    maker.release()


@pytest.fixture
def stream():
    """A private stream for one test (synchronized and destroyed afterwards), so a failed
    job cannot reach the default stream."""
    s, ret = acl.rt.create_stream()
    assert ret == 0
    yield s
    acl.rt.synchronize_stream(s)
    acl.rt.destroy_stream(s)


@pytest.fixture(scope="session")
def sdk_prefix(tmp_path_factory):
    """The C SDK, built once for the session in a temporary prefix."""
    return sdk.ensure(tmp_path_factory.mktemp("sdk") / "aclnn-sdk")
