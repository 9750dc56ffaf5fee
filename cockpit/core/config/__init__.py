"""Provides the cockpit's own files: the strict YAML loader (`yaml_file`: file:line errors, one error type
per kind under `ConfigFileError`), the declarative schema each kind is checked against and its JSON Schema
is generated from (`schema`), the config file (`settings`), the role table (`role_table`) and the layout
files (`layouts`; their panes are the UI's)."""
