"""Provides the cockpit's own files: the strict YAML loader (file:line errors), the config file
(`config.yaml`) and the layouts."""
