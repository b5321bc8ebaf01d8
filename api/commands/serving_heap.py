"""The heap of an API process, set up once before it serves (``slaplan serve``, each process of
``--processes N``).

Two kinds of work per request that do not depend on the request go away
(docs/performance.md has the figures):

- The C allocator handing a list page's memory back to the kernel and taking it again: a page
  of 100 planned DGDRs is 1.25 MB, copied a few times on its way out (joined, encoded, the part
  the socket does not take at once). glibc serves a buffer that large by mapping fresh memory
  and returns it on free (its threshold for that starts at 128 KiB), and trims freed memory at
  the top of its heaps past a threshold as low; the next page then faults every 4 KiB of its
  buffers in again. Here buffers up to ``MMAP_THRESHOLD_BYTES`` come from the heap, and up to
  ``TRIM_THRESHOLD_BYTES`` freed at the top of a heap stay there for the next page.
- Python's cyclic garbage collector walking, at each full collection, every object the process
  made while starting (modules, the app and its schemas, the planner's tables): they live as
  long as the process, so they are moved out of its reach (``gc.freeze``).
"""

from __future__ import annotations

import gc

# glibc's mallopt(3) parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# A buffer of this many bytes or fewer comes from the heap: a page at the server's cap (500
# planned DGDRs, about 6 MB) and its copies.
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
# Freed memory at the top of a heap is returned to the kernel only past this many bytes: the
# copies of one such page, freed together, stay for the next.
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (see the module's docstring); False where the C library is not
    glibc, or refuses them, and nothing changed."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the C library this process runs on
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1


def prepare_to_serve() -> None:
    """Called once, after the app is built and before requests arrive: the allocator's thresholds,
    then what start-up left collected and the rest frozen."""
    keep_freed_memory()
    gc.collect()
    gc.freeze()
