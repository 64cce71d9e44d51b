"""The long-running programs: the MCP server and the watcher."""
