"""File formats: reading and writing text (atomic output, compression, headers), corpora, trees,
rule files and count files."""
