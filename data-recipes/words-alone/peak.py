"""Run a command and write its peak resident memory (bytes, the largest of its processes) to a file.

usage: python3 peak.py OUT COMMAND [ARG ...]      (exits with COMMAND's status)
"""
import resource
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__.split("\n\n")[1])
status = subprocess.call(sys.argv[2:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
peak *= 1 if sys.platform == "darwin" else 1024          # bytes on macOS, KiB on Linux
with open(sys.argv[1], "w") as f:
    f.write(f"{peak}\n")
sys.exit(status)
