"""Running out of memory: under an address-space limit (``ulimit -v``) every command stops with one line
"grind: error: out of memory" and exit status 1 -- never a segfault in a kernel's work buffers, a hang in
the BLAS allocator (SIGTERM ignored), or a traceback blaming the build."""
import os
import re
import resource
import subprocess
import sys

import pytest

from conftest import REPO, grind

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux counts it")

MB = 1 << 20


def grind_limited(limit_mb, *args, env=None, timeout=60):
    """grind ARGS with an address-space limit of ``limit_mb`` MB; a hang fails the test (killed after ``timeout``)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * MB, limit_mb * MB))
    return subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=limit, env={**os.environ, **(env or {})}, timeout=timeout)


def out_of_memory(r):
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "not built" not in r.stderr and "build_ext" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("grind: error:")]
    assert len(errors) == 1 and errors[0].startswith("grind: error: out of memory"), r.stderr
    return errors[0]


# ----------------------------------------------------------------------------- native code

def test_every_allocation_in_csrc_is_checked():
    """Each pointer a kernel gets from malloc/calloc/realloc is compared with NULL in its file (the CKY
    kernel's ``xcalloc`` raises itself): a failed allocation is never written through."""
    unchecked, seen = [], 0
    for path in sorted((REPO / "csrc").glob("*.pyx")):
        text = path.read_text()
        for m in re.finditer(r"([\w.\[\]]+)\s*=\s*(?:<[^>]+>\s*)?(?:malloc|calloc|realloc|aligned_alloc)\(", text):
            seen += 1
            name = re.escape(m.group(1))
            if not re.search(rf"{name}\s*[=!]=\s*NULL", text):
                unchecked.append(f"{path.name}: {m.group(0)}")
    assert seen > 50 and not unchecked, unchecked


@pytest.fixture(scope="module")
def long_dmv(tmp_path_factory):
    """A DMV grammar and a corpus with one 3000-word sentence: its work buffers want ~1.1 GB."""
    d = tmp_path_factory.mktemp("long")
    words = "NOUN VERB ADJ DET ADP".split()
    lines = [" ".join(words[(7 * i) % 5] for i in range(3000))] + [" ".join(words[:4])] * 3
    (d / "c.txt").write_text("\n".join(lines) + "\n")
    grind("make-grammar", "dmv", "-o", d / "g.txt", d / "c.txt")
    return d


@pytest.mark.parametrize("command", [["parse", "--mbr"], ["estep"]])
def test_dmv_work_buffers_that_do_not_fit_are_out_of_memory_not_a_segfault(long_dmv, command):
    r = grind_limited(600, *command, long_dmv / "g.txt", long_dmv / "c.txt")
    line = out_of_memory(r)
    assert "3000-word sentence" in line          # the kernel's buffers, not the import, ran out


# ----------------------------------------------------------------------------- loading the BLAS

def test_low_memory_fails_fast_with_out_of_memory_at_every_limit(tmp_path):
    """From a limit too small to load numpy up to one that runs: exit 0, or one "out of memory" line
    within the timeout.  OpenBLAS spins forever (SIGTERM ignored) on a buffer that does not fit in
    a window of these limits, and a shared object that cannot be mapped was reported as an unbuilt kernel."""
    (tmp_path / "g.txt").write_text("0.5 S --> A B\n0.5 S --> B A\n0.75 A --> a\n0.25 A --> b\n"
                                    "0.25 B --> a\n0.75 B --> b\n")
    (tmp_path / "c.txt").write_text("a b\nb a\n")
    ran = 0
    for limit in range(120, 380, 40):
        r = grind_limited(limit, "train", "--algo", "em", "--iterations", "2", "-o", tmp_path / "out.txt",
                          tmp_path / "g.txt", tmp_path / "c.txt", env={"OPENBLAS_NUM_THREADS": "2"}, timeout=30)
        if r.returncode == 0:
            ran += 1
        else:
            out_of_memory(r)
    assert ran, "no limit up to 360 MB let grind train run"


def test_an_import_that_could_not_map_a_shared_object_is_out_of_memory():
    from grind.errors import import_out_of_memory, raise_if_out_of_memory
    e = ImportError("/x/libscipy_openblas.so: failed to map segment from shared object")
    assert import_out_of_memory(e) and not import_out_of_memory(ImportError("No module named 'grind.kernels._cky'"))
    wrapped = ImportError("numpy: IMPORTANT: PLEASE READ THIS FOR ADVICE")
    wrapped.__cause__ = e
    assert import_out_of_memory(wrapped)
    with pytest.raises(MemoryError, match="cannot load grind.kernels._cky"):
        raise_if_out_of_memory(e, "grind.kernels._cky")
    raise_if_out_of_memory(ImportError("No module named x"), "x")     # not memory: the caller goes on
