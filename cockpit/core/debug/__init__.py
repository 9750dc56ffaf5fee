"""Provides the post-mortem debugger: paused workers, the Debug Adapter Protocol client, legacy
RemotePdb sessions and the session that drives them."""
