package gen

import (
	"fmt"
	"math"
)

// Shape is how the generator writes tool calls.
type Shape string

const (
	// ShapeDemo writes tool calls in mcpulse's own event contract (DESIGN.md §2): the calling
	// MCP server reports $mcp_ignored_keys itself. The default.
	ShapeDemo Shape = "demo"
	// ShapeSDK writes tool calls as the @posthog/mcp SDK (0.16.3) sends them: the arguments
	// in $mcp_parameters, the tool result in $mcp_response, no $mcp_ignored_keys, each session
	// opened by $mcp_initialize and $mcp_tools_list events carrying the served schemas, and a
	// $exception event beside each failed call. Those events come on top of Config.Events.
	ShapeSDK Shape = "sdk"
)

func (s Shape) validate() error {
	switch s {
	case "", ShapeDemo, ShapeSDK:
		return nil
	}
	return fmt.Errorf("shape must be %q or %q, got %q", ShapeDemo, ShapeSDK, s)
}

// LinesFor returns a Config.Events that holds at least toolCalls $mcp_tool_call events, in
// either shape (the SDK shape's session and exception events come on top of Config.Events).
func LinesFor(toolCalls int) int {
	// Tool calls are ToolCallShare of the valid lines (duplicates and malformed lines are
	// 1.5% of the lines); the shares are exact counts, rounded.
	lines := float64(toolCalls) / ToolCallShare / (1 - DuplicateRate - MalformedRate)
	return int(math.Ceil(lines*1.01)) + 100
}
