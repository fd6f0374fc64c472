module github.com/mcp-exec/mcp-exec/bench

go 1.26.8
