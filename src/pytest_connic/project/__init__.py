"""The SDK boundary: the quiet SDK import, the project index, the loaded project, bounded agent YAML, env files."""
