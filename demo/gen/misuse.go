package gen

import (
	"math/rand/v2"
)

// Misuse the demo shape shows: failed calls carry $mcp_error_message in the TypeScript MCP
// SDK's own wording, so the tool-diagnostics panels have validation errors and calls to
// unlisted tools to draw. The SDK shape sets the same fields in sdkArguments.

// demoUnknownToolRate is the share of the demo shape's calls made to a tool name the server
// does not list (a name the agent made up), answered "Tool X not found". It is higher than the
// SDK shape's so that the panels have rows at the demo's 200,000 events.
const demoUnknownToolRate = 0.008

// demoErrorPass gives each failed tool call of the demo shape its error message: a call to a
// made-up tool name ("MCP error -32602: Tool X not found"), an input-validation failure (a
// required key missing, a wrong type or an unrecognised key, as zod words them), or the
// tool's own failure. It draws from its own random generator, after the calls are made, so
// the calls themselves are those of the other shape.
func (g *generator) demoErrorPass(events []*event) {
	seed := uint64(g.cfg.Seed)
	main := g.rng
	g.rng = rand.New(rand.NewPCG(seed^0x64656d6f5f657272, seed+0x6d6973757365)) // "demo_err", "misuse"
	defer func() { g.rng = main }()
	for _, e := range events {
		tc := e.tool
		if tc == nil || !tc.isError {
			continue
		}
		switch {
		case g.chance(demoUnknownToolRate / ToolErrorRate):
			tc.toolName = hallucinatedName(tc.toolName, g.rng.IntN(4))
			tc.execVerb, tc.execTarget, tc.mode = "", "", "tools"
			tc.errorType = "not_found"
			tc.errorMessage = "MCP error -32602: Tool " + tc.toolName + " not found"
			tc.unknownTool = true
		case tc.errorType == "validation_error":
			tc.errorMessage = g.breakArguments(tc.effectiveTool(), tc.schemaTool.Schema, g.genArgs(tc.schemaTool.Schema))
			tc.validation = true
		default:
			tc.errorMessage = toolErrorMessages[tc.errorType]
		}
	}
}
