"""Thin adapters over the Workbench: the REST service (rest.py) and the MCP server."""
