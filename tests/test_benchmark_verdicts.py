"""The benchmark's bookkeeping (benchmarks/, not timed here): the alternating timer, the
targets judged against a same-run reference, and the notes that say when a torch/ours
target was out of reach."""

import subprocess
import sys
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
import torch
from benchmarks import cases, harness, isa, probe, runner
from benchmarks.cases import (
    CASES,
    DTYPES,
    Case,
    note_bandwidth_ceilings,
    note_compute_floors,
    note_staging_bounds,
)
from benchmarks.harness import (
    Row,
    both,
    paired_share,
    streamed_and_torch,
    time_alternating,
    vs_case,
    vs_torch,
)

from aclnn import acl
from aclnn.kernels import pointwise


def test_time_alternating_calls_each_function_in_turn():
    calls = []
    fns = [lambda name=name: calls.append(name) for name in "abc"]
    medians = time_alternating(fns, repeat=3, warmup=2, settle=0.0)
    assert calls == list("abc") * 5
    assert len(medians) == 3 and all(m >= 0 for m in medians)


def test_triad_fraction_prefers_the_same_bytes_probe():
    row = Row("case", ours_s=0.010, bytes_moved=400_000_000, triad_gbps=80.0)
    assert row.triad_fraction == pytest.approx(0.5)  # 40 GB/s of the run's 80
    row.extra["triad_ms"] = 8.0
    assert row.triad_fraction == pytest.approx(0.8)  # the probe took 8 ms for our 10


def _share(median: float) -> dict:
    """A `paired_share` result as `Row.extra` holds it: the pairs' median and no spread."""
    return harness.PairedShare(median, median, median, 31)._asdict()


def test_vs_case_uses_the_reference_timed_alongside_in_pairs():
    target = vs_case("contiguous", 0.7)
    row = Row("transposed", ours_s=0.010, elements=1000)
    assert target.check(row, {})[0] is None
    row.extra.update(reference_ms=8.0, reference_elements=1000, reference_share=_share(0.6))
    ok, detail = target.check(row, {})
    assert ok is False and "0.60" in detail  # the pairs decide, not the medians' 0.80
    row.extra["reference_share"] = _share(0.8)
    assert target.check(row, {})[0] is True
    row.extra["reference_elements"] = 2000  # the reference computed twice as many
    assert target.check(row, {})[0] is False
    assert target.needs == ("contiguous",)


def test_vs_case_crosses_over_the_swapped_inputs():
    """With the varied inputs swapped after the first pairs, the ratio is the geometric
    mean of before and after: a slower set of buffers weighs on both calls alike and
    cancels out."""
    target = vs_case("normal", 0.8)
    row = Row("spread", ours_s=0.012, elements=1000)
    row.extra.update(reference_elements=1000, reference_share=_share(8 / 12))
    assert target.check(row, {})[0] is False  # 0.67: our buffers are the slow ones
    row.extra["swapped_share"] = _share(12 / 8)  # the reference's values in them as slow
    assert harness.crossed_ratio(row) == pytest.approx(1.0)
    ok, detail = target.check(row, {})
    assert ok is True and "1.00" in detail
    row.extra["swapped_share"] = _share(12 / 10)  # our values: 1.5x, then 0.83x the other's
    assert harness.crossed_ratio(row) == pytest.approx((1.5 * 10 / 12) ** 0.5)


def test_measure_throughput_times_the_setups_own_reference_or_swaps_varied_inputs(
        monkeypatch):
    calls, swapped = [], []

    def setup_with(name, **fields):
        return lambda cfg, dev: harness.Setup(lambda: calls.append(name), None, 0, 100,
                                              **fields)

    monkeypatch.setattr(harness.Device, "swap", lambda self, a, b: swapped.append((a, b)))
    normal = Case("normal", setup_with("normal", varied=(1, 8)), None)
    spread = Case("spread", setup_with("spread", varied=(2, 8)), vs_case("normal", 0.8))
    monkeypatch.setattr(cases, "CASES", [normal, spread])
    cfg = harness.Config(quick=True, repeat=1, warmup=0)
    row = cases.measure_throughput(spread, cfg)
    pairs = cfg.share_pairs
    assert swapped == [((2, 8), (1, 8))]
    assert calls == ["spread", "normal"] * (1 + pairs) + ["normal", "spread"] * pairs
    assert row.extra["reference_share"]["pairs"] == row.extra["swapped_share"]["pairs"] == pairs
    assert row.extra["reference_elements"] == 100 and "reference_ms" in row.extra

    calls.clear()
    layout = Case("transposed", setup_with("transposed", reference=lambda: calls.append("own")),
                  vs_case("not a case", 0.75))
    row = cases.measure_throughput(layout, cfg)
    assert calls == ["transposed", "own"] * (1 + pairs) and "swapped_share" not in row.extra
    assert row.extra["reference_elements"] == 100 and len(swapped) == 1


def test_device_swap_exchanges_two_buffers_contents():
    dev = harness.Device()
    try:
        a, b = np.arange(8, dtype=np.float32), -np.arange(1, 9, dtype=np.float32)
        at_a, at_b = dev.place(a), dev.place(b)
        dev.swap((at_a, a.nbytes), (at_b, b.nbytes))
        back = [np.empty(8, np.float32) for _ in range(2)]
        for host, at in zip(back, (at_a, at_b)):
            assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.nbytes, at, host.nbytes,
                                 acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert back[0].tolist() == b.tolist() and back[1].tolist() == a.tolist()
    finally:
        dev.release()


def test_paired_share_takes_each_pairs_ratio_before_the_median(monkeypatch):
    """Memory that slows down for the second and third pairs: each pair's ratio is 0.9 or
    0.2, where the ratio of the medians (2 / 10) would be the outlier's."""
    timed = {"ours": [1.0, 10.0, 10.0, 4.0, 5.0], "probe": [0.9, 9.0, 2.0, 3.6, 4.5]}
    calls = []
    monkeypatch.setattr(harness, "alternating_times", lambda fns, pairs, warmup: (
        calls.append((len(fns), pairs, warmup)) or [timed["ours"], timed["probe"]]))
    share = paired_share(lambda: None, lambda: None, 5, 2)
    assert calls == [(2, 5, 2)]
    assert share.pairs == 5 and share.median == pytest.approx(0.9)
    ratios = sorted(p / o for o, p in zip(timed["ours"], timed["probe"]))
    assert share.low == pytest.approx(np.percentile(ratios, 25, method="weibull"))
    assert share.high == pytest.approx(np.percentile(ratios, 75, method="weibull"))


def test_paired_share_times_ours_then_the_probe_in_each_pair():
    calls = []
    share = paired_share(lambda: calls.append("ours"), lambda: calls.append("probe"), 3, 1)
    assert calls == ["ours", "probe"] * 4 and share.pairs == 3 and share.median > 0


def test_streamed_and_torch_judges_by_the_paired_share_where_there_is_one():
    target = streamed_and_torch(0.85, 1.0)
    row = Row("loss", ours_s=0.010, torch_s=0.012, extra={"floor_ms": 8.0})
    row.extra["floor_share"] = harness.PairedShare(0.88, 0.84, 0.91, 31)._asdict()
    ok, detail = target.check(row, {})
    assert row.streamed_fraction == 0.88 and ok is True
    assert "x streamed triad 0.88 (>= 0.85), the median of 31 pairs (quartiles 0.84-0.91)" \
        in detail
    row.extra["floor_share"]["median"] = 0.84
    assert target.check(row, {})[0] is False


def test_streamed_and_torch_judges_against_the_streamed_probe():
    target = streamed_and_torch(0.85, 1.0)
    row = Row("loss", ours_s=0.010, torch_s=0.012)
    assert target.check(row, {})[0] is None  # no streamed probe timed alongside
    row.extra["floor_ms"] = 8.0
    ok, detail = target.check(row, {})
    assert ok is False and "x streamed triad 0.80" in detail and "torch/ours 1.20" in detail
    row.extra["floor_ms"] = 9.0
    assert target.check(row, {})[0] is True
    row.torch_s = 0.009
    assert target.check(row, {})[0] is False


def test_both_passes_only_when_each_target_does():
    target = both(vs_torch(1.5), vs_case("normal", 0.8))
    assert target.needs == ("normal",)
    row = Row("spread", ours_s=0.010, torch_s=0.016, elements=1000)
    assert target.check(row, {})[0] is None  # the reference was not timed
    row.extra.update(reference_elements=1000, reference_share=_share(0.9))
    ok, detail = target.check(row, {})
    assert ok is True and "torch/ours 1.60" in detail and "0.90" in detail
    row.extra["reference_share"] = _share(0.7)
    assert target.check(row, {})[0] is False
    row.extra["reference_share"], row.torch_s = _share(0.9), 0.014
    assert target.check(row, {})[0] is False


def _failed(name, ours_ms, torch_ms, floor_ms, factor=1.5):
    case = Case(name, None, vs_torch(factor))
    row = Row(name, ours_s=ours_ms / 1e3, torch_s=torch_ms / 1e3, bytes_moved=134_000_000)
    row.extra["floor_ms"] = floor_ms
    ok, row.detail = case.target.check(row, {})
    row.verdict = "PASS" if ok else "FAIL"
    return case, row


def test_bandwidth_ceiling_notes():
    out_of_reach = _failed("a", ours_ms=3.5, torch_ms=3.6, floor_ms=3.0)  # bound 1.20
    reachable = _failed("b", ours_ms=5.0, torch_ms=6.0, floor_ms=2.0)  # bound 3.0
    passed = _failed("c", ours_ms=2.0, torch_ms=6.0, floor_ms=1.9)
    cases, rows = zip(out_of_reach, reachable, passed)
    note_bandwidth_ceilings(list(rows), list(cases))
    assert rows[0].note.startswith("out of reach here") and "<= 1.20" in rows[0].note
    assert rows[1].note.startswith("reachable in principle") and "<= 3.00" in rows[1].note
    assert "0.40 of the probe's speed" in rows[1].note
    assert rows[2].note == ""


def test_no_ceiling_note_where_another_part_of_the_target_failed():
    """A case that meets its torch/ours part but fails another gets no bandwidth note."""
    case, row, normal = _value_range_rows(3.9, crossed_ok=False)
    row.extra["floor_ms"] = 1.9  # torch 4.6 ms: bound 2.42, and 1.77 reached
    note_bandwidth_ceilings([normal, row], [case])
    assert row.verdict == "FAIL" and row.ratio >= 1.5 and row.note == ""


def test_ceiling_note_adds_the_bound_of_our_compute():
    """A case timed in cache also gets torch's time over its compute floor, flagged where
    that bound is below the target."""
    compute_bound = _failed("a", ours_ms=4.6, torch_ms=6.0, floor_ms=3.5)
    compute_bound[1].extra["compute_ms"] = 4.2  # bound 1.43
    memory_bound = _failed("b", ours_ms=4.6, torch_ms=6.0, floor_ms=3.5)
    memory_bound[1].extra["compute_ms"] = 3.0  # bound 2.00
    cases, rows = zip(compute_bound, memory_bound)
    note_bandwidth_ceilings(list(rows), list(cases))
    assert rows[0].note.startswith("reachable in principle")
    assert rows[0].note.endswith("in 4.20 ms, so torch/ours <= 1.43 for this kernel "
                                 "(bound by its compute here)")
    assert rows[1].note.endswith("in 3.00 ms, so torch/ours <= 2.00 for this kernel")


def _loss_row(name, ours_ms, compute_ms, floor_ms=5.6, torch_ms=20.0):
    """A loss case judged by its target (0.85 x streamed triad, torch/ours >= 1.0), with
    its in-cache compute timed."""
    case = Case(name, None, streamed_and_torch(0.85, 1.0))
    row = Row(name, ours_s=ours_ms / 1e3, torch_s=torch_ms / 1e3, bytes_moved=134_000_000)
    row.extra.update(floor_ms=floor_ms, compute_ms=compute_ms)
    ok, row.detail = case.target.check(row, {})
    row.verdict = "PASS" if ok else "FAIL"
    return case, row


def test_compute_floor_notes():
    """A case failing its streamed-triad share gets the streamed triad's time over its
    in-cache compute as the share's bound, "bound by its compute" where that is under the
    target; a passing case and one failing only torch/ours get none."""
    compute_bound = _loss_row("a", ours_ms=7.0, compute_ms=7.0)  # bound 0.80
    reachable = _loss_row("b", ours_ms=7.0, compute_ms=6.3)  # bound 0.89
    passed = _loss_row("c", ours_ms=6.0, compute_ms=6.3)
    slower_than_torch = _loss_row("d", ours_ms=6.0, compute_ms=6.3, torch_ms=5.0)
    cases, rows = zip(compute_bound, reachable, passed, slower_than_torch)
    note_compute_floors(list(rows), list(cases))
    assert rows[0].note == (
        "bound by its compute here: our kernel's rows with their operands in cache (a row "
        "of 4096 elements repeated on each of 2 threads) compute this case's elements in "
        "7.00 ms, the streamed triad moves its bytes in 5.60 ms, so x streamed triad <= 0.80 "
        "for this kernel (target 0.85); ours took 7.00 ms")
    assert rows[1].note.startswith("reachable in principle") and "<= 0.89" in rows[1].note
    assert rows[2].note == "" and rows[3].verdict == "FAIL" and rows[3].note == ""


def test_compute_floor_note_claims_no_bound_above_the_call_from_memory():
    """An in-cache time above the case's own call from memory is no floor: the note says
    so and gives no bound, where that time alone would have said "bound by its
    compute"."""
    case, row = _loss_row("a", ours_ms=7.0, compute_ms=7.5)
    note_compute_floors([row], [case])
    assert row.note == (
        "no compute bound measured: our kernel's rows with their operands in cache (a row of "
        "4096 elements repeated on each of 2 threads) compute this case's elements in 7.50 "
        "ms, more than the 7.00 ms of its call from memory")


def test_in_cache_floor_is_the_probe_time_per_element(monkeypatch):
    """The compute floor is the median time of the probe's run (timed as the cases are)
    over the elements it computes."""
    runs = []
    monkeypatch.setattr(harness, "time_alternating",
                        lambda fns, repeat, warmup: [fn() for fn in fns] and [0.010])
    in_cache = harness.InCache(lambda: runs.append(1), 4000, np.zeros((1, 1, 1), np.uint8))
    assert harness.seconds_per_element_in_cache(in_cache, 7, 2) == pytest.approx(2.5e-6)
    assert runs == [1]


def test_ceiling_note_names_a_read_write_probe_for_cases_that_mostly_write():
    case, row = _failed("pool", ours_ms=4.0, torch_ms=18.0, floor_ms=3.0, factor=5.0)
    row.extra["floor_written_mb"] = 103.0
    note_bandwidth_ceilings([row], [case])
    assert row.note.startswith("reachable in principle: a probe reading 31 MB and writing "
                               "103 MB with streaming stores took 3.00 ms")


@pytest.mark.parametrize(("src_lines", "out_lines"), [(401, 1606), (1606, 401), (0, 130)])
def test_read_write_probe_reads_each_line_once_and_writes_every_line(src_lines, out_lines):
    """The read-write floor probe: every line of the source summed once (integers, so the
    sums are exact), every line of the output written with the line pattern."""
    src = np.arange(16 * src_lines, dtype=np.float32) % 7
    out = np.zeros(64 * out_lines + 64, np.uint8)
    out = out[-out.ctypes.data % 64:][:64 * out_lines]  # on a cache line
    line = np.tile(np.arange(16, dtype=np.float32), probe._STEP_LINES)
    sums = np.zeros(64 * 16, np.float32)
    probe._read_write(out, src, line, sums)
    assert sums.sum() == src.sum()
    assert np.array_equal(out.view(np.float32), np.tile(np.arange(16, dtype=np.float32),
                                                        out_lines))


@pytest.mark.parametrize("streamed", [False, True])
def test_triad_over_a_cases_buffers_computes_in_words_in_place(streamed):
    """The same-bytes probe over a case's own buffers: out = a + b * c on their uint32
    words (wrapping), up to the smallest buffer (whole lines when streamed)."""
    dev = harness.Device()
    try:
        rng = np.random.default_rng(3)
        hosts = [rng.integers(0, 2**32, 16 * 40, dtype=np.uint32).view(np.float16)
                 for _ in range(3)]
        out = dev.output((2 * 16 * 40 + 10,), np.float16)  # larger: its tail is untouched
        buffers = dev.buffers(*(dev.tensor(h) for h in hosts), out)
        probe.triad_over(buffers, streamed)()
        got = np.empty(2 * 16 * 40 + 10, np.float16)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(got), got.nbytes, buffers[3][0], got.nbytes,
                             acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        a, b, c = (h.view(np.uint32) for h in hosts)
        assert np.array_equal(got[:-10].view(np.uint32), a + b * c)
        assert not got[-10:].view(np.uint16).any()
    finally:
        dev.release()


def test_measure_throughput_runs_the_probes_over_the_cases_buffers(monkeypatch):
    over = []
    monkeypatch.setattr(probe, "triad_over",
                        lambda buffers, streamed: lambda: over.append((buffers, streamed)))
    buffers = ((1, 64), (2, 64), (3, 64), (4, 64))
    case = Case("loss", lambda cfg, dev: harness.Setup(lambda: None, lambda: None, 256, 16,
                                                       buffers=buffers), vs_torch(1.0))
    row = cases.measure_throughput(case, harness.Config(repeat=1, warmup=0))
    assert (buffers, False) in over and (buffers, True) in over
    assert "triad_ms" in row.extra and "floor_ms" in row.extra
    assert "floor_share" not in row.extra  # judged by torch/ours alone


def test_measure_throughput_pairs_ours_with_the_streamed_triad_for_a_share_target(
        monkeypatch):
    over = []
    monkeypatch.setattr(probe, "triad_over",
                        lambda buffers, streamed: lambda: over.append(streamed))
    buffers = ((1, 64), (2, 64), (3, 64), (4, 64))
    case = Case("loss", lambda cfg, dev: harness.Setup(lambda: None, lambda: None, 256, 16,
                                                       buffers=buffers),
                streamed_and_torch(0.85, 1.0))
    cfg = harness.Config(repeat=1, warmup=0)
    row = cases.measure_throughput(case, cfg)
    assert row.extra["floor_share"]["pairs"] == cfg.share_pairs == 31
    assert over.count(True) == 1 + cfg.share_pairs  # once alongside torch, then the pairs
    assert row.streamed_fraction == row.extra["floor_share"]["median"]


def _on_a_line(words):
    """Zeroed uint32 words starting on a cache line (the probes store non-temporally)."""
    raw = np.zeros(words + 16, np.uint32)
    return raw[(-raw.ctypes.data % 64) // 4:][:words]


def _probe_operands(side, size, seed):
    """gradOut, self, target and output words of a [side, side] case of `size`-byte
    elements for the staged probes, the first three random."""
    rng = np.random.default_rng(seed)
    a, x, c, out = (_on_a_line(side * side * size // 4) for _ in range(4))
    for words in (a, x, c):
        words[:] = rng.integers(0, 2**32, words.size, dtype=np.uint32)
    return a, x, c, out


_PROBE_CODES = [(probe.bits.F32, np.uint32), (probe.bits.F16, np.uint16),
                (probe.bits.BF16, np.uint16)]
_PROBE_TILES = [(64, 16, 64), (64, 32, 64), (96, 48, 96), (64, 16, 32), (96, 48, 32)]


@pytest.mark.parametrize(("code", "bits_type"), _PROBE_CODES)
@pytest.mark.parametrize(("side", "rows", "columns"), _PROBE_TILES)
def test_staged_probe_reads_every_word_of_self_once_and_streams_the_rest(
        code, bits_type, side, rows, columns):
    """The staged-tile probe's memory-only pass: every word of the transposed operand
    summed once, tile by tile (integers, so the sum is exact), and out = a + c * c over
    every word of the others (wrapping)."""
    a, x, c, out = _probe_operands(side, np.dtype(bits_type).itemsize, 4)
    sums = np.zeros(probe.THREADS, np.uint32)
    probe._staged_triad(out, a, x, x.view(np.uint8), c, side, rows, columns, code,
                        probe.READS, sums)
    assert sums.sum(dtype=np.uint32) == x.sum(dtype=np.uint32)
    assert np.array_equal(out, a + c * c)


@pytest.mark.parametrize(("code", "bits_type"), _PROBE_CODES)
@pytest.mark.parametrize(("side", "rows", "columns"), _PROBE_TILES)
def test_staged_probe_transposes_the_runs_the_kernel_stages(code, bits_type, side, rows,
                                                            columns):
    """The transposing pass transposes each tile's runs as our staging does, 16 x 16
    blocks down BLOCK rows at a time, and keeps nothing but the first word of each
    thread's last block (its first column's first one or two elements: the first element
    of its first row, then of its second for 16-bit elements), still streaming
    out = a + c * c."""
    size = np.dtype(bits_type).itemsize
    a, x, c, out = _probe_operands(side, size, 6)
    sums = np.zeros(probe.THREADS, np.uint32)
    probe._staged_triad(out, a, x, x.view(np.uint8), c, side, rows, columns, code,
                        probe.TRANSPOSES, sums)
    assert np.array_equal(out, a + c * c)
    per_band = side // columns
    tiles = side // rows * per_band
    self_rows = x.view(np.uint8).reshape(side, size * side)
    for p in range(probe.THREADS):
        last_tile = (p + 1) * tiles // probe.THREADS - 1
        first_row, first_column = last_tile // per_band * rows, last_tile % per_band * columns
        at = size * (first_row + rows - probe.BLOCK)  # the last block's, along self's rows
        group = first_column + columns - probe.BLOCK  # the tile's last BLOCK rows of self
        first_word = self_rows[group: group + 4 // size, at: at + size]
        assert sums[p] == first_word.reshape(-1).view(np.uint32)[0]


@pytest.mark.parametrize(("code", "bits_type"), _PROBE_CODES)
@pytest.mark.parametrize(("side", "rows", "columns"), _PROBE_TILES)
def test_staged_probe_stages_self_transposed(code, bits_type, side, rows, columns):
    """The staging pass keeps each tile of self transposed in a staged tile and reads it
    back: out = a + transposed self * c, word for word (16-bit elements two to a word)."""
    a, x, c, out = _probe_operands(side, np.dtype(bits_type).itemsize, 7)
    sums = np.zeros(probe.THREADS, np.uint32)
    probe._staged_triad(out, a, x, x.view(np.uint8), c, side, rows, columns, code,
                        probe.STAGES, sums)
    transposed = np.ascontiguousarray(x.view(bits_type).reshape(side, side).T)
    assert np.array_equal(out, a + transposed.reshape(-1).view(np.uint32) * c)


@pytest.mark.parametrize(("code", "line"), [(probe.bits.F32, 16), (probe.bits.F16, 32)])
def test_swept_tiles_run_from_a_line_of_columns_to_whole_rows(code, line):
    """The staging is swept over 16 to 512 rows by a cache line's worth of columns, 1024
    or whole rows, each dividing the side; our own tile is among them."""
    dtype = {probe.bits.F32: np.float32, probe.bits.F16: np.float16}[code]
    _, run_bytes, _ = cases._staged_runs(4096, dtype)
    tiles = probe.swept_tiles(4096, code)
    assert tiles == [(rows, columns) for rows in (16, 64, 128, 256, 512)
                     for columns in (line, 1024, 4096)]
    assert (run_bytes // np.dtype(dtype).itemsize, 4096) in tiles
    assert probe.swept_tiles(96, code) == [(16, line), (16, 96)]  # those that divide 96


@pytest.mark.parametrize(("rows", "row_words", "run_words"),
                         [(32, 64, 16), (48, 64, 32), (16, 96, 48)])
def test_staged_touches_take_one_word_of_every_line_of_self_once(rows, row_words, run_words):
    """The staging-fetch probe: the first word of each 64-byte line of every row summed
    once (integers, so the sum is exact), tile by tile, BLOCK rows at a time."""
    x = np.random.default_rng(5).integers(0, 2**32, rows * row_words, dtype=np.uint32)
    sums = np.zeros(probe.THREADS, np.uint32)
    probe._staged_touches(x, x.view(np.uint8), row_words, run_words, sums)
    line_starts = x.reshape(rows, row_words)[:, ::probe.LINE_WORDS]
    assert sums.sum(dtype=np.uint32) == line_starts.sum(dtype=np.uint32)


@pytest.mark.parametrize(("dtype", "itemsize"), [(np.float32, 4), (np.float16, 2)])
def test_staged_probe_reads_the_runs_the_kernel_stages(dtype, itemsize):
    """The probe's runs are the tiled kernel's staged tile height along self's rows."""
    row, column = (4096 * itemsize, itemsize), (itemsize, 4096 * itemsize)
    rows, _ = pointwise._tile_shape((4096, 4096), [row, column, row, row], itemsize,
                                    probe.THREADS)
    assert cases._staged_runs(4096, dtype) == (4096 * itemsize, rows * itemsize,
                                               probe.CODES[np.dtype(dtype)])


def test_staging_bound_notes():
    """A failed layout case gets the contiguous call's time over the staged-tile probe's as
    its bound, out of reach for these tiles where that is under the target."""
    def row(name, ours_ms, staged_ms, verdict="FAIL"):
        return Row(name, ours_ms / 1e3, verdict=verdict,
                   extra={"staged_ms": staged_ms, "floor_ms": 2.4, "reference_ms": 2.5})
    rows = [row("a", 4.0, 3.6), row("b", 4.0, 2.8), row("c", 3.0, 2.8, "PASS")]
    note_staging_bounds(rows)
    assert rows[0].note.startswith("out of reach for these tiles here")
    assert "<= 0.69 with these tiles" in rows[0].note
    assert rows[1].note.startswith("reachable in principle")
    assert "(the layout alone: 0.86 of its speed)" in rows[1].note
    assert rows[1].note.endswith("ours took 4.00 ms, 0.70 of the probe's speed")
    assert rows[2].note == ""


def _staging_note(**extra):
    """The staging-bound note of a failed layout case whose memory-only probe allows 0.89
    of the contiguous call's rate (ours 4 ms), with these further timings (ms)."""
    rows = [Row("a", 4.0e-3, verdict="FAIL",
                extra={"staged_ms": 2.8, "floor_ms": 2.4, "reference_ms": 2.5, **extra})]
    note_staging_bounds(rows)
    return rows[0].note


@pytest.mark.parametrize(("transposes_ms", "verdict", "bound", "share"), [
    (3.6, "out of reach for these tiles here", "0.69", "0.90"),
    (3.0, "reachable in principle", "0.83", "0.75")])
def test_staging_bound_notes_add_the_transposes(transposes_ms, verdict, bound, share):
    """Where the probe was also timed transposing self's runs (keeping nothing), the
    contiguous call's time over it bounds our elements/s too, and our share of its speed
    is what storing and reading back the staged tiles leaves; under the target, out of
    reach for these tiles even where the memory-only probe allows it."""
    note = _staging_note(staged_transposes_ms=transposes_ms)
    assert note.startswith(verdict)
    assert "<= 0.89 with these tiles" in note
    assert note.endswith(
        f"the same probe transposing self's runs as our staging does, keeping nothing of "
        f"them, took {transposes_ms:.2f} ms, so elements/s vs it <= {bound}; ours reached "
        f"{share} of its speed (the rest: storing and reading back the staged tiles)")


@pytest.mark.parametrize(("compute_ms", "touches_ms", "verdict", "bound"), [
    (2.0, 1.5, "out of reach for these tiles here", "0.71"),
    (1.5, 1.5, "reachable in principle", "0.83")])
def test_staging_bound_notes_add_staging_and_computing_in_turn(compute_ms, touches_ms,
                                                               verdict, bound):
    """Where the rows' compute in cache and the staging's fetches were timed, their sum
    bounds the elements/s of a kernel that does them in turn; under the target, the case
    is out of reach for these tiles even where the memory-only probe allows it."""
    note = _staging_note(compute_ms=compute_ms, staged_touches_ms=touches_ms)
    assert note.startswith(verdict)
    assert "<= 0.89 with these tiles" in note
    assert note.endswith(
        f"(our contiguous kernel's rows in cache) {compute_ms:.2f} ms and fetching "
        f"the lines of self our staging reads, in its order, {touches_ms:.2f} ms add up to "
        f"{compute_ms + touches_ms:.2f} ms, so elements/s vs it <= {bound}")


@pytest.mark.parametrize(("best_ms", "verdict", "bound", "share"), [
    (3.6, "out of reach here for every tile shape tried", "0.69", "0.90"),
    (3.2, "out of reach for these tiles here", "0.78", "0.80")])
def test_staging_bound_notes_add_the_swept_staging(best_ms, verdict, bound, share):
    """Where the staging alone was swept over tile shapes, the contiguous call's time over
    the fastest bounds every shape tried; under the target, out of reach here for every
    one of them; above it, the other bounds decide (here the transposing probe's 0.69)."""
    swept = {"16x16": 9.0, "128x4096": best_ms + 0.4, "512x1024": best_ms, "64x16": 8.0}
    note = _staging_note(staged_transposes_ms=3.6, swept_staging_ms=swept)
    assert note.startswith(verdict)
    assert note.endswith(
        f"over 4 tile shapes, 16-512 rows by 16-4096 columns, took at best {best_ms:.2f} ms "
        f"(512x1024), so elements/s vs it <= {bound} with any of them; ours reached "
        f"{share} of its speed")


def test_measure_throughput_times_the_staged_probe_for_a_transposed_self(monkeypatch):
    """A transposed-self case times the staged probe over its buffers on our tile (its
    memory-only and transposing passes) and, staging, over every swept tile shape."""
    timed = []
    monkeypatch.setattr(probe, "triad_over",
                        lambda buffers, streamed: lambda: timed.append(("triad", streamed)))
    monkeypatch.setattr(probe, "staged_triad_over",
                        lambda buffers, side, tile, code, stage:
                        lambda: timed.append(("staged", side, tile, code, stage)))
    monkeypatch.setattr(probe, "staged_touches_over",
                        lambda buffer, row, run: lambda: timed.append(("touches", buffer, row,
                                                                       run)))
    buffers = ((1, 64), (2, 64), (3, 64), (4, 64))
    case = Case("layout", lambda cfg, dev: harness.Setup(
        lambda: None, None, 256, 16,
        in_cache=harness.InCache(lambda: None, 16, np.zeros((1, 1, 1), np.uint8)),
        reference=lambda: None, buffers=buffers, staged=(128, 32, probe.bits.F16)),
        vs_case("other", 0.75))
    row = cases.measure_throughput(case, harness.Config(quick=True, repeat=1, warmup=0))
    ours = (16, 64)  # 32 bytes of 16-bit elements along rows of 64 of them
    for stage in (probe.READS, probe.TRANSPOSES):
        assert ("staged", 64, ours, probe.bits.F16, stage) in timed
    assert ("triad", True) in timed
    assert ("touches", (2, 64), 128, 32) in timed  # self's buffer
    swept = probe.swept_tiles(64, probe.bits.F16)
    assert swept == [(16, 32), (16, 64), (64, 32), (64, 64)]
    for tile in swept:
        assert ("staged", 64, tile, probe.bits.F16, probe.STAGES) in timed
    assert {"staged_ms", "staged_transposes_ms", "floor_ms", "reference_ms", "compute_ms",
            "staged_touches_ms"} <= row.extra.keys()
    assert list(row.extra["swept_staging_ms"]) == ["16x32", "16x64", "64x32", "64x64"]


def test_targets_carry_their_torch_factor_and_floor_fraction():
    assert vs_torch(1.5).torch_factor == 1.5
    assert streamed_and_torch(0.85, 1.0).torch_factor == 1.0
    assert both(vs_case("x", 0.8), vs_torch(1.5)).torch_factor == 1.5
    assert vs_case("x", 0.7).torch_factor is None
    assert streamed_and_torch(0.85, 1.0).floor_fraction == 0.85
    assert both(vs_case("x", 0.8), streamed_and_torch(0.85, 1.0)).floor_fraction == 0.85
    assert vs_torch(1.5).floor_fraction is None


@pytest.mark.parametrize(("machine", "flags", "levels"), [
    ("x86_64", {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"},
     ["avx512", "avx2"]),
    ("x86_64", {"avx2", "fma", "f16c"}, ["avx2"]),
    ("x86_64", {"sse2"}, ["baseline"]),
    ("aarch64", {"fp", "asimd"}, ["neon"]),
])
def test_isa_levels_cover_every_level_the_machine_runs(monkeypatch, machine, flags, levels):
    """An AVX-512 machine also runs the AVX2 build; the others their own level."""
    monkeypatch.setattr(isa.platform, "machine", lambda: machine)
    monkeypatch.setattr(isa, "_flags", lambda: flags)
    assert isa.levels() == levels
    assert all(level == levels[0] or level in isa.ENVIRONMENTS for level in levels)


def test_benchmark_spreads_draw_what_they_say():
    """The GELU input spreads of the benchmarks: ranges and the share of specials."""
    from benchmarks.harness import host_data
    u8 = host_data((100_000,), np.float32, 1, "u8")
    u100 = host_data((100_000,), np.float32, 1, "u100")
    assert np.abs(u8).max() <= 8 and np.abs(u8).max() > 7.9
    assert np.abs(u100).max() <= 100 and np.abs(u100).max() > 99
    special = host_data((100_000,), np.float32, 1, "special")
    assert (~np.isfinite(special)).sum() == 1_000
    assert np.isnan(special).any() and np.isposinf(special).any() and np.isneginf(special).any()


def test_result_table_renders_every_row_and_column():
    """The table (rich) in a log: one line per case with its figures and verdict, no escape
    codes."""
    import io

    from benchmarks.runner import COLUMNS, table
    from rich.console import Console
    rows = [Row("gelu f32 none", ours_s=0.0098, torch_s=0.0121, bytes_moved=201_326_592),
            Row("tiny", ours_s=0.0000136, torch_s=None)]
    rows[0].verdict, rows[1].verdict = "FAIL", "PASS"
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(table(rows, "avx2"))
    text = out.getvalue()
    assert "\x1b[" not in text
    assert all(name in text for name in COLUMNS)
    gelu = next(line for line in text.splitlines() if "gelu f32 none" in line).split()
    assert gelu[3:] == ["avx2", "9.80", "12.10", "1.23", "20.5", "-", "FAIL"]
    tiny = next(line for line in text.splitlines() if "tiny" in line).split()
    assert tiny[1:] == ["avx2", "0.0136", "-", "-", "-", "-", "PASS"]


class StopRun(Exception):
    """Stands in for this level's own work, once the other levels were started."""


def _stop_run():
    raise StopRun


def test_other_levels_run_the_same_selection(monkeypatch):
    """`python -m benchmarks --only X --quick` runs the other instruction-set levels with
    the same options (each in a process of its own, compiled for its level)."""
    commands = []
    monkeypatch.setattr(isa, "levels", lambda: ["avx512", "avx2"])
    monkeypatch.setattr(runner.subprocess, "run", lambda command, env: commands.append(
        command) or SimpleNamespace(returncode=0))
    monkeypatch.setattr(runner, "init_runtime", _stop_run)
    monkeypatch.setattr("sys.argv", ["benchmarks", "--only", "avgpool", "--quick"])
    with pytest.raises(StopRun):
        runner.main()
    (command,) = commands
    assert command[3:] == ["--only", "avgpool", "--quick", "--isa", "avx2", "--json",
                           str(runner.DEFAULT_JSON.with_name("results-avx2.json"))]


def test_isa_option_runs_in_that_level_s_environment(monkeypatch):
    """`--isa avx2` started without the AVX2 environment reruns itself in a process that
    has it (it ran the native build, labelled avx2, before); started with it, it runs
    in place; a level the machine cannot run is refused."""
    runs = []
    monkeypatch.setattr(isa, "levels", lambda: ["avx512", "avx2"])
    monkeypatch.setattr(runner.subprocess, "run", lambda command, env: runs.append(
        (command, env)) or SimpleNamespace(returncode=3))
    monkeypatch.setattr(runner, "init_runtime", _stop_run)
    for name in isa.ENVIRONMENTS["avx2"]:
        monkeypatch.delenv(name, raising=False)
    assert runner.main(["--only", "gelu", "--isa", "avx2"]) == 3
    ((command, env),) = runs
    assert command[3:] == ["--only", "gelu", "--isa", "avx2"]
    assert all(env[k] == v for k, v in isa.ENVIRONMENTS["avx2"].items())
    for name, value in isa.ENVIRONMENTS["avx2"].items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StopRun):
        runner.main(["--only", "gelu", "--isa", "avx2"])
    assert len(runs) == 1
    assert runner.main(["--isa", "neon"]) == 2


def test_every_gelu_dtype_and_form_has_the_value_range_cases():
    """Each GELU case on N(0,1), in every dtype and both forms, has its U(+-8), U(+-100)
    and specials cases, each held to the N(0,1) case's speed."""
    by_name = {case.name: case for case in CASES}
    for d, _ in DTYPES:
        for mode in ("none", "tanh"):
            for spread in ("u8", "u100", "special"):
                case = by_name[f"gelu {d} {mode} {harness.SPREADS[spread]}"]
                assert case.target.needs == (f"gelu {d} {mode}",)


def test_exact_products_are_timed_alongside_our_call(monkeypatch):
    """A setup's `exact_products` is timed in one alternation with our call
    (`extra["exact_products_ms"]`: ours, then the exact products)."""
    calls = []
    case = Case("bf16 u100", lambda cfg, dev: harness.Setup(
        lambda: calls.append("ours"), None, 0, 100,
        exact_products=lambda: calls.append("exact")), None)
    row = cases.measure_throughput(case, harness.Config(repeat=1, warmup=0))
    assert calls == ["ours", "ours", "exact"] and len(row.extra["exact_products_ms"]) == 2



def test_exact_products_are_timed_on_the_cases_own_values(monkeypatch):
    """With a reference case whose varied inputs are swapped in later pairs, the exact
    products are timed before that swap, on the values of the case itself."""
    events = []
    monkeypatch.setattr(harness.Device, "swap", lambda self, a, b: events.append("swap"))

    def setup_with(name, **fields):
        return lambda cfg, dev: harness.Setup(lambda: events.append(name), None, 0, 100,
                                              **fields)
    normal = Case("normal", setup_with("normal", varied=(1, 8)), None)
    spread = Case("spread", setup_with("spread", varied=(2, 8),
                                       exact_products=lambda: events.append("exact")),
                  vs_case("normal", 0.8))
    monkeypatch.setattr(cases, "CASES", [normal, spread])
    cases.measure_throughput(spread, harness.Config(quick=True, repeat=1, warmup=0))
    assert "exact" in events and events.index("exact") < events.index("swap")

def _value_range_rows(exact_ms, crossed_ok: bool):
    """A bfloat16 U(+-100) case judged against its N(0,1) case (torch 4.5 ms there), its
    exact products timed at `exact_ms` beside ours at 2.6 ms."""
    normal = Row("normal", ours_s=2.0e-3, torch_s=4.5e-3, elements=100)
    case = Case("spread", None, harness.both(vs_torch(1.5), vs_case("normal", 0.8)))
    row = Row("spread", ours_s=2.6e-3 if not crossed_ok else 2.1e-3, torch_s=4.6e-3,
              elements=100)
    row.extra.update(reference_elements=100, exact_products_ms=[2.6, exact_ms],
                     reference_share=_share(2.0e-3 / row.ours_s))
    ok, row.detail = case.target.check(row, {})
    row.verdict = "PASS" if ok else "FAIL"
    return case, row, normal


def test_subnormal_cost_notes():
    """A failed case with exact products timed gets their time, the torch bound they
    leave on its reference case and the elements/s against it they would have (ours, 1 /
    1.3 of the reference's, scaled by ours / exact), flagged out of reach where either is
    under its target; a passing case gets no note."""
    case, row, normal = _value_range_rows(3.9, crossed_ok=False)
    cases.note_subnormal_costs([normal, row], [case])
    assert row.verdict == "FAIL" and "took 3.90 ms against ours 2.60 ms" in row.note
    assert row.note.endswith("4.50 / 3.90 = 1.15 (target 1.5), and elements/s vs 'normal' "
                             "0.77 x 2.60 / 3.90 = 0.51 (target 0.8); out of reach here "
                             "either way")
    case, row, normal = _value_range_rows(2.8, crossed_ok=False)
    cases.note_subnormal_costs([normal, row], [case])
    assert row.note.endswith("= 1.61 (target 1.5), and elements/s vs 'normal' 0.77 x "
                             "2.60 / 2.80 = 0.71 (target 0.8); out of reach here either way")
    case, row, normal = _value_range_rows(2.2, crossed_ok=False)
    cases.note_subnormal_costs([normal, row], [case])
    assert row.note.endswith("= 2.05 (target 1.5), and elements/s vs 'normal' 0.77 x "
                             "2.60 / 2.20 = 0.91 (target 0.8)")
    case, row, normal = _value_range_rows(3.9, crossed_ok=True)
    cases.note_subnormal_costs([normal, row], [case])
    assert row.verdict == "PASS" and row.note == ""


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_exact_products_give_our_results(approximate):
    """The exact products (this build's table with its subnormal factors scaled) write
    what our call writes, g and self from a bfloat16 U(+-100) case's data."""
    n = 1 << 14
    g, x = harness.host_data((n,), cases.BF16, 0), harness.host_data((n,), cases.BF16, 1, "u100")
    dev = harness.Device()
    try:
        tg, tx, ours_out, exact_out = (dev.tensor(g), dev.tensor(x), dev.output((n,), cases.BF16),
                                       dev.output((n,), cases.BF16))
        harness.two_phase("GeluBackwardV2", tg, tx, approximate, ours_out)()
        cases._exact_products(approximate, dev.buffers(tg, tx, exact_out))()
        ours, exact = (harness.device_array(buffer, np.uint16)
                       for buffer in dev.buffers(ours_out, exact_out))
        assert np.array_equal(ours, exact) and ours.any()
    finally:
        dev.release()


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_views_share_the_device_memory(dtype):
    """`Device.torch_view` is a torch tensor over a device tensor's own memory: it reads
    the values placed there, and what PyTorch writes into it is what the device holds."""
    _, dtype = dtype
    host = harness.host_data((3, 5), dtype, 4)
    dev = harness.Device()
    try:
        tensor, out = dev.tensor(host), dev.output((3, 5), dtype)
        view = dev.torch_view(tensor, host.shape, dtype)
        assert torch.equal(view, harness.to_torch(host))
        torch.neg(view, out=dev.torch_view(out, host.shape, dtype))
        written = harness.device_array(dev.buffers(out)[0], dtype)
        assert np.array_equal(written.reshape(host.shape).astype(np.float32),
                              -host.astype(np.float32))
    finally:
        dev.release()


def _fills(call, buffer) -> bool:
    """Whether `call` writes into the device buffer (address, bytes), zeroed for it (its
    contents are put back)."""
    array = harness.device_array(buffer, np.uint8)
    held = array.copy()
    array[:] = 0
    call()
    filled = array.any()
    array[:] = held
    return filled


@pytest.mark.parametrize("case", ["smooth_l1 f32 none", "l1 f16 none", "gelu bf16 none",
                                  "smooth_l1 f16 self transposed"])
def test_torch_writes_where_our_call_writes(case):
    """PyTorch's call of a throughput case writes into the very device buffer ours writes:
    of the case's buffers, zeroed one at a time, it fills exactly one, which ours fills."""
    cfg = SimpleNamespace(n=4096, side=64, quick=True)
    dev = harness.Device()
    try:
        s = next(c for c in CASES if c.name == case).setup(cfg, dev)
        written = [b for b in set(dev._buffers.values()) if _fills(s.torch, b)]
        assert len(written) == 1 and _fills(s.ours, written[0])
    finally:
        dev.release()


def _rows_as(rows: np.ndarray, k: int, dtype) -> np.ndarray:
    """Operand k of every thread's rows of a compute probe, as float64."""
    return rows[:, k].copy().view(dtype).astype(np.float64)


@pytest.mark.parametrize(("case", "dtype", "beta", "scale"), [
    ("smooth_l1 f32 self transposed", np.float32, 1.0, 1.0),
    ("smooth_l1 f16 self transposed", np.float16, 1.0, 1.0),
    ("smooth_l1 bf16 none", ml_dtypes.bfloat16, 1.0, 1.0),
    ("l1 f16 mean", np.float16, 0.0, 1 / 4096)])
def test_loss_cases_time_their_rows_in_cache(case, dtype, beta, scale):
    """A loss case's compute floor (a transposed self's rows') is our rows of its dtype, its
    beta and its scale (1/n for mean) on every thread's own in-cache operands: after a run
    each thread's output row is g * slope(x - y) * scale, against float64."""
    cfg = SimpleNamespace(n=4096, side=64, quick=True)
    dev = harness.Device()
    try:
        s = next(c for c in CASES if c.name == case).setup(cfg, dev)
    finally:
        dev.release()
    rows = s.in_cache.rows
    assert rows.shape == (probe.THREADS, 4, probe.ROW_ELEMENTS * np.dtype(dtype).itemsize)
    assert s.in_cache.elements == probe.THREADS * probe.ROW_ELEMENTS * probe.ROW_REPEATS
    s.in_cache.run()
    g, x, y, o = (_rows_as(rows, k, dtype) for k in range(4))
    d = x - y
    slope = np.sign(d) if beta == 0 else np.where(np.abs(d) < beta, d / beta, np.sign(d))
    expected = (g * slope * scale).astype(dtype).astype(np.float64)
    assert np.all(np.abs(g) > 0)  # every output is a product worth checking
    np.testing.assert_allclose(o, expected, rtol=2 * float(ml_dtypes.finfo(dtype).eps), atol=0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_cases_time_their_rows_in_cache(approximate):
    """A float32 GELU case's compute floor is our rows of its form on every thread's own
    in-cache operands, self from the case's spread: after a run each output row is
    g * GELU'(x), against torch in float64."""
    cfg = SimpleNamespace(n=4096, side=64, quick=True)
    dev = harness.Device()
    try:
        s = next(c for c in CASES if c.name == f"gelu f32 {approximate} U(+-8)").setup(cfg, dev)
    finally:
        dev.release()
    s.in_cache.run()
    g, x, o = (_rows_as(s.in_cache.rows, k, np.float32) for k in range(3))
    assert np.abs(x).max() > 4  # U(+-8), not N(0, 1)
    expected = torch.ops.aten.gelu_backward(torch.from_numpy(g), torch.from_numpy(x),
                                            approximate=approximate).numpy()
    np.testing.assert_allclose(o, expected, rtol=1e-5, atol=1e-6)


def test_peak_memory_probe_loads_the_measured_calls_kernel_before_it_measures():
    """The probe's warm-up call takes the kernel the measured call takes (the contiguous
    parallel one), so that loading it - or compiling it, where Numba's cache is stale (16
    MiB) - is not counted as the call's memory; a warm-up of 8 elements ran on the calling
    thread's kernel instead."""
    script = ("from aclnn import acl\n"
              "from aclnn.kernels import smooth_l1_rows\n"
              "from benchmarks import peakmem\n"
              "acl.init(); acl.rt.set_device(0)\n"
              "warm, _ = peakmem._call(peakmem.WARM_ELEMENTS, True)\n"
              "warm()\n"
              "print(len(smooth_l1_rows.smooth_l1_flat.overloads))\n")
    loaded = subprocess.run([sys.executable, "-c", script], cwd=cases.REPO, check=True,
                            capture_output=True, text=True).stdout
    assert int(loaded) == 1
