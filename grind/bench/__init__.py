"""``make bench``: kernel throughput against references measured in the same run."""
