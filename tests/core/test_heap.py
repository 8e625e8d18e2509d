"""core/heap.py: freed memory between live allocations goes back to the system."""

from __future__ import annotations

import pytest

from core import heap


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_trim_returns_pages_freed_between_live_allocations():
    trim = heap.trimmer()
    assert trim is not None, "this C library (glibc, as in the image) has malloc_trim"
    # 160 MB in 8 KiB blocks (below malloc's mmap threshold: they share the heap), then nine
    # in ten freed: the kept tenth pins the heap, so free() alone returns nothing.
    blocks = [bytearray(8192) for _ in range(20_000)]
    for block in blocks:
        block[0] = block[4096] = 1  # bytearray(n) is zeroed by memset: resident anyway
    kept = blocks[::10]
    del blocks, block
    before = rss_kib()
    trim()
    after = rss_kib()
    assert before - after > 100 * 1024, (before, after)  # of the 144 MB freed
    assert len(kept) == 2_000


def test_trim_forever_trims_after_every_sleep(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(heap, "trimmer", lambda: lambda: calls.append("trim"))

    def sleep(seconds: float) -> None:
        if len(calls) == 4:
            raise StopIteration  # ends the endless loop
        calls.append(f"sleep {seconds}")

    with pytest.raises(StopIteration):
        heap.trim_forever(sleep, 10.0)
    assert calls == ["sleep 10.0", "trim", "sleep 10.0", "trim"]


def test_without_malloc_trim_it_does_nothing(monkeypatch):
    monkeypatch.setattr(heap, "trimmer", lambda: None)
    heap.trim_forever(lambda seconds: pytest.fail("no loop without malloc_trim"))
