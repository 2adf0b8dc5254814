"""The `anonymous_code_agent` method profile: any sandboxed code agent, shared instructions."""
