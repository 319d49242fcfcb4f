"""The aclnn cache (framework/plan_cache.py): a phase 1 that repeats a successful one
reuses its plan, and a cached call answers exactly as a full phase 1 would, whatever
happened to its arguments, the SoC or the memory in between."""

import gc
import weakref

import numpy as np
import pytest

import aclnn
from aclnn import acl
from aclnn.framework import plan_cache
from aclnn.kernels import pointwise
from support import check_accepted, empty_device, run_two_phase, to_device

SL1 = aclnn.aclnnSmoothL1LossBackwardGetWorkspaceSize
SL1_RUN = aclnn.aclnnSmoothL1LossBackward
POOL = aclnn.aclnnAvgPool2dBackwardGetWorkspaceSize


@pytest.fixture(autouse=True)
def fresh_cache():
    """An empty cache with the default limit for each test, and again afterwards."""
    plan_cache.configure(plan_cache.DEFAULT_LIMIT)
    yield plan_cache.cache
    plan_cache.configure(plan_cache.DEFAULT_LIMIT)


@pytest.fixture
def plans(monkeypatch):
    """Counts the SmoothL1 plans phase 1 builds (pointwise.smooth_l1_backward calls)."""
    built = []
    original = pointwise.smooth_l1_backward

    def counting(*args, **kwargs):
        built.append(args)
        return original(*args, **kwargs)
    monkeypatch.setattr(pointwise, "smooth_l1_backward", counting)
    return built


@pytest.fixture
def sl1():
    """Device tensors g, x, y, out of 6 float32 elements (x - y spans both sides of beta)."""
    tensors = [to_device(np.full(6, 2.0, np.float32)),
               to_device(np.arange(6, dtype=np.float32)),
               to_device(np.full(6, 2.5, np.float32)),
               empty_device((6,), np.float32)]
    yield tensors
    for t in tensors:
        if t.tensor is not None:
            t.free()


def _args(sl1, beta=1.0):
    g, x, y, out = sl1
    return g.tensor, x.tensor, y.tensor, 0, beta, out.tensor


def _expected(beta):
    d = np.arange(6, dtype=np.float64) - 2.5
    return 2.0 * np.where(np.abs(d) < beta, d / beta, np.sign(d))


def _answer(get_workspace_size, *args):
    """(status, recent error message, has an executor) of one phase 1."""
    aclnn.aclGetRecentErrMsg()
    _, executor, ret = get_workspace_size(*args)
    return ret, aclnn.aclGetRecentErrMsg() if ret else "", executor is not None


def _cached_and_uncached(get_workspace_size, *args):
    """The answer of phase 1 with the cache on (the call was cached before), then off."""
    cached = _answer(get_workspace_size, *args)
    plan_cache.configure(0)
    return cached, _answer(get_workspace_size, *args)


def test_repeated_call_plans_once_and_computes_the_same(sl1, plans):
    """The second identical phase 1 builds no plan; both executors give the result; another
    beta is another call."""
    for beta, expected_plans in ((1.0, 1), (1.0, 1), (2.0, 2), (1.0, 2)):
        assert run_two_phase(SL1, SL1_RUN, *_args(sl1, beta)) == 0
        assert len(plans) == expected_plans
        np.testing.assert_allclose(sl1[3].view(), _expected(beta), rtol=1e-6)


def test_executors_from_the_cache_are_independent(sl1):
    """Two executors of one cached call: running one consumes only that one."""
    _, first = check_accepted(SL1(*_args(sl1)))
    _, second = check_accepted(SL1(*_args(sl1)))
    assert first is not second
    assert SL1_RUN(None, 0, first, None) == 0
    assert SL1_RUN(None, 0, first, None) == aclnn.ACLNN_ERR_PARAM_INVALID
    assert SL1_RUN(None, 0, second, None) == 0
    assert acl.rt.synchronize_stream(None) == 0


def test_destroyed_tensor_fails_as_without_the_cache(sl1):
    check_accepted(SL1(*_args(sl1)))
    assert aclnn.aclDestroyTensor(sl1[1].tensor) == 0
    assert _answer(SL1, *_args(sl1))[0] == aclnn.ACLNN_ERR_PARAM_INVALID  # and again:
    cached, uncached = _cached_and_uncached(SL1, *_args(sl1))
    assert cached == uncached
    assert cached[0] == aclnn.ACLNN_ERR_PARAM_INVALID and "destroyed" in cached[1]


def test_freed_memory_fails_as_without_the_cache_and_is_not_kept(sl1, fresh_cache):
    """Freeing an allocation drops the entries that use it: the cache keeps no reference to
    freed memory (the runtime has given it back)."""
    check_accepted(SL1(*_args(sl1)))
    assert len(fresh_cache) == 1
    buffer = sl1[2].tensor.region.buffer
    root = weakref.ref(buffer.base if buffer.base is not None else buffer)
    del buffer
    assert acl.rt.free(sl1[2].ptr) == 0
    assert len(fresh_cache) == 0
    gc.collect()
    assert root() is None
    cached, uncached = _cached_and_uncached(SL1, *_args(sl1))
    assert cached == uncached
    assert cached[0] == aclnn.ACLNN_ERR_PARAM_INVALID and "freed" in cached[1]
    aclnn.aclDestroyTensor(sl1[2].tensor)
    sl1[2].tensor = None


def test_collected_tensors_take_their_entries(sl1, fresh_cache):
    """A tensor object that is garbage-collected (its memory still allocated) leaves no
    entry behind."""
    x = sl1[1]
    view = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [x.total // 4],
                                 x.ptr)
    g, _, y, out = sl1
    check_accepted(SL1(g.tensor, view, y.tensor, 0, 1.0, out.tensor))
    assert len(fresh_cache) == 1
    del view
    gc.collect()
    assert len(fresh_cache) == 0


def test_soc_switch_is_a_different_call(use_soc):
    """A bfloat16 call cached on Ascend910B is refused on Ascend910, as without the cache."""
    import ml_dtypes

    tensors = [to_device(np.ones(4, ml_dtypes.bfloat16)) for _ in range(4)]
    try:
        args = (*(t.tensor for t in tensors[:3]), 0, 1.0, tensors[3].tensor)
        check_accepted(SL1(*args))
        use_soc("Ascend910")
        cached, uncached = _cached_and_uncached(SL1, *args)
        assert cached == uncached
        assert cached[0] == aclnn.ACLNN_ERR_PARAM_INVALID
    finally:
        for t in tensors:
            t.free()


def test_limit_drops_the_least_recently_used(sl1, plans, fresh_cache):
    plan_cache.configure(2)
    for beta in (1.0, 2.0, 1.0, 3.0):  # 2.0 is the least recently used when 3.0 comes
        check_accepted(SL1(*_args(sl1, beta)))
    assert len(fresh_cache) == 2 and len(plans) == 3
    check_accepted(SL1(*_args(sl1, 1.0)))
    check_accepted(SL1(*_args(sl1, 2.0)))
    assert len(plans) == 4


def test_limit_zero_turns_the_cache_off(sl1, plans, fresh_cache):
    plan_cache.configure(0)
    for _ in range(3):
        check_accepted(SL1(*_args(sl1)))
    assert len(plans) == 3 and len(fresh_cache) == 0


def test_arguments_without_a_key_are_not_cached(sl1, plans, fresh_cache):
    """A NumPy scalar beta is accepted but not cached; -0.0 and 0.0 are different calls, and
    so are 1 and 1.0 (equal values of other types)."""
    for beta in (np.float64(1.0), np.float64(1.0), 0.0, -0.0, 0.0, 1, 1.0, 1):
        check_accepted(SL1(*_args(sl1, beta)))
    assert len(plans) == 6 and len(fresh_cache) == 4


@pytest.mark.parametrize("text, limit", [("5", 5), ("0", 0), ("10000000", 10_000_000),
                                         ("", 10000), ("many", 10000), ("-1", 10000),
                                         ("10000001", 10000)])
def test_limit_from_the_environment(monkeypatch, text, limit):
    monkeypatch.setenv("ACLNN_CACHE_LIMIT", text)
    assert plan_cache._limit_from_environment() == limit


@pytest.fixture
def pool_call(monkeypatch):
    """AvgPool2dBackward's plans as they are built (pool.AvgPool2dBackwardLaunch calls),
    and device tensors for it: gradOutput [1, 1, 2, 2], self and gradInput [1, 1, 4, 4]."""
    from aclnn.kernels import pool

    built = []
    original = pool.AvgPool2dBackwardLaunch
    monkeypatch.setattr(pool, "AvgPool2dBackwardLaunch",
                        lambda *a: built.append(a) or original(*a))
    tensors = [to_device(np.ones((1, 1, 2, 2), np.float32), fmt=aclnn.ACL_FORMAT_NCHW),
               *(to_device(np.zeros((1, 1, 4, 4), np.float32), fmt=aclnn.ACL_FORMAT_NCHW)
                 for _ in range(2))]
    yield built, [t.tensor for t in tensors]
    for t in tensors:
        t.free()


def test_int_arrays_count_by_value_and_liveness(pool_call):
    """AvgPool2dBackward: a new aclIntArray with the same values is the same call; a
    destroyed one fails as without the cache."""
    built, (grad, x, out) = pool_call
    arrays = []
    try:
        for _ in range(2):
            k, p = aclnn.aclCreateIntArray([2, 2]), aclnn.aclCreateIntArray([0, 0])
            arrays += [k, p]
            check_accepted(POOL(grad, x, k, k, p, False, True, 0, 0, out))
        assert len(built) == 1
        assert aclnn.aclDestroyIntArray(k) == 0
        cached, uncached = _cached_and_uncached(POOL, grad, x, k, k, p, False, True, 0, 0, out)
        assert cached == uncached and cached[0] == aclnn.ACLNN_ERR_PARAM_INVALID
    finally:
        for a in arrays:
            aclnn.aclDestroyIntArray(a)


def test_plan_with_a_tensor_it_was_not_given_is_not_stored(sl1, fresh_cache):
    """A plan whose tensors are not all arguments of the call cannot be rebuilt for a hit."""
    args = _args(sl1)
    key = fresh_cache.key("aclnnSmoothL1LossBackward", args)
    fresh_cache.store(key, args, [], 0, [sl1[0].tensor, aclnn.aclCreateTensor(
        [6], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [6], sl1[1].ptr)])
    assert len(fresh_cache) == 0
    fresh_cache.store(key, args, [], 0, [sl1[0].tensor])
    assert len(fresh_cache) == 1


def test_functional_calls_are_not_cached(monkeypatch, fresh_cache):
    """The functional API's tensors lend an array's memory for one call: such a call is
    never stored (storing and dropping it would only cost time)."""
    stored = []
    monkeypatch.setattr(fresh_cache, "store", lambda *args: stored.append(args))
    g, x, y = (np.ones(8, np.float32) for _ in range(3))
    for _ in range(2):
        aclnn.smooth_l1_loss_backward(g, x, y)
    assert stored == [] and len(fresh_cache) == 0


# --- a call that repeats its operator's last one (PlanCache.repeat) ------------------

L1 = aclnn.aclnnL1LossBackwardGetWorkspaceSize
builtin_id = id  # the real one, where a test gives plan_cache a fake


def test_a_repeated_call_builds_no_key(sl1, plans, fresh_cache, monkeypatch):
    """A call with the last call's objects, or with an equal float scalar of another object
    (as the C API passes them), is recognised without a key; a scalar of another type, and
    a zero float of another object (-0.0 == 0.0), are looked up by their key."""
    keys = []
    original = fresh_cache.key
    monkeypatch.setattr(fresh_cache, "key", lambda *a: keys.append(a) or original(*a))
    args = _args(sl1)
    for _ in range(3):
        assert run_two_phase(SL1, SL1_RUN, *args) == 0
    assert len(keys) == 1 and len(plans) == 1
    np.testing.assert_allclose(sl1[3].view(), _expected(1.0), rtol=1e-6)
    beta = float("1.0")  # equal, another object
    assert beta is not args[4]
    assert run_two_phase(SL1, SL1_RUN, *_args(sl1, beta)) == 0
    assert len(keys) == 1 and len(plans) == 1
    check_accepted(SL1(*_args(sl1, 1)))  # an int: another call
    assert len(keys) == 2 and len(plans) == 2
    for zero, new_plans in ((0.0, 3), (float("-0.0"), 4), (float("0.0"), 4)):
        check_accepted(SL1(*_args(sl1, zero)))
        assert len(plans) == new_plans
    assert len(keys) == 5


def test_equal_scalars_with_another_tensor_are_another_call(sl1):
    """Scalars matched by value, tensors by identity: another self tensor is planned for."""
    g, x, y, out = sl1
    assert run_two_phase(SL1, SL1_RUN, *_args(sl1, float("1.0"))) == 0
    assert run_two_phase(SL1, SL1_RUN, g.tensor, g.tensor, y.tensor, 0, float("1.0"),
                         out.tensor) == 0
    np.testing.assert_allclose(out.view(), 2.0 * np.full(6, -0.5), rtol=1e-6)  # d = 2 - 2.5


def test_a_tensor_in_a_collected_tensors_place_is_not_taken_for_it(sl1, fresh_cache,
                                                                   monkeypatch):
    """A tensor object whose identity a collected one had (made to happen here by a fake
    `id`) gets its own plan: the result is computed from its own memory."""
    g, x, y, out = sl1
    fake = {}
    monkeypatch.setattr(plan_cache, "id", lambda obj: fake.get(builtin_id(obj), builtin_id(obj)),
                        raising=False)
    old = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [6],
                                x.tensor.addr)
    assert run_two_phase(SL1, SL1_RUN, g.tensor, old, y.tensor, 0, 1.0, out.tensor) == 0
    old_id = builtin_id(old)
    del old
    gc.collect()
    new = aclnn.aclCreateTensor([6], aclnn.ACL_FLOAT, [1], 0, aclnn.ACL_FORMAT_ND, [6],
                                g.tensor.addr)
    fake[builtin_id(new)] = old_id
    assert run_two_phase(SL1, SL1_RUN, g.tensor, new, y.tensor, 0, 1.0, out.tensor) == 0
    np.testing.assert_allclose(out.view(), 2.0 * np.full(6, -0.5), rtol=1e-6)  # d = 2 - 2.5


def test_reassigned_int_array_values_are_another_call(pool_call):
    """An int array whose values were replaced since the last call plans again."""
    built, (grad, x, out) = pool_call
    k, s, p = (aclnn.aclCreateIntArray(v) for v in ([2, 2], [2, 2], [0, 0]))
    args = (grad, x, k, s, p, False, True, 0, 0, out)
    try:
        for _ in range(2):
            check_accepted(POOL(*args))
        assert len(built) == 1
        k.values, p.values = (3, 3), (1, 1)  # the same pooled shape
        check_accepted(POOL(*args))
        assert len(built) == 2
    finally:
        for a in (k, s, p):
            aclnn.aclDestroyIntArray(a)


def test_a_contract_switch_is_not_a_repeat(sl1, fresh_cache):
    args = _args(sl1)
    check_accepted(SL1(*args))
    assert fresh_cache.repeat("aclnnSmoothL1LossBackward", args) is not None
    contract = acl.get_contract()
    acl.set_contract("documented" if contract == "library" else "library")
    try:
        assert fresh_cache.repeat("aclnnSmoothL1LossBackward", args) is None
    finally:
        acl.set_contract(contract)
    assert fresh_cache.repeat("aclnnSmoothL1LossBackward", args) is not None


def test_a_repeat_is_the_most_recently_used(sl1, plans, fresh_cache):
    """A repeated call counts as used: with a limit of 2, the entry dropped for a third
    call is the other operator's, used after it but not since."""
    plan_cache.configure(2)
    g, x, y, out = sl1
    sl1_args = _args(sl1)
    check_accepted(SL1(*sl1_args))
    check_accepted(L1(g.tensor, x.tensor, y.tensor, 0, out.tensor))
    check_accepted(SL1(*sl1_args))  # a repeat, not the newest entry
    check_accepted(SL1(*_args(sl1, 2.0)))  # a third entry: L1's goes
    assert len(fresh_cache) == 2 and len(plans) == 3  # (L1 plans through SmoothL1's kernel)
    check_accepted(SL1(*sl1_args))
    assert len(plans) == 3
    check_accepted(L1(g.tensor, x.tensor, y.tensor, 0, out.tensor))
    assert len(plans) == 4
