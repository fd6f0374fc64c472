module mcp-exec/bench

go 1.26.8
