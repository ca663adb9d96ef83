"""Metrics and the official result format."""
