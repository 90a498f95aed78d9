"""Evaluation: dependency attachment accuracy beside baselines, unlabeled bracket scores."""
