"""Runs, their results and statistics: the one app that owns the models."""
