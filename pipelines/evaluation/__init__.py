"""Evaluation of a release against the true data, per family, and the plots."""
