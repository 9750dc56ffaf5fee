"""Provides training metrics: samples parsed from the driver log in each framework's format, and
the series and summaries built from them."""
