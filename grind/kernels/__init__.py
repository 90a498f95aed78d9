"""Chart kernels behind one contract (weights in, expected counts and log Z out; Viterbi and sampled trees)."""
