"""Inference algorithms over count vectors: EM, VB, collapsed VB, streaming and stochastic VB, samplers, logistic-normal priors, mixtures, committees; and the training driver."""
