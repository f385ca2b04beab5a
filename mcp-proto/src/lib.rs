//! Sans-IO MCP client core.
