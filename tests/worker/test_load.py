"""``LoadMeter``: the rates a worker daemon's heartbeat carries, from counters and times."""

from __future__ import annotations

import pytest

from actorrt.worker.load import LoadMeter, Window


def test_a_window_spans_its_newest_sample_at_least_its_length_old() -> None:
    window = Window(5.0)
    assert window.growth() == (0.0, ())
    for t in range(0, 12):
        window.add(float(t), t * 10.0)
    window.add(11.0, 999.0)  # not after the newest: ignored
    assert window.growth() == (5.0, (50.0,))


def test_load_meter_rates_from_counters() -> None:
    meter = LoadMeter(clock_ticks=100, window_s=5.0)
    # a tree of two processes: 50 ticks a second between them, one child ending, one new
    assert meter.actor("a", 0.0, {10: 100, 11: 50}, (0.0, 0)) == (0.0, 0.0)  # the baseline
    assert meter.actor("a", 1.0, {10: 130, 11: 70}, (0.9, 20)) == (50.0, pytest.approx(20 / 0.9))
    cpu, _ = meter.actor("a", 2.0, {10: 160, 12: 20}, (1.9, 40))  # 11 ended; 12 is new
    assert cpu == 50.0
    # idle: no report for longer than a host's report period: the counter stood still
    for t in (3.0, 4.0, 5.0, 6.0, 7.0, 8.0):
        cpu, calls = meter.actor("a", t, {10: 160, 12: 20}, (1.9, 40))
    assert cpu == 0.0 and calls == 0.0
    assert meter.node(0.0, 10, 100) == 0.0 and meter.node(1.0, 60, 200) == 50.0
    meter.keep(["b"])
    assert meter.actor("a", 9.0, {10: 999}, None) == (0.0, 0.0)  # forgotten: a new baseline
