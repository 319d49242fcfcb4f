"""The compiled kernels.

Numba keeps a compiled function on disk and throws it away when the function's own source
file changes, but a kernel here also compiles code of other modules of this package into
itself (pointwise's tiled kernel takes the rows of gelu_rows and smooth_l1_rows): after a
change to one of those alone, it would go on running the old code. So the stamp that
Numba checks a cached kernel against also covers every source file of this package, and
code elsewhere that compiles the kernels' code into cached functions of its own (the
benchmarks' probes) asks for the same stamp (`stamp_with_kernel_sources`).

And Numba saves a new signature by reading a function's cache index, picking the first
free data file name and writing the index back; two processes doing that at once (workers
of `aclnn run --jobs` on a cold cache) can pick the same name, and one signature then loads
the other's machine code. So saves take a lock on the index first.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core import caching

_HERE = Path(__file__).resolve().parent


def _sources_digest() -> str:
    """A digest of every module of this package (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(_HERE.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


SOURCES_DIGEST = _sources_digest()


def _stamped_in(base: type, directory: Path) -> type:
    """A Numba cache locator like `base`, for the functions of modules in `directory` only,
    whose source stamp is the function file's own and SOURCES_DIGEST."""
    class Locator(base):
        def get_source_stamp(self):
            return super().get_source_stamp(), SOURCES_DIGEST

        @classmethod
        def from_function(cls, py_func, py_file):
            if Path(py_file).resolve().parent != directory:
                return None
            return super().from_function(py_func, py_file)

    Locator.__name__ = Locator.__qualname__ = f"PackageStamped{base.__name__}"
    return Locator


def stamp_with_kernel_sources(directory: Path) -> None:
    """Make Numba's on-disk cache of the functions defined in the modules of `directory`
    stale whenever a source file of this package changes, as this package's own are: put
    such locators ahead of Numba's (NUMBA_CACHE_DIR first, then the in-tree __pycache__);
    with a Numba that lays its locators out otherwise, keep Numba's."""
    classes = getattr(caching.CacheImpl, "_locator_classes", None)
    bases = [getattr(caching, name, None)
             for name in ("UserProvidedCacheLocator", "InTreeCacheLocator")]
    if not isinstance(classes, list) or any(b is None or b not in classes for b in bases):
        return
    directory = Path(directory).resolve()
    for base in bases:
        classes.insert(classes.index(base), _stamped_in(base, directory))


def _lock_cache_saves() -> None:
    """Make Numba's cache saves hold an exclusive lock on `<index>.lock` (flock: between
    processes, and between threads that open it separately); where flock or the
    index file class is missing, saves stay as they are."""
    try:
        import fcntl
    except ImportError:
        return
    index_file = getattr(caching, "IndexDataCacheFile", None)
    save = getattr(index_file, "save", None)
    if save is None or getattr(save, "locked", False):
        return

    @functools.wraps(save)
    def locked_save(self, key, data):
        try:
            lock = open(self._index_path + ".lock", "ab")
        except OSError:  # an unwritable cache: Numba's own save reports it
            return save(self, key, data)
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return save(self, key, data)

    locked_save.locked = True
    index_file.save = locked_save


stamp_with_kernel_sources(_HERE)
_lock_cache_saves()
