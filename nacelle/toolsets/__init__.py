"""Ready-made tool sets: local files and commands, web search and fetch."""
