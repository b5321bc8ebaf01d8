"""An API process's heap before it serves (``api.commands.serving_heap``): glibc's thresholds keep
a list page's buffers in the heap, and start-up's objects are out of the collector's reach."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys

import pytest

from api.commands import serving_heap

GLIBC = platform.libc_ver()[0] == "glibc"
# Prints how many bytes the C allocator had mapped for single buffers (mallinfo2's hblkhd) while a
# 6 MB buffer was alive, over what it had before; after ``serving_heap.keep_freed_memory()`` when
# the argument is "tuned".
MAPPED_FOR_A_PAGE = """
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "tuned":
    from api.commands.serving_heap import keep_freed_memory
    assert keep_freed_memory()
before = libc.mallinfo2().hblkhd
page = bytearray(6 * 1024 * 1024)
print(libc.mallinfo2().hblkhd - before)
"""


def _mapped_for_a_page(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", MAPPED_FOR_A_PAGE, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_a_page_sized_buffer_comes_from_the_heap_once_the_thresholds_are_set():
    assert _mapped_for_a_page("default") >= 6 * 1024 * 1024  # glibc maps it on its own
    assert _mapped_for_a_page("tuned") == 0


@pytest.mark.skipif(GLIBC, reason="another C library is left as it is")
def test_other_c_libraries_are_left_alone():
    assert serving_heap.keep_freed_memory() is False


def test_start_up_objects_are_frozen_out_of_the_collectors_reach():
    held: list = []  # a container the collector tracks, made before serving starts
    assert any(obj is held for obj in gc.get_objects())
    try:
        serving_heap.prepare_to_serve()
        assert not any(obj is held for obj in gc.get_objects())  # the frozen are in no generation
    finally:
        gc.unfreeze()
