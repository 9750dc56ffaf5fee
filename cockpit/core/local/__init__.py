"""Provides the local cluster (`cockpit local up`, TARGET `local`): `record` (what is remembered of it,
and its token) apart from `processes` (starting, joining, killing and stopping its Ray processes)."""
